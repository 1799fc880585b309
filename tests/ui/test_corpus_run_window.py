"""The Corpus tab's Run on a folder… runs the loaded checkpoint's statistics off the GUI thread and opens
the STATS file it writes; Cancel writes nothing; a model the statistics do not run is one line."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from attnviz.corpus import read_stats
from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.ui.context import AppContext
from attnviz.ui.model_view.corpus_run import CorpusRun, suggested_output
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
    p.shutdown()
    ctx.compute.shutdown(timeout=5)


def _load(qtbot, panel, folder):
    with qtbot.waitSignal(panel.attention_ready, timeout=30000):
        panel.load_model(folder)


def _texts(tmp_path, n=3) -> Path:
    folder = tmp_path / "texts"
    folder.mkdir()
    for i in range(n):
        (folder / f"doc{i}.txt").write_text(f"the river bank number {i} in spring", encoding="utf-8")
    return folder


def test_run_on_a_folder_writes_and_opens_the_statistics(qtbot, panel, tmp_path):
    _load(qtbot, panel, DATA / "tiny_gpt2")
    view = panel.corpus
    texts, out = _texts(tmp_path), tmp_path / "stats.parquet"
    seen = []
    view.runner.progress.connect(lambda p: seen.append((p.done, p.total)))
    with qtbot.waitSignal(view.runner.finished, timeout=60000):
        assert view.run_on(texts, out)
        assert view.cancel_button.isVisibleTo(view) and not view.run_button.isEnabled()
    assert out.is_file() and view.stats is not None and view.stats.documents == 3
    assert seen and seen[-1] == (3, 3)
    assert not view.cancel_button.isVisibleTo(view) and view.run_button.isEnabled()
    grid = view.corpus_matrix()
    assert grid is not None and np.isfinite(grid).all()
    # the file equals what the command line's corpus run writes for the same texts
    from attnviz.corpus.run import run_corpus

    ref = tmp_path / "ref.parquet"
    run_corpus(str(DATA / "tiny_gpt2"), None, texts, ref, scheduler="threads", workers=1, batch=1)
    a, b = read_stats(out), read_stats(ref)
    assert a.documents == b.documents
    assert a.values.keys() == b.values.keys()
    for name in a.values:
        np.testing.assert_allclose(a.values[name], b.values[name], rtol=1e-6, atol=1e-9)


def test_cancel_writes_nothing_and_says_so(qtbot, panel, tmp_path):
    _load(qtbot, panel, DATA / "tiny_gpt2")
    view = panel.corpus
    gate = []

    def slow_run(folder, name, texts, out, progress=None, **kw):
        from attnviz.corpus.run import Progress

        for i in range(1000):
            progress(Progress(done=i, total=1000, failed=0, elapsed=0.0))
            time.sleep(0.005)
            gate.append(i)
        raise AssertionError("the run was not cancelled")

    view.runner._run = slow_run
    out = tmp_path / "stats.parquet"
    with qtbot.waitSignal(view.runner.progress, timeout=10000):
        assert view.run_on(_texts(tmp_path), out)
    with qtbot.waitSignal(view.runner.stopped, timeout=5000):
        view.cancel_button.click()
    assert "cancelled" in view.message_text().lower() and not out.exists()
    assert view.run_button.isEnabled()
    n = len(gate)
    qtbot.wait(100)
    assert len(gate) <= n + 1  # the worker stopped at its next document


def test_an_image_model_cannot_run_the_corpus(qtbot, panel, tmp_path):
    _load(qtbot, panel, DATA / "tiny_vit")
    assert not panel.corpus.run_on(_texts(tmp_path), tmp_path / "s.parquet")
    assert "text checkpoints" in panel.corpus.message_text()
    assert not (tmp_path / "s.parquet").exists()


def test_a_folder_without_texts_is_one_line(qtbot, panel, tmp_path):
    _load(qtbot, panel, DATA / "tiny_gpt2")
    view = panel.corpus
    empty = tmp_path / "empty"
    empty.mkdir()
    with qtbot.waitSignal(view.runner.failed, timeout=30000):
        assert view.run_on(empty, tmp_path / "s.parquet")
    text = view.message_text()
    assert text.startswith("The corpus run did not finish:") and "\n" not in text and "Traceback" not in text


def test_suggested_output_sits_beside_the_corpus():
    assert suggested_output("/data/texts", "gpt2") == Path("/data/gpt2-stats.parquet")
    assert isinstance(CorpusRun(), CorpusRun)
