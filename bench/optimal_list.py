"""The optimal list rule: acceptance minus bound on the issue's grid, solve times, verifier speed.

1. ``acceptance - acceptance_bound`` per cell of K in {2, 3, 4, 8, 16} x delta in
   {0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4}, the relative difference of the rejections, and
   the worst difference against an independent mpmath bound (40 digits; the reference of
   ``tests/optimize/test_list_rule.py``).
2. Solve time per (K, delta): cold (``lru_cache`` cleared), warm (cached), and the vectorised
   per-row solve of 100,000 distinct deltas.
3. Verifier time per call against RASS (optimal weights) in the same process, n = 200,000,
   K = 4, d = 64: one shared delta and per-row deltas ~ U(0, 3); median of ``--repeats`` calls.
4. Gaussian-mixture speedup (``GaussianMixture.random(dim=512, n_components=5, seed=20260714)``,
   30 steps, churn 0.06, ``prefetch="nearest"``, default protocol) of D-GRS, RASS and the optimal
   list rule on the trees (K, L) = (4, 4) and (2, 3), ``--gm-n`` trajectories each (0 skips).

Run:  python bench/optimal_list.py [--repeats 5] [--gm-n 2000] [--out bench/results/optimal_list.md]

``--grid`` instead writes ``bench/results/optimal_list_grid.md`` (issue 18, part 1): K in
{2, 3, 4, 5, 8, 16, 32, 64, 128, 256, 512, 1024} x ``--grid-n`` deltas ``linspace(1e-3, 40)``.

* failures before and after: the code before the fix (``git show REV:rass_theory/optimize/
  list_rule.py`` loaded as a temporary module; ``--before REV``) and the current code, with the
  checks of the scalar ``optimal_list_rule`` (root order, mass defect, gap to
  ``acceptance_bound``; before: evaluated row-wise exactly as its ``_cached_rule`` does, and
  cross-checked against the old scalar path on a subset), plus "silently wrong" ``t_a``
  (status optimal but ``t_a`` off by more than 1e-8 relative);
* worst gap to the 30-digit mpmath reference (``tests/optimize/mp_list_reference.py``) of the
  acceptance, ``t_a`` and the TV bound ``|D(t_a)|`` on every ``--mp-every``-th delta, through the
  scalar public path ``rt.optimal_list_rule``;
* the verifier at per-row deltas (log-uniform on [1e-3, 40], all distinct) against the child
  draw ``rng.standard_normal((n, K, d))`` in the same process, NumPy and torch (CPU).

Run:  python bench/optimal_list.py --grid [--grid-n 8000] [--mp-every 40] [--before REV]
"""
from __future__ import annotations

import argparse
import pathlib
import platform
import statistics
import time

import numpy as np

import rass_theory as rt
from rass_theory.optimize import list_rule as lr

GRID_K = (2, 3, 4, 8, 16)
GRID_DELTA = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)


def gap_table():
    lines = ["| K \\ delta | " + " | ".join(f"{d:g}" for d in GRID_DELTA) + " |",
             "| ---: |" + " ---: |" * len(GRID_DELTA)]
    worst, worst_cell, worst_rel, all_ok = 0.0, None, 0.0, True
    for K in GRID_K:
        cells = []
        for d in GRID_DELTA:
            rule = rt.optimal_list_rule(K, d)
            gap = rule.acceptance - rt.acceptance_bound(K, d)
            rej_b = rt.exact.bound.bound_rejection_probability(K, d)
            rel = abs(rule.rejection_probability - rej_b) / rej_b if rej_b > 0 else 0.0
            worst_rel = max(worst_rel, rel)
            if abs(gap) >= abs(worst):
                worst, worst_cell = gap, (K, d)
            all_ok &= rule.status == "optimal"
            cells.append(f"{gap:.1e}" if rule.status == "optimal" else f"{gap:.1e} ({rule.status})")
        lines.append(f"| {K} | " + " | ".join(cells) + " |")
    return lines, worst, worst_cell, worst_rel, all_ok


