"""The Corpus tab of the Pretrained workspace, before a STATS file is open, says which command writes
one — attnviz-cli corpus with the loaded checkpoint's own folder — and copies it; the command as
copied (TEXTS replaced) writes a file the tab then opens."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from PySide6.QtGui import QGuiApplication

from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.ui.context import AppContext
from attnviz.ui.model_view.corpus_view import corpus_command
from attnviz.ui.model_view.panel import ModelViewPanel

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"


@pytest.fixture
def panel(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    p = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(p)
    p.resize(1000, 640)
    p.show()
    yield p
    ctx.compute.shutdown(timeout=5)


def _load(qtbot, panel, folder):
    with qtbot.waitSignal(panel.attention_ready, timeout=30000):
        panel.load_model(folder)


def test_the_empty_corpus_tab_gives_the_command_with_the_checkpoints_folder(qtbot, panel, tmp_path):
    view = panel.corpus
    hint = view.command_hint
    panel.tabs.setCurrentWidget(view)
    assert "attnviz-cli corpus" in hint.text.text() and hint.command.text().startswith("attnviz-cli corpus MODEL ")
    _load(qtbot, panel, DATA / "tiny_gpt2")
    assert hint.isVisible() and hint.copy_button.isVisible()
    command = hint.command.text()
    assert command == corpus_command(DATA / "tiny_gpt2", "tiny_gpt2")
    assert shlex.split(command)[:3] == ["attnviz-cli", "corpus", str(DATA / "tiny_gpt2")]
    assert "&" in hint.copy_button.text()  # an access key
    hint.copy_button.click()
    assert QGuiApplication.clipboard().text() == command
    assert hint.copy_button.text() == "Co&pied"

    # the command as copied, TEXTS and the output replaced, writes a file the tab opens
    from attnviz.cli import main

    texts = tmp_path / "texts.txt"
    texts.write_text("the cat sat on the mat\na river bank in spring\n", encoding="utf-8")
    out = tmp_path / "stats.parquet"
    argv = [str(texts) if a == "TEXTS" else str(out) if a.endswith(".parquet") else a for a in shlex.split(command)]
    assert main(argv[1:] + ["--scheduler", "threads", "--workers", "1"]) == 0
    assert view.open_stats(out)
    assert view.corpus_matrix() is not None and not hint.isVisible() and view.split.isVisible()


def test_an_image_model_is_told_the_command_runs_text_checkpoints(qtbot, panel):
    _load(qtbot, panel, DATA / "tiny_vit")
    hint = panel.corpus.command_hint
    assert "image model" in hint.text.text() and "text checkpoints" in hint.text.text()
    assert hint.command.isHidden() and hint.copy_button.isHidden()


def test_corpus_command_quotes_a_folder_with_spaces():
    cmd = corpus_command("/models/my model", "my model")
    assert shlex.split(cmd) == ["attnviz-cli", "corpus", "/models/my model", "TEXTS", "--out",
                                "my model-stats.parquet"]
