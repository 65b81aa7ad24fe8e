"""Generate the tutorial notebooks from this script (run: ``python notebooks/_build.py``).

The notebooks are stored without outputs; keeping their source here makes them reviewable as
plain Python and keeps every notebook small enough to execute in CI
(``tests/test_notebooks.py``). Each notebook checks its own claims with ``assert`` so that a
regression anywhere in the toolkit fails the notebook test.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent


def md(text):
    return new_markdown_cell(text.strip("\n"))


def code(text):
    return new_code_cell(text.strip("\n"))


NB01 = [
    md("""
# 01 — A tour of the exact theory

One speculative node: `K` children `X_1..X_K ~ N(mu_draft, sigma^2 I)` and a target kernel
`N(mu_target, sigma^2 I)`. Everything depends only on `K` and the standardised displacement
`delta = ||mu_target - mu_draft|| / sigma` (proof `proofs/P1-rank1-reduction.md`):
in the rank-1 coordinate `s`, drafts are `N(0, 1)` and the target is `f(s) = phi(s - delta)`.

This notebook computes the exact acceptance of each rule, the list-coupling bound, and checks the
law of the child RASS selects against a simulation.
"""),
    code("""
import numpy as np
from scipy import stats
import rass_theory as rt

K, delta = 4, 1.0
for rule in ("dgrs", "rass"):
    print(f"{rule:>5}: acceptance = {rt.acceptance(rule, K, delta):.6f}")
print(f"  rmc: acceptance = {rt.acceptance('rmc', 1, delta):.6f}   (K = 1, equals 2 Phi(-delta/2) = {2 * stats.norm.cdf(-delta / 2):.6f})")
print(f"bound: alpha*(K, delta) = {rt.acceptance_bound(K, delta):.6f}")
"""),
    md("""
**Ordering.** Every rule that outputs one of the K iid drafts or a correction is below the bound
`alpha*(K, delta) = min_t [Phi(t - delta) + 1 - Phi(t)^K]`; at `K = 1` the bound *is* RMC's
acceptance. Check both over a few cells:
"""),
    code("""
for K_ in (1, 2, 4, 8):
    for d in (0.25, 1.0, 2.0):
        a_dgrs, a_rass, bound = rt.acceptance("dgrs", K_, d), rt.acceptance("rass", K_, d), rt.acceptance_bound(K_, d)
        assert a_dgrs <= bound + 1e-9 and a_rass <= bound + 1e-9
        print(f"K={K_} delta={d:<4}  D-GRS {a_dgrs:.4f}  RASS {a_rass:.4f}  bound {bound:.4f}")
assert abs(rt.acceptance_bound(1, 1.0) - rt.acceptance("rmc", 1, 1.0)) < 1e-9
"""),
    md("""
## The selected law of RASS

RASS sorts the children by `s`, draws a rank `j ~ w` and proposes that child. Its `s` has density
`g_w(s) = phi(s) sum_j w_j K!/(j!(K-1-j)!) Phi(s)^j (1 - Phi(s))^(K-1-j)`, and the rule accepts with
probability `min(1, f/g_w)`, so its acceptance is `1 - TV(g_w, f)`. Simulate the selection and
compare the histogram with `rt.selected_law(w, delta).pdf`:
"""),
    code("""
opt = rt.optimal_rank_weights(K, delta)
w = opt.weights
print("optimal weights (ascending ranks):", np.round(w, 4), "status:", opt.status)

rng = np.random.default_rng(0)
n = 200_000
s_sorted = np.sort(rng.standard_normal((n, K)), axis=1)
rank = rng.choice(K, size=n, p=w)
s_sel = s_sorted[np.arange(n), rank]

law = rt.selected_law(w, delta)
edges = np.linspace(-4, 4, 41)
counts, _ = np.histogram(s_sel, bins=edges)
expected = n * np.diff(law.cdf(edges))
chi2 = float(np.sum((counts - expected) ** 2 / expected))
p = stats.chi2.sf(chi2, len(counts) - 1)
print(f"chi-square of the simulated selection against the exact law: {chi2:.1f} on {len(counts) - 1} df, p = {p:.3f}")
assert p > 1e-4
"""),
    code("""
from matplotlib.figure import Figure
from rass_theory.plot.style import style_context, OKABE_ITO

