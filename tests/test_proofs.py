"""Every test that ``proofs/`` names must exist (CI guard for the proofs' "Tests" lists).

A reference is a back-quoted pytest node id: ``tests/path.py``, ``tests/path.py::test_x``,
``tests/path.py::TestClass`` or ``tests/path.py::TestClass::test_x`` (also ``bench/`` files and
helper functions such as ``tests/exact/mp_reference.py::dgrs``).  A back-quoted ``::name`` or
``::Class::name`` continues the last full reference in the same file: ``::name`` is looked up in
the last named class first, then at module level.  Names are found with :mod:`ast`, without
importing the test modules.
"""
import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROOFS = ROOT / "proofs"
_TOKEN = re.compile(r"`([^`\s]+)`")
_FULL = re.compile(r"^((?:tests|bench)/[\w/.-]+\.py)((?:::\w+(?:\[[^\]]*\])?)*)$")
_REL = re.compile(r"^((?:::\w+(?:\[[^\]]*\])?)+)$")


def _parts(suffix):
    return [re.sub(r"\[.*\]$", "", p) for p in suffix.split("::") if p]


def references(text):
    """``(node id, line)`` of every test reference in a markdown text, relative ids resolved."""
    out, last_file, last_class = [], None, None
    for lineno, line in enumerate(text.splitlines(), 1):
        for token in _TOKEN.findall(line):
            token = token.rstrip(".,;:")
            full = _FULL.match(token)
            if full:
                last_file, names = full.group(1), _parts(full.group(2))
                last_class = names[0] if names and names[0].startswith("Test") else None
                out.append(("::".join([last_file] + names), lineno))
                continue
            rel = _REL.match(token)
            if rel and last_file:
                names = _parts(rel.group(1))
                if len(names) == 1 and last_class:
                    out.append((f"{last_file}::{last_class}::{names[0]}|{last_file}::{names[0]}", lineno))
                else:
                    if names[0].startswith("Test"):
                        last_class = names[0]
                    out.append(("::".join([last_file] + names), lineno))
    return out


@functools.lru_cache(maxsize=None)
def _module(path):
    return ast.parse((ROOT / path).read_text(encoding="utf-8"))


def _body_names(body):
    return {n.name: n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _has_method(tree, cls, name, seen=()):
    """``name`` defined in class ``cls`` or in one of its bases defined in the same module."""
    if name in _body_names(cls.body):
        return True
    top = _body_names(tree.body)
    for base in cls.bases:
        b = top.get(base.id) if isinstance(base, ast.Name) else None
        if isinstance(b, ast.ClassDef) and b.name not in seen and _has_method(tree, b, name, seen + (cls.name,)):
            return True
    return False


def exists(node_id):
    """Whether ``path[::name[::method]]`` names a file and (by ``ast``) a definition in it."""
    path, *names = node_id.split("::")
    if not (ROOT / path).is_file():
        return False
    if not names:
        return True
    tree = _module(path)
    top = _body_names(tree.body)
    obj = top.get(names[0])
    if obj is None:
        return False
    if len(names) == 1:
        return True
    return isinstance(obj, ast.ClassDef) and len(names) == 2 and _has_method(tree, obj, names[1])


def _all_references():
    refs = []
    for md in sorted(PROOFS.glob("*.md")):
        for node, line in references(md.read_text(encoding="utf-8")):
            refs.append((md.name, line, node))
    return refs


def test_parser_resolves_relative_ids():
    text = ("- `tests/a.py::TestX::test_one`, `::test_two`, `::TestY::test_three`, `::test_four`\n"
            "- `tests/b.py::test_five` and `::test_six`; `bench/c.py`; `not a path`")
    assert [n for n, _ in references(text)] == [
        "tests/a.py::TestX::test_one", "tests/a.py::TestX::test_two|tests/a.py::test_two",
        "tests/a.py::TestY::test_three", "tests/a.py::TestY::test_four|tests/a.py::test_four",
        "tests/b.py::test_five", "tests/b.py::test_six", "bench/c.py"]


def test_checker_rejects_missing_names():
    assert exists("tests/test_proofs.py::test_parser_resolves_relative_ids")
    assert not exists("tests/test_proofs.py::test_that_does_not_exist")
    assert not exists("tests/no_such_file.py")


def test_every_proof_names_tests():
    files = {md.name for md in PROOFS.glob("P*.md")} | {md.name for md in PROOFS.glob("S*.md")}
    named = {f for f, _, _ in _all_references()}
    assert files <= named, f"proofs naming no test: {sorted(files - named)}"


@pytest.mark.parametrize("where,line,node", _all_references(), ids=lambda v: str(v))
def test_named_test_exists(where, line, node):
    candidates = node.split("|")
    assert any(exists(c) for c in candidates), f"{where}:{line} names {candidates[0]}, which does not exist"
