"""Journeys through the real application in a real X window (Xvfb), as a person makes them.

1. Build a session and get it back: File > New, type a prompt into the inputs panel, add a camera image
   and a block of FAST action tokens from files, open the mask workspace, click the VLA preset, paint cells
   with a mouse drag on the mask canvas and watch the heatmap change, click a head in the all-heads grid
   and a query row in the heatmap, File > Save As, File > Quit; start the application again on the file
   and find the same mask, head, query token and heatmap pixels.
2. Lose the work and get it back: edit the demo, let the one-second autosave write, kill the process
   (SIGKILL), start again, find the recovery offer, click Recover and find the edit.

Clicks, key presses and drags are QTest events on the widgets a person would use; file dialogs are
answered through the window's ``Prompts``. Screenshots of each step are kept in the test artifacts folder (conftest.ARTIFACTS).
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from PIL import Image

pytestmark = [pytest.mark.xvfb, pytest.mark.slow]

# shared by every script: pixels of a widget, waiting for the newest computation, real clicks and drags
HELPERS = """
import os, time
import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtTest import QTest

ART = os.environ["ARTIFACTS"]
LEFT, NOMOD = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier

def settle(timeout=90.0, after_ms=500):
    # the newest request is answered, nothing is computing, and it stays so for after_ms (redraws)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        app.processEvents()
        r = ctx.response
        if r is not None and r.request_id == ctx.compute.latest_id and not ctx.compute.busy:
            wait(after_ms)
            if ctx.response.request_id == ctx.compute.latest_id and not ctx.compute.busy:
                return ctx.response
        time.sleep(0.005)
    raise TimeoutError("the computation did not settle")

