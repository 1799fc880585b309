"""The Q-K PCA of a long input (more query + key rows than ``SYNC_PCA_ROWS``) runs on the inspector's
PCA worker, not the GUI thread: the redraw returns with the scatter cleared and a "computing" line,
and the embedding drawn when it arrives is the one the GUI thread would have computed, with the
selected query and key outlined. A short input is still drawn at once."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.model.diagnostics.qk_embedding import qk_embedding  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import ModelConfig, SessionState, TextSource  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.panels import inspector_panel  # noqa: E402
from attnviz.ui.panels.inspector_panel import SYNC_PCA_ROWS, InspectorPanel  # noqa: E402

TIMEOUT = 20000


@pytest.fixture
def pca_threads(monkeypatch):
    """The name of the thread of every PCA the inspector computes."""
    seen: list[str] = []

    def recorded(q, k):
        seen.append(threading.current_thread().name)
        return qk_embedding(q, k)

    monkeypatch.setattr(inspector_panel, "qk_embedding", recorded)
    return seen


def open_panel(qtbot, words: int):
    text = " ".join(f"w{n}" for n in range(words))
    ctx = AppContext(Session(SessionState(sources=(TextSource("t", text=text),), model=ModelConfig(d_model=8, nh=1))))
    panel = InspectorPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1300, 800)
    panel.show()
    panel.matrices.setCurrentWidget(panel.scatter)  # the PCA is drawn while its tab is shown
    # the first show's own steps (parts made, a first draw) end before the test's computation starts
    qtbot.waitUntil(lambda: not panel.drawing_in_steps, timeout=TIMEOUT)
    return ctx, panel


def close(ctx, panel):
    ctx.compute.shutdown()
    panel.pca_job.shutdown()
    panel.close()
    panel.deleteLater()
    ctx.deleteLater()


def test_a_long_inputs_pca_runs_on_the_worker_and_is_drawn_when_it_arrives(qtbot, pca_threads):
    ctx, panel = open_panel(qtbot, 700)
    try:
        with qtbot.waitSignal(panel.pca_job.done, timeout=TIMEOUT):
            with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
                ctx.recompute(now=True)
            resp = ctx.response
            assert resp.Tq + resp.Tk > SYNC_PCA_ROWS  # the size this test is about
            assert panel.scatter.embedding is None and "computing the PCA" in panel.scatter.info.text()
        main = threading.main_thread().name
        assert pca_threads and all(name != main for name in pca_threads)
        qtbot.waitUntil(lambda: panel.scatter.embedding is not None, timeout=TIMEOUT)
        want = qk_embedding(resp.q[0], resp.k[0])
        np.testing.assert_allclose(panel.scatter.embedding.q_xy, want.q_xy, atol=1e-9)
        np.testing.assert_allclose(panel.scatter.embedding.k_xy, want.k_xy, atol=1e-9)
        assert panel.scatter.selected.getData()[0].shape == (2,)  # the selected query and key outlined
        drawn = len(pca_threads)
        ctx.set_view(query=5, key=3)  # the same points: only the outline moves, no new PCA
        assert len(pca_threads) == drawn
    finally:
        close(ctx, panel)


def test_a_short_inputs_pca_is_drawn_at_once_on_the_gui_thread(qtbot, pca_threads):
    ctx, panel = open_panel(qtbot, 20)
    try:
        with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
            ctx.recompute(now=True)
        assert panel.scatter.embedding is not None
        assert pca_threads == [threading.main_thread().name]
    finally:
        close(ctx, panel)
