"""Elementwise kernels of the law engine, torch CPU against NumPy/SciPy, on one scan block.

Why the torch/NumPy CPU ratio of the verifiers is above 1 (issue 22): the law engine runs the same
algorithm on both back ends (one code path, written against the backend namespace), so the
difference is the libraries' CPU kernels.  Every operation below is timed on one block of the
crossing scan (690 rows x 190 grid points = 131,100 float64 values, the block size of
``exact.laws._SCAN_ENTRIES``), one thread, best of ``--repeats`` runs of ``--number`` calls each.

Usage::

    OMP_NUM_THREADS=1 python bench/torch_cpu_ops.py     # writes bench/results/torch_cpu_ops.md
"""
from __future__ import annotations

import argparse
import os
import platform
import timeit

import numpy as np
from scipy import special

from _common import RESULTS


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(RESULTS / "torch_cpu_ops.md"))
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    a = np.random.default_rng(0).normal(size=(690, 190))
    b = a + 1.0
    mask = a > 0
    ta, tb, tmask = torch.as_tensor(a), torch.as_tensor(b), torch.as_tensor(mask)
    ops = [
        ("ndtr (Phi)", lambda: special.ndtr(a), lambda: torch.special.ndtr(ta)),
        ("log_ndtr", lambda: special.log_ndtr(a), lambda: torch.special.log_ndtr(ta)),
        ("log", lambda: np.log(b * b), lambda: torch.log(tb * tb)),
        ("multiply", lambda: a * b, lambda: ta * tb),
        ("where", lambda: np.where(mask, a, b), lambda: torch.where(tmask, ta, tb)),
        ("compare (a > 0)", lambda: a > 0, lambda: ta > 0),
        ("nonzero of a mask", lambda: np.flatnonzero(mask), lambda: torch.nonzero(tmask.reshape(-1))[:, 0]),
        ("tiny op (5 x 190)", lambda: a[:5] * 2.0, lambda: ta[:5] * 2.0),
    ]

    def best(fn):
        return min(timeit.repeat(fn, number=args.number, repeat=args.repeats)) / args.number * 1e3

    lines = [
        "# Law-engine kernels: torch CPU against NumPy/SciPy",
        "",
        f"Command: `OMP_NUM_THREADS=1 python bench/torch_cpu_ops.py`; torch {torch.__version__}, NumPy "
        f"{np.__version__}; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end.  One block of the crossing scan "
        "(690 x 190 float64), one thread, best of "
        f"{args.repeats} x {args.number} calls.",
        "",
        "| operation | NumPy / SciPy (ms) | torch (ms) | torch / NumPy |",
        "|---|---:|---:|---:|",
    ]
    for name, f_np, f_torch in ops:
        x, y = best(f_np), best(f_torch)
        lines.append(f"| {name} | {x:.4f} | {y:.4f} | {y / x:.2f} |")
    lines.append("")
    from pathlib import Path

    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
