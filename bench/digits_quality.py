"""Quality of the shipped digits model against held-out digits (plain and speculative samples).

Usage::

    python bench/digits_quality.py [--n 1000] [--out bench/results/digits_quality.md]
"""
from __future__ import annotations

import argparse
import json
from importlib import resources
from pathlib import Path

import torch

from rass_theory.diffusion.torch_sampler import plain_sample_torch, speculative_sample_torch
from rass_theory.models import digits_flow
from rass_theory.models.quality import digits_quality

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "bench/results/digits_quality.md"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = digits_flow()
    meta = json.loads((resources.files("rass_theory.models") / "data" / "digits_flow.json").read_text())
    plain = digits_quality(plain_sample_torch(model, args.n, rng=1), rng=0)
    spec = digits_quality(speculative_sample_torch(model, "rass", K=4, L=3, n_samples=args.n, rng=2).samples, rng=0)
    lines = [
        "# Quality of the shipped digits flow model",
        "",
        f"`python bench/digits_quality.py --n {args.n}`. Training (`python bench/train_digits.py --steps "
        f"{meta['steps']} --threads {meta['threads']}`): {meta['train_seconds']} s on a shared 2-core machine, "
        f"final loss {meta['final_loss']}, {meta['n_parameters']:,} parameters, {meta['bytes'] / 1e3:.0f} kB.",
        "",
        "Reference: scikit-learn's digits, 20 % stratified held-out split (360 images, never seen in training). "
        "Samples are rounded to the 0..16 pixel grid. Classifier: logistic regression on the training split "
        f"(held-out accuracy {plain.classifier_accuracy:.3f}). 30 steps, churn 0.06.",
        "",
        "| samples | classifier confidence | class entropy (max 2.303) | NN distance to train | C2ST accuracy vs held-out |",
        "|---|---|---|---|---|",
        f"| held-out real digits | {plain.confidence_real:.3f} | {plain.class_entropy_real:.3f} | "
        f"{plain.nn_distance_real:.3f} | {plain.c2st_accuracy_real:.3f} (training vs held-out) |",
        f"| plain chain (n = {args.n}) | {plain.confidence:.3f} | {plain.class_entropy:.3f} | "
        f"{plain.nn_distance:.3f} | {plain.c2st_accuracy:.3f} |",
        f"| speculative RASS K=4, L=3 (n = {args.n}) | {spec.confidence:.3f} | {spec.class_entropy:.3f} | "
        f"{spec.nn_distance:.3f} | {spec.c2st_accuracy:.3f} |",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
