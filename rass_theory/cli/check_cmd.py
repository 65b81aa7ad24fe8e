"""``rass-theory check`` and ``rass-theory certify``: exactness of a verifier from the command line.

``TARGET`` is ``package.module:attribute`` (dots after the colon walk attributes).  What it names
is used as follows (``--as auto``, the default):

* a class is instantiated with no arguments (a factory);
* a callable whose signature has no required parameter is a zero-argument factory and is called
  (``rass_theory.verifiers:rass`` gives ``rass()``);
* any other callable is the verifier itself
  (``verifier(children, mu_draft, mu_target, sigma, rng)``).

``--as verifier`` / ``--as factory`` force either reading.  Exit status: 0 passed, 1 failed,
2 usage error (unimportable target, bad option), with a message rather than a traceback.
"""
from __future__ import annotations

import importlib
import inspect
import json
import os
import sys

import click

__all__ = ["check", "certify", "load_verifier"]


class TargetError(click.ClickException):
    exit_code = 2


def load_verifier(target: str, mode: str = "auto"):
    """Import ``package.module:attr`` and return the verifier it names (see module docstring)."""
    if ":" not in target:
        raise TargetError(f"TARGET must look like package.module:callable, got {target!r}")
    module_name, _, attr_path = target.partition(":")
    if not module_name or not attr_path:
        raise TargetError(f"TARGET must look like package.module:callable, got {target!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # like ``python -m``: modules in the working directory import
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is reported, not raised
        raise TargetError(f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}") from None
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"module {module_name!r} has no attribute {attr_path!r}") from None
    if not callable(obj):
        raise TargetError(f"{target} is a {type(obj).__name__}, not a callable verifier or factory")
    if mode == "verifier":
        return obj
    if mode == "factory" or inspect.isclass(obj) or (mode == "auto" and _no_required_params(obj)):
        try:
            verifier = obj()
        except Exception as exc:  # noqa: BLE001
            raise TargetError(f"calling the factory {target}() failed: {type(exc).__name__}: {exc}") from None
        if not callable(verifier):
            raise TargetError(f"factory {target}() returned a {type(verifier).__name__}, not a callable verifier")
        return verifier
    return obj


def _no_required_params(obj) -> bool:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    return all(p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in sig.parameters.values())


