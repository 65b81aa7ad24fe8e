"""The mutant catalogue: every mutant runs, keeps the contract's shapes, and is wrong in law.

Wrongness is shown at the harness's default cell (K = 4, delta = 0.5, dim = 8): analytically
(Kolmogorov distance of the output law of ``s`` from ``N(delta, 1)``, by quadrature) where the
output density has a closed form, otherwise by a quick Monte Carlo with a stated test.  The
harness's own power against each mutant is tested with the harness.
"""
import numpy as np
import pytest
from scipy import signal, stats
from scipy.special import ndtr

from rass_theory import mutants
from rass_theory.mutants import MUTANTS, all_mutants, round_bfloat16
from rass_theory.verifiers import check_contract

K, DELTA, DIM = 4, 0.5, 8
# Kolmogorov distance the harness can detect at n = 1e6 is about 2e-3; ask for more than twice that
MIN_KS = 0.004


def node(n, rng, K=K, delta=DELTA, d=DIM):
    mu_d = np.broadcast_to(rng.standard_normal(d), (n, d))
    e = rng.standard_normal(d)
    e /= np.linalg.norm(e)
    mu_t = mu_d + delta * e
    children = mu_d[:, None, :] + rng.standard_normal((n, K, d))
    return children, mu_d, mu_t, e


def coords(states, mu_d, e):
    z = states - mu_d
    s = z @ e
    zp = z - s[:, None] * e
    return s, np.einsum("nd,nd->n", zp, zp)


class TestCatalogue:
    def test_at_least_eight_documented_mutants(self):
        assert len(MUTANTS) >= 8
        for name, factory in MUTANTS.items():
            doc = " ".join((factory.__doc__ or "").split())
            assert "Wrong:" in doc and "Plausible:" in doc and "Caught by" in doc, name
            assert mutants.MUTANT_CATCHES[name]

    def test_all_mutants_filters_by_K(self):
        assert set(all_mutants(4)) == set(MUTANTS)
        small = all_mutants(1)
        assert "dgrs_sorted_order" not in small and "ratio_against_draft" in small

    def test_back_ends_are_the_one_list_of_names(self):
        """Back-end names come from ``rass_theory.backend.NAMES`` (no second list in mutants.py)."""
        from rass_theory.backend import NAMES

        assert NAMES == ("numpy", "torch") and not hasattr(mutants, "BACKENDS")
        assert all(set(b) <= set(NAMES) for b in mutants.MUTANT_BACKENDS.values())
        assert set(all_mutants(4, "torch")) == {n for n, b in mutants.MUTANT_BACKENDS.items() if "torch" in b}
        with pytest.raises(ValueError, match=r"backend must be one of \('numpy', 'torch'\)"):
            all_mutants(4, "jax")

    @pytest.mark.parametrize("name", sorted(MUTANTS))
    def test_runs_and_keeps_contract_shapes(self, name, rng):
        children, mu_d, mu_t, _ = node(3000, rng)
        res = MUTANTS[name](K)(children, mu_d, mu_t, 1.0, rng)
        assert res.states.shape == (3000, DIM) and res.accepted.dtype == np.bool_
        issues = check_contract(res, children)
        if name == "claims_child_after_correction":
            assert [i.kind for i in issues] == ["not_a_copy"]
        else:
            assert issues == [], issues


