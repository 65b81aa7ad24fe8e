"""Train the shipped digits flow-matching model (rass_theory/models/data/digits_flow.pt).

Usage::

    python bench/train_digits.py [--steps 12000] [--threads 2] [--out rass_theory/models/data/digits_flow.pt]

Flow matching on ``x_s = (1 - s) x0 + s xi`` (``x0`` a normalised 8x8 digit from the 80 % training
split of scikit-learn's bundled digits, ``xi ~ N(0, I_64)``): minimise
``E || u(x_s, s) - (xi - x0) ||^2`` with Adam, a cosine learning-rate decay and an exponential
moving average of the weights (the EMA is what ships).  ``s`` is drawn as ``U(0, 1)`` mixed with a
logit-normal density that favours the middle noise levels.  Deterministic for a given seed and
thread count.  Runs in a few minutes on 2 CPU cores; writes the weights (float32 state dict,
``torch.save`` of plain tensors, loadable with ``weights_only=True``) and a JSON sidecar with the
training time and loss.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import time
from pathlib import Path

import torch

from rass_theory.models.digits import DigitsVelocityNet, load_digits_split
from rass_theory.models.init import init_parameters_

ROOT = Path(__file__).resolve().parents[1]


def sample_s(n, gen):
    u = torch.rand(n, generator=gen)
    ln = torch.sigmoid(torch.randn(n, generator=gen))
    pick = torch.rand(n, generator=gen) < 0.5
    return torch.where(pick, u, ln).clamp(1e-4, 1.0)


def train(steps: int, batch: int, lr: float, seed: int, hidden: int, depth: int, ema_decay: float = 0.999):
    x_tr, _, _, _ = load_digits_split()
    data = torch.as_tensor(x_tr, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    net = init_parameters_(DigitsVelocityNet(dim=64, hidden=hidden, depth=depth), gen)  # no global seeding
    ema = copy.deepcopy(net)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 0.5 * (1 + math.cos(math.pi * min(i, steps) / steps)))
    losses = []
    for i in range(steps):
        idx = torch.randint(0, data.shape[0], (batch,), generator=gen)
        x0 = data[idx]
        xi = torch.randn(x0.shape, generator=gen)
        s = sample_s(batch, gen)
        xs = (1 - s[:, None]) * x0 + s[:, None] * xi
        loss = ((net(xs, s) - (xi - x0)) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            for pe, p in zip(ema.parameters(), net.parameters()):
                pe.mul_(ema_decay).add_(p, alpha=1 - ema_decay)
        losses.append(loss.item())
        if (i + 1) % 1000 == 0:
            print(f"step {i + 1}/{steps} loss(last 1000) {sum(losses[-1000:]) / 1000:.4f}", flush=True)
    return ema, sum(losses[-1000:]) / min(1000, len(losses))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=12000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "rass_theory/models/data/digits_flow.pt"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    ema, final_loss = train(args.steps, args.batch, args.lr, args.seed, args.hidden, args.depth)
    wall = time.perf_counter() - t0
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in ema.state_dict().items()}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": ema.config(), "state_dict": state}, out)
    meta = {"train_seconds": round(wall, 1), "final_loss": round(final_loss, 5), "steps": args.steps,
            "batch": args.batch, "lr": args.lr, "threads": args.threads, "seed": args.seed,
            "n_parameters": sum(v.numel() for v in state.values()), "bytes": out.stat().st_size,
            "note": "machine shared with other jobs while training"}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta), flush=True)


if __name__ == "__main__":
    main()
