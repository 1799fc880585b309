"""Make the documentation's screenshots (``docs/images/*.png``) from the real application.

``make screenshots`` runs ``QT_QPA_PLATFORM=offscreen .venv/bin/python tools/make_screenshots.py``:
this file starts ``attnviz`` itself (``attnviz.ui.app.main``) with the application's test-script hook
pointing back at this file, so every picture is the real window, its docks and dialogs, driven the
way a person would drive them (demos opened from File > New from demo, presets clicked, cells
painted, rows selected). Settings and autosave go to a temporary folder, so the person's own are
never touched; compiled kernels stay in the usual user cache.

``python tools/make_screenshots.py [--out DIR] [--only NAME ...]`` writes to ``docs/images`` by
default; ``--only`` makes just the named pictures (file names without ``.png``).
"""

from __future__ import annotations

import os
import sys

SHOTS = (  # (file name without .png, what it shows) — the list the docs refer to
    ("window", "the main window on the vla-mask demo"),
    ("tokens-text", "a text source: BPE pieces with their ids, the selected token's span lit in the text"),
    ("tokens-image", "an image source: 16x16 patches over the picture, with the class token"),
    ("tokens-block", "a custom block of tokens (FAST actions) and its generator"),
    ("inspector-river-bank", "the Q/K/V inspector on bank -> river, seed 002's numbers"),
    ("normalisation", "Diagnostics > Normalisation on the river bank"),
    ("jacobian", "Diagnostics > Softmax Jacobian: the d_k study"),
    ("heads", "the heatmap with every head as a small map"),
    ("weights", "the inspector's W^Q, W^K, W^V, W^O tab"),
    ("positional-sinusoidal", "Diagnostics > Positional encodings, sinusoidal page"),
    ("positional-rope", "Diagnostics > Positional encodings, RoPE page"),
    ("alibi", "the heatmap of a text under ALiBi"),
    ("mask-designer", "the mask designer after the VLA preset and a painted stroke"),
    ("mask-code", "Mask as code: the FlexAttention mask_mod"),
    ("flash-tiles", "the mask designer's flash tiles on the long-context demo"),
    ("flash-check", "Diagnostics > Flash vs reference"),
    ("alignment", "Diagnostics > Alignment on the translation demo"),
    ("pretrained", "the Pretrained model panel on all-MiniLM-L6-v2"),
)


def launch(argv: list[str]) -> int:
    """Start the application on this file as its test script; returns its exit code."""
    import argparse
    import tempfile
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=repo / "docs" / "images", help="folder for the PNG files")
    ap.add_argument("--only", nargs="*", default=None, help="make only these pictures (names without .png)")
    args = ap.parse_args(argv)
    known = {name for name, _ in SHOTS}
    unknown = sorted(set(args.only or ()) - known)
    if unknown:
        ap.error(f"no such screenshot: {', '.join(unknown)}; choose from {', '.join(sorted(known))}")
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    with tempfile.TemporaryDirectory(prefix="attnviz-shots-") as home:
        os.environ.update(ATTNVIZ_TEST_SCRIPT=os.path.abspath(__file__), ATTNVIZ_SHOTS_OUT=str(args.out.resolve()),
                          ATTNVIZ_SHOTS_ONLY=",".join(args.only or ()),
                          XDG_CONFIG_HOME=os.path.join(home, "config"), XDG_DATA_HOME=os.path.join(home, "data"))
        from attnviz.ui.app import main

        return main(["--theme", "light", "--autosave-interval", "3600"])


# ------------------------------------------------------------------------------------------------
# inside the application (run by the test-script hook: app, window, ctx, wait, quit are given)


