"""The documentation tells the truth: every ``attnviz-cli`` transcript in README.md and
docs/user-guide.md prints what the docs say it prints, every picture they show exists, the keyboard
shortcut table is the one the running application lists, and the river-bank numbers of the guide are
what the application computes."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", ROOT / "docs" / "user-guide.md")
# transcripts whose output depends on the machine, the clock or the load: run, but not compared
UNCOMPARED = ("bench", "model list", "inspect")


def transcripts(path: Path) -> list[tuple[str, str]]:
    """(command, expected output) of every ``$ attnviz-cli ...`` line in the file's console blocks."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S):
        command, lines = None, []
        for line in block.splitlines():
            if line.startswith("$ "):
                if command is not None:
                    out.append((command, "\n".join(lines)))
                command, lines = line[2:], []
            else:
                lines.append(line)
        if command is not None:
            out.append((command, "\n".join(lines)))
    return out


def _needs_minilm(command: str) -> bool:
    return "all-MiniLM-L6-v2" in command


def _minilm_installed() -> bool:
    from attnviz.checkpoints import ready_models

    return "all-MiniLM-L6-v2" in dict(ready_models())


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_cli_transcripts_print_what_the_docs_show(doc, tmp_path):
    found = transcripts(doc)
    assert found, f"{doc.name} shows no attnviz-cli transcript"
    compared = 0
    for command, expected in found:
        argv = shlex.split(command)
        assert argv[0] == "attnviz-cli", command
        if any(command.startswith(f"attnviz-cli {word}") for word in UNCOMPARED):
            continue
        if _needs_minilm(command) and not _minilm_installed():
            continue
        proc = subprocess.run([sys.executable, "-m", "attnviz.cli", *argv[1:]], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
        printed = (proc.stdout + proc.stderr).rstrip("\n")
        assert printed == expected.rstrip("\n"), f"$ {command}\n--- printed ---\n{printed}\n--- docs ---\n{expected}"
        compared += 1
    assert compared >= 3


def test_every_picture_the_docs_show_exists():
    shown = []
    for doc in DOCS:
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", doc.read_text(encoding="utf-8")):
            shown.append((doc.parent / target).resolve())
    assert len(shown) >= 15
    missing = [str(p.relative_to(ROOT)) for p in shown if not p.is_file()]
    assert not missing, missing
    names = {p.stem for p in shown if p.parent == ROOT / "docs" / "images"}
    assert names <= {name for name, _ in _screenshot_list()}, "a picture the docs show is not made by make screenshots"


def _screenshot_list():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_screenshots", ROOT / "tools" / "make_screenshots.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)  # definitions only: the script acts under its __main__ guard
    finally:
        sys.modules.pop(spec.name, None)
    return [(shot.name, shot.what) for shot in module.SHOTS]


def test_every_picture_is_made_through_the_screenshot_option():
    shots = _screenshot_list()
    assert len(shots) == len({name for name, _ in shots}) >= 15
    source = (ROOT / "tools" / "make_screenshots.py").read_text(encoding="utf-8")
    assert '"--screenshot"' in source and "ATTNVIZ_TEST_SCRIPT" not in source


SHORTCUTS_AND_NUMBERS = """
import numpy as np
ctx.set_view(query=3, key=2)
end = __import__("time").monotonic() + 60
while (ctx.response is None or ctx.response.request_id != ctx.compute.latest_id or ctx.compute.busy) \\
        and __import__("time").monotonic() < end:
    wait(20)
r = ctx.response
report({"rows": [list(row) for row in window.shortcut_rows()],
        "tokens": list(r.query_labels),
        "q": np.asarray(r.q)[0, 3].tolist(), "scores": np.asarray(r.scores)[0, 3].tolist(),
        "weights": np.asarray(r.weights)[0, 3].tolist(), "output": np.asarray(r.output)[0, 3].tolist()})
quit(0)
"""


def _guide_shortcuts() -> set[tuple[str, str, str]]:
    text = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    section = text.split("## Keyboard shortcuts", 1)[1].split("\n## ", 1)[0]
    rows = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("menu", "---"):
            rows.add((cells[0], cells[1], cells[2].split(" (also")[0]))
    return rows


@pytest.mark.xvfb
@pytest.mark.slow
def test_the_guide_matches_the_running_application(app_runs):
    proc, rep = app_runs.run("facts", SHORTCUTS_AND_NUMBERS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert rep is not None, proc.stderr[-3000:]
    assert _guide_shortcuts() == {tuple(r) for r in rep["rows"]}
    # seed 002's river bank as the guide quotes it: query, scores, weights and output of "bank"
    assert rep["tokens"] == ["by", "the", "river", "bank"]
    assert [round(x, 2) for x in rep["q"]] == [2.3, 2.3, 0.0, 0.0]
    assert [round(x, 2) for x in rep["scores"]] == [0.46, 0.0, 2.3, 0.69]
    assert [round(x, 2) for x in rep["weights"]] == [0.11, 0.07, 0.69, 0.14]
    assert [round(x, 3) for x in rep["output"]] == [1.431, 0.062, 0.137, 0.0]
