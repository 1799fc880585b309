"""A panel whose factory raises is drawn as a placeholder saying why, and the window's notice says it too (the
message is kept past the except block: no NameError once the event loop runs)."""

from __future__ import annotations

from attnviz.ui.panels import PanelSpec


def test_a_panel_that_cannot_be_built_is_a_placeholder_and_a_notice(make_window, qtbot):
    def broken(_ctx):
        raise RuntimeError("no such widget")

    window = make_window(extra_panels=[PanelSpec(id="broken", title="Broken", factory=broken)])
    said = []
    window.notify = lambda level, text: said.append((level, text))
    assert "broken" not in window.panels  # in no workspace: built when it is asked for
    w = window.panel("broken")
    qtbot.waitUntil(lambda: bool(said), timeout=3000)
    assert said == [("error", "the Broken panel could not be created: no such widget")]
    assert w.objectName() == "panel_broken" and window.panels["broken"] is w


def test_the_about_box_the_error_box_and_the_recovery_offer_have_access_keys(make_window, qtbot):
    from attnviz.ui.access_keys import missing_access_keys

    window = make_window()
    about = window.show_about()
    assert missing_access_keys(about) == []
    about.close()
    try:
        raise ValueError("planted")
    except ValueError as exc:
        box = window.show_exception(type(exc), exc, exc.__traceback__)
    assert missing_access_keys(box) == []
    box.close()