def shoot_all(app, window, ctx, wait) -> list[str]:  # noqa: C901 - one straight walk through the app
    import time
    from pathlib import Path

    import numpy as np
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QSplitter

    from attnviz.model.commands import SetPositional
    from attnviz.model.positional import PositionalConfig
    from attnviz.ui.diagnostics.alignment import AlignmentTab
    from attnviz.ui.diagnostics.flash_check import FlashCheckTab
    from attnviz.ui.diagnostics.jacobian import JacobianTab
    from attnviz.ui.diagnostics.normalisation import NormalisationTab
    from attnviz.ui.diagnostics.positional import PositionalTab

    out = Path(os.environ["ATTNVIZ_SHOTS_OUT"])
    only = {n for n in os.environ.get("ATTNVIZ_SHOTS_ONLY", "").split(",") if n}
    written: list[str] = []
    window.files.prompts.save_changes = lambda *_a: "discard"

    def wanted(name: str) -> bool:
        return not only or name in only

    def settle(timeout: float = 180.0, after_ms: int = 500):
        """The newest request is answered and the panels' own workers are idle."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            app.processEvents()
            r = ctx.response
            if r is not None and r.request_id == ctx.compute.latest_id and not ctx.compute.busy:
                break
            time.sleep(0.01)
        heat = window.panel("heatmap")
        for job in (heat.job, heat.grid_job):
            job.wait_idle(60)
        wait(after_ms)
        return ctx.response

    def wait_until(done, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while not done() and time.monotonic() < end:
            wait(50)
        wait(300)

    def save(widget, name: str) -> None:
        path = out / f"{name}.png"
        widget.grab().save(str(path))
        written.append(str(path))
        print(f"wrote {path}", flush=True)

    def open_demo(name: str, **view) -> None:
        window.files.new_session(name)  # File > New from demo
        settle()
        if view:
            ctx.set_view(**view)
            settle(after_ms=300)

    def float_dock(panel_id: str, w: int, h: int):
        """Undock a dock into its own window of w x h (as a person pulls it out to work on it)."""
        dock = window.docks[panel_id]
        dock.setFloating(True)
        dock.resize(w, h)
        dock.show()
        dock.raise_()
        panel = window.panel(panel_id)
        wait(400)
        return dock, panel

    def redock(dock) -> None:
        dock.setFloating(False)
        wait(200)

    def reselect(key: int) -> None:
        """Pick another key and then ``key`` again (as a person clicks through the row), so the
        breakdown's tables are laid out in the panel as it is now shown."""
        ctx.set_view(key=(key + 1) % ctx.response.Tk)
        wait(300)
        ctx.set_view(key=key)
        wait(500)

    def heatmap_alone(grid_width: int):
        """Only the central heatmap panel, its all-heads grid grid_width pixels wide (View menu:
        every dock hidden); reset_layout() brings the docks back."""
        for dock in window.docks.values():
            dock.hide()
        heat = window.panel("heatmap")
        wait(300)
        total = sum(heat.splitter.sizes())
        heat.splitter.setSizes([total - grid_width, grid_width])
        settle(after_ms=800)
        return heat

    def widen_first(panel, share: float) -> None:
        """Give the first pane of the panel's main splitter ``share`` of its width."""
        split = panel.findChild(QSplitter)
        total = sum(split.sizes())
        split.setSizes([int(total * share), total - int(total * share)])
        wait(300)

    window.resize(1600, 1000)
    wait(200)
    window.reset_layout()
    wait(300)
    settle()

    # -- the window -------------------------------------------------------------------------------
    if wanted("window"):
        open_demo("vla-mask", query=17, head=1)
        window.panel("inputs").select_source("prompt")
        window.docks["mask_designer"].raise_()
        heat = window.panel("heatmap")
        total = sum(heat.splitter.sizes())
        heat.splitter.setSizes([total - 230, 230])
        settle(after_ms=800)
        save(window, "window")

    # -- tokens -----------------------------------------------------------------------------------
    if wanted("tokens-text") or wanted("tokens-block"):
        open_demo("vla-mask", query=17)
        dock, inputs = float_dock("inputs", 460, 640)
        if wanted("tokens-text"):
            inputs.select_source("prompt")
            wait(300)
            save(dock, "tokens-text")
        if wanted("tokens-block"):
            inputs.select_source("fast actions")
            wait(300)
            save(dock, "tokens-block")
        redock(dock)
    if wanted("tokens-image"):
        open_demo("vit-image", query=0)
        dock, inputs = float_dock("inputs", 460, 700)
        inputs.select_source(ctx.session.state.sources[0].name)
        wait(400)
        save(dock, "tokens-image")
        redock(dock)

    # -- Q, K, V ------------------------------------------------------------------------------------
    if wanted("inspector-river-bank") or wanted("weights"):
        open_demo("river-bank", query=3, key=2, head=0)
        dock, inspector = float_dock("inspector", 1400, 800)
        if wanted("inspector-river-bank"):
            widen_first(inspector, 0.62)
            inspector.matrices.setCurrentIndex(0)
            reselect(key=2)
            save(dock, "inspector-river-bank")
        redock(dock)

    # -- scaling ------------------------------------------------------------------------------------
    if wanted("normalisation") or wanted("jacobian"):
        open_demo("river-bank", query=3)
        dock, diag = float_dock("diagnostics", 1300, 840)
        if wanted("normalisation"):
            diag.show_tab(NormalisationTab)
            ctx.set_view(normalisation="unscaled")
            settle(after_ms=600)
            save(dock, "normalisation")
            ctx.set_view(normalisation="scaled")
            settle(after_ms=200)
        if wanted("jacobian"):
            tab = diag.show_tab(JacobianTab)
            wait(300)
            tab.run_study()
            wait_until(lambda: not tab.job.busy)
            save(dock, "jacobian")
        redock(dock)

    # -- heads --------------------------------------------------------------------------------------
    if wanted("heads"):
        open_demo("vla-mask", query=17, head=1)
        save(heatmap_alone(520), "heads")
        window.reset_layout()
    if wanted("weights"):
        open_demo("vla-mask", query=17, head=1)
        dock, inspector = float_dock("inspector", 1500, 760)
        widen_first(inspector, 0.55)
        inspector.matrices.setCurrentIndex(1)
        reselect(key=19)
        save(dock, "weights")
        redock(dock)

    # -- positions ----------------------------------------------------------------------------------
    if wanted("positional-sinusoidal") or wanted("positional-rope"):
        open_demo("vla-mask")
        dock, diag = float_dock("diagnostics", 1300, 960)
        tab = diag.show_tab(PositionalTab)
        tab.positions.setValue(96)
        for page, name in ((0, "positional-sinusoidal"), (1, "positional-rope")):
            if wanted(name):
                tab.pages.setCurrentIndex(page)
                wait(300)
                wait_until(lambda: not tab.job.busy)
                save(dock, name)
        redock(dock)
    if wanted("alibi"):
        open_demo("long-context")
        text = ctx.session.state.sources[0]
        from attnviz.model.commands import SetText

        ctx.execute(SetText(text.name, " ".join(text.text.split()[:48])))  # a short passage
        ctx.execute(SetPositional(PositionalConfig("alibi")))
        settle()
        ctx.set_view(head=0, query=30)
        save(heatmap_alone(420), "alibi")
        window.reset_layout()

    # -- masks ----------------------------------------------------------------------------------------
    if wanted("mask-designer") or wanted("mask-code"):
        open_demo("vla-mask")
        dock, designer = float_dock("mask_designer", 1400, 800)
        QTest.mouseClick(designer.preset_bar.buttons["vla"], Qt.MouseButton.LeftButton)
        settle()
        designer.flush()
        resp = ctx.response
        prompt = next(s for s in resp.query_segments if s.name == "prompt")
        actions = next(s for s in resp.key_segments if s.name == "fast actions")
        frame = designer.canvas.frame
        vp = frame.viewport()
        row = prompt.start + 2
        pts = [frame.cell_to_widget(row, c).toPoint() for c in range(actions.start, actions.stop)]
        QTest.mouseMove(vp, pts[0])
        QTest.mousePress(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, pts[0])
        for p in pts[1:]:
            wait(30)
            QTest.mouseMove(vp, p)
        wait(30)
        QTest.mouseRelease(vp, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, pts[-1])
        settle()
        designer.flush()
        wait(300)
        if wanted("mask-designer"):
            save(dock, "mask-designer")
        if wanted("mask-code"):
            dialog = designer.open_code_dialog()
            dialog.resize(900, 620)
            wait(500)
            save(dialog, "mask-code")
            dialog.close()
        redock(dock)

    # -- flash --------------------------------------------------------------------------------------
    if wanted("flash-tiles"):
        open_demo("long-context")
        dock, designer = float_dock("mask_designer", 1400, 800)
        designer.flush()
        wait(500)
        save(dock, "flash-tiles")
        redock(dock)
    if wanted("flash-check"):
        open_demo("vla-mask")
        dock, diag = float_dock("diagnostics", 1560, 560)
        tab = diag.show_tab(FlashCheckTab)
        wait(300)
        tab.run()
        wait_until(lambda: not tab.job.busy)
        save(dock, "flash-check")
        redock(dock)

    # -- cross-attention --------------------------------------------------------------------------------
    if wanted("alignment"):
        open_demo("translation", query=2, head=0)
        dock, diag = float_dock("diagnostics", 760, 300)
        diag.show_tab(AlignmentTab)
        wait(600)
        save(dock, "alignment")
        redock(dock)

    # -- a pretrained checkpoint ------------------------------------------------------------------------
    if wanted("pretrained"):
        from attnviz.checkpoints import ready_models

        models = dict(ready_models())
        if "all-MiniLM-L6-v2" not in models:
            print("skipped pretrained: all-MiniLM-L6-v2 is not installed (make setup installs it)", flush=True)
        else:
            open_demo("river-bank")
            dock, panel = float_dock("pretrained", 1300, 820)
            got = []
            panel.attention_ready.connect(lambda *a: got.append(a))
            panel.auto_load = False
            panel.load_model(models["all-MiniLM-L6-v2"])
            wait_until(lambda: bool(got), timeout=180)
            prev = panel.outcome.summaries.to_previous  # (layers, heads)
            layer, head = (int(i) for i in np.unravel_index(np.argmax(prev), prev.shape))
            panel.summary.set_metric("previous")
            panel.select_head(layer, head)
            wait(600)
            save(dock, "pretrained")
            redock(dock)
    return written


if __name__ == "__attnviz_test_script__":
    shoot_all(app, window, ctx, wait)  # noqa: F821 - names given by the test-script hook
    quit(0)  # noqa: F821
elif __name__ == "__main__":
    raise SystemExit(launch(sys.argv[1:]))