def _parse_list(text: str, kind, name: str):
    try:
        values = [kind(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated values, got {text!r}", param_hint=name) from None
    if not values:
        raise click.BadParameter("must list at least one value", param_hint=name)
    return values


def _common_options(f):
    options = [
        click.option("--n-samples", type=str, default=None,
                     help="Nodes verified per cell and dtype (e.g. 1e6; default: the harness default, 200,000)."),
        click.option("--alpha", type=float, default=1e-3, show_default=True, help="Family-wise false-fail rate."),
        click.option("--seed", type=int, default=None,
                     help="Seed of every random draw (default: a fresh seed, printed so the run can be repeated)."),
        click.option("--backend", type=click.Choice(["numpy", "torch", "dask"]), default="numpy", show_default=True),
        click.option("--device", type=str, default=None, help="torch device for --backend torch."),
        click.option("--chunk-size", type=int, default=None, help="Rows per chunk (default 100,000)."),
        click.option("--sigma", type=float, default=None,
                     help="Fixed kernel scale (default: per-row scales log-uniform on [0.1, 10])."),
        click.option("--dtype", "dtypes", type=str, default=None,
                     help="Comma-separated precision passes (default float64,float32; the default grid's power "
                          "cell runs float64 only; bfloat16 needs --backend torch)."),
        click.option("--as", "mode", type=click.Choice(["auto", "verifier", "factory"]), default="auto",
                     show_default=True, help="How to read TARGET (see --help text above)."),
        click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
                     help="Also write the result as JSON to this file."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _n_samples(text):
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise click.BadParameter(f"expected a number such as 1e6, got {text!r}", param_hint="--n-samples") from None
    if not value.is_integer() or value < 2:
        raise click.BadParameter(f"must be an integer >= 2, got {text!r}", param_hint="--n-samples")
    return int(value)


def _harness_kwargs(n_samples, alpha, seed, backend, device, chunk_size, sigma, dtypes):
    kw = {"alpha": alpha, "rng": seed, "backend": backend, "sigma": sigma}
    if dtypes is not None:
        kw["dtype"] = tuple(_parse_list(dtypes, str, "--dtype"))
    if n_samples is not None:
        kw["n_samples"] = n_samples
    if device is not None:
        kw["device"] = device
    if chunk_size is not None:
        kw["chunk_size"] = chunk_size
    return kw


def _write_json(path, payload):
    if path:
        with open(path, "w") as fh:
            json.dump(payload, fh, indent=2)


@click.command("check")
@click.argument("target")
@click.option("--K", "K", type=int, default=None,
              help="Children per node (default: the grid K in {2, 3, 4, 8}, or the verifier's fixed K).")
@click.option("--delta", type=float, default=None,
              help="Named delta (default: the grid's); other rows spread from 1e-3 to 12.")
@click.option("--dim", type=int, default=None, help="State dimension (default 8; the grid also has dim 256).")
@click.option("--detect", type=float, default=None,
              help="Design n for this KS distance (e.g. 0.002): the smallest n that detects it, printed.")
@click.option("--expected-acceptance", type=float, default=None,
              help="Exact acceptance to test against (built-in rules supply their own).")
@click.option("--checkpoint", type=click.Path(dir_okay=False), default=None,
              help="Checkpoint file (.npz): resume from it, write to it.")
@click.option("--progress/--no-progress", default=False)
@_common_options
def check(target, K, delta, dim, detect, expected_acceptance, checkpoint, progress, n_samples, alpha, seed, backend,
          device, chunk_size, sigma, dtypes, mode, json_path):
    """Test whether the verifier TARGET (package.module:callable) is exact; exit 1 if not.

    Without --K and --delta the default grid runs (one Holm family over every cell).
    """
    from rich.console import Console

    from ..scale.check import check_exactness

    verifier = load_verifier(target, mode)
    kw = _harness_kwargs(_n_samples(n_samples), alpha, seed, backend, device, chunk_size, sigma, dtypes)
    try:
        report = check_exactness(verifier, K=K, delta=delta, dim=dim, expected_acceptance=expected_acceptance,
                                 checkpoint=checkpoint, progress=progress, detect=detect, **kw)
    except (ValueError, TypeError) as exc:
        raise TargetError(str(exc)) from None
    console = Console(width=200)
    console.print(report.to_rich_table())
    console.print(f"seed {report.seed} (--seed {report.seed} repeats this run); "
                  f"{report.correction_fraction:.1%} of rows took the correction branch")
    _write_json(json_path, report.to_dict())
    sys.exit(0 if report.passed else 1)


@click.command("certify")
@click.argument("target")
@click.option("--K", "K", type=str, default="2,4", show_default=True, help="Comma-separated K values.")
@click.option("--delta", type=str, default="0.5,1,2", show_default=True, help="Comma-separated delta values.")
@click.option("--dim", type=str, default="8", show_default=True, help="Comma-separated dimensions.")
@_common_options
def certify(target, K, delta, dim, n_samples, alpha, seed, backend, device, chunk_size, sigma, dtypes, mode, json_path):
    """Certify TARGET over the grid K x delta x dim (Holm across the whole grid); exit 1 on failure."""
    from rich.console import Console

    from ..scale.check import certify as run_certify

    verifier = load_verifier(target, mode)
    Ks = _parse_list(K, int, "--K")
    deltas = _parse_list(delta, float, "--delta")
    dims = _parse_list(dim, int, "--dim")
    cells = [(k, d, m) for k in Ks for d in deltas for m in dims]
    kw = _harness_kwargs(_n_samples(n_samples), alpha, seed, backend, device, chunk_size, sigma, dtypes)
    try:
        result = run_certify(verifier, cells, show=True, console=Console(width=200), **kw)
    except (ValueError, TypeError) as exc:
        raise TargetError(str(exc)) from None
    _write_json(json_path, result.to_dict())
    sys.exit(0 if result.passed else 1)