grid = np.linspace(-4, 5, 400)
with style_context():
    fig = Figure(figsize=(6, 3.4), layout="constrained")
    ax = fig.add_subplot()
    ax.hist(s_sel, bins=edges, density=True, color=OKABE_ITO["sky_blue"], alpha=0.6, label="simulated selection")
    ax.plot(grid, law.pdf(grid), color=OKABE_ITO["blue"], label="selected law $g_w$ (exact)")
    ax.plot(grid, stats.norm.pdf(grid - delta), color="black", linestyle="--", label="target $f$")
    ax.fill_between(grid, np.minimum(law.pdf(grid), stats.norm.pdf(grid - delta)), color=OKABE_ITO["bluish_green"],
                    alpha=0.25, label=r"$\\min(g_w, f)$: acceptance")
    ax.set_xlabel("rank-1 coordinate s (standard deviations)")
    ax.set_ylabel("density")
    ax.legend()
fig
"""),
    md("The green area is the acceptance probability. Integrate it numerically and compare with the exact value:"),
    code("""
from scipy import integrate

overlap, err = integrate.quad(lambda s: min(law.pdf(np.array([s]))[0], stats.norm.pdf(s - delta)), -12, 14, limit=200,
                              points=[0.0, delta])
exact = rt.acceptance("rass", K, delta, weights=w)
print(f"integral of min(g_w, f) = {overlap:.8f}   rt.acceptance = {exact:.8f}")
assert abs(overlap - exact) < 1e-6
"""),
    md("""
## All rules against delta

`rass_theory.plot` draws the same comparison for several `K` (a small grid here; the report uses a
finer one). Every figure function has a `*_data` companion whose table is what the figure shows.
"""),
    code("""
from rass_theory import plot

table = plot.acceptance_data(K_values=(1, 2, 4), deltas=np.linspace(0, 3, 7), rules=("rmc", "dgrs", "rass", "bound"))
plot.plot_acceptance(table)
"""),
]

NB02 = [
    md("""
# 02 — Check your own verifier

A verifier is any function

```python
verifier(children (n, K, d), mu_draft (n, d), mu_target (n, d), sigma, rng) -> result
```

whose result has `states (n, d)`, `accepted (n,)` and `child_index (n,)` (the verifier contract, `docs/ARCHITECTURE.md`). It
does not have to use any class of this package. `rt.check_exactness` runs it on a synthetic node
and tests the **whole** committed state against the target law, with a stated power.

Here we write the single-draft reflection coupling for child 0 by hand, check it, then break it.
"""),
    code("""
from types import SimpleNamespace

import numpy as np
from scipy import stats
import rass_theory as rt


def my_verifier(children, mu_draft, mu_target, sigma, rng):
    \"\"\"Reflection maximal coupling on child 0 (ignores the other children).\"\"\"
    x = children[:, 0, :]
    # compute in float64 whatever the input dtype; the states go back in the inputs' dtype
    mu_draft, mu_target = np.asarray(mu_draft, dtype=float), np.asarray(mu_target, dtype=float)
    sigma = np.broadcast_to(np.asarray(sigma, dtype=float), (len(x),))[:, None]  # scalar or (n,)
    diff = mu_target - mu_draft
    norm = np.linalg.norm(diff, axis=1)
    delta = norm / sigma[:, 0]
    e = diff / np.where(norm > 0, norm, 1.0)[:, None]
    z = (x - mu_draft) / sigma
    s = np.einsum("nd,nd->n", z, e)
    # accept with probability min(1, phi(s - delta) / phi(s)) = min(1, exp(s delta - delta^2 / 2))
    accepted = np.log(rng.random(len(s))) < np.minimum(s * delta - 0.5 * delta**2, 0.0)
    s_new = np.where(accepted, s, delta - s)          # reflect on rejection, keep z_perp
    states = (mu_draft + sigma * (z + (s_new - s)[:, None] * e)).astype(children.dtype)
    states[accepted] = x[accepted]                    # accepted rows are exactly the child
    child_index = np.where(accepted, 0, -1)
    return SimpleNamespace(states=states, accepted=accepted, child_index=child_index)
"""),
    md("""
