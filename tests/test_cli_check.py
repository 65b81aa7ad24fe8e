"""``rass-theory check`` / ``certify``: importing targets, verdicts as exit codes, clear errors."""
import json
import textwrap

import pytest
from click.testing import CliRunner

from rass_theory.cli import main

MODULE = textwrap.dedent('''
    import numpy as np
    from types import SimpleNamespace

    def resample(children, mu_draft, mu_target, sigma, rng):
        n, K, d = children.shape
        sig = np.broadcast_to(np.asarray(sigma, dtype=float), (n,))[:, None]
        return SimpleNamespace(states=(mu_target + sig * rng.standard_normal((n, d))).astype(mu_target.dtype),
                               accepted=np.zeros(n, bool), child_index=np.full(n, -1))

    def make_resample():
        return resample

    class Inflated:
        def __call__(self, children, mu_draft, mu_target, sigma, rng):
            n, K, d = children.shape
            sig = np.broadcast_to(np.asarray(sigma, dtype=float), (n,))[:, None]
            return SimpleNamespace(states=(mu_target + 1.2 * sig * rng.standard_normal((n, d))).astype(mu_target.dtype),
                                   accepted=np.zeros(n, bool), child_index=np.full(n, -1))

    NOT_CALLABLE = 3
''')


@pytest.fixture
def target_module(tmp_path, monkeypatch):
    (tmp_path / "cli_target_mod.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "cli_target_mod"


FAST = ["--n-samples", "5000", "--chunk-size", "5000", "--seed", "1", "--K", "4", "--delta", "0.5"]


def test_check_passes_with_verifier_and_factory(target_module, tmp_path):
    runner = CliRunner()
    for attr in ("resample", "make_resample"):
        out = tmp_path / f"{attr}.json"
        res = runner.invoke(main, ["check", f"{target_module}:{attr}", *FAST, "--json", str(out)])
        assert res.exit_code == 0, res.output
        assert "s_ks" in res.output and "PASSED" in res.output
        assert json.loads(out.read_text())["passed"] is True


def test_check_fails_with_exit_code_one(target_module):
    res = CliRunner().invoke(main, ["check", f"{target_module}:Inflated", *FAST])
    assert res.exit_code == 1, res.output
    assert "FAIL" in res.output


def test_default_check_is_the_grid_with_a_printed_seed(target_module):
    res = CliRunner().invoke(main, ["check", f"{target_module}:resample", "--n-samples", "2000",
                                    "--chunk-size", "2000", "--dtype", "float64"])
    assert res.exit_code == 0, res.output
    assert "certify" in res.output and "random seed" in res.output and "took the correction branch" in res.output


def test_detect_designs_n_and_bad_detect_is_an_error(target_module):
    base = ["check", f"{target_module}:resample", "--K", "4", "--delta", "0.5", "--chunk-size", "20000",
            "--dtype", "float64", "--seed", "1"]
    res = CliRunner().invoke(main, [*base, "--detect", "0.05"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, [*base, "--detect", "2"])
    assert res.exit_code != 0 and "detect" in res.output


def test_builtin_rule_by_factory():
    res = CliRunner().invoke(main, ["check", "rass_theory.verifiers:rmc", *FAST, "--K", "1"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("target, message", [
    ("no_such_module_xyz:f", "cannot import module"),
    ("cli_target_mod:missing", "has no attribute"),
    ("cli_target_mod:NOT_CALLABLE", "not a callable"),
    ("cli_target_mod", "package.module:callable"),
])
def test_unusable_targets_exit_two_without_traceback(target_module, target, message):
    res = CliRunner().invoke(main, ["check", target, *FAST])
    assert res.exit_code == 2
    assert message in res.output and "Traceback" not in res.output


def test_bad_harness_argument_exits_two(target_module):
    res = CliRunner().invoke(main, ["check", f"{target_module}:resample", "--dim", "0", *FAST])
    assert res.exit_code == 2 and "dim" in res.output
    res = CliRunner().invoke(main, ["check", f"{target_module}:resample", "--dtype", "float16", *FAST])
    assert res.exit_code == 2 and "dtype" in res.output
    res = CliRunner().invoke(main, ["check", f"{target_module}:resample", "--n-samples", "abc"])
    assert res.exit_code == 2 and "--n-samples" in res.output


def test_certify_grid(target_module, tmp_path):
    out = tmp_path / "grid.json"
    res = CliRunner().invoke(main, ["certify", f"{target_module}:resample", "--K", "2,4", "--delta", "0,1",
                                    "--n-samples", "3000", "--chunk-size", "3000", "--seed", "1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert len(data["cells"]) == 4 and data["passed"] is True
    per_cell = len([t for t in data["cells"][0]["tests"] if t["name"] != "contract"])
    from rass_theory.stats.family import tail_test_names
    # every cell's tests (its own far tails included) + the grid-pooled far tails
    assert data["n_tests"] == 4 * per_cell + len(tail_test_names(8, 2)) and data["seed"] == 1
