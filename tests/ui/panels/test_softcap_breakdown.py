"""The softcap score rule in the window: the Q·K·V breakdown shows q·k, × 1/√dₖ, then c·tanh(s/c) and the
weight, and the settings panel's cap control edits c through an undoable command."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.model.commands import SetScoreRule  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.panels.inspector_panel import InspectorPanel  # noqa: E402
from attnviz.ui.panels.settings_panel import SettingsPanel  # noqa: E402
from qt_tables import table_texts  # noqa: E402

TIMEOUT = 20000


@pytest.fixture
def capped(qtbot):
    st = build_demo("river-bank")
    ctx = AppContext(Session(replace(st, score_rule=replace(st.score_rule, name="softcap", cap=2.0))))
    panel = InspectorPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1300, 800)
    panel.show()
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.recompute(now=True)
    yield ctx, panel
    ctx.compute.shutdown()
    panel.close()
    panel.deleteLater()
    ctx.deleteLater()


def test_breakdown_shows_the_scale_then_the_cap(capped):
    ctx, panel = capped
    bd = panel.breakdown
    assert panel.selection() == (0, 3, 2)  # bank's row, river's key
    text = bd.formula.text()
    capped_score = 2.0 * math.tanh(2.3 / 2.0)
    assert "q_3 · k_2 = Σ q⊙k = 4.6" in text and "s = 4.6 × 1/√4 = 2.3" in text, text
    assert f"2·tanh(s/2) = {capped_score:.2f}" in text and "soft cap c = 2" in text
    row = table_texts(bd.row_table)
    assert len(row) == 4
    assert row[0] == ["0.92", "0", "4.6", "1.38"]  # q·k against by, the, river, bank
    assert row[1] == ["0.46", "0", "2.3", "0.69"]  # × 1/√4
    s = ctx.response.q[0, 3] @ ctx.response.k[0].T / 2.0  # (Tk,) bank's scaled scores
    np.testing.assert_allclose([float(bd.row_table.item(2, c).toolTip()) for c in range(4)], 2.0 * np.tanh(s / 2.0),
                               atol=1e-12)
    assert row[2][2] == f"{capped_score:.2f}"
    np.testing.assert_allclose([float(bd.row_table.item(3, c).toolTip()) for c in range(4)],
                               ctx.response.weights[0, 3], atol=1e-12)
    headers = [bd.row_table.verticalHeaderItem(r).text() for r in range(4)]
    assert headers[2] == "2·tanh(s/2)" and headers[3] == "weight"
    assert f"weight {ctx.response.weights[0, 3, 2]:.2f}" in text


def test_other_rules_keep_the_three_row_table(qtbot, capped):
    ctx, panel = capped
    with qtbot.waitSignal(ctx.response_changed, timeout=TIMEOUT):
        ctx.execute(SetScoreRule(replace(ctx.session.state.score_rule, name="scaled_dot")))
    assert panel.breakdown.row_table.rowCount() == 3
    assert "tanh" not in panel.breakdown.formula.text()
    assert table_texts(panel.breakdown.row_table)[2] == ["0.11", "0.07", "0.69", "0.14"]  # seed 002's softmax


def test_settings_cap_control_edits_the_rule(qtbot):
    st = build_demo("river-bank")
    ctx = AppContext(Session(st))
    p = SettingsPanel(ctx)
    qtbot.addWidget(p)
    p.show()
    assert not p.cap.isVisibleTo(p)  # scaled_dot: no cap to set
    ctx.execute(SetScoreRule(replace(st.score_rule, name="softcap")))
    assert p.cap.isVisibleTo(p) and p.cap.value() == 50.0
    p.cap.setValue(12.5)
    assert ctx.session.state.score_rule.cap == 12.5
    ctx.undo_stack.undo()
    assert ctx.session.state.score_rule.cap == 50.0 and p.cap.value() == 50.0
    ctx.compute.shutdown()
