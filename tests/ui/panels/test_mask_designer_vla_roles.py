"""The VLA preset on a session that is not VLA-shaped says why instead of doing nothing: with the
roles dialog cancelled it says what it needs; with image and prompt tokens only (no actions) it says
the mask changes nothing here; both offer the roles dialog for every segment."""

from __future__ import annotations

from test_mask_designer_support import make_panel


def test_vla_preset_with_the_roles_dialog_cancelled_says_why_and_offers_it_again(qtbot):
    ctx, panel = make_panel(qtbot, "river-bank")
    asked = []
    panel.ask_vla_roles = lambda _parent, rows: (asked.append([r.name for r in rows]), None)[1]
    before = ctx.session.state.mask
    assert not panel.apply_preset("vla")
    assert asked == [["by the river bank"]]
    assert panel.message.isVisible() and "not applied" in panel.message_text and 'href="roles"' in panel.message_text
    assert ctx.session.state.mask == before
    panel.ask_vla_roles = lambda _parent, rows: (asked.append([r.name for r in rows]), {rows[0].name: "E"})[1]
    panel.message.linkActivated.emit("roles")  # "choose the roles…"
    assert len(asked) == 2 and ctx.session.state.mask != before


def test_vla_preset_without_action_tokens_says_it_changes_nothing(qtbot):
    ctx, panel = make_panel(qtbot, "vit-image")  # an image and its class token: role I, nothing to ask
    asked = []
    panel.ask_vla_roles = lambda _parent, rows: (asked.append([r.name for r in rows]), None)[1]
    assert panel.apply_preset("vla")
    assert asked == []
    text = panel.message_text
    assert "only changes something where there are action tokens" in text and "'image' as image" in text, text
    assert 'href="roles"' in text and panel.message.isVisible()
    panel.message.linkActivated.emit("roles")  # every segment asked for, whatever was inferred
    assert len(asked) == 1 and asked[0] != []