def mpmath_check():
    """Worst ``|acceptance - alpha*_mpmath|`` over the grid, and its cell."""
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "optimize"))
    from test_list_rule import _mp_bound

    worst, cell = 0.0, None
    for K in GRID_K:
        for d in GRID_DELTA:
            err = abs(rt.optimal_list_rule(K, d).acceptance - float(_mp_bound(K, d)[0]))
            if err >= worst:
                worst, cell = err, (K, d)
    return worst, cell


def solve_times():
    cold, warm = [], []
    for K in GRID_K:
        for d in GRID_DELTA:
            lr._cached_rule.cache_clear()
            t0 = time.perf_counter()
            rt.optimal_list_rule(K, d)
            t1 = time.perf_counter()
            for _ in range(100):
                rt.optimal_list_rule(K, d)
            t2 = time.perf_counter()
            cold.append(t1 - t0)
            warm.append((t2 - t1) / 100)
    deltas = np.random.default_rng(0).uniform(0.0, 3.0, 100_000)
    t0 = time.perf_counter()
    P = lr.solve_list_rule(4, deltas)
    vec = time.perf_counter() - t0
    assert P.converged.all()
    return cold, warm, vec


def _nodes(n, K, d, delta, rng):
    mu_d = np.zeros((n, d))
    mu_t = np.zeros((n, d))
    mu_t[:, 0] = delta
    children = mu_d[:, None, :] + rng.standard_normal((n, K, d))
    return children, mu_d, mu_t


def _median_time(verifier, args, repeats, rng):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        verifier(*args, 1.0, rng)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def speed(repeats):
    rng = np.random.default_rng(1)
    n, K, d = 200_000, 4, 64
    rows = []
    for label, delta in (("shared delta = 0.5", 0.5), ("shared delta = 1", 1.0),
                         ("per-row delta ~ U(0, 3)", rng.uniform(0.0, 3.0, n))):
        args = _nodes(n, K, d, delta, rng)
        ol, ra = rt.verifiers.optimal_list(), rt.verifiers.rass()
        ol(*args, 1.0, rng)  # warm both (solves and tables cached)
        ra(*args, 1.0, rng)
        t_ol = _median_time(ol, args, repeats, rng)
        t_ra = _median_time(ra, args, repeats, rng)
        rows.append((label, t_ol, t_ra))
    return rows


def gm_speedups(n):
    from rass_theory.diffusion import GaussianMixture, speculative_sample

    target = GaussianMixture.random(dim=512, n_components=5, seed=20260714)
    rows = []
    for K, L in ((4, 4), (2, 3)):
        for v in ("dgrs", "rass", "optimal_list"):
            t0 = time.perf_counter()
            res = speculative_sample(target, v, K=K, L=L, n_samples=n, n_steps=30, churn=0.06,
                                     rng=np.random.default_rng(7), prefetch="nearest")
            rows.append((K, L, v, res.speedup, res.speedup_se, time.perf_counter() - t0))
    return rows


# ---------------------------------------------------------------------------------------------
# issue 18, part 1: the (K, delta) grid before and after
# ---------------------------------------------------------------------------------------------

GRID_KS = (2, 3, 4, 5, 8, 16, 32, 64, 128, 256, 512, 1024)


def _load_before(rev):
    """The list-rule module at git revision ``rev``, imported as a temporary module."""
    import importlib.util
    import subprocess
    import sys
    import tempfile

    root = pathlib.Path(__file__).resolve().parents[1]
    src = subprocess.run(["git", "show", f"{rev}:rass_theory/optimize/list_rule.py"], cwd=root,
                         capture_output=True, text=True, check=True).stdout
    path = pathlib.Path(tempfile.mkdtemp()) / "list_rule_before.py"
    path.write_text(src)
    name = "rass_theory.optimize._list_rule_before"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _before_status(old, K, deltas, bounds):
    """Row-wise the checks of the old ``_cached_rule`` (same formulas), on its vectorised solve."""
    from scipy.special import log_ndtr

    p = old.solve_list_rule(K, deltas)
    ts, ta = p.t_star, p.t_keep
    with np.errstate(all="ignore"):
        acc = np.where(np.isfinite(ts), np.exp(log_ndtr(ts - deltas)) - np.expm1(K * log_ndtr(ts)), 1.0)
        defect = np.abs(np.exp(log_ndtr(ta - deltas)) - np.exp(K * log_ndtr(ta)))
    fail = ~p.converged | ~(defect <= 1e-12) | ~(np.abs(acc - bounds) <= 1e-12)
    return fail, ta


