"""Stable geometry whatever the content: a notice (a warning about fully masked rows, an error) floats
at the bottom of the workspace instead of taking a line above it, so the mask workspace's presets and
painter stay where they were under the mouse (they once moved down 29 px when a warning came)."""

from __future__ import annotations

from PySide6.QtCore import QRect

from attnviz.ui.messages import Level


def _where(w, widget):
    return QRect(widget.mapTo(w, widget.rect().topLeft()), widget.size()).getRect()


def test_a_notice_moves_nothing_in_the_mask_workspace(make_window, qtbot):
    w = make_window("river-bank", all_panels=True)
    w.resize(1280, 800)
    w.show_workspace("mask")
    md = w.panel("mask_designer")
    qtbot.wait(300)
    md.flush()
    qtbot.wait(100)

    def geometry():
        return [_where(w, b) for b in md.preset_bar.buttons.values()] + [_where(w, md.canvas)]

    before = geometry()
    w.notify(Level.WARNING, "2 fully masked rows: 'by', 'the' attend to no key, their weights and outputs are 0 " * 3)
    qtbot.wait(100)
    assert w.notice.isVisible() and w.notice.label.text().startswith("2 fully masked")
    assert geometry() == before
    notice = QRect(w.notice.mapTo(w.area, w.notice.rect().topLeft()), w.notice.size())
    assert w.area.rect().contains(notice) and notice.bottom() > w.area.height() - 20  # at the bottom, inside
    assert w.notice.label.height() >= w.notice.label.heightForWidth(w.notice.label.width()) - 2  # all its text
    w.resize(1024, 700)
    qtbot.wait(100)
    notice = QRect(w.notice.mapTo(w.area, w.notice.rect().topLeft()), w.notice.size())
    assert w.area.rect().contains(notice), (notice.getRect(), w.area.rect().getRect())  # follows the area
    w.notice.dismiss()
    assert not w.notice.isVisible()
