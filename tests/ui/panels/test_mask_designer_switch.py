"""The mask designer across a session switch: opening another demo must not report fully masked rows
built from the old session's segments; the new picture comes from the new session's response only,
while a real edit that masks whole rows is still reported."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from attnviz.model.mask.commands import SetBlockRule  # noqa: E402
from attnviz.model.mask.rules import Rule  # noqa: E402
from attnviz.ui.file_actions import FileActions, Prompts  # noqa: E402
from test_mask_designer_support import make_panel, wait_response  # noqa: E402


class _Discard(Prompts):
    def save_changes(self, parent, what):
        return "discard"


def _open(qtbot, files, ctx, panel, demo):
    assert files.new_session(demo)
    wait_response(qtbot, ctx)
    qtbot.wait(50)
    panel.flush()


def test_opening_another_demo_reports_nothing_and_rebuilds_from_its_response(qtbot):
    ctx, panel = make_panel(qtbot, "river-bank")
    files = FileActions(ctx, prompts=_Discard())
    messages = []
    ctx.message.connect(lambda level, text: messages.append((level, text)))
    for demo in ("vla-mask", "river-bank", "vla-mask", "translation", "river-bank"):
        _open(qtbot, files, ctx, panel, demo)
        resp = ctx.response
        assert not panel.axes_stale
        assert panel.axes.q_labels == tuple(resp.query_labels)
        assert panel.axes.k_labels == tuple(resp.key_labels)
        assert [b.segment for b in panel.snapshot.q_blocks] == [s.name for s in resp.query_segments]
        assert not panel.snapshot.fully_masked.any()  # every demo's own mask leaves each row a key
    assert not [t for _l, t in messages if "fully masked" in t]


def test_a_sequence_edit_waits_for_its_response_before_redrawing(qtbot):
    ctx, panel = make_panel(qtbot, "vla-mask")
    files = FileActions(ctx, prompts=_Discard())
    before = panel.snapshot
    files.new_session("river-bank")
    assert panel.axes_stale
    panel.flush()
    assert panel.snapshot is before  # the old picture stays until the new response arrives
    wait_response(qtbot, ctx)
    panel.flush()
    assert panel.snapshot is not before and panel.axes.Tq == 4


def test_an_edit_that_masks_whole_rows_is_still_reported(qtbot):
    ctx, panel = make_panel(qtbot, "river-bank")
    files = FileActions(ctx, prompts=_Discard())
    _open(qtbot, files, ctx, panel, "vla-mask")
    _open(qtbot, files, ctx, panel, "river-bank")
    seg = ctx.response.query_segments[0].name
    with qtbot.waitSignal(ctx.message, timeout=3000, check_params_cb=lambda _l, t: "fully masked" in t) as msg:
        assert panel.execute(panel.target.lift(SetBlockRule(seg, seg, Rule.deny())))
        panel.flush()
    assert "4 query rows are fully masked: 0 (by), 1 (the), 2 (river), 3 (bank)" in msg.args[1]
