"""Layering of the package, locked in (after scipy's ``_lib/tests/test_import_cycles.py`` and
``test_public_api.py``).

Packages import downward only::

    _validation -> backend -> frame -> exact -> optimize -> verifiers -> mutants -> stats -> scale / torch
    -> testing -> models -> diffusion -> plot -> report -> cli

Every ``import``/``from ... import`` of the package, at module level or inside a function, and
every ``importlib.import_module("rass_theory...")`` with a literal name, is an edge.  The tests
fail on any upward edge, on an import cycle between subpackages or between modules, on ``import rass_theory as
rt`` inside the package, and when ``import rass_theory`` loads torch, dask or matplotlib.
"""
import ast
import functools
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1] / "rass_theory"

LAYERS = ["_validation", "backend", "frame", "exact", "optimize", "verifiers", "mutants", "stats",
          ("scale", "torch"), "testing", "models", "diffusion", "plot", "report", "cli"]
RANK = {}
for i, layer in enumerate(LAYERS):
    for name in (layer if isinstance(layer, tuple) else (layer,)):
        RANK[name] = i

def _from_target(node: ast.ImportFrom, package: str) -> str:
    """The absolute module name of ``from <target> import ...`` inside ``package`` (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _unit(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "rass_theory" or len(parts) < 2:
        return None
    return parts[1]


@functools.lru_cache(maxsize=1)
def _edges():
    """``{(importer unit, imported unit): [files]}`` over every module of the package."""
    edges = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        src = _unit(module) if module != "rass_theory" else None
        if src is None:
            continue
        src = src[:-3] if src.endswith(".py") else src
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = _from_target(node, package)
                if target == "rass_theory":
                    targets = [f"rass_theory.{a.name}" for a in node.names]
                else:
                    targets = [target]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                targets = [node.args[0].value]
            for t in targets:
                dst = _unit(t)
                if dst is not None and dst != src and dst in RANK and src in RANK:
                    edges.setdefault((src, dst), []).append(str(path.relative_to(ROOT.parent)))
    return edges


def test_imports_go_downward():
    upward = {e: sorted(set(files)) for e, files in _edges().items() if RANK[e[1]] > RANK[e[0]]}
    assert not upward, f"upward imports (a package may import only layers below it): {upward}"


def test_edge_parser_sees_module_and_function_level_imports():
    """The package graph is not vacuous: it holds edges the code is known to have, at module level
    (``stats`` imports ``verifiers``) and inside functions only (``stats.config`` imports ``exact``
    in ``_bound``)."""
    edges = _edges()
    assert ("stats", "verifiers") in edges and ("stats", "exact") in edges
    assert "rass_theory/stats/config.py" in edges[("stats", "exact")]


def test_no_cycles_between_subpackages():
    graph = {}
    for (a, b) in _edges():
        graph.setdefault(a, set()).add(b)
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in graph.get(node, ()):
            if state.get(nxt) == "open":
                raise AssertionError(f"import cycle: {' -> '.join(stack + [node, nxt])}")
            if nxt not in state:
                visit(nxt, stack + [node])
        state[node] = "done"

    for node in list(graph):
        if node not in state:
            visit(node, [])


def test_no_import_rass_theory_as_rt_inside_the_package():
    offenders = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "rass_theory" for a in node.names):
                offenders.append(str(path.relative_to(ROOT.parent)))
    assert not offenders, f"import the implementing module instead of the top-level package: {offenders}"


def test_top_level_import_is_light():
    code = ("import sys, rass_theory; "
            "print(sorted(m for m in ('torch', 'dask', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"import rass_theory loaded heavy optional modules: {out}"


# ---------------------------------------------------------------- module-level cycles
#: No module imports, at any site (function-level included), a module that imports it back, directly
#: or through others (issue 22 removed the last four: stats/harness <-> certify, verifiers/_core <->
#: _tensors, diffusion/{kernel, plain, speculative, torch_sampler}, report/{budget, builder, learned,
#: mnist, sections}).  A shared piece goes into a lower module instead.


@functools.lru_cache(maxsize=1)
def _module_graph():
    """``{module: {modules it imports}}`` over every module of the package, any import site."""
    modules = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT.parent).with_suffix("").parts
        modules[".".join(rel[:-1] if rel[-1] == "__init__" else rel)] = path
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                target = _from_target(node, package)
                for a in node.names:       # ``from pkg import submodule`` is an edge to the submodule
                    out.add(f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target)
        graph[name] = {t for t in out if t in modules and t != name}
    return graph


def strongly_connected(graph):
    """The strongly connected components with more than one node (Tarjan), each a set."""
    index, low, stack, on_stack, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in list(graph):
        if v not in index:
            visit(v)
    return comps


def test_cycle_detector_finds_a_cycle_it_is_shown():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [{"a", "b", "c"}]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []
    assert sorted(map(sorted, strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "a"}}))) == [
        ["a", "b"], ["c", "d"]]


def test_module_graph_sees_function_level_imports():
    """The module graph is not vacuous: it holds an import made only inside a function
    (``diffusion.kernel`` imports ``diffusion.torch_target`` in ``PlainKernel._as_torch_target``)."""
    graph = _module_graph()
    assert "rass_theory.diffusion.torch_target" in graph["rass_theory.diffusion.kernel"]
    assert "rass_theory.stats.grid" in graph["rass_theory.stats.harness"]


def test_no_module_cycles():
    cycles = [sorted(c) for c in strongly_connected(_module_graph())]
    assert not cycles, f"import cycles between modules (import a shared lower module instead): {cycles}"
