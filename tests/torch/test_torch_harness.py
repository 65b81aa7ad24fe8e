"""Torch chunk runner and ``check_exactness(backend="torch")``: counts, verdicts, ported mutants."""
import numpy as np
import pytest
import torch

import rass_theory as rt
from rass_theory.stats.node import SyntheticNode, chunk_plan
from rass_theory.stats.streaming import VIOLATION_KINDS, ExactnessCounts
from rass_theory.torch import mutants as tm
from rass_theory.torch import verifiers as tv
from rass_theory.torch._core import TorchVerifierResult
from rass_theory.torch.harness import resolve_device, run_chunk_torch


def small_node(K=4, delta=0.6, dim=5):
    return SyntheticNode.build(K, delta, dim, n_bins=256, entropy=7)


class TestRunner:
    def test_counts_are_consistent_and_reproducible(self):
        node = small_node()
        spec = chunk_plan(3000, 3000, 7, 100)[0]
        a = run_chunk_torch(tv.dgrs(), node, spec, "cpu")
        b = run_chunk_torch(tv.dgrs(), node, spec, "cpu")
        assert a.equal(b)
        assert a.n_rows == a.n_valid == 3000 and a.s_counts.sum() == 3000 and a.r_counts.sum() == 3000
        assert a.dir_counts.shape == (node.n_directions, 256) and (a.dir_counts.sum(1) == 3000).all()
        assert a.joint_counts.sum() == 3000 and a.subsample.shape == (100, 5)
        assert 0 < a.n_accepted < 3000 and a.violations.sum() == 0

    def test_bins_match_numpy_binning_of_the_same_states(self):
        """The on-device PIT binning equals ExactnessCounts.from_chunk on the same states."""
        node = small_node()
        n = 2000
        g = torch.Generator().manual_seed(0)
        children = (torch.from_numpy(np.array(node.mu_draft)) + torch.randn(n, node.K, node.dim, generator=g,
                                                                         dtype=torch.float64))
        mu_d = torch.from_numpy(np.array(node.mu_draft)).expand(n, node.dim)
        mu_t = torch.from_numpy(np.array(node.mu_target)).expand(n, node.dim)
        res = tv.rass("uniform")(children, mu_d, mu_t, 1.0, 1)
        from rass_theory.torch.harness import counts_from_torch_result

        got = counts_from_torch_result(node, res, children, keep=10)
        z = node.standardise(res.states.numpy())
        ref = ExactnessCounts.from_chunk(node, z, np.ones(n, bool), res.accepted.numpy(),
                                         np.zeros(len(VIOLATION_KINDS), np.int64), (), 10)
        assert got.equal(ref)

    def test_contract_violations_are_counted(self):
        node = small_node()
        spec = chunk_plan(500, 500, 7, 0)[0]

        def broken(children, mu_draft, mu_target, sigma, rng):
            res = tv.rass("uniform")(children, mu_draft, mu_target, sigma, rng)
            states = torch.where(res.accepted[:, None], res.states + 1e-9, res.states)   # claimed copies differ
            states[0, 0] = float("nan")
            return TorchVerifierResult(states, res.accepted, res.child_index)

        counts = run_chunk_torch(broken, node, spec, "cpu")
        v = counts.violation_dict()
        assert v["not_a_copy"] > 0 and v["non_finite"] == 1
        assert counts.n_valid < 500 and any("not_a_copy" in m for m in counts.messages)

    def test_wrong_shape_invalidates_chunk(self):
        node = small_node()
        spec = chunk_plan(200, 200, 7, 0)[0]

        def bad(children, mu_draft, mu_target, sigma, rng):
            res = tv.dgrs()(children, mu_draft, mu_target, sigma, rng)
            return TorchVerifierResult(res.states[:, :2], res.accepted, res.child_index)

        counts = run_chunk_torch(bad, node, spec, "cpu")
        assert counts.n_valid == 0 and counts.violation_dict() == {"shape": 200}

    def test_device_errors(self):
        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
        with pytest.raises(ValueError, match="CUDA is not available"):
            run_chunk_torch(tv.dgrs(), small_node(), chunk_plan(10, 10, 0, 0)[0], "cuda")
        with pytest.raises(ValueError, match="device must be"):
            resolve_device("tpu")


class TestCheckExactness:
    @pytest.mark.parametrize("factory,K", [(tv.rass, 4), (tv.dgrs, 4), (tv.rmc, 1)])
    def test_exact_rules_pass(self, factory, K):
        rep = rt.check_exactness(factory(), K=K, delta=0.5, dim=6, n_samples=60_000, chunk_size=30_000,
                                 two_sample_size=200, backend="torch", device="cpu", rng=3)
        assert rep.passed, [(t.name, t.pvalue) for t in rep.tests]
        assert abs(rep.acceptance_rate - factory().expected_acceptance(K, 0.5)) < 0.01

    def test_same_statistics_family_as_numpy(self):
        kw = dict(K=4, delta=0.5, dim=6, n_samples=20_000, rng=3)
        t_rep = rt.check_exactness(tv.dgrs(), backend="torch", device="cpu", **kw)
        n_rep = rt.check_exactness(rt.verifiers.dgrs(), **kw)
        assert [t.name for t in t_rep.tests] == [t.name for t in n_rep.tests]


# the power of the default harness is the stats package's business; here every ported mutant must
# be rejected at a modest n (the bfloat16 lattice needs the fine-bin chi-square, hence more rows)
MUTANT_N = {"precision_bf16_residual": 150_000}


@pytest.mark.parametrize("name", list(tm.all_mutants(4)))
def test_ported_mutants_fail(name):
    mutant = tm.all_mutants(4)[name]
    rep = rt.check_exactness(mutant, K=4, delta=0.5, dim=6, n_samples=MUTANT_N.get(name, 30_000),
                             chunk_size=50_000, two_sample_size=0, backend="torch", device="cpu", rng=4)
    assert not rep.passed