def _grid_laws():
    """Output densities of s for the mutants with a closed form, on a fine grid."""
    from rass_theory.exact import batch as eb
    from rass_theory.verifiers._weights import resolve_weights

    x = np.linspace(-12.0, 12.0 + DELTA, 40001)
    dx = x[1] - x[0]
    f = stats.norm.pdf(x - DELTA)
    phi = stats.norm.pdf(x)

    def g_of(w):
        return np.exp(eb.selected_logpdf(w, np.full(x.size, DELTA), x))

    def law(g, accept, residual):
        kept = g * accept
        return kept + (1 - kept.sum() * dx) * residual / (residual.sum() * dx)

    w = resolve_weights("optimal", K, np.array([DELTA]))
    gw, g_rev = g_of(w), g_of(w[::-1].copy())
    tv1 = 1 - 2 * ndtr(-DELTA / 2)
    overlap = np.minimum(f, phi)
    r = np.maximum(f - gw, 0)
    kernel = stats.norm.pdf(np.arange(-(x.size // 2), x.size // 2 + 1) * dx) * dx
    return x, dx, {
        "ratio_against_draft": law(gw, np.minimum(1, f / phi), np.maximum(f - gw, 0)),
        "single_draft_residual": law(gw, np.minimum(1, f / gw), np.maximum(f - phi, 0)),
        "residual_from_target": law(gw, np.minimum(1, f / gw), f),
        "weights_reversed_in_correction": law(gw, np.minimum(1, f / g_rev), np.maximum(f - g_rev, 0)),
        "rass_drafting_order": law(phi, np.minimum(1, f / gw), np.maximum(f - gw, 0)),
        "always_accept_top": K * phi * ndtr(x) ** (K - 1),
        "dgrs_flat_residual": overlap * (1 - tv1 ** K) / (1 - tv1) + tv1 ** K * np.maximum(f - phi, 0) / tv1,
        # the fresh noise's component along e convolves the residual branch with N(0, 1)
        "orth_unprojected_fresh": np.minimum(f, gw) + signal.fftconvolve(r, kernel, mode="same"),
    }


@pytest.fixture(scope="module")
def grid_laws():
    return _grid_laws()


class TestWrongInLaw:
    @pytest.mark.parametrize("name", sorted(["ratio_against_draft", "single_draft_residual", "residual_from_target",
                                             "weights_reversed_in_correction", "rass_drafting_order",
                                             "always_accept_top", "dgrs_flat_residual", "orth_unprojected_fresh"]))
    def test_analytic_kolmogorov_distance(self, name, grid_laws):
        x, dx, laws = grid_laws
        p = laws[name]
        assert p.sum() * dx == pytest.approx(1.0, abs=1e-6)
        distance = np.max(np.abs(np.cumsum(p) * dx - ndtr(x - DELTA)))
        assert distance > MIN_KS, (name, distance)

    @pytest.mark.parametrize("name", sorted(["single_draft_residual", "orth_unprojected_fresh", "always_accept_top"]))
    def test_analytic_law_matches_simulation(self, name, grid_laws, rng):
        """The closed forms above describe what the mutants actually do (KS against the grid CDF)."""
        x, dx, laws = grid_laws
        cdf = np.cumsum(laws[name]) * dx
        children, mu_d, mu_t, e = node(60_000, rng)
        s, _ = coords(MUTANTS[name](K)(children, mu_d, mu_t, 1.0, rng).states, mu_d, e)
        assert stats.kstest(s, lambda v: np.interp(v, x, cdf)).pvalue > 1e-4

    @pytest.mark.parametrize("name", ["dgrs_sorted_order", "dgrs_level_off_by_one"])
    def test_monte_carlo_s_is_not_target(self, name, rng):
        children, mu_d, mu_t, e = node(50_000, rng)
        s, _ = coords(MUTANTS[name](K)(children, mu_d, mu_t, 1.0, rng).states, mu_d, e)
        ks = stats.kstest(s - DELTA, "norm")
        assert ks.pvalue < 1e-8 and ks.statistic > MIN_KS

    @pytest.mark.parametrize("name, atom", [("orth_zeroed_on_correction", None),
                                            ("reflection_drops_zperp", 1 - 2 * ndtr(-DELTA / 2))])
    def test_orthogonal_part_has_an_atom_at_zero(self, name, atom, rng):
        """chi2(d-1) has no atom; these mutants put the whole correction branch at ||z_perp|| = 0."""
        children, mu_d, mu_t, e = node(50_000, rng)
        res = MUTANTS[name](K)(children, mu_d, mu_t, 1.0, rng)
        _, r = coords(res.states, mu_d, e)
        at_zero = np.mean(r < 1e-20)
        assert at_zero == pytest.approx(np.mean(~res.accepted), abs=1e-12)
        assert at_zero > 0.01
        if atom is not None:
            assert abs(at_zero - atom) < 4.5 * np.sqrt(atom * (1 - atom) / 50_000)

    def test_bf16_residual_is_atomic(self, rng):
        """Corrected outputs sit on the bfloat16 lattice; a continuous law almost never does."""
        children, mu_d, mu_t, e = node(100_000, rng)
        res = MUTANTS["precision_bf16_residual"](K)(children, mu_d, mu_t, 1.0, rng)
        s, _ = coords(res.states, mu_d, e)
        on_lattice = np.abs(s - round_bfloat16(s)) <= 1e-9 * (1 + np.abs(s))
        assert on_lattice[~res.accepted].mean() > 0.99
        # an exact rule's outputs hit the lattice with probability ~1e-7
        exact_s, _ = coords(children[:, 0], mu_d, e)
        assert (np.abs(exact_s - round_bfloat16(exact_s)) <= 1e-9 * (1 + np.abs(exact_s))).sum() <= 2
        assert (~res.accepted).sum() > 1000

    def test_claims_child_is_a_contract_violation_on_every_correction(self, rng):
        children, mu_d, mu_t, _ = node(20_000, rng)
        res = MUTANTS["claims_child_after_correction"](K)(children, mu_d, mu_t, 1.0, rng)
        issues = check_contract(res, children)
        assert issues[0].kind == "not_a_copy" and 0.01 * 20_000 < issues[0].n_rows < 0.05 * 20_000


def test_round_bfloat16_matches_known_values():
    x = np.array([1.0, 1.00390625, 1.005, 3.14159, -2.5e-3, 0.0])
    expected = np.array([1.0, 1.0, 1.0078125, 3.140625, -0.00250244140625, 0.0])
    np.testing.assert_array_equal(round_bfloat16(x), expected)