Its exact acceptance is `2 Phi(-delta/2)`; passing it as `expected_acceptance` adds an exact
binomial test of the accepted count at the named delta. Every row is its own node (its own
`sigma`, passed as an `(n,)` array or a scalar), so the verifier broadcasts `sigma`. 40,000 rows keep
this notebook fast; `rt.check_exactness(my_verifier)` with no options runs the default grid.
"""),
    code("""
delta = 0.5
rep = rt.check_exactness(my_verifier, K=4, delta=delta, dim=8, n_samples=40_000, alpha=1e-3, rng=1,
                         expected_acceptance=2 * stats.norm.cdf(-delta / 2))
print(rep.summary())
for t in rep.tests:
    print(f"  {t.name:<20} statistic {t.statistic:10.4g}   p {t.pvalue:.3g}   adjusted p {t.pvalue_adjusted:.3g}")
print(f"smallest detectable KS distance at this n: {rep.detectable_ks_distance:.4f}")
assert rep.passed
"""),
    md("""
## A plausible bug

On rejection, a tired implementer draws a fresh `s` from the target `N(delta, 1)` instead of
reflecting. The accepted part already carries target mass `min(phi, f)`, so drawing the
remainder from `f` itself over-weights the region where `f > phi`.
"""),
    code("""
def buggy_verifier(children, mu_draft, mu_target, sigma, rng):
    res = my_verifier(children, mu_draft, mu_target, sigma, rng)
    sigma = np.broadcast_to(np.asarray(sigma, dtype=float), (len(children),))[:, None]
    diff = mu_target - mu_draft
    norm = np.linalg.norm(diff, axis=1)
    e = diff / np.where(norm > 0, norm, 1.0)[:, None]
    z = (res.states - mu_draft) / sigma
    s = np.einsum("nd,nd->n", z, e)
    fresh = norm / sigma[:, 0] + rng.standard_normal(len(s))   # BUG: residual drawn from the target itself
    s_new = np.where(res.accepted, s, fresh)
    states = mu_draft + sigma * (z + (s_new - s)[:, None] * e)
    states[res.accepted] = res.states[res.accepted]
    return SimpleNamespace(states=states, accepted=res.accepted, child_index=res.child_index)


bad = rt.check_exactness(buggy_verifier, K=4, delta=delta, dim=8, n_samples=40_000, alpha=1e-3, rng=1)
print(bad.summary())
print("failed tests:", [t.name for t in bad.failed_tests])
assert not bad.passed
"""),
    md("""
## The mutant catalogue

`rass_theory.mutants` holds realistic wrong verifiers; the harness must reject each of them at
its default settings. Here is one, checked at a modest `n`:
"""),
    code("""
from rass_theory.mutants import MUTANTS, MUTANT_CATCHES

print(len(MUTANTS), "mutants:", ", ".join(MUTANTS))
name = "orth_zeroed_on_correction"
print(MUTANTS[name].__doc__.strip().splitlines()[0])
mrep = rt.check_exactness(MUTANTS[name](4), K=4, delta=delta, dim=8, n_samples=40_000, alpha=1e-3, rng=2)
print(mrep.summary())
print("expected to be caught by:", MUTANT_CATCHES[name], "| failed tests:", [t.name for t in mrep.failed_tests])
assert not mrep.passed
"""),
    md("""
From the command line the same check is

```
rass-theory check mypkg.mymodule:my_verifier --K 4 --delta 0.5 --dim 8
```

which prints the table and exits non-zero on failure.
"""),
]

NB03 = [
    md("""
# 03 — Rank weights and value-aware policies

RASS is exact for **any** rank weights `w`; the weights only decide how often it accepts.
The optimal weights minimise `TV(g_w, f)`, a convex program (`proofs/`). A *value-aware* policy
may also look at the children's values — e.g. take the top child when its `s >= t`, otherwise
draw a rank — and stays exact as long as its selected law is known.
"""),
    code("""
import numpy as np
import rass_theory as rt
from rass_theory import plot

K, delta = 4, 1.0
opt = rt.optimal_rank_weights(K, delta)
uniform = np.full(K, 1 / K)
top = np.eye(K)[-1]
print("optimal weights:", np.round(opt.weights, 4), "| certified gap:", getattr(opt, "gap", "n/a"))
for name, w in (("uniform", uniform), ("top rank only", top), ("optimal", opt.weights)):
    print(f"{name:>14}: acceptance {rt.acceptance('rass', K, delta, weights=w):.4f}")
