"""Pieces the benchmark scripts share: their command lines and the node batch they time.

The scripts run as ``python bench/<name>.py``; Python then puts ``bench/`` first on ``sys.path``,
so they import this module as ``from _common import ...``.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def cpu_best(fn, repeats):
    """The fewest CPU seconds (``time.process_time``) of ``repeats`` calls of ``fn()``."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def node_batch_parser(doc):
    """Parser with the node-batch options ``--n``, ``--K``, ``--d``, ``--delta``.

    ``doc`` is the script's module docstring; its first line is the description.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="nodes (rows) in the batch")
    parser.add_argument("--K", type=int, default=4, help="children per node")
    parser.add_argument("--d", type=int, default=64, help="dimension")
    parser.add_argument("--delta", type=float, default=0.5, help="displacement |mu_target - mu_draft| / sigma")
    return parser


def shared_means(n, d, delta, rng):
    """Draft and target means of ``n`` identical nodes at displacement ``delta`` (sigma = 1).

    Returns ``(mu_draft, mu_target)``: ``mu_draft`` is one standard-normal row broadcast to
    ``(n, d)`` (a read-only view), ``mu_target = mu_draft + delta * e`` with ``e`` a uniformly
    random unit vector (a new ``(n, d)`` array).
    """
    mu_draft = np.broadcast_to(rng.standard_normal(d), (n, d))
    e = rng.standard_normal(d)
    e /= np.linalg.norm(e)
    return mu_draft, mu_draft + delta * e


def digits_parser(doc, *, n, out, only_help):
    """Parser of the learned-digits benches: ``--n``, ``--threads``, ``--seed``, ``--out``, ``--only-verifiers``.

    ``n`` is the default trajectory count, ``out`` the default report's file name under
    ``bench/results/`` and ``only_help`` the help of ``--only-verifiers``.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--n", type=int, default=n, help="trajectories per arm")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS / out))
    parser.add_argument("--only-verifiers", default="", help=only_help)
    return parser