def pixels(widget):
    img = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    a = np.frombuffer(img.constBits(), dtype=np.uint8, count=img.sizeInBytes())
    return a.reshape(img.height(), img.bytesPerLine() // 4, 4)[:, : img.width(), :3].copy()

def click(widget, pos=None):
    if pos is None:
        QTest.mouseClick(widget, LEFT)
    else:
        QTest.mouseMove(widget, pos)
        wait(30)
        QTest.mouseClick(widget, LEFT, NOMOD, pos)
    wait(50)

def drag(widget, points):
    # press, move through the points with the button held (pyqtgraph drops moves < 10 ms apart), release
    QTest.mouseMove(widget, points[0])
    wait(30)
    QTest.mousePress(widget, LEFT, NOMOD, points[0])
    for p in points[1:]:
        wait(30)
        QTest.mouseMove(widget, p)
    wait(30)
    QTest.mouseRelease(widget, LEFT, NOMOD, points[-1])

def shoot(name):
    path = os.path.join(ART, name)
    app.primaryScreen().grabWindow(0).save(path)  # the whole screen as the X server holds it
    return path

def mask_facts(md):
    m = ctx.session.state.mask
    return {"design": repr(m), "painted": m.overrides.to_array().tolist(),
            "effective": md.canvas.effective_mask().astype(int).tolist()}
"""

BUILD_AND_SAVE = HELPERS + """
settle(120)
window.new_action.trigger()  # File > New: one empty text source, selected in the inputs panel
settle(30, 300)
inputs = window.panel("inputs")
edit = inputs.text_editor.edit
click(edit.viewport())
QTest.keyClicks(edit, "pick up the red block")
click(inputs.tree.viewport(), inputs.tree.visualItemRect(inputs.tree.topLevelItem(0)).center())  # commits
end = time.monotonic() + 10
while ctx.session.state.sources[0].text != "pick up the red block" and time.monotonic() < end:
    wait(20)
text_response = settle()
ok_image = window.files.add_file(CAMERA)
ok_block = window.files.add_file(ACTIONS)
built = settle()

window.workspace_actions["mask"].trigger()  # View > Mask workspace: the cells large, the heatmap beside
designer = window.panel("mask_designer")
heat = window.panel("heatmap")
settle()
click(designer.preset_bar.buttons["vla"])
vla = settle()
designer.flush()
vla_weights = np.array(vla.weights)
before = pixels(heat.heatmap.frame)
shoot("e2e_journey_1_vla_preset.png")

frame = designer.canvas.frame
actions_segment = next(seg for seg in built.key_segments if seg.name == "fast_actions")
ROW, COLS = 3, list(range(actions_segment.start, actions_segment.stop))  # prompt token "red" x FAST actions
drag(frame.viewport(), [frame.cell_to_widget(ROW, c).toPoint() for c in COLS])
painted = settle()
designer.flush()
after = pixels(heat.heatmap.frame)
shoot("e2e_journey_2_painted.png")

# select head 2 in the all-heads grid (2 columns: row 1, column 0) and query "red" in the heatmap
window.workspace_actions["attention"].trigger()
settle(30, 300)
grid = heat.grid
click(grid.plot.viewport(), grid.tile_center(1, 0).toPoint())
settle(30, 300)
click(heat.heatmap.frame.viewport(), heat.heatmap.frame.cell_to_widget(ROW, 1).toPoint())
final = settle()
final_pixels = pixels(heat.heatmap.frame)
heat.heatmap.frame.grab().save(os.path.join(ART, "e2e_journey_heatmap_before_save.png"))

window.files.prompts.save_file = lambda *a: SAVE_TO  # the Save As dialog's answer
window.save_as_action.trigger()
np.save(SAVE_TO + ".pixels.npy", final_pixels)
np.save(SAVE_TO + ".weights.npy", np.array(final.weights))
facts = mask_facts(designer)
report({"sources": [[s.name, s.start, s.stop] for s in built.query_segments], "ok_image": ok_image,
        "ok_block": ok_block, "text_tokens": text_response.Tq, "Tq": final.Tq,
        "vla_row": vla_weights[0, ROW].tolist(), "painted_row": np.array(painted.weights)[0, ROW].tolist(),
        "changed": float(np.mean(np.any(before != after, axis=-1))) if before.shape == after.shape else 1.0,
        "undo_after_paint": ctx.undo_stack.undoText(), "head": ctx.session.state.view.head,
        "query": ctx.session.state.view.query, "dirty": ctx.session.dirty, "path": window.files.path,
        "title": window.windowTitle(), **facts})
window.quit_action.trigger()  # File > Quit
if window.isVisible():
    quit(4)  # the window refused to close
"""

REOPEN = HELPERS + """
reopened = settle(120)
designer = window.panel("mask_designer")
designer.flush()
heat = window.panel("heatmap")
wait(500)
shoot("e2e_journey_3_reopened.png")
heat.heatmap.frame.grab().save(os.path.join(ART, "e2e_journey_heatmap_reopened.png"))
np.save(SAVED + ".pixels2.npy", pixels(heat.heatmap.frame))
np.save(SAVED + ".weights2.npy", np.array(reopened.weights))
report({"path": window.files.path, "dirty": ctx.session.dirty, "head": ctx.session.state.view.head,
        "query": ctx.session.state.view.query, "Tq": reopened.Tq, "heatmap_head": heat.head_combo.currentText(),
        "grid_selected": list(heat.grid.selected) if heat.grid.selected else None,
        "heatmap_row": heat.heatmap.frame.selected_row, **mask_facts(designer)})
quit(0)
"""


def _write_inputs(folder):
    """A camera picture (a red block on a table) and six FAST action tokens of width d_model = 64."""
    rgb = np.full((64, 96, 3), 160, np.uint8)  # (H, W, 3)
    rgb[14:38, 30:58] = (205, 35, 35)
    rgb[44:, :] = (95, 72, 50)
    camera = folder / "camera.png"
    Image.fromarray(rgb).save(camera)
    actions = folder / "fast_actions.npy"
    np.save(actions, np.random.default_rng(7).normal(size=(6, 64)))  # (6, d_model)
    return camera, actions


def test_build_a_vla_session_save_it_and_find_it_again(app_runs, tmp_path):
    camera, actions = _write_inputs(tmp_path)
    saved = tmp_path / "robot.attnviz"
    script = (BUILD_AND_SAVE.replace("CAMERA", repr(str(camera))).replace("ACTIONS", repr(str(actions)))
              .replace("SAVE_TO", repr(str(saved))))
    proc, rep = app_runs.run("build", script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert rep is not None, proc.stderr[-3000:]
    # the prompt is 5 BPE tokens, the 64x96 camera 4x6 patches + [CLS], then 6 action tokens
    assert rep["ok_image"] and rep["ok_block"] and rep["text_tokens"] == 5
    assert rep["sources"] == [["text", 0, 5], ["camera", 5, 30], ["fast_actions", 30, 36]], rep["sources"]
    assert rep["Tq"] == 36
    # VLA: the prompt may not look at the FAST action tokens ...
    assert rep["vla_row"][30:] == [0.0] * 6
    # ... until the drag painted those cells allowed: one stroke, one undo step, the heatmap moved
    assert rep["painted"] == [[3, c, 1] for c in range(30, 36)], rep["painted"]
    assert rep["undo_after_paint"] == "Paint allow"
    assert all(w > 0 for w in rep["painted_row"][30:]) and abs(sum(rep["painted_row"]) - 1) < 1e-9
    assert rep["changed"] > 0.002
    assert rep["head"] == 2 and rep["query"] == 3
    assert not rep["dirty"] and rep["path"] == str(saved) and saved.exists()
    assert rep["title"].startswith("robot.attnviz")

    proc2, rep2 = app_runs.run("reopen", REOPEN.replace("SAVED", repr(str(saved))), args=[saved])
    assert proc2.returncode == 0, proc2.stderr[-3000:]
    assert rep2 is not None, proc2.stderr[-3000:]
    assert rep2["path"] == str(saved) and not rep2["dirty"] and rep2["Tq"] == 36
    for key in ("design", "painted", "effective"):
        assert rep2[key] == rep[key], key
    assert (rep2["head"], rep2["query"]) == (2, 3)
    assert rep2["heatmap_head"] == "head 2" and rep2["grid_selected"] == [1, 0] and rep2["heatmap_row"] == 3
    w1, w2 = np.load(f"{saved}.weights.npy"), np.load(f"{saved}.weights2.npy")
    np.testing.assert_allclose(w2, w1, rtol=0, atol=1e-12)
    p1, p2 = np.load(f"{saved}.pixels.npy"), np.load(f"{saved}.pixels2.npy")
    assert p1.shape == p2.shape, (p1.shape, p2.shape)
    diff = np.abs(p1.astype(int) - p2.astype(int))
    assert diff.mean() < 1.0 and np.mean(diff.max(axis=-1) > 24) < 0.005


EDIT_AND_WAIT = HELPERS + """
settle(120)
window.show_workspace("mask")
designer = window.panel("mask_designer")
settle()
click(designer.preset_bar.buttons["causal"])
edited = settle()
autosave = os.path.join(DATA_DIR, "autosave.attnviz")
end = time.monotonic() + 20
while not os.path.exists(autosave) and time.monotonic() < end:
    wait(50)
shoot("e2e_recovery_1_before_kill.png")
report({"design": repr(ctx.session.state.mask), "dirty": ctx.session.dirty, "autosaved": os.path.exists(autosave),
        "upper": np.array(edited.weights)[0][0, 1:].tolist()})
while True:  # keep working until the process is killed
    wait(100)
"""

RECOVER = HELPERS + """
end = time.monotonic() + 20
while window.files.recovery_box is None and time.monotonic() < end:
    wait(50)
box = window.files.recovery_box
wait(300)
offered = {"shown": box is not None and box.isVisible(), "text": box.text() if box is not None else "",
           "buttons": [b.text().replace("&", "") for b in box.buttons()] if box is not None else []}
shoot("e2e_recovery_2_offer.png")
design_before = repr(ctx.session.state.mask)
upper_before = np.array(settle().weights)[0][0, 1:].tolist()
if box is not None:
    click(window.files.recover_button)
recovered = settle()
shoot("e2e_recovery_3_recovered.png")
report({**offered, "design_before": design_before, "upper_before": upper_before, "design": repr(ctx.session.state.mask),
        "dirty": ctx.session.dirty, "box_gone": window.files.recovery_box is None,
        "upper": np.array(recovered.weights)[0][0, 1:].tolist()})
quit(0)
"""


def test_killed_app_offers_its_autosave_on_the_next_start(app_runs):
    proc, report = app_runs.start("edit", EDIT_AND_WAIT.replace("DATA_DIR", repr(str(app_runs.data_dir))),
                                  args=["--autosave-interval", "1"])
    rep = app_runs.wait_report(proc, report, timeout=90)
    assert rep is not None and proc.poll() is None, proc.communicate(timeout=30)[1][-3000:] if proc.poll() else ""
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert rep["dirty"] and rep["autosaved"]
    assert "kind='causal'" in rep["design"] and rep["upper"] == [0.0, 0.0, 0.0]  # "by" sees no later token
    assert (app_runs.data_dir / "running.json").exists()  # no clean exit was recorded

    proc2, rep2 = app_runs.run("recover", RECOVER)
    assert proc2.returncode == 0, proc2.stderr[-3000:]
    assert rep2 is not None, proc2.stderr[-3000:]
    assert rep2["shown"] and "did not close properly" in rep2["text"]
    assert set(rep2["buttons"]) >= {"Recover", "Discard"}
    # the demo the application opens with, until Recover is clicked
    assert "kind='causal'" not in rep2["design_before"] and min(rep2["upper_before"]) > 0
    assert rep2["box_gone"] and rep2["design"] == rep["design"] and rep2["dirty"]
    assert rep2["upper"] == [0.0, 0.0, 0.0]
    assert not os.path.exists(app_runs.data_dir / "running.json")  # this run quit cleanly


LONG_SEQUENCE = HELPERS + """
from attnviz.model.commands import AddSource, SetMask
from attnviz.model.mask.presets import preset
from attnviz.model.state import CustomSource
settle(120)
heat = window.panel("heatmap")
ctx.execute(AddSource(CustomSource("long block", count=9000, generator="noise", seed=4)))
ctx.execute(SetMask(preset("sliding_window", (), w=256, causal_window=True)))
resp = settle(240, 1500)
end = time.monotonic() + 60
while heat.mode != "overview" and time.monotonic() < end:
    wait(50)
wait(3000)  # the overview job
picture = pixels(heat.heatmap.frame)
mode = heat.mode
shoot("e2e_journey_long_sequence.png")
row, col = 8500, 8400
readout = heat.heatmap.readout_text(row, col)
window.show_workspace("mask")
designer = window.panel("mask_designer")
settle(30, 300)
designer.flush()
ctx.set_view(matrix="mask")
wait(300)
report({"ok": resp.ok, "error": resp.error, "T": resp.Tq, "mask_is_none": resp.mask is None,
        "tiled": type(resp.block_mask).__name__, "sparsity": resp.sparsity, "mode": mode,
        "colours": int(len(np.unique(picture.reshape(-1, 3), axis=0))), "readout": readout,
        "designer": designer.message_text, "mask_note": heat.note.text(), "path": resp.path,
        "status_T": window.status.tokens_label.text()})
quit(0)
"""


def test_a_long_sequence_is_shown_as_an_overview_with_its_mask_kept_per_tile(app_runs):
    proc, rep = app_runs.run("long", LONG_SEQUENCE, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert rep["ok"], rep["error"]
    assert rep["T"] == 9004 and rep["mask_is_none"] and rep["tiled"] == "TiledMask" and rep["path"] == "engine:flash"
    assert rep["sparsity"] > 80  # a 256-token causal window over 9,004 tokens skips most tiles
    assert rep["mode"] == "overview" and rep["colours"] >= 8  # the overview is drawn, not blank
    assert "q 8500" in rep["readout"] and "k 8400" in rep["readout"] and "weight" in rep["readout"]
    assert "kept per flash tile" in rep["designer"]
    assert "held per flash tile" in rep["mask_note"]
    assert rep["status_T"] == "T = 9,004"