assert rt.acceptance("rass", K, delta, weights=opt.weights) >= max(
    rt.acceptance("rass", K, delta, weights=uniform), rt.acceptance("rass", K, delta, weights=top)) - 1e-9
"""),
    md("How the optimal weights move with `delta` (uniform at `delta = 0`, concentrating on the top ranks as `delta` grows):"),
    code("""
wt = plot.optimal_weights_data(K_values=(2, 4), deltas=np.linspace(0, 3, 7))
plot.plot_optimal_weights(wt)
"""),
    md("""
## Beyond RASS: the threshold policy

`optimal_threshold_policy(K, delta)` optimises the threshold `t` and the fallback weights.
For `K = 4, delta = 1` the exact values are (`proofs/P8-value-aware-policies.md`): RASS 0.896, threshold policy 0.924 = the bound.
"""),
    code("""
from rass_theory.optimize.policies import optimal_threshold_policy

pol = optimal_threshold_policy(K, delta)
rass = rt.acceptance("rass", K, delta)
bound = rt.acceptance_bound(K, delta)
print(f"RASS {rass:.4f}   threshold policy {pol.acceptance:.4f} (t = {pol.t:.3f})   bound {bound:.4f}")
assert rass <= pol.acceptance + 1e-9 <= bound + 2e-9
"""),
    md("""
Where the two rules sit against the bound over `delta` (the policy is optimised at the one cell
above; each policy optimisation is a search over thresholds, so the report runs it on a coarse
grid):
"""),
    code("""
from rass_theory.plot.table import Table, concat

table = plot.acceptance_data(K_values=(2, 4), deltas=np.linspace(0, 3, 7), rules=("dgrs", "rass", "bound"))
policy_row = Table({"rule": ["threshold"], "K": [K], "delta": [delta], "acceptance": [pol.acceptance]})
gaps = plot.gap_data(concat([table, policy_row]))
print(gaps.where(delta=delta, K=K).records())
plot.plot_gap_to_bound(gaps)
"""),
    md("""
The threshold policy is also a verifier (`rt.verifiers.threshold(K=4)`) and passes the exactness
harness like the others; `rass-theory report` certifies it with the built-in rules.
"""),
]

NB04 = [
    md("""
# 04 — Check your own speculative sampler, step by step

A verifier can be exact and the sampler around it still wrong: the wrong sigma at a depth, a stale
velocity treated as the target's, randomness reused, a draft that peeks at the noise. Comparing
final samples with plain sampling averages every such bug over the whole chain and often misses
it. Under an exact sampler every committed state is an exact draw of the plain kernel given the
past (`proofs/P9-tree-exactness.md`), so the standardised residual
`r_t = (x_{t+1} - kernel.mean(k, x_t)) / kernel.std(k)` is iid `N(0, I)`.
`diffusion.check_sampler` tests that at every committed step (section 7 of P9).

All a sampler has to do is **record** each committed state, the draft mean it was drafted around,
and the tree depth it was committed at.
"""),
    code("""
import numpy as np
import rass_theory as rt
from rass_theory import diffusion

target = diffusion.GaussianMixture.random(dim=8, n_components=3, seed=0)
kernel = diffusion.plain_kernel(target, n_steps=30, churn=0.06, protocol="paper")
print(kernel, "| committed states per trajectory:", kernel.n_states)


