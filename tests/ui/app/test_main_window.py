"""The main window with every panel: menus and shortcuts, open/save round trips through
real files, undo/redo, theme switch, drag and drop, messages for bad files, export, autosave and
the recovery offer, unexpected errors, and a GUI that keeps turning during a long computation."""

from __future__ import annotations

import csv
import threading
import time

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPointF, QRect, Qt, QTimer, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImage, QPalette
from PySide6.QtWidgets import QApplication, QMessageBox

from attnviz.model.commands import set_model
from attnviz.model.compute import run
from attnviz.model.demos import build_demo
from attnviz.model.session import Session
from attnviz.model.state import ImageSource
from attnviz.persist import AutosaveStore, load_session, save_session
from attnviz.sources.image import bundled_image
from attnviz.ui.compute_controller import ComputeController
from attnviz.ui.context import AppContext
from attnviz.ui.export import PNG_SCALES
from attnviz.ui.panels import PANELS
from attnviz.ui.theme import DARK, LIGHT, current_theme


def test_every_panel_is_in_the_sidebar_or_a_workspace(make_window, qtbot):
    w = make_window("vla-mask", all_panels=True)
    specs = PANELS
    assert {s.id for s in specs} >= {"inputs", "model", "heatmap", "image"}
    placed = {pid for page in w.area.pages.values() for pid in page.slots} | set(w.sidebar.scrolls)
    assert placed == {s.id for s in specs}
    assert set(w.sidebar.scrolls) == {s.id for s in specs if s.area == "left"}
    # panels of workspaces not shown yet are built when their workspace is first shown
    assert "inspector" not in w.panels
    w.show_workspace("qkv")
    qtbot.waitUntil(lambda: "inspector" in w.panels, timeout=5000)
    for s in specs:
        assert w.panel(s.id) is not None
    w.show_workspace("attention")
    assert w.panel("heatmap").isVisible()
    titles = [a.text() for a in w.menuBar().actions()]
    assert titles == ["&File", "&Edit", "&View", "&Help"]
    rows = w.shortcut_rows()
    assert ("File", "Open…", "Ctrl+O") in rows and ("File", "Save", "Ctrl+S") in rows
    assert ("Edit", "Undo", "Ctrl+Z") in [(m, a.split(" ")[0], k) for m, a, k in rows]
    dlg = w.show_shortcuts()
    assert dlg.table.rowCount() == len(rows) and dlg.isVisible()


def test_open_save_round_trip_through_real_files(make_window, tmp_path, qtbot, respond):
    w = make_window("vla-mask")
    ctx = w.ctx
    assert ctx.execute(set_model(seed=11))
    ctx.set_view(head=2, query=5, colormap="magma")
    assert ctx.session.dirty and w.isWindowModified()
    path = tmp_path / "work.attnviz"
    assert w.files.save_as(path)
    assert path.exists() and not ctx.session.dirty and not w.isWindowModified()
    assert w.windowTitle().startswith("work.attnviz")
    saved = ctx.session.state
    assert w.files.new_session("river-bank")
    assert ctx.session.state == build_demo("river-bank") and w.files.path is None
    assert w.files.open_path(path)
    assert ctx.session.state == saved and w.files.path == str(path)
    assert w.settings.recent_files()[0] == str(path)
    resp = respond(ctx)
    assert resp.ok and resp.Tq == 44
    # Save writes to the same file again
    ctx.set_view(head=1)
    assert w.files.save()
    assert load_session(path).view.head == 1
    # Save As asks for a name; cancelling it changes nothing
    w.files.prompts.save_answers = [None]
    assert not w.files.save_as()


def test_view_only_changes_do_not_ask_to_save_but_are_saved(make_window, tmp_path):
    w = make_window("vla-mask")
    heat = w.panel("heatmap")
    heat.matrix_combo.activated.emit(heat.matrix_combo.findText("mask"))
    heat.cmap_combo.activated.emit(heat.cmap_combo.findText("magma"))
    assert w.ctx.session.state.view.matrix == "mask"
    assert not w.ctx.session.dirty and not w.isWindowModified()
    assert w.files.maybe_save("quitting") and w.files.prompts.asked == []
    path = tmp_path / "view.attnviz"
    assert w.files.save_as(path)
    assert load_session(path).view.matrix == "mask" and load_session(path).view.colormap == "magma"


def test_replacing_a_dirty_session_asks_first(make_window, tmp_path):
    w = make_window("river-bank")
    w.ctx.execute(set_model(drop_handset=True, seed=4))
    w.files.prompts.changes_answer = "cancel"
    assert not w.files.new_session("vit-image")
    assert w.ctx.session.dirty and len(w.ctx.session.state.sources) == 1
    w.files.prompts.changes_answer = "save"
    w.files.prompts.save_answers = [str(tmp_path / "kept")]
    assert w.files.new_session("vit-image")
    assert (tmp_path / "kept.attnviz").exists() and not w.ctx.session.dirty


