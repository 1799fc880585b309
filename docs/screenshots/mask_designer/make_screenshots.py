"""Render the mask designer screenshots of this folder (offscreen):

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/screenshots/mask_designer/make_screenshots.py

vla_preset.png: the vla-mask demo under the seed-000 preset with 8x8 flash tiles; painted.png: the
same with painted allow / deny cells, a sub-block split and a fully masked query row; code.png: the
FlexAttention mask_mod of the painted mask; rule_chooser.png: the popup a block cell opens.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

from attnviz.model.demos import build_demo
from attnviz.model.mask.commands import PaintCells, PaintLines, PaintRect, SplitBlock
from attnviz.model.session import Session
from attnviz.ui.context import AppContext
from attnviz.ui.panels.mask_designer_panel import MaskDesignerPanel

OUT = Path(__file__).resolve().parent


def settle(app, ctx, panel):
    ctx.compute.wait_idle(60)
    for _ in range(30):
        app.processEvents()
    panel.flush()
    app.processEvents()


def main() -> int:
    app = QApplication.instance() or QApplication(sys.argv)
    ctx = AppContext(Session(build_demo("vla-mask")))
    ctx.recompute(now=True)
    ctx.compute.wait_idle(60)
    app.processEvents()
    panel = MaskDesignerPanel(ctx)
    panel.resize(1320, 820)
    panel.show()
    settle(app, ctx, panel)
    panel.preset_bar.buttons["none"].click()
    panel.preset_bar.buttons["vla"].click()
    panel.tiles.block_m.setValue(8)
    panel.tiles.block_n.setValue(8)
    settle(app, ctx, panel)
    panel.grab().save(str(OUT / "vla_preset.png"))

    t = panel.target
    panel.execute(t.lift(SplitBlock("image", 5)))
    panel.execute(t.lift(PaintRect(0, 5, 36, 40, "allow")))  # image.1 peeks at the first expert tokens
    panel.execute(t.lift(PaintCells([(30, 29), (31, 29), (32, 29), (33, 30)], "deny")))
    panel.execute(t.lift(PaintLines("row", (22,), ctx.response.Tk, "deny")))  # one prompt token sees nothing
    settle(app, ctx, panel)
    panel.grab().save(str(OUT / "painted.png"))

    dialog = panel.open_code_dialog()
    dialog.set_format("flex")
    dialog.resize(820, 600)
    settle(app, ctx, panel)
    dialog.grab().save(str(OUT / "code.png"))
    dialog.close()

    snap = panel.snapshot
    names = [b.name for b in snap.q_blocks]
    panel._on_cell_clicked(names.index("fast actions"), names.index("fast actions"))
    app.processEvents()
    panel.chooser.grab().save(str(OUT / "rule_chooser.png"))
    panel.chooser.close()
    ctx.compute.shutdown()
    print("wrote", ", ".join(p.name for p in sorted(OUT.glob("*.png"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
