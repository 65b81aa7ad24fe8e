"""Draw ``docs/layers.png``: the package's layers and the import edges that exist between them.

Run ``python docs/make_layers_figure.py``.  The layers and the edges come from the layering test
(``tests/test_layering.py``: ``LAYERS``, ``_edges()``, which parses every module of the package),
so the figure shows the code as it is, not as intended: one box per subpackage, bottom to top in
import order, labelled with the first line of its docstring (its job), and an arrow for each
import edge that no longer path implies (the transitive reduction of the import graph; the title
counts all edges).  Every arrow points down: the test fails on an upward edge.
"""
from __future__ import annotations

import pathlib
import sys

import ast
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
import test_layering  # noqa: E402


def layer_positions():
    """``{package: (x, y)}``: one row per layer, packages of one layer side by side."""
    pos = {}
    for row, layer in enumerate(test_layering.LAYERS):
        names = layer if isinstance(layer, tuple) else (layer,)
        for col, name in enumerate(names):
            pos[name] = (col - 0.5 * (len(names) - 1), float(row))
    return pos


def job(package: str) -> str:
    """First line of the package's (or module's) docstring."""
    root = test_layering.ROOT
    path = root / package / "__init__.py"
    path = path if path.exists() else root / f"{package}.py"
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.splitlines()[0].rstrip(",") if doc else ""


def transitive_reduction(edges):
    """The edges ``(a, b)`` with no other path from ``a`` to ``b``."""
    succ = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)

    def reachable(a, skip):
        seen, stack = set(), [n for n in succ.get(a, ()) if (a, n) != skip]
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(succ.get(n, ()))
        return seen

    return sorted(e for e in edges if e[1] not in reachable(e[0], e))


def draw(path: pathlib.Path) -> None:
    pos = layer_positions()
    edges = test_layering._edges()
    fig, ax = plt.subplots(figsize=(11.0, 9.0))
    for src, dst in transitive_reduction(edges):
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        bend = 0.25 * (1 if (x0 + y0) % 2 else -1) if y0 - y1 > 1 else 0.0
        ax.annotate("", xy=(x1, y1 + 0.18), xytext=(x0, y0 - 0.18),
                    arrowprops=dict(arrowstyle="->", color="0.55", lw=0.6,
                                    connectionstyle=f"arc3,rad={bend}"))
    for name, (x, y) in pos.items():
        ax.text(x, y, name, ha="center", va="center", fontsize=10, family="monospace",
                bbox=dict(boxstyle="round,pad=0.35", fc="#eef3fb", ec="#33557f"))
    for row, layer in enumerate(test_layering.LAYERS):
        names = layer if isinstance(layer, tuple) else (layer,)
        jobs = [re.sub(r"``|:[a-z]+:`|`", "", job(n)) for n in names]
        text = "\n".join(f"{n}: {j[:90]}" for n, j in zip(names, jobs)) if len(names) > 1 else jobs[0]
        ax.text(1.0, row, text, ha="left", va="center", fontsize=7.5)
    ax.set_xlim(-1.2, 6.5)
    ax.set_ylim(-0.8, len(test_layering.LAYERS) - 0.2)
    ax.axis("off")
    ax.set_title(f"rass_theory layers: {len(edges)} package-level import edges, all downward",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


if __name__ == "__main__":
    draw(HERE / "layers.png")
    print(f"wrote {HERE / 'layers.png'}")
