"""Access keys in the export dialogs: every button and labelled field of the PNG export's two
questions, the save-changes question and the mask-as-code and interventions-as-code windows can be
reached with Alt and a letter of its own, and the PNG questions still answer what they did."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QInputDialog, QLabel, QMessageBox, QPushButton

from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.ui.access_keys import access_key, missing_access_keys, set_standard_keys
from attnviz.ui.context import AppContext
from attnviz.ui.file_actions import Prompts
from attnviz.ui.png_dialogs import resolution_dialog, width_dialog

CHOICES = ["1x · 400 x 300 px", "2x · 800 x 600 px", "width in pixels…"]


def _shown(qtbot, dialog):
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def test_access_key():
    assert access_key("&Save…") == "s" and access_key("Clos&e") == "e"
    assert access_key("Save") is None and access_key("R&&D") is None and access_key("R&&&D") == "d"


def test_the_checker_finds_a_button_without_an_access_key(qtbot):
    d = QInputDialog()
    _shown(qtbot, d)
    assert any("'OK'" in p for p in missing_access_keys(d))  # Qt's own texts carry none
    b = QPushButton("&Cancel again", d)
    b.show()
    d.setCancelButtonText("&Cancel")
    assert any("share the access key Alt+C" in p for p in missing_access_keys(d))


@pytest.mark.parametrize("make", [lambda: resolution_dialog(None, CHOICES), lambda: width_dialog(None, 800)],
                         ids=["resolution", "width"])
def test_the_png_questions_have_access_keys(qtbot, make):
    d = _shown(qtbot, make())
    assert missing_access_keys(d) == []
    fields = [lab for lab in d.findChildren(QLabel) if lab.buddy() is not None]
    assert len(fields) == 1 and access_key(fields[0].text()) in ("r", "w")  # Alt+R / Alt+W goes to the field
    ok = next(b for b in d.findChildren(QPushButton) if b.text() == "&OK")
    assert ok.isEnabled()


def test_the_png_questions_answer_as_before(qtbot):
    d = resolution_dialog(None, CHOICES)
    assert d.textValue() == CHOICES[1]  # 2x is offered first
    w = width_dialog(None, 800)
    assert (w.intValue(), w.intMinimum()) == (800, 16)

    def accept():
        for top in QApplication.topLevelWidgets():
            if isinstance(top, QInputDialog) and top.isVisible():
                top.accept()

    p = Prompts()
    QTimer.singleShot(50, accept)
    assert p.png_resolution(None, CHOICES) == 1
    QTimer.singleShot(50, accept)
    assert p.png_width(None, 1234) == 1234


def test_the_save_changes_question_has_access_keys(qtbot):
    box = QMessageBox(QMessageBox.Icon.Question, "Unsaved changes", "Save?",
                      QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
                      | QMessageBox.StandardButton.Cancel)
    _shown(qtbot, box)
    assert missing_access_keys(box)  # Qt's own texts
    set_standard_keys(box)
    assert missing_access_keys(box) == []
    assert [access_key(box.button(b).text()) for b in (QMessageBox.StandardButton.Save,
                                                       QMessageBox.StandardButton.Discard)] == ["s", "d"]


def test_the_code_windows_have_access_keys(qtbot):
    from attnviz.ui.mask_designer.export_dialog import MaskCodeDialog
    from attnviz.ui.model_view.intervene_view import CodeDialog

    ctx = AppContext(Session(build_demo("river-bank")))
    try:
        mask = _shown(qtbot, MaskCodeDialog(ctx, lambda: (None, None, 1)))
        assert missing_access_keys(mask) == []
        code = _shown(qtbot, CodeDialog({"pytorch": "print(1)\n", "lens": "print(2)\n"}))
        assert missing_access_keys(code) == []
    finally:
        ctx.compute.shutdown(timeout=5)
