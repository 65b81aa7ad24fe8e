"""rass_theory.exact is written once against the backend namespace: no module of it imports torch."""
import ast
import pathlib

import rass_theory.exact

EXACT = pathlib.Path(rass_theory.exact.__file__).parent


def _imports_torch(source: str) -> bool:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and node.level == 0:
            return True
    return False


def test_no_exact_module_imports_torch():
    offenders = [p.name for p in sorted(EXACT.glob("*.py")) if _imports_torch(p.read_text())]
    assert offenders == []


def test_the_check_sees_an_import():
    assert _imports_torch("def f():\n    import torch.special\n")
    assert _imports_torch("from torch import nn\n")
    assert not _imports_torch("from .laws import sample\n")
