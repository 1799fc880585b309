"""docs/architecture.md names files, modules and symbols; each must exist, so the story cannot drift from the
code without a failing test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "attnviz"

# words in backticks that are not names of this code: shapes, formulas, commands, event names, job names
NOT_CODE = {"mask[i, j] == True", "(nh, Tq, Tk)", "Concat(heads) W^O", "lse = m + log l", "ok", "error", "mask",
            "state", "dirty", "view", "cli", "ui", "persist", "model", "engine", "sources", "checkpoints", "corpus",
            "rules", "paint", "design", "presets", "commands", "analysis", "export", "make test", "pytest",
            "attnviz-cli bench", "make screenshots", "pyproject.toml", "docs/images", "benchmarks/",
            "benchmarks/README.md", "attnviz-overview", "attnviz-head-grid", ".attnviz", "BlockMask",
            "attnviz-cli", "exp2", "response.error", "ctx.response_changed", "ctx.execute(cmd)",
            "session.execute(cmd)", "apply(design)", "attention(q, k, v, mask, kernel=...)",
            "attnviz.show", "attnviz.save", "stroke_started", "stroke_cells", "stroke_rect", "stroke_finished",
            "ComputeController.submit", "mask_mod", "ar_mask"}


def _quoted() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return sorted(set(re.findall(r"`([^`\n]+)`", text)))


def _sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))


def test_the_document_names_code():
    names = _quoted()
    assert len([n for n in names if n.startswith("attnviz/")]) >= 20, "the document lost its paths"


@pytest.mark.parametrize("name", [n for n in _quoted() if n.startswith("attnviz/")])
def test_every_path_exists(name):
    assert (ROOT / name).exists(), f"docs/architecture.md names {name}, which does not exist"


@pytest.mark.parametrize("name", [n for n in _quoted() if re.fullmatch(r"[a-z_]+\.py", n)])
def test_every_module_file_exists(name):
    assert list(PACKAGE.rglob(name)), f"docs/architecture.md names {name}; no such module under attnviz/"


def test_every_symbol_is_defined():
    sources = _sources()
    symbols = [n for n in _quoted() if n not in NOT_CODE and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
    assert "LatestJob" in symbols and "PaintRect" in symbols
    missing = [s for s in symbols
               if not re.search(rf"^\s*(class|def) {s}\b|^{s}\s*[:=]|^\s+{s}\s*=\s*Signal", sources, re.M)]
    assert not missing, f"docs/architecture.md names symbols nothing defines: {missing}"


def test_dotted_methods_exist():
    sources = _sources()
    for owner, method in (("ComputeController", "submit"),):
        body = sources.split(f"class {owner}", 1)
        assert len(body) == 2 and re.search(rf"def {method}\b", body[1]), f"{owner}.{method} is gone"


def test_job_names_exist():
    sources = _sources()
    for job in ("attnviz-overview", "attnviz-head-grid"):
        assert f'"{job}"' in sources, f"the document names the job {job!r}, which no LatestJob is called"


def test_canvas_signals_exist():
    canvas = (PACKAGE / "ui" / "widgets" / "mask_canvas.py").read_text(encoding="utf-8")
    for sig in ("stroke_started", "stroke_cells", "stroke_rect", "stroke_finished"):
        assert re.search(rf"^\s+{sig} = Signal", canvas, re.M), sig
