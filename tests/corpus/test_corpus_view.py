"""The "Corpus" tab of the Pretrained model panel: a STATS.parquet as layers x heads grids, the current
input's statistics beside it on one colour scale, and files it cannot use said in the tab."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from corpus_helpers import TINY_GPT2, write_lines  # noqa: E402

from attnviz.checkpoints import load_checkpoint, run_text  # noqa: E402
from attnviz.corpus.compare import input_statistics  # noqa: E402
from attnviz.corpus.files import AtomicParquet, stats_columns, stats_schema  # noqa: E402
from attnviz.corpus.run import run_corpus  # noqa: E402
from attnviz.corpus.stats import STATISTICS, HeadSums  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.corpus_view import CorpusStatsView  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

WAIT_MS = 30000


@pytest.fixture(scope="module")
def tiny_stats(tmp_path_factory):
    d = tmp_path_factory.mktemp("stats")
    texts = write_lines(d / "c.txt", ["the river bank", "a steep bank after the rain", "rain"])
    out = d / "stats.parquet"
    run_corpus(TINY_GPT2, None, texts, out, scheduler="threads", workers=1, batch=2)
    return out


def _other_model_stats(path, model="other-model", shape=(3, 4)):
    f = AtomicParquet(path, stats_schema({"model": model}))
    f.write(stats_columns(HeadSums(np.ones((*shape, 5)), rows=4, prev_rows=3, documents=1)))
    f.commit()
    return path


def test_view_shows_each_statistic_of_the_file(qtbot, tiny_stats):
    from attnviz.corpus import read_stats

    view = CorpusStatsView()
    qtbot.addWidget(view)
    assert view.open_stats(tiny_stats)
    want = read_stats(tiny_stats)
    for name in STATISTICS:
        view.set_statistic(name)
        np.testing.assert_array_equal(view.corpus_matrix(), want.values[name])
        assert view.corpus_map.levels()[0] <= np.nanmin(want.values[name])
    assert "tiny_gpt2 · 3 documents" in view.source.text()
    view.resize(700, 400)
    view.show()
    qtbot.waitExposed(view)
    assert not view.grab().isNull()  # painting asks QWidget.metric(): the view does not shadow it
    assert view.input_matrix() is None and view.message_text() == ""


def test_unreadable_file_is_a_message(qtbot, tmp_path):
    view = CorpusStatsView()
    qtbot.addWidget(view)
    bad = tmp_path / "s.parquet"
    bad.write_text("no")
    assert not view.open_stats(bad)
    assert "Could not open the corpus statistics" in view.message_text() and "not a readable Parquet" in view.message_text()
    assert view.corpus_matrix() is None


def _panel(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    panel = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(panel)
    panel.resize(1200, 760)
    panel.show()
    qtbot.waitExposed(panel)
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS) as blocker:
        panel.load_model(TINY_GPT2)
    return panel, blocker.args[0]


def test_panel_tab_puts_the_input_beside_the_corpus(qtbot, tiny_stats):
    panel, result = _panel(qtbot)
    view = panel.corpus
    assert panel.tabs.tabText(panel.tabs.indexOf(view)) == "Corpus"
    assert view.open_stats(tiny_stats)
    view.set_statistic("to_prev")
    mine = input_statistics(run_text(load_checkpoint(TINY_GPT2), panel.text_edit.text()).attentions)
    np.testing.assert_allclose(view.input_matrix(), mine["to_prev"], rtol=0, atol=1e-12)
    assert view.corpus_map.levels() == view.input_map.levels()  # one colour scale for both grids
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.set_text("rain on the river bank", run=True)
    mine = input_statistics(run_text(load_checkpoint(TINY_GPT2), "rain on the river bank").attentions)
    np.testing.assert_allclose(view.input_matrix(), mine["to_prev"], rtol=0, atol=1e-12)
    view.head_clicked.emit(1, 0)  # a click on a cell of either grid
    assert panel.selected == (1, 0) and view.selected == (1, 0)
    assert view.line.text().startswith("layer 1 · head 0: to previous")
    assert "in this input" in view.line.text()


def test_statistics_of_another_model_are_not_compared(qtbot, tmp_path):
    panel, _result = _panel(qtbot)
    view = panel.corpus
    assert view.open_stats(_other_model_stats(tmp_path / "other.parquet"))
    assert view.input_matrix() is None
    assert "is for other-model with 3 layers x 4 heads; tiny_gpt2 has 2 x 2" in view.message_text()
    assert view.open_stats(_other_model_stats(tmp_path / "same_shape.parquet", shape=(2, 2)))
    assert "is for other-model, not tiny_gpt2" in view.message_text()


def test_maps_from_a_file_are_compared_with_a_corpus_of_their_shape(qtbot, tmp_path):
    """A maps file names no model, so a corpus of the same (layers, heads) is compared, whatever model it names."""
    import attnviz

    ctx = AppContext(Session(build_demo("river-bank")))
    panel = ModelViewPanel(ctx)
    qtbot.addWidget(panel)
    panel.auto_load = False
    a = np.random.default_rng(2).random((3, 4, 6, 6))
    a /= a.sum(axis=-1, keepdims=True)
    maps = attnviz.save(tmp_path / "made_elsewhere.npz", a, [f"t{i}" for i in range(6)])
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.load_model(str(maps))
    view = panel.corpus
    assert view.open_stats(_other_model_stats(tmp_path / "other.parquet", shape=(3, 4)))
    view.set_statistic("entropy")
    np.testing.assert_allclose(view.input_matrix(), input_statistics(a)["entropy"], rtol=0, atol=1e-6)
    assert view.open_stats(_other_model_stats(tmp_path / "wrong.parquet", shape=(2, 4)))
    assert view.input_matrix() is None and "with 2 layers x 4 heads" in view.message_text()
