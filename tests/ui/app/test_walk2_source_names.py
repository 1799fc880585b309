"""The sources list names every source whole: in a 310 px sidebar with the cross-attention role column
"French (decoder)" was cut to "French (deco…"; a name wider than its column now wraps onto a second line
of a taller row, one word too long for it keeps its start and its end, and the row's tooltip holds the
whole name."""

from __future__ import annotations

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QStyleOptionViewItem

from attnviz.model.commands import RenameSource
from attnviz.ui.panels.inputs_panel import InputsPanel

LONG = "camera_front_left_wrist_2024-06-01.png"  # one word: it cannot wrap


def test_every_source_name_shows_whole_or_keeps_both_ends_with_a_tooltip(qtbot, make_ctx, respond):
    ctx = make_ctx("translation")  # cross-attention: the role column takes room from the names
    assert ctx.execute(RenameSource("English (encoder)", LONG))
    p = InputsPanel(ctx)
    qtbot.addWidget(p)
    p.resize(290, 600)  # the sidebar of a 1024 x 700 window is 310 px with its frame and margins
    p.show()
    respond(ctx)
    qtbot.wait(50)
    tree = p.tree
    assert not tree.isColumnHidden(3)  # the role column is there
    fm = QFontMetrics(tree.font())
    delegate = tree.itemDelegateForColumn(0)
    rows = {}
    for i in range(tree.topLevelItemCount()):
        item = tree.topLevelItem(i)
        name = item.data(0, Qt.ItemDataRole.UserRole)
        assert item.text(0) == name
        assert item.toolTip(0).splitlines()[0] == name  # the whole name on hover
        index = tree.indexFromItem(item, 0)
        opt = QStyleOptionViewItem()
        opt.initFrom(tree)
        room = delegate.name_room(opt, index)
        rows[name] = (tree.visualItemRect(item).height(), room)
    height, room = rows["French (decoder)"]
    assert fm.horizontalAdvance("French (decoder)") > room  # too wide for one line here ...
    wrapped = fm.boundingRect(QRect(0, 0, room, 10_000), int(Qt.TextFlag.TextWordWrap), "French (decoder)")
    assert wrapped.width() <= room and wrapped.height() <= height - 4  # ... and whole on two
    assert tree.textElideMode() == Qt.TextElideMode.ElideMiddle
    _height, room = rows[LONG]
    shown = fm.elidedText(LONG, tree.textElideMode(), room)
    assert shown != LONG and shown[:4] == LONG[:4] and shown[-4:] == ".png"  # its start and its end
    p.resize(700, 600)  # room enough: one line again
    qtbot.wait(50)
    item = tree.topLevelItem(0)
    assert tree.visualItemRect(item).height() < height