def my_sampler(kernel, x0, rng, stale_child_velocity=False):
    \"\"\"Trees of depth 2 with 2 children per node, frozen draft velocity, D-GRS verifier.\"\"\"
    verify = rt.verifiers.dgrs()
    n, d = x0.shape
    k0, S = kernel.first_stochastic, kernel.n_states
    traj = np.empty((n, S, d))
    traj[:, 0] = x0
    draft_means = np.zeros((n, S, d))
    depths = np.full((n, S), -1)
    x, step = x0.copy(), np.full(n, k0)
    u_frozen = kernel.velocity(k0, x)                     # the draft velocity of the next round
    while (rows := np.flatnonzero(step < kernel.stop)).size:
        y, k = x[rows], step[rows]
        alive = np.ones(rows.size, dtype=bool)
        v_root = None
        for j in range(2):
            alive &= k + j < kernel.stop
            w = np.flatnonzero(alive)
            if w.size == 0:
                break
            kk = k[w] + j
            if stale_child_velocity and j == 1:           # BUG: reuse the root's velocity, save a call
                v = v_root[w]
            else:
                v = kernel.velocity(kk, y[w])             # target velocity at the node
            if j == 0:
                v_root = np.zeros_like(y)
                v_root[w] = v
            mu_target = kernel.affine(kk, y[w], v)
            mu_draft = kernel.affine(kk, y[w], u_frozen[rows[w]])
            sigma = kernel.std(kk)
            children = mu_draft[:, None, :] + sigma[:, None, None] * rng.standard_normal((w.size, 2, d))
            res = verify(children, mu_draft, mu_target, sigma, rng)
            t = kk + 1 - k0
            traj[rows[w], t] = res.states                 # record: the committed state,
            draft_means[rows[w], t] = mu_draft            # the draft mean in force,
            depths[rows[w], t] = j                        # and the depth
            y[w] = res.states
            step[rows[w]] += 1
            u_frozen[rows[w]] = v                         # prefetch: the last verified node's velocity
            alive[w] = res.accepted
        x[rows] = y
    return traj, draft_means, depths
"""),
    md("""
`check_sampler` draws the `N(0, I)` starts, calls `sampler(kernel, x0, rng)`, and runs every test
of `check_trajectories` in one Holm family: chi-square of `||r||^2` per step and per depth, KS of
`<r, e>` along predictable directions (draft-to-target, velocity, velocity increment, fixed random
ones), lag-1 and lag-2 correlations along trajectories, correlation across trajectories, and a
final-state two-sample test. Its own target calls are counted separately.
"""),
    code("""
rep = diffusion.check_sampler(my_sampler, kernel, n_trajectories=600, rng=0)
print(rep.summary())
assert rep.passed
"""),
    md("""
## A plausible bug

To save a target call, the sampler reuses the root's velocity as the target velocity of the
accepted child. The verifier is still exact for the means it is given, but the child's target
mean is wrong, along the velocity increment, at every depth-1 commit.
"""),
    code("""
def buggy_sampler(kernel, x0, rng):
    return my_sampler(kernel, x0, rng, stale_child_velocity=True)


bad = diffusion.check_sampler(buggy_sampler, kernel, n_trajectories=600, rng=0)
print(bad.summary())
print("failed:", [t.name for t in bad.failed][:6])
assert not bad.passed
"""),
    md("""
The toolkit's own samplers record the same arrays with `return_trajectories=True` (off by
default: it holds `8 n S (2 d + 1)` bytes):
"""),
    code("""
run = diffusion.speculative_sample(target, "rass", K=2, L=2, n_samples=600, protocol="paper", rng=1,
                                   return_trajectories=True)
rep = diffusion.check_trajectories(run.trajectories, kernel, run.draft_means, run.depths, rng=2)
print(rep.summary(top=3))
assert rep.passed
"""),
    md("""
`rass_theory.diffusion.sampler_mutants` holds a catalogue of wrong samplers (wrong sigma below the
root, a stale leaf velocity called exact, a prefetch chosen after seeing the children, a verifier
whose generator never advances, a draft that peeks at the noise); `bench/sampler_mutants.py`
shows that the check rejects each at 2,000 trajectories while the final-sample tests need many
more.
"""),
]

NOTEBOOKS = {
    "01_exact_theory_tour.ipynb": NB01,
    "02_check_your_verifier.ipynb": NB02,
    "03_rank_weights_and_policies.ipynb": NB03,
    "04_check_your_sampler.ipynb": NB04,
}


def build(out_dir: Path = HERE) -> list[Path]:
    """Write every notebook (no outputs) into ``out_dir``; return the paths."""
    paths = []
    for name, cells in NOTEBOOKS.items():
        stem = name.split("_")[0]
        for i, cell in enumerate(cells):
            cell["id"] = f"nb{stem}-cell{i:02d}"  # stable ids: rebuilding gives identical files
        nb = new_notebook(cells=cells, metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        })
        nbformat.validate(nb)
        path = out_dir / name
        nbformat.write(nb, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print("wrote", p)
