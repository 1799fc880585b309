"""A maps file in the window and its session: ``attnviz FILE.npz`` shows the maps in the Pretrained workspace
and, read-only, in the Attention workspace's heatmap (the file's layer and head, a banner; unticking returns to
the session's own attention); File ▸ Save and autosave keep them in the session file; reopening it shows the
very same maps in both workspaces; a session whose maps member is hostile is refused in one line."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import numpy as np
import pytest

pytest.importorskip("PySide6")

import attnviz  # noqa: E402
from attnviz.model.commands import set_model  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.persist import AutosaveStore, read_session  # noqa: E402
from attnviz.persist.session_maps import MAPS_MEMBER  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402

WAIT_MS = 60000
TOKENS = ["[CLS]", "the", "river", " bank", "[SEP]", "was", "steep"]


def softmax(shape, seed=0):
    x = np.random.default_rng(seed).normal(size=shape) * 2
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture
def window(qtbot, tmp_path):
    from attnviz.ui.file_actions import Prompts
    from attnviz.ui.main_window import MainWindow
    from attnviz.ui.settings import AppSettings

    class Discard(Prompts):
        def save_changes(self, parent, what):  # closing the window at the end drops unsaved work
            return "discard"

    ctx = AppContext(Session(build_demo("river-bank")))
    store = AutosaveStore(tmp_path / "data")
    store.mark_running()
    w = MainWindow(ctx, settings=AppSettings(tmp_path / "settings.ini"), autosave=store, prompts=Discard())
    qtbot.addWidget(w)
    w.resize(1024, 700)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.stop_workers()
    ctx.compute.shutdown(timeout=5)


def open_maps(qtbot, w, path):
    from attnviz.ui.app import open_file_argument

    panel = w.panel("pretrained")
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        assert open_file_argument(w, str(path))
    qtbot.waitUntil(lambda: w.ctx.maps is not None, timeout=WAIT_MS)
    return panel


def heatmap_shows(qtbot, w):
    heat = w.panel("heatmap")
    w.show_workspace("attention")
    qtbot.waitUntil(lambda: heat.mode == "maps" and heat.heatmap.values is not None
                    and not heat.heatmap.pooling(), timeout=WAIT_MS)
    return heat


def pick(qtbot, heat, layer, head):
    heat.layer_combo.setCurrentIndex(layer)
    heat.layer_combo.activated.emit(layer)
    heat.head_combo.setCurrentIndex(head + 1)
    heat.head_combo.activated.emit(head + 1)
    qtbot.waitUntil(lambda: not heat.heatmap.pooling(), timeout=WAIT_MS)


def test_save_and_reopen_keeps_the_maps_bit_for_bit(qtbot, window, tmp_path):
    w = window
    a = softmax((2, 4, 7, 7))
    path = attnviz.save(tmp_path / "river.npz", a, TOKENS, dtype="float16")
    want = a.astype(np.float16).astype(np.float32)  # what the file holds, as the window shows it
    assert not w.ctx.session.dirty
    panel = open_maps(qtbot, w, path)
    assert w.ctx.maps.name == "river.npz"
    assert w.ctx.session.dirty and w.isWindowModified()  # maps that no session file holds yet: unsaved work

    heat = heatmap_shows(qtbot, w)
    assert heat.maps_check.isVisibleTo(heat) and heat.maps_check.isChecked()
    assert heat.maps_check.text() == "maps from river.npz"
    assert heat.note.text().startswith("Read-only maps from river.npz (2 layers × 4 heads, 7 × 7 tokens)")
    assert np.array_equal(heat.heatmap.values, want[0, 0])
    pick(qtbot, heat, 1, 2)
    assert np.array_equal(heat.heatmap.values, want[1, 2])
    assert "layer 1 · head 2 · read-only maps from river.npz" in heat.heatmap.frame.title.text
    qtbot.waitUntil(lambda: heat.grid.maps is not None and heat.grid.maps.shape[:2] == (2, 2), timeout=WAIT_MS)
    np.testing.assert_array_equal(heat.grid.maps.reshape(4, 7, 7), want[1])  # the layer's heads, unpooled at 7 x 7
    values, rows, cols, _name = heat.current_matrix()
    assert np.array_equal(values, want[1, 2]) and rows == TOKENS and cols == TOKENS
    # an edit of the session recomputes the session, not the file's maps
    assert w.ctx.execute(set_model(seed=5))
    qtbot.wait(300)
    assert heat.mode == "maps" and np.array_equal(heat.heatmap.values, want[1, 2])

    session = tmp_path / "with-maps.attnviz"
    assert w.files.save_as(session)
    assert not w.ctx.session.dirty
    state, payload = read_session(session)
    assert payload.maps.name == "river.npz" and payload.maps.dtype == "<f2"
    with zipfile.ZipFile(session) as zf:
        assert np.array_equal(np.load(io.BytesIO(zf.read(MAPS_MEMBER)))["attentions"], a.astype(np.float16))

    assert w.files.new_session("river-bank")  # the maps belonged to that session
    assert w.ctx.maps is None and not heat.maps_check.isVisibleTo(heat) and not heat.maps_shown()

    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        assert w.files.open_path(session)
    assert w.ctx.session.state == state and w.ctx.maps.name == "river.npz"
    assert not w.ctx.session.dirty and not w.isWindowModified()  # the session's own maps: no edit
    assert np.array_equal(panel.grid.maps, want)  # the Pretrained workspace: the same maps, bit for bit
    assert np.array_equal(w.ctx.maps.maps.attentions, want)
    heat = heatmap_shows(qtbot, w)
    assert np.array_equal(heat.heatmap.values, want[0, 0])

    heat.maps_check.setChecked(False)  # back to the session's own computation
    qtbot.waitUntil(lambda: heat.mode == "dense", timeout=WAIT_MS)
    assert heat.heatmap.values.shape == (4, 4)  # the river-bank demo's four tokens
    assert "read-only" not in heat.heatmap.frame.title.text and not heat.note.isVisibleTo(heat)


def test_autosave_keeps_the_maps(qtbot, window, tmp_path):
    w = window
    a = softmax((1, 2, 7, 7), seed=3)
    panel = open_maps(qtbot, w, attnviz.save(tmp_path / "auto.npz", a, TOKENS))
    assert w.ctx.execute(set_model(seed=9))  # unsaved work: autosave writes
    assert w.files.autosave_now()
    state, payload = read_session(w.files.autosave.autosave_path)
    assert payload.maps.name == "auto.npz" and payload.maps.dtype == "<f4"
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):  # shown again in the Pretrained workspace
        assert w.files.recover()
    assert np.array_equal(w.ctx.maps.maps.attentions, a.astype(np.float32))


def test_a_long_map_is_pooled_and_zooms(qtbot, window, tmp_path):
    w = window
    T = 1500
    a = np.tril(np.ones((T, T), np.float32))
    a /= a.sum(axis=-1, keepdims=True)
    open_maps(qtbot, w, attnviz.save(tmp_path / "long.npz", a[None, None], [f"t{i}" for i in range(T)],
                                     dtype="float16"))
    heat = heatmap_shows(qtbot, w)
    assert heat.heatmap.values.shape == (T, T) and heat.heatmap.pooled  # the overview: pooled to the screen
    assert heat.heatmap.base.values.shape[0] < T
    heat.heatmap.frame.view.setRange(xRange=(0, 40), yRange=(0, 40), padding=0)  # zoom into the first rows
    qtbot.waitUntil(lambda: heat.heatmap.detail.extent is not None, timeout=WAIT_MS)
    r0, r1, c0, c1 = heat.heatmap.detail.extent
    assert r1 - r0 < T and c1 - c0 < T


def test_a_hostile_maps_member_is_refused_in_one_line(qtbot, window, tmp_path):
    w = window
    open_maps(qtbot, w, attnviz.save(tmp_path / "ok.npz", softmax((1, 2, 7, 7)), TOKENS))
    good = tmp_path / "good.attnviz"
    assert w.files.save_as(good)
    with zipfile.ZipFile(good) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    manifest = json.loads(members.pop("manifest.json"))
    buf = io.BytesIO()
    np.savez_compressed(buf, attentions=np.full((1, 2, 7, 7), np.nan, np.float32), tokens=np.array(TOKENS))
    members[MAPS_MEMBER] = buf.getvalue()
    manifest["maps"].update(size=len(buf.getvalue()), sha256=hashlib.sha256(buf.getvalue()).hexdigest())
    bad = tmp_path / "bad.attnviz"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            zf.writestr(name, data)
    messages = []
    w.ctx.message.connect(lambda level, text: messages.append((level, text)))
    before = w.ctx.session.state
    assert not w.files.open_path(bad)
    level, text = messages[-1]
    assert level == "error" and "\n" not in text
    assert text.startswith(f"cannot open the session: {bad}: its attention maps: ok.npz")
    assert "NaN" in text
    assert w.ctx.session.state is before and w.ctx.maps is not None  # nothing changed


def test_a_maps_file_loaded_in_the_pretrained_panel_itself_becomes_the_sessions_maps(qtbot, window, tmp_path):
    """The panel's own open dialog (load_model on a path) is followed too, not only ``attnviz FILE``."""
    w = window
    path = attnviz.save(tmp_path / "panel.npz", softmax((1, 2, 7, 7), seed=3), TOKENS)
    w.show_workspace("pretrained")
    panel = w.panel("pretrained")
    panel.auto_load = False
    with qtbot.waitSignal(panel.attention_ready, timeout=WAIT_MS):
        panel.load_model(str(path))
    qtbot.waitUntil(lambda: w.ctx.maps is not None, timeout=WAIT_MS)
    assert w.ctx.maps.name == "panel.npz" and w.ctx.maps.shape == (1, 2, 7, 7)
    assert w.ctx.session.dirty