def grid_rows(old, n_delta, mp_every):
    """Per K: points, failures before/after, silently wrong t_a before, scalar checks after, mpmath."""
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "optimize"))
    import mp_list_reference as ref

    deltas = np.linspace(1e-3, 40.0, n_delta)
    rows, worst = [], {"acc": (0.0, None), "t_a": (0.0, None), "tv": (0.0, None)}
    for K in GRID_KS:
        bounds = np.array([rt.acceptance_bound(K, float(d)) for d in deltas])
        fail_before, ta_before = _before_status(old, K, deltas, bounds)
        new = lr.solve_list_rule(K, deltas)
        fail_after = np.zeros(deltas.size, dtype=bool)
        fail_after[[i for i, _ in new.failed_checks()]] = True
        fail_after |= ~(np.abs(new.acceptance - bounds) <= lr.CERTIFICATE_TOL)
        with np.errstate(invalid="ignore"):
            wrong = ~fail_before & ~(np.abs(ta_before - new.t_keep) <= 1e-8 * np.maximum(1.0, np.abs(new.t_keep)))
        fail_d = deltas[fail_before]
        band = f"{fail_d.min():.2f}-{fail_d.max():.2f}" if fail_d.size else "-"
        # the scalar public path and the mpmath reference on every mp_every-th delta
        scalar_fail = 0
        for d in deltas[::mp_every]:
            try:
                rule = rt.optimal_list_rule(K, float(d))
            except ValueError:
                scalar_fail += 1
                continue
            alpha, _rej, t_a, _t2 = ref.reference(K, float(d))
            for key, err in (("acc", abs(rule.acceptance - float(alpha))),
                             ("t_a", abs(rule.t_keep - float(t_a)) / max(1.0, abs(float(t_a)))),
                             ("tv", float(ref.defect(rule.t_keep, K, float(d))))):
                if err >= worst[key][0]:
                    worst[key] = (err, (K, float(d)))
        rows.append((K, deltas.size, int(fail_before.sum()), band, int(wrong.sum()), int(fail_after.sum()),
                     deltas[::mp_every].size, scalar_fail))
    return rows, worst


def _check_before_emulation(old, K=64, n=120):
    """The row-wise emulation of the old checks agrees with the old scalar path on a band of the grid."""
    deltas = np.linspace(8.2, 9.0, n)
    bounds = np.array([rt.acceptance_bound(K, float(d)) for d in deltas])
    fail, _ = _before_status(old, K, deltas, bounds)
    scalar = np.array([old._cached_rule.__wrapped__(K, float(d)).status != "optimal" for d in deltas])
    return int((fail != scalar).sum()), int(scalar.sum()), n


def verifier_per_row(repeats):
    """Verifier time at per-row deltas / child-draw time (same process), NumPy and torch CPU."""
    import torch

    from rass_theory.torch import verifiers as tv

    out = []
    for K, d in ((4, 64), (32, 16), (128, 4)):
        n = 50_000
        rng = np.random.default_rng(11)
        delta = np.exp(rng.uniform(np.log(1e-3), np.log(40.0), n))
        t_draw = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            children = rng.standard_normal((n, K, d))
            t_draw.append(time.perf_counter() - t0)
        mu_d = np.zeros((n, d))
        mu_t = np.zeros((n, d))
        mu_t[:, 0] = delta
        v = rt.verifiers.optimal_list()
        t_np = _median_time(v, (children, mu_d, mu_t), repeats, rng)
        targs = [torch.as_tensor(a) for a in (children, mu_d, mu_t)]
        gen = torch.Generator().manual_seed(0)
        vt = tv.optimal_list()
        t_t = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            vt(*targs, 1.0, gen)
            t_t.append(time.perf_counter() - t0)
        t_solve = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            lr.solve_list_rule(K, delta).certify()
            t_solve.append(time.perf_counter() - t0)
        out.append((K, d, n, statistics.median(t_draw), t_np, statistics.median(t_t), statistics.median(t_solve)))
    return out


