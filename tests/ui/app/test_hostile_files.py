"""The window with hostile targets and files: saving onto a FIFO, a folder or a device, and opening a
session with a lone surrogate or an impossible index, end in a message in the window and change
nothing."""

from __future__ import annotations

import json
import os
import stat
import zipfile

from attnviz.model.commands import set_model
from attnviz.model.demos import build_demo
from attnviz.persist import save_session


def test_save_onto_a_fifo_or_folder_is_a_message_and_keeps_them(make_window, tmp_path):
    w = make_window("river-bank")
    assert w.ctx.execute(set_model(seed=5))
    os.mkfifo(tmp_path / "pipe.attnviz")
    (tmp_path / "folder.attnviz").mkdir()
    for path in (tmp_path / "pipe.attnviz", tmp_path / "folder.attnviz"):
        kind = stat.S_IFMT(os.lstat(path).st_mode)
        assert not w.files.save_as(path)
        assert w.notice.isVisible() and w.notice.level == "error"
        assert "cannot save" in w.notice.label.text() and "not a regular file" in w.notice.label.text()
        assert stat.S_IFMT(os.lstat(path).st_mode) == kind
        assert w.ctx.session.dirty and w.files.path is None  # the work is still unsaved, and says so
        w.notice.dismiss()
    assert w.files.save_as(tmp_path / "real.attnviz") and not w.ctx.session.dirty


def _edited(tmp_path, name, edit):
    """A river-bank session whose manifest state went through ``edit`` (members unchanged)."""
    src = save_session(tmp_path / "src.attnviz", build_demo("river-bank"))
    with zipfile.ZipFile(src) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    manifest = json.loads(members.pop("manifest.json"))
    edit(manifest["state"])
    with zipfile.ZipFile(tmp_path / name, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))  # lone surrogates become \udXXX escapes
        for member, data in members.items():
            zf.writestr(member, data)
    return tmp_path / name


def test_opening_hostile_strings_and_indices_is_a_message(make_window, tmp_path):
    w = make_window("vla-mask")
    before = w.ctx.session.state
    cases = {
        "surrogate.attnviz": (lambda s: s["sources"][0].update(name="bank\udc80"), "state.sources[0].name"),
        "token.attnviz": (lambda s: s["model"].update(qk_overrides=[["k", 0, 10**12, 0, 1.0]]),
                          "model.qk_overrides[0].token"),
        "head.attnviz": (lambda s: s["mask"]["payload"].update(heads=[{"head": 10**9, "design": {}}]),
                         "mask.payload.heads[0].head"),
    }
    for name, (edit, where) in cases.items():
        assert not w.files.open_path(_edited(tmp_path, name, edit))
        assert w.notice.isVisible() and w.notice.level == "error"
        assert where in w.notice.label.text(), name
        assert w.ctx.session.state == before
        w.notice.dismiss()
