"""A heatmap given a matrix larger than the GUI thread can pool quickly pools it on its worker: the
call returns before any pooling has run, the pooling runs on another thread, and what is drawn then
is the same picture the GUI thread would have drawn. A caller that pooled on its own worker
(``pool_matrix`` to ``display_shape``) hands the result over and nothing is pooled again."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from attnviz.model.display import pooled_matrix
from attnviz.model.display.pooling import pool_max
from attnviz.ui.widgets.heatmap import SYNC_POOL_CELLS, AttentionHeatmap, HeatmapConfig


@pytest.fixture
def heatmap(qtbot, qapp):
    w = AttentionHeatmap(config=HeatmapConfig(region_debounce_ms=10))
    qtbot.addWidget(w)
    w.resize(600, 500)
    w.show()
    qtbot.waitExposed(w)
    return w


@pytest.fixture
def pool_threads(monkeypatch):
    """The name of the thread of every call of the pooling function the heatmap uses."""
    seen: list[str] = []
    real = pooled_matrix.pool_max

    def recorded(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(pooled_matrix, "pool_max", recorded)
    return seen


def big_causal(T: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    v = rng.random((T, T), dtype=np.float32) * 0.01  # (T, T)
    mask = np.tril(np.ones((T, T), dtype=bool))
    v[2500, 17] = 0.875  # one isolated peak far from the diagonal
    return v, mask


def test_a_3000_square_matrix_is_pooled_on_the_worker_not_the_gui_thread(heatmap, qtbot, pool_threads):
    v, mask = big_causal()
    assert v.size > SYNC_POOL_CELLS  # the size this test is about
    labels = [f"t{i}" for i in range(3000)]
    heatmap.set_matrix(v, mask=mask, row_labels=labels, col_labels=labels, title="weights", value_label="weight")
    assert pool_threads == []  # returned before anything was pooled on this (or any) thread
    assert heatmap.pooling() and heatmap.is_empty()
    with qtbot.waitSignal(heatmap.matrix_shown, timeout=30000):
        pass
    main = threading.main_thread().name
    assert pool_threads and all(name != main for name in pool_threads)
    assert not heatmap.pooling()
    # the token labels arrived with the picture and narrowed the view: it is pooled again to fit
    qtbot.waitUntil(lambda: heatmap.base.values.shape == heatmap.display_shape(3000, 3000), timeout=30000)
    assert all(name != main for name in pool_threads)
    H, W = heatmap.display_shape(3000, 3000)
    assert heatmap.base.values.shape == (H, W) and H < 3000
    want, ok = pool_max(v, mask, (H, W))  # what the GUI thread drew before
    np.testing.assert_array_equal(heatmap.base.allowed, ok)
    np.testing.assert_array_equal(np.nan_to_num(heatmap.base.values, nan=-1), np.nan_to_num(want, nan=-1))
    assert np.nanmax(heatmap.base.values) == pytest.approx(0.875)  # the peak survives pooling
    assert "weight 0.875" in heatmap.readout_text(2500, 17)  # exact readout of the held matrix
    assert heatmap.readout_text(5, 2000).endswith("masked")
    assert heatmap.frame.title.text == "weights"  # the labels and title came with the picture


def test_a_matrix_pooled_by_the_caller_is_drawn_without_pooling_again(heatmap, qtbot, pool_threads):
    v, mask = big_causal()
    pm = pooled_matrix.pool_matrix(v, mask, heatmap.display_shape(*v.shape))  # the caller's worker would do this
    del pool_threads[:]
    with qtbot.waitSignal(heatmap.matrix_shown, timeout=1000):
        heatmap.set_matrix(pm, title="weights")
    assert pool_threads == []  # nothing pooled anywhere: the image was handed over
    assert not heatmap.pooling() and not heatmap.is_empty()
    assert heatmap.base.values is pm.image
    assert heatmap.levels() == pm.levels and pm.levels[1] == pytest.approx(0.875)
    assert "0.875" in heatmap.readout_text(2500, 17)


def test_a_newer_matrix_wins_over_one_still_pooling(heatmap, qtbot):
    v, mask = big_causal()
    heatmap.set_matrix(v, mask=mask, title="big")
    small = np.full((4, 5), 0.5, dtype=np.float32)
    heatmap.set_matrix(small, title="small")  # drawn at once; the big one must not come back over it
    assert heatmap.base.values.shape == (4, 5) and not heatmap.pooling()
    heatmap._pool_job.wait_idle(30)
    qtbot.wait(100)  # any late delivery would have arrived
    assert heatmap.base.values.shape == (4, 5) and heatmap.frame.n_rows == 4


def test_a_bad_large_matrix_is_reported_in_the_title_not_raised(heatmap, qtbot):
    v, _ = big_causal()
    v[10, 3] = np.nan
    heatmap.set_matrix(v)  # the NaN is found on the worker: no exception here
    qtbot.waitUntil(lambda: not heatmap.pooling(), timeout=30000)
    assert heatmap.is_empty()
    assert "values contain NaN" in heatmap.frame.title.text
    with pytest.raises(ValueError, match="labels"):  # what costs nothing to check still raises at once
        heatmap.set_matrix(v, row_labels=["a"])


def test_the_colour_bar_is_made_with_the_first_picture_in_the_theme_of_then(qtbot, qapp):
    import pyqtgraph as pg

    from attnviz.ui.theme import apply_theme, current_theme

    apply_theme(qapp, "dark")
    try:
        w = AttentionHeatmap()
        qtbot.addWidget(w)
        w.set_colormap("viridis")  # a colormap chosen early makes no bar yet
        bars = [i for i in w.frame.ci.items if isinstance(i, pg.ColorBarItem)]
        assert bars == [] and not w.has_colorbar  # half the widget's construction time, skipped
        w.set_matrix(np.eye(3, dtype=np.float32))
        assert w.has_colorbar  # made by the first content, not by the reads below
        assert isinstance(w.colorbar, pg.ColorBarItem) and w.colorbar in w.frame.ci.items
        axis = w.colorbar.getAxis("right")
        assert axis.textPen().color().name() == pg.mkColor(current_theme().plot_foreground).name()
        assert tuple(w.colorbar.levels()) == pytest.approx(w.levels())
    finally:
        apply_theme(qapp, "light")