def grid_main(args):
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    old = _load_before(args.before)
    t0 = time.perf_counter()
    rows, worst = grid_rows(old, args.grid_n, args.mp_every)
    elapsed = time.perf_counter() - t0
    mism, n_fail_scalar, n_chk = _check_before_emulation(old)
    tot = [sum(r[i] for r in rows) for i in (1, 2, 4, 5, 6, 7)]
    out = ["# Optimal list rule on the (K, delta) grid: before and after (issue 18, part 1)", "",
           (f"`python bench/optimal_list.py --grid --grid-n {args.grid_n} --mp-every {args.mp_every} "
            f"--before {args.before}`; {stamp}, {platform.machine()}, Python {platform.python_version()}, "
            f"rass_theory {rt.__version__}; grid {elapsed:.0f} s.  The machine was shared (2 cores, several "
            "sessions): times are noisy, ratios are measured in one process, back to back."), "",
           (f"K in {{{', '.join(map(str, GRID_KS))}}} x {args.grid_n} deltas `linspace(1e-3, 40)`. A point "
            "*fails* when a check of the scalar `optimal_list_rule` fails: root finding/order "
            "`t_lo < t_a <= t*`, mass defect `|D(t_a)| <= 1e-12`, `|acceptance - acceptance_bound| <= 1e-12` "
            "(after: also the gap to the independent bracketing solve). *Before* is revision "
            f"`{args.before}`, its checks applied row-wise with its own formulas to its vectorised solve "
            f"(cross-check against its scalar path on {n_chk} deltas in [8.2, 9] at K = 64: {n_fail_scalar} "
            f"failures there, {mism} disagreements). *Silently wrong* counts points whose old status was "
            "optimal but whose `t_a` differs from the new one by more than 1e-8 relative; each passed the old "
            "mass-defect check, so by P10.7 (`proofs/P10-optimal-list-rule.md`) its output was still within "
            "TV about 1e-12 of the target: wrong constants, not a wrong law. *Scalar path after*: "
            "`rt.optimal_list_rule` on every `--mp-every`-th delta, exceptions counted."), "",
           "| K | points | failures before | failing deltas before | silently wrong t_a before | failures after "
           "| scalar path after (points / exceptions) |",
           "| ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for K, npts, fb, band, wr, fa, nsc, sf in rows:
        out.append(f"| {K} | {npts} | {fb} | {band} | {wr} | {fa} | {nsc} / {sf} |")
    out.append(f"| all | {tot[0]} | {tot[1]} | | {tot[2]} | {tot[3]} | {tot[4]} / {tot[5]} |")
    out += ["", (f"Against the 30-digit mpmath reference, through `rt.optimal_list_rule` on every "
                 f"{args.mp_every}-th delta ({tot[4]} points):"), "",
            "| quantity | worst | at (K, delta) |", "| --- | ---: | --- |"]
    labels = {"acc": "abs(acceptance - alpha*)", "t_a": "abs(t_a - t_a mp) / max(1, abs(t_a))",
              "tv": "TV bound abs(D(t_a)) of the float t_a, in mpmath"}
    for key in ("acc", "t_a", "tv"):
        err, at = worst[key]
        out.append(f"| {labels[key]} | {err:.2e} | {at[0]}, {at[1]:.6g} |")
    out += ["", f"## Verifier at per-row deltas (log-uniform on [1e-3, 40], all distinct; median of {args.repeats})",
            "", "| K | d | n | child draw | NumPy verifier | ratio | torch CPU verifier | ratio | solve + certify |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for K, d, n, t_draw, t_np, t_t, t_solve in verifier_per_row(args.repeats):
        out.append(f"| {K} | {d} | {n} | {t_draw:.3f} s | {t_np:.3f} s | {t_np / t_draw:.2f} | {t_t:.3f} s | "
                   f"{t_t / t_draw:.2f} | {t_solve:.3f} s |")
    text = "\n".join(out) + "\n"
    print(text)
    pathlib.Path(args.grid_out).write_text(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gm-n", type=int, default=2000)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "optimal_list.md"))
    parser.add_argument("--grid", action="store_true", help="write the (K, delta) grid report instead")
    parser.add_argument("--grid-n", type=int, default=8000)
    parser.add_argument("--mp-every", type=int, default=40)
    parser.add_argument("--before", default="3005d45~1", help="git revision of the code before the fix")
    parser.add_argument("--grid-out", default=str(pathlib.Path(__file__).parent / "results" / "optimal_list_grid.md"))
    args = parser.parse_args(argv)
    if args.grid:
        grid_main(args)
        return
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    intro = (f"`python bench/optimal_list.py --repeats {args.repeats}`; {stamp}, {platform.machine()}, "
             f"numpy {np.__version__}. The machine was shared with other jobs (2 cores, several sessions), so "
             "absolute times are noisy; ratios are measured in one process, back to back.")
    out = ["# Optimal list rule: acceptance at the bound, solve time, verifier speed", "", intro, "",
           "## Acceptance minus bound (`optimal_list_rule(K, delta).acceptance - acceptance_bound(K, delta)`)", ""]
    lines, worst, cell, worst_rel, all_ok = gap_table()
    out += lines
    status = "Every cell has status `optimal`." if all_ok else "Some cells did NOT reach status `optimal` (see table)."
    out += ["", (f"Worst cell: K = {cell[0]}, delta = {cell[1]:g}, acceptance - bound = {worst:.2e}; worst relative "
                 f"difference of the rejections (rule vs bound module) = {worst_rel:.2e}. {status}"), ""]
    mp_worst, mp_cell = mpmath_check()
    out += [(f"Against an independent mpmath bound (40 digits): worst |acceptance - alpha*| = {mp_worst:.2e} "
             f"at K = {mp_cell[0]}, delta = {mp_cell[1]:g}."), ""]
    cold, warm, vec = solve_times()
    out += ["## Solve time per (K, delta), 50 cells", "",
            "| | median | max |", "| --- | ---: | ---: |",
            f"| cold (cache cleared) | {1e3 * statistics.median(cold):.2f} ms | {1e3 * max(cold):.2f} ms |",
            f"| warm (lru_cache hit) | {1e6 * statistics.median(warm):.2f} us | {1e6 * max(warm):.2f} us |",
            "", (f"Vectorised per-row solve of 100,000 distinct deltas (K = 4): {vec:.2f} s "
                 f"({1e6 * vec / 1e5:.1f} us per row)."), ""]
    out += [f"## Verifier time per call, n = 200,000, K = 4, d = 64 (median of {args.repeats})", "",
            "| batch | optimal_list | RASS (optimal weights) | ratio |", "| --- | ---: | ---: | ---: |"]
    for label, t_ol, t_ra in speed(args.repeats):
        out.append(f"| {label} | {t_ol:.3f} s | {t_ra:.3f} s | {t_ol / t_ra:.2f} |")
    if args.gm_n:
        out += ["", f"## Gaussian-mixture speedup, prefetch nearest ({args.gm_n} trajectories per arm, seed 7)", "",
                ("dim 512, 5 components (seed 20260714), 30 steps, churn 0.06, default protocol; speedup = "
                 "standard steps / target calls (ratio of means) ± SE."), "",
                "| K | L | verifier | speedup | run time |", "| ---: | ---: | --- | ---: | ---: |"]
        for K, L, v, sp, se, el in gm_speedups(args.gm_n):
            out.append(f"| {K} | {L} | {v} | {sp:.3f} ± {se:.3f} | {el:.0f} s |")
    text = "\n".join(out) + "\n"
    print(text)
    pathlib.Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
