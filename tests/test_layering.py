"""The layer rules of attnviz, checked on every import statement in the package (including
imports inside functions): Qt and pyqtgraph only under attnviz/ui, numba only under attnviz/engine,
and arrows between layers only pointing down (ui -> persist -> model -> sources | engine; corpus ->
checkpoints)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "attnviz"

# layer -> attnviz sub-packages it may import (besides itself)
ALLOWED = {
    "engine": set(),
    "sources": set(),
    "model": {"engine", "sources"},
    "persist": {"model", "engine", "sources"},
    "checkpoints": {"engine", "sources"},
    "corpus": {"checkpoints", "engine", "sources"},
    "cli": {"persist", "model", "engine", "sources", "checkpoints", "corpus"},
    "ui": {"persist", "model", "engine", "sources", "checkpoints", "corpus"},
}
QT_ROOTS = {"PySide6", "shiboken6", "pyqtgraph", "PyQt5", "PyQt6"}


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            yield "." * node.level + (node.module or "")


def _layer(path: Path) -> str:
    rel = path.relative_to(PKG).parts
    return rel[0] if len(rel) > 1 else "top"


FILES = sorted(PKG.rglob("*.py"))


def test_package_has_modules():
    assert len(FILES) > 10


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_layer_rules(path: Path):
    layer = _layer(path)
    for name in _imports(path):
        assert not name.startswith("."), f"{path}: use absolute imports ({name})"
        root = name.split(".")[0]
        if root in QT_ROOTS:
            assert layer == "ui", f"{path} imports {name}: Qt/pyqtgraph belong in attnviz/ui only"
        if root in {"numba", "llvmlite"}:
            assert layer == "engine", f"{path} imports {name}: numba belongs in attnviz/engine only"
        if root == "attnviz" and layer in ALLOWED:
            parts = name.split(".")
            if len(parts) > 1 and parts[1] in ALLOWED and parts[1] != layer:
                assert parts[1] in ALLOWED[layer], f"{path} ({layer}) may not import {name}"


def test_rule_catches_a_violation(tmp_path):
    """The checker itself: a Qt import in a model-like file is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from PySide6 import QtCore\n", encoding="utf-8")
    assert "PySide6" in list(_imports(bad))
