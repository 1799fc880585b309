"""The mask workspace's first visit imports the panel's module in one turn: what only a click needs (the code
dialog, the VLA roles dialog, the flash timing) is imported when it is first used."""

from __future__ import annotations

import json
import os
import subprocess
import sys

LATER = ("attnviz.ui.mask_designer.export_dialog", "attnviz.ui.mask_designer.role_dialog",
         "attnviz.model.mask.flash_timing")


def test_importing_the_panel_leaves_the_dialogs_and_the_timing_for_later():
    code = ("import json, sys; import attnviz.ui.panels.mask_designer_panel as p; "
            f"print(json.dumps([m for m in {list(LATER)!r} if m in sys.modules]), hasattr(p, 'MaskDesignerPanel'))")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded, has_panel = out.stdout.strip().splitlines()[-1].rsplit(" ", 1)
    assert has_panel == "True" and json.loads(loaded) == []


def test_the_code_dialog_and_the_roles_question_still_open(qtbot, monkeypatch):
    from attnviz.model.demos import build_demo
    from attnviz.model.session import Session
    from attnviz.ui.context import AppContext
    from attnviz.ui.mask_designer import role_dialog
    from attnviz.ui.panels.mask_designer_panel import MaskDesignerPanel

    ctx = AppContext(Session(build_demo("river-bank")))
    try:
        panel = MaskDesignerPanel(ctx)
        qtbot.addWidget(panel)
        dialog = panel.open_code_dialog()
        assert type(dialog).__name__ == "MaskCodeDialog" and dialog.isVisible()
        assert panel.open_code_dialog() is dialog  # made once
        dialog.close()
        asked = []
        monkeypatch.setattr(role_dialog, "ask_in_dialog", lambda parent, rows: asked.append(rows) or None)
        assert panel.ask_vla_roles(panel, ["row"]) is None and asked == [["row"]]  # the roles dialog's question
    finally:
        ctx.compute.shutdown(timeout=5)
