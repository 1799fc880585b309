"""The Q/K/V inspector built when a result is already there (the workspace's first visit) draws it on
the next turn of the event loop, not inside its constructor, and the four projection maps of a tab
not shown wait for that tab: building and drawing everything in one step held up the window."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QWidget  # noqa: E402

from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import ModelConfig, SessionState, TextSource  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.panels.inspector_panel import InspectorPanel  # noqa: E402

TIMEOUT = 20000


def test_a_result_already_there_is_drawn_on_the_next_turn_and_the_projections_with_their_tab(qtbot):
    state = SessionState(sources=(TextSource("t", text="the cat sat on the mat"),), model=ModelConfig(d_model=8, nh=2))
    ctx = AppContext(Session(state))
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.recompute(now=True)
    window = QWidget()  # a shown window whose workspace shows the panel
    qtbot.addWidget(window)
    window.resize(1300, 800)
    window.show()
    try:
        panel = InspectorPanel(ctx)  # as the window's panel factory builds it: no parent yet
        assert panel.q_map.values is None  # nothing drawn by the constructor
        panel.setParent(window)  # then placed in the shown window's workspace
        panel.resize(1300, 800)
        panel.show()
        qtbot.waitUntil(lambda: panel.q_map.values is not None, timeout=TIMEOUT)
        np.testing.assert_array_equal(panel.q_map.values, ctx.response.q[0].astype(np.float32))
        assert panel.breakdown.formula.text().strip()  # the breakdown followed
        assert panel.wq_map.values is None and panel.wo_map.values is None  # their tab is not shown
        panel.matrices.setCurrentWidget(panel.weights_page)
        np.testing.assert_array_equal(panel.wq_map.values, ctx.response.projections.W_q[0].astype(np.float32))
        assert panel.wo_map.values is not None
        ctx.set_view(head=1)  # another head while the projections are shown: drawn at once
        np.testing.assert_array_equal(panel.wq_map.values, ctx.response.projections.W_q[1].astype(np.float32))
    finally:
        ctx.compute.shutdown()
        window.close()
        window.deleteLater()
        ctx.deleteLater()


def test_the_weight_maps_are_made_when_their_tab_comes_forward_and_drawn_a_turn_later(qtbot):
    state = SessionState(sources=(TextSource("t", text="the cat sat on the mat"),), model=ModelConfig(d_model=8, nh=2))
    ctx = AppContext(Session(state))
    panel = InspectorPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1300, 800)
    panel.show()
    try:
        with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
            ctx.recompute(now=True)
        assert "wq_map" not in vars(panel) and panel.weights_stale  # not made while their tab is hidden
        panel.matrices.setCurrentWidget(panel.weights_page)
        assert "wq_map" in vars(panel) and panel.weights_stale  # made in this turn, not drawn yet
        qtbot.waitUntil(lambda: not panel.weights_stale, timeout=TIMEOUT)  # drawn on a later one
        assert panel.wq_map.title_text() == "W^Q, head 0"
    finally:
        ctx.compute.shutdown()
        panel.close()
        panel.deleteLater()
        ctx.deleteLater()


def test_another_tab_brought_forward_before_the_first_draw_raises_nothing(qtbot):
    """Switching the matrices' tab (the Q-K PCA) in the turn between the panel's show and its first draw asked
    the empty Q map to mark row 0 ('row 0 outside 0..-1', an exception in a slot)."""
    state = SessionState(sources=(TextSource("t", text="the cat sat on the mat"),), model=ModelConfig(d_model=8, nh=2))
    ctx = AppContext(Session(state))
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.recompute(now=True)
    window = QWidget()
    qtbot.addWidget(window)
    window.resize(1300, 800)
    window.show()
    try:
        panel = InspectorPanel(ctx)
        panel.setParent(window)
        panel.resize(1300, 800)
        panel.show()
        assert panel.q_map.values is None  # not drawn yet
        pca = next(i for i in range(panel.matrices.count()) if "PCA" in panel.matrices.tabText(i))
        panel.matrices.setCurrentIndex(pca)  # before the first draw: nothing may raise
        panel.matrices.setCurrentIndex(0)
        qtbot.waitUntil(lambda: panel.q_map.values is not None, timeout=TIMEOUT)
        assert panel.q_map.frame.selected_row == panel.selection()[1]  # the selection is marked once drawn
    finally:
        ctx.compute.shutdown(timeout=5)
