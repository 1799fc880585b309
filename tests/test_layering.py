"""The architecture of attnviz, as import-linter contracts in pyproject.toml ([tool.importlinter]):
each contract is run here, so a plain `pytest` catches what `lint-imports` in `make test` catches.
import-linter sees imports inside functions too."""

from __future__ import annotations

import ast
import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import attnviz

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "attnviz"
CONTRACTS = {
    c["id"]: c for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
}


def _lint(cwd: Path, contract: str) -> subprocess.CompletedProcess:
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--no-cache", "--no-logo", "--contract", contract],
        cwd=cwd, env={**os.environ, "PYTHONPATH": str(cwd)}, capture_output=True, text=True,
    )


@pytest.mark.parametrize("contract", sorted(CONTRACTS))
def test_contract_kept(contract):
    run = _lint(ROOT, contract)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize(
    ("path", "line", "contract"),
    [
        ("model/heads.py", "def _f():\n    from PySide6 import QtCore\n", "qt-only-in-ui"),
        ("sources/text.py", "import numba\n", "numba-only-in-engine"),
        ("engine/naive.py", "def _f():\n    import attnviz.model.session\n", "layers"),
        ("persist/atomic.py", "import attnviz.checkpoints.config\n", "session-stack"),
        ("corpus/texts.py", "import attnviz.model.session\n", "checkpoint-stack"),
    ],
)
def test_contract_catches_a_violation(tmp_path, path, line, contract):
    """The contracts check the real package: one bad import in a copy of it breaks the contract."""
    shutil.copytree(PKG, tmp_path / "attnviz", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    module = "attnviz." + path.removesuffix(".py").replace("/", ".")
    assert f"{module} -> " not in _lint(tmp_path, contract).stdout
    with open(tmp_path / "attnviz" / path, "a", encoding="utf-8") as f:
        f.write("\n\n" + line)
    run = _lint(tmp_path, contract)
    assert run.returncode == 1 and f"{module} -> " in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize(("contract", "home"), [("qt-only-in-ui", "ui"), ("numba-only-in-engine", "engine")])
def test_library_contracts_cover_every_module(contract, home):
    """A new module of attnviz is checked as soon as it exists: these contracts list every module
    outside the library's home."""
    children = {f"attnviz.{m.name}" for m in pkgutil.iter_modules(attnviz.__path__)}
    assert set(CONTRACTS[contract]["source_modules"]) == children - {f"attnviz.{home}"}


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_are_absolute(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    relative = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level > 0]
    assert not relative, f"{path}: relative imports on lines {relative}; use `from attnviz... import`"