def test_undo_redo_actions(make_window):
    w = make_window("vit-image")
    before = w.ctx.session.state
    assert w.ctx.execute(set_model(seed=5))
    assert w.undo_action.isEnabled() and "Change model settings" in w.undo_action.text()
    w.undo_action.trigger()
    assert w.ctx.session.state == before
    w.redo_action.trigger()
    assert w.ctx.session.state.model.seed == 5


def test_theme_switch_is_applied_and_remembered(make_window):
    w = make_window("river-bank")
    app = QApplication.instance()
    try:
        w.theme_actions["dark"].trigger()
        assert current_theme().name == "dark" and w.settings.theme() == "dark"
        assert app.palette().color(QPalette.ColorRole.Window).name() == DARK.window
        assert w.panel("heatmap").heatmap.frame.backgroundBrush().color().name() == DARK.plot_background
    finally:
        w.theme_actions["light"].trigger()
    assert app.palette().color(QPalette.ColorRole.Window).name() == LIGHT.window


def _drop(widget, paths):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    enter = QDragEnterEvent(widget.rect().center(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    drop = QDropEvent(QPointF(widget.rect().center()), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, drop)
    return enter.isAccepted(), drop.isAccepted()


def test_dropping_an_image_adds_a_source_and_shows_the_image_workspace(make_window, respond, qtbot):
    w = make_window("river-bank")
    accepted = _drop(w, [bundled_image("river-scene.png")])
    assert accepted == (True, True)
    src = w.ctx.session.state.sources[-1]
    assert isinstance(src, ImageSource) and src.name == "river-scene"
    qtbot.waitUntil(lambda: w.workspace == "image", timeout=2000)
    assert not w.panel("image").visibleRegion().isEmpty()
    resp = respond(w.ctx)
    assert resp.ok and resp.Tq == 4 + 1 + 14 * 14
    w.ctx.undo_stack.undo()
    assert len(w.ctx.session.state.sources) == 1
    w.show_workspace("attention")
    w.files.new_session("vla-mask")  # a whole session with an image opened: the workspace stays
    qtbot.wait(50)
    assert w.workspace == "attention"


def test_dropping_a_session_file_opens_it(make_window, tmp_path):
    path = tmp_path / "dropped.attnviz"
    save_session(path, build_demo("translation"))
    w = make_window("river-bank")
    _drop(w, [path])
    assert w.ctx.session.state == build_demo("translation") and w.files.path == str(path)


def test_bad_files_are_reported_in_the_window_and_nothing_changes(make_window, tmp_path):
    w = make_window("river-bank")
    before = w.ctx.session.state
    bad = tmp_path / "broken.attnviz"
    bad.write_bytes(b"PK\x03\x04 this is not a session")
    assert not w.files.open_path(bad)
    assert w.notice.isVisible() and w.notice.level == "error"
    assert "cannot open the session" in w.notice.label.text()
    assert "cannot open the session" in w.status.currentMessage()
    assert w.ctx.session.state == before
    w.notice.dismiss()
    assert not w.files.open_path(tmp_path / "notes.docx")
    assert "cannot open notes.docx" in w.notice.label.text()
    assert not w.files.open_path(tmp_path / "missing.png")
    assert "file not found" in w.notice.label.text()
    assert w.ctx.session.state == before


def test_compute_errors_show_and_clear(make_window, respond):
    w = make_window("vla-mask")
    from attnviz.model.commands import SetPositional
    from attnviz.model.positional import PositionalConfig

    w.ctx.execute(set_model(hs=15))  # RoPE needs an even head size
    w.ctx.execute(SetPositional(PositionalConfig("rope")))
    resp = respond(w.ctx)
    assert not resp.ok
    qtbot_wait = time.monotonic() + 2
    while not w.notice.isVisible() and time.monotonic() < qtbot_wait:
        QApplication.processEvents()
    assert w.notice.isVisible() and w.notice.from_compute
    w.ctx.undo_stack.undo()
    assert respond(w.ctx).ok
    assert not w.notice.isVisible()


def test_export_png_svg_csv_npy(make_window, tmp_path):
    w = make_window("vla-mask")
    w.ctx.set_view(head=1)
    resp = w.ctx.response
    assert w.files.export_png(tmp_path / "h.png")
    img = QImage(str(tmp_path / "h.png"))
    assert not img.isNull() and img.width() > 200
    assert w.files.export_svg(tmp_path / "h")  # the suffix is added
    svg = (tmp_path / "h.svg").read_text()
    assert "<svg" in svg and len(svg) > 1000
    assert w.files.export_csv(tmp_path / "m.csv")
    with open(tmp_path / "m.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][1:] == list(resp.key_labels) and [r[0] for r in rows[1:]] == list(resp.query_labels)
    np.testing.assert_allclose(np.array([[float(x) for x in r[1:]] for r in rows[1:]]), resp.weights[1])
    assert w.files.export_npy(tmp_path / "m.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "m.npy"), resp.weights)
    assert "exported" in w.status.currentMessage()
    # a folder that does not exist is a message, not an exception
    assert not w.files.export_png(tmp_path / "no" / "such" / "h.png")
    assert "does not exist" in w.notice.label.text()


def test_png_export_offers_a_resolution(make_window, tmp_path):
    w = make_window("vla-mask")
    widget = w.panel("heatmap").export_widget()
    W, H = widget.width(), widget.height()
    w.files.prompts.png_answers = [1]  # "2x"
    w.files.prompts.save_answers = [str(tmp_path / "two.png")]
    assert w.files.export_png()  # as File > Export > Heatmap as PNG calls it
    asked = [a for a in w.files.prompts.asked if a.startswith("png resolution")]
    assert asked and f"2x · {2 * W} x {2 * H} px" in asked[0] and "width in pixels…" in asked[0]
    img = QImage(str(tmp_path / "two.png"))
    assert (img.width(), img.height()) == (2 * W, 2 * H)
    w.files.prompts.png_answers = [len(PNG_SCALES), 1800]  # a width in pixels
    w.files.prompts.save_answers = [str(tmp_path / "wide.png")]
    assert w.files.export_png()
    assert QImage(str(tmp_path / "wide.png")).width() == 1800
    w.files.prompts.png_answers = [None]  # cancelled: nothing is asked or written after
    assert not w.files.export_png() and not (tmp_path / "none.png").exists()


def test_autosave_on_a_timer_and_clean_save_removes_it(make_window, tmp_path, qtbot):
    w = make_window("river-bank", autosave_ms=40)
    store = w.files.autosave
    assert not store.autosave_path.exists()  # a clean session is not autosaved
    w.ctx.execute(set_model(drop_handset=True, seed=9))
    qtbot.waitUntil(store.autosave_path.exists, timeout=3000)
    assert load_session(store.autosave_path) == w.ctx.session.state
    assert w.files.save_as(tmp_path / "real.attnviz")
    assert not store.autosave_path.exists()
    w.close()
    assert not store.running_path.exists()  # a clean exit is recorded


def test_recovery_offer_after_a_crash(make_window, tmp_path, qtbot):
    crashed = AutosaveStore(tmp_path / "data")
    crashed.mark_running()  # ... and the process died without mark_clean_exit
    lost = build_demo("vla-mask")
    crashed.write(lost, None)
    w = make_window("river-bank")
    assert w.files.offer_recovery()
    box = w.files.recovery_box
    assert box.isVisible() and "did not close properly" in box.text()
    box.setVisible(True)
    w.files.recover_button.click()
    qtbot.waitUntil(lambda: w.files.recovery_box is None, timeout=2000)
    assert w.ctx.session.state == lost and w.ctx.session.dirty


def test_recovery_can_be_declined(make_window, tmp_path, qtbot):
    crashed = AutosaveStore(tmp_path / "data")
    crashed.mark_running()
    crashed.write(build_demo("vit-image"), None)
    w = make_window("river-bank")
    assert w.files.offer_recovery()
    w.files.discard_button.click()
    qtbot.waitUntil(lambda: w.files.recovery_box is None, timeout=2000)
    assert w.ctx.session.state == build_demo("river-bank")
    assert not w.files.autosave.autosave_path.exists()
    assert not w.files.offer_recovery()


def test_unexpected_errors_are_shown_in_a_dialog(make_window):
    from attnviz.ui.app import _ExceptionReporter

    w = make_window("river-bank")
    reporter = _ExceptionReporter(w)
    try:
        raise RuntimeError("a bug")
    except RuntimeError as exc:
        reporter(type(exc), exc, exc.__traceback__)
    box = w.findChild(QMessageBox, "exception_box")
    assert box.isVisible() and "RuntimeError: a bug" in box.text() and "Traceback" in box.detailedText()
    assert reporter.count == 1 and w.isVisible()


def test_layout_and_recent_files_persist(make_window, tmp_path, monkeypatch):
    from attnviz.ui.main_window import MainWindow

    monkeypatch.setattr(MainWindow, "_available", lambda self: QRect(0, 0, 1920, 1040))  # offscreen: 800 x 800
    w = make_window("river-bank")
    w.files.save_as(tmp_path / "a.attnviz")
    w.show_workspace("image")
    w.sidebar_action.trigger()  # View > Sidebar: hidden
    assert not w.sidebar.isVisible()
    w.close()
    assert w.settings.layout() is not None and w.settings.geometry() is not None
    w2 = make_window("river-bank")
    assert not w2.sidebar.isVisible() and w2.workspace == "image"
    w2._fill_recent()
    assert str(tmp_path / "a.attnviz") in [a.text() for a in w2.recent_menu.actions()]
    w2.reset_layout()
    assert w2.sidebar.isVisible() and w2.sidebar_action.isChecked()


def test_selection_shows_everywhere(make_window, qtbot):
    w = make_window("vla-mask")
    heat, inputs, image = w.panel("heatmap"), w.panel("inputs"), w.panel("image")
    qtbot.wait(50)
    frame = heat.heatmap.frame
    qtbot.mouseClick(frame.viewport(), Qt.MouseButton.LeftButton, pos=frame.cell_to_widget(3, 0).toPoint())
    assert w.ctx.session.state.view.query == 3
    assert image.view.highlighted == 3  # patch 3 over the image ...
    assert inputs.image_editor.view.highlighted == 3  # ... and in the inputs' patch grid
    inputs.select_source("prompt")
    w.ctx.set_view(query=17)  # prompt token 2
    sel = inputs.text_editor.edit.extraSelections()
    text = w.ctx.session.state.source("prompt").text
    assert any(text[s.cursor.selectionStart():s.cursor.selectionEnd()].strip() == "the" for s in sel)
    assert inputs.text_editor.chips.selected == 2


def test_event_loop_turns_during_a_long_compute_and_cancel_works(qtbot, tmp_path, make_window):
    release = threading.Event()

    def slow_run(req, progress=None, is_cancelled=None, on_preview=None):
        if req.request_id > 1:
            while not release.is_set():
                if is_cancelled is not None and is_cancelled():
                    break
                if progress is not None:
                    progress(0.5, "slow stage")
                time.sleep(0.01)
        return run(req, progress, is_cancelled)

    ctx = AppContext(Session(build_demo("vla-mask")), compute_controller=ComputeController(compute=slow_run))
    w = make_window(ctx=ctx)
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(5)
    ctx.execute(set_model(seed=3))  # request 2: blocks on the worker
    qtbot.waitUntil(lambda: w.status.progress.isVisible(), timeout=3000)
    qtbot.wait(200)
    assert len(ticks) >= 15  # the GUI thread kept processing timers while the worker ran
    assert w.status.cancel_button.isVisible() and "slow stage" in w.status.progress.format()
    w.status.cancel_button.click()
    assert not w.status.progress.isVisible() and not ctx.compute.busy
    assert "cancelled" in w.status.currentMessage()
    release.set()
    timer.stop()
    ctx.execute(set_model(seed=4))
    qtbot.waitUntil(lambda: ctx.response is not None and ctx.response.ok and not ctx.compute.busy, timeout=10000)
    assert w.status.heads_label.text() == "heads: 4" and "T = 44" in w.status.tokens_label.text()


@pytest.mark.parametrize("demo", ["translation", "vit-image"])
def test_status_bar_shows_the_computation(make_window, demo):
    w = make_window(demo)
    resp = w.ctx.response
    assert w.status.kernel_label.text() == "kernel: flash"
    if resp.cross:
        assert w.status.tokens_label.text() == "Tq = 3 · Tk = 3"
    else:
        assert w.status.tokens_label.text() == "T = 197"
    assert w.status.time_label.text().startswith("computed in ") and w.status.time_label.text().endswith(" ms")
    assert not w.status.masked_label.isVisible()


def test_the_status_bar_says_when_the_numpy_path_stands_in_for_the_engine(make_window, qtbot):
    import dataclasses

    w = make_window("river-bank")
    resp = w.ctx.response
    w.ctx.response_changed.emit(dataclasses.replace(resp, path="numpy", stand_in=True))
    assert w.status.kernel_label.text() == "kernel: numpy · engine compiling…"
    assert "stands in" in w.status.kernel_label.toolTip()
    w.ctx.response_changed.emit(resp)
    assert w.status.kernel_label.text() == "kernel: flash"
    w.ctx.response_changed.emit(dataclasses.replace(resp, path="engine:naive", kernel_stand_in="flash"))
    assert w.status.kernel_label.text() == "kernel: naive · flash compiling…"
    assert "naive kernel stands in while its flash kernel compiles" in w.status.kernel_label.toolTip()
