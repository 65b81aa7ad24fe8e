"""One-call device check of the torch backend: tests, throughput, one exactness verdict -> JSON.

    python bench/gpu_check.py --device cuda --out gpu_check.json          # < 8 min on one GPU
    python bench/gpu_check.py --device cpu --out cpu_check.json --quick   # smoke test, < 30 s without the
                                                                         # mnist section (--skip-mnist); about
                                                                         # 3 min with it on the shared 2-core CPU

Sections (each guarded: a failure is recorded in the JSON and the script goes on):

1. ``environment``: torch / CUDA versions, device name and memory.
2. ``tests``: ``pytest tests/torch`` in a subprocess (the device-parametrised tests run on CUDA
   when it is present); ``--quick`` runs the validation and degenerate-row classes only.
3. ``sync_free``: on CUDA, every torch verifier is run under
   ``torch.cuda.set_sync_debug_mode("error")`` after a warm-up call; ``true`` means no
   device-to-host synchronisation happened in the call.
4. ``throughput``: samples/s of every verifier for K in {2, 4, 8} and d in {64, 3072, 16384}
   (float64 and float32), with the time ``torch.randn`` needs to draw the same children; ``n`` is
   chosen so the children take at most ``--children-gb`` GB.
5. ``exactness``: ``check_exactness(rass(), K=4, delta=0.5, dim=8, backend="torch")`` with
   ``10**7`` samples (``--quick``: ``10**4``) and the ported mutant ``single_draft_residual``
   (``10**6`` rows; ``--quick``: ``10**5``, the fewest at which it is reliably rejected),
   which must fail.

6. ``digits``: the torch tree sampler (RASS K=4, L=3) and the plain chain on the shipped
   ``rass_theory.models.digits_flow`` model on the device: speedup, wall times, and on CUDA the
   host synchronisations counted with ``set_sync_debug_mode("warn")`` against the loop rounds
   (expected: one per round plus the final copies of the samples).

7. ``mnist``: the RASS paper's image protocol on the shipped ``rass_theory.models.mnist_unet``
   (``bench/mnist_speedup.py``'s arms, in its order: verification-matched, the known-wrong control,
   then budget-matched) with ``--mnist-n`` images per arm (default 500, the paper's number), each
   arm's speedup with SE under both estimators, its ``check_trajectories`` verdict and wall time,
   and a plain reference per eps; ``--mnist-budget-s`` (default 1800 s) stops launching arms when
   spent.  ``--quick``: one eps, the RASS and D-GRS 2x3 arms and the control, 20 images each.

A time budget (``--budget-s``, default 420 s) skips the remaining throughput cells when spent.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _sync(device):
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device, reps):
    """Median wall time of ``fn()`` over ``reps`` calls after one warm-up call."""
    fn()
    _sync(device)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def environment(device):
    import numpy as np
    import torch
    info = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "device": str(device), "cuda_available": torch.cuda.is_available(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, gpu_memory_gb=round(props.total_memory / 2**30, 1),
                    cuda=torch.version.cuda, capability=f"{props.major}.{props.minor}")
    return info


def run_tests(device, quick, timeout):
    cmd = [sys.executable, "-m", "pytest", os.path.join(ROOT, "tests", "torch"), "-q", "-p", "no:cacheprovider"]
    if quick:
        cmd += ["-k", "TestValidation or TestDegenerate"]
    env = dict(os.environ)
    if device.type != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    tail = (proc.stdout + proc.stderr).strip().splitlines()
    return {"command": " ".join(cmd[1:]), "returncode": proc.returncode, "passed": proc.returncode == 0,
            "summary": tail[-1] if tail else "", "tail": tail[-15:], "seconds": round(time.perf_counter() - t0, 1)}


def _verifiers(K=4, optimal_threshold=True):
    """Every torch verifier; the throughput grid uses a fixed threshold policy (its speed does not
    depend on optimality, and solving the optimal policy per K would spend the time budget)."""
    from rass_theory.torch import verifiers as tv
    thr = tv.threshold(delta=0.5) if optimal_threshold else tv.threshold(t=0.8, weights=[1.0 / K] * K)
    return {"rmc": tv.rmc(), "dgrs": tv.dgrs(), "rass": tv.rass(), "rass_pinned": tv.rass(delta=0.5),
            "threshold": thr, "resample": tv.resample()}


def _batch(n, K, d, dtype, device, delta=0.5, seed=0):
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
    mu_draft = torch.randn(d, generator=g, dtype=dtype, device=device).expand(n, d)
    e = torch.randn(d, generator=g, dtype=dtype, device=device)
    e = e / torch.linalg.vector_norm(e)
    mu_target = (mu_draft[0] + delta * e).expand(n, d)
    children = torch.randn(n, K, d, generator=g, dtype=dtype, device=device) + mu_draft[:, None, :]
    return children, mu_draft, mu_target


def sync_free(device):
    import torch
    out = {}
    if device.type != "cuda":
        return {"skipped": "host synchronisation is only observable on CUDA"}
    for name, v in _verifiers().items():
        K = 1 if name == "rmc" else 4
        children, mu_d, mu_t = _batch(4096, K, 64, torch.float64, device)
        g = torch.Generator(device=device).manual_seed(1)
        v(children, mu_d, mu_t, 1.0, g)       # warm-up: host-side tables are built and cached here
        torch.cuda.synchronize()
        try:
            torch.cuda.set_sync_debug_mode("error")
            v(children, mu_d, mu_t, 1.0, g)
            out[name] = True
        except RuntimeError as exc:
            out[name] = f"synchronised: {str(exc).splitlines()[0]}"
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return out


def throughput(device, quick, children_gb, deadline):
    import torch
    Ks = (4,) if quick else (2, 4, 8)
    ds = (64,) if quick else (64, 3072, 16384)
    dtypes = (torch.float64,) if quick else (torch.float64, torch.float32)
    reps = 1 if quick else 3
    rows = []
    for dtype in dtypes:
        for K in Ks:
            for d in ds:
                if time.perf_counter() > deadline:
                    rows.append({"K": K, "d": d, "dtype": str(dtype), "skipped": "time budget spent"})
                    continue
                bytes_per_row = K * d * torch.finfo(dtype).bits // 8
                n = int(min(2000 if quick else 1_000_000, children_gb * 2**30 / bytes_per_row))
                n = max(n, 256)
                row = {"K": K, "d": d, "dtype": str(dtype).replace("torch.", ""), "n": n}
                try:
                    children, mu_d, mu_t = _batch(n, K, d, dtype, device)
                    g = torch.Generator(device=device).manual_seed(0)
                    t_randn = _timed(lambda: torch.randn(n, K, d, generator=g, dtype=dtype, device=device), device, reps)
                    row["randn_samples_per_s"] = n / t_randn
                    for name, v in _verifiers(K, optimal_threshold=False).items():
                        if name == "rass_pinned":
                            continue
                        if name == "rmc":
                            args = (children[:, :1], mu_d, mu_t)
                        else:
                            args = (children, mu_d, mu_t)
                        t = _timed(lambda: v(*args, 1.0, g), device, reps)
                        row[f"{name}_samples_per_s"] = n / t
                        row[f"{name}_over_randn"] = t / t_randn
                    del children, mu_d, mu_t
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                except Exception as exc:  # noqa: BLE001 - out of memory etc.: record and go on
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                rows.append(row)
    return rows


def exactness(device, quick):
    import rass_theory as rt
    from rass_theory.torch import mutants as tm
    from rass_theory.torch import verifiers as tv
    n = 10_000 if quick else 10_000_000
    chunk = 10_000 if quick else 1_000_000
    out = {}
    # the mutant needs about 1e5 rows to be rejected (at 1e4 its smallest adjusted p is about 0.05)
    for label, v, n_i in (("rass", tv.rass(), n), ("mutant_single_draft_residual", tm.single_draft_residual(4),
                                                     100_000 if quick else 1_000_000)):
        t0 = time.perf_counter()
        rep = rt.check_exactness(v, K=4, delta=0.5, dim=8, n_samples=n_i, chunk_size=min(max(chunk, 100_000), n_i),
                                 backend="torch", device=str(device), rng=2026)
        out[label] = {"n_samples": n_i, "passed": bool(rep.passed), "acceptance_rate": rep.acceptance_rate,
                      "expected_acceptance": v.expected_acceptance(4, 0.5),
                      "min_adjusted_pvalue": min(float(t.pvalue_adjusted) for t in rep.tests),
                      "failed_tests": [t.name for t in rep.tests if not t.passed],
                      "detectable_ks_distance": float(rep.detectable_ks_distance),
                      "seconds": round(time.perf_counter() - t0, 2)}
    return out


def digits(device, quick):
    """Torch tree sampler on the shipped digits model: speedup, wall time, host syncs per round."""
    import warnings

    import torch
    from rass_theory.diffusion.torch_sampler import plain_sample_torch, speculative_sample_torch
    from rass_theory.models import digits_flow
    n = 100 if quick else 1000
    model = digits_flow(device=device)
    speculative_sample_torch(model, "rass", K=4, L=3, n_samples=8, rng=0)         # warm-up
    _sync(device)
    t0 = time.perf_counter()
    plain = plain_sample_torch(model, n, rng=1)
    _sync(device)
    t_plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    if device.type == "cuda":
        torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = speculative_sample_torch(model, "rass", K=4, L=3, n_samples=n, rng=2, record_trace=False)
    finally:
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("default")
    _sync(device)
    syncs = sum("synchroniz" in str(w.message) for w in caught)
    loops = 1 + int((run.rounds.trajectory[1:] <= run.rounds.trajectory[:-1]).sum())
    return {"n": n, "speedup": run.speedup, "speedup_se": run.speedup_se, "plain_seconds": round(t_plain, 3),
            "speculative_seconds": round(time.perf_counter() - t0, 3), "device": run.extra["device"],
            "loop_rounds": loops, "host_syncs": syncs if device.type == "cuda" else None,
            "plain_mean_pixel": float(plain.mean()), "speculative_mean_pixel": float(run.samples.mean())}


def mnist(device, quick, n, budget_s):
    """The MNIST protocol arms on the device (see ``bench/mnist_speedup.py``); stops when ``budget_s`` is spent."""
    import torch
    bench_dir = os.path.join(ROOT, "bench")
    if bench_dir not in sys.path:
        sys.path.insert(0, bench_dir)
    import mnist_speedup as ms
    from rass_theory.models import mnist_unet

    n = 20 if quick else int(n)
    model = mnist_unet(device=device)
    eps_list = (0.3,) if quick else ms.EPS
    arms = ms.arm_list(eps_list)
    if quick:
        keep = {"verification|eps=0.3|rass|2x3", "verification|eps=0.3|dgrs|2x3",
                f"verification|eps=0.3|{ms.CONTROL}|2x3"}
        arms = [a for a in arms if a["key"] in keep]
    t0 = time.perf_counter()
    plain, out = {}, {"n": n, "arms": [], "plain": {}, "not_run": []}
    for eps in eps_list:
        x, wall = ms.run_plain(model, eps, max(n, 20), 0, device=device)
        plain[eps] = x
        out["plain"][str(eps)] = {"n": int(x.shape[0]), "wall_s": round(wall, 2), "mean_pixel": float(x.mean())}
    for arm in arms:
        if time.perf_counter() - t0 > budget_s:
            out["not_run"].append(arm["key"])
            continue
        row, _ = ms.run_arm(model, arm, n, 0, plain_ref=plain[arm["eps"]], device=device)
        out["arms"].append({k: v for k, v in row.items() if k != "widths"} | {"chain_length": len(row["widths"])})
        _sync(device)
    rows = out["arms"]
    exact = [r for r in rows if r["verifier"] != ms.CONTROL]
    ctrl = [r for r in rows if r["verifier"] == ms.CONTROL]
    out["all_exact_arms_pass"] = all(r.get("check_passed", False) for r in exact)
    out["control_fails"] = all(not r.get("check_passed", True) for r in ctrl) if ctrl else None
    zs = [abs(r["z"]) for r in rows if "z" in r]
    out["max_abs_z"] = max(zs) if zs else None
    out["seconds"] = round(time.perf_counter() - t0, 1)
    out["torch_device"] = str(torch.device(device))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:0 or cpu")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--quick", action="store_true", help="small sizes and a short test subset")
    parser.add_argument("--skip-tests", action="store_true", help="do not run the pytest subset")
    parser.add_argument("--budget-s", type=float, default=420.0, help="wall-time budget for throughput")
    parser.add_argument("--children-gb", type=float, default=4.0, help="max size of one children tensor")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's choice; 1 with --quick)")
    parser.add_argument("--mnist-n", type=int, default=500, help="images per MNIST protocol arm")
    parser.add_argument("--mnist-budget-s", type=float, default=1800.0,
                        help="stop launching MNIST arms after this many seconds")
    parser.add_argument("--skip-mnist", action="store_true", help="do not run the MNIST protocol section")
    args = parser.parse_args(argv)

    t_start = time.perf_counter()
    import torch
    from rass_theory.torch.harness import resolve_device
    device = resolve_device(args.device)
    threads = args.threads if args.threads is not None else (1 if args.quick else None)
    if threads is not None:
        torch.set_num_threads(max(1, threads))
    report = {"script": "bench/gpu_check.py", "argv": sys.argv[1:] if argv is None else list(argv),
              "quick": args.quick, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    deadline = t_start + args.budget_s

    def section(name, fn, *a):
        t0 = time.perf_counter()
        try:
            report[name] = fn(*a)
        except Exception as exc:  # noqa: BLE001 - one broken section must not lose the others
            report[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
        report.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t0, 2)
        _write(args.out, report)

    section("environment", environment, device)
    if not args.skip_tests:
        section("tests", run_tests, device, args.quick, 300 if not args.quick else 120)
    section("sync_free", sync_free, device)
    section("exactness", exactness, device, args.quick)
    section("digits", digits, device, args.quick)
    section("throughput", throughput, device, args.quick, args.children_gb, deadline)
    if not args.skip_mnist:
        section("mnist", mnist, device, args.quick, args.mnist_n, args.mnist_budget_s)
    report["total_seconds"] = round(time.perf_counter() - t_start, 1)
    ok = [report.get("tests", {}).get("passed", True) if not args.skip_tests else True,
          report.get("exactness", {}).get("rass", {}).get("passed") is True,
          report.get("exactness", {}).get("mutant_single_draft_residual", {}).get("passed") is False]
    mn = report.get("mnist", {})
    if isinstance(mn, dict) and "error" not in mn and mn:
        ok += [mn.get("all_exact_arms_pass") is True, mn.get("control_fails") is not False]
    sf = report.get("sync_free", {})
    if isinstance(sf, dict) and "skipped" not in sf:
        ok.append(all(v is True for v in sf.values()))
    report["ok"] = bool(all(ok))
    _write(args.out, report)
    print(json.dumps({k: report[k] for k in ("ok", "total_seconds")}, indent=None))
    return 0 if report["ok"] else 1


def _write(path, report):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(report, fh, indent=2, default=lambda o: o if not isinstance(o, float) or math.isfinite(o) else None)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
