"""The read-only attention maps of a file that the window shows (``attnviz FILE.npz``), as the session carries
them: :class:`ShownMaps` is what ``AppContext.maps`` holds while the Pretrained workspace shows a maps file,
File ▸ Save and autosave write it into the session file (:mod:`attnviz.persist.session_maps`), and opening that
session shows the same maps again — in the Pretrained workspace and, read-only, in the Attention workspace's
heatmap. This module only converts between the two forms and hands the maps to the Pretrained panel.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from attnviz.checkpoints.maps_file import Maps, maps_from_bytes, maps_npz_bytes
from attnviz.persist import SessionMaps

_TEMP_DIRS: list[str] = []  # folders of maps written back from sessions for the Pretrained panel to load


@dataclass(eq=False)
class ShownMaps:
    """A maps file's checked maps and the name of the file they came from."""

    name: str  # the file's name, e.g. "run.npz"
    maps: Maps  # attentions (L, nh, Tq, Tk) float32, tokens, ...
    _stored: SessionMaps | None = field(default=None, repr=False)  # the session member, made once

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(L, nh, Tq, Tk)."""
        return tuple(self.maps.attentions.shape)

    @property
    def row_tokens(self) -> list[str]:
        """(Tq,) the query rows' tokens (cross-attention: the target's)."""
        return list(self.maps.target_tokens if self.maps.target_tokens is not None else self.maps.tokens)

    def to_session(self) -> SessionMaps:
        """The session file's form: the maps as a compressed .npz, float16 when the file stored float16."""
        if self._stored is None:
            data = maps_npz_bytes(self.maps)
            dtype = "<f2" if self.maps.stored == "float16" else "<f4"
            self._stored = SessionMaps(name=self.name, data=data, dtype=dtype, shape=self.shape)
        return self._stored


def from_session(stored: SessionMaps) -> ShownMaps:
    """The maps a session file carries, checked as a maps file is; CheckpointError (one line) otherwise."""
    maps = maps_from_bytes(stored.data, stored.name, stored.shape, stored.dtype)
    return ShownMaps(name=stored.name, maps=maps, _stored=stored)


def _cleanup() -> None:
    for folder in _TEMP_DIRS:
        shutil.rmtree(folder, ignore_errors=True)


def show_in_pretrained(window, shown: ShownMaps) -> bool:
    """Show ``shown`` in the window's Pretrained workspace (its panel loads files: the session's .npz bytes are
    written to a private temporary folder under the maps file's name, read back and checked again there);
    ``ctx.maps`` is set at once. False when the window has no Pretrained workspace."""
    window.ctx.set_maps(shown)
    panel = window.panel("pretrained")
    if panel is None or not hasattr(panel, "load_model"):
        return False
    if not _TEMP_DIRS:
        atexit.register(_cleanup)
    folder = tempfile.mkdtemp(prefix="attnviz-maps-")
    _TEMP_DIRS.append(folder)
    stem = Path(shown.name).stem or "maps"
    path = os.path.join(folder, f"{stem}.npz")
    with open(path, "wb") as fh:
        fh.write(shown.to_session().data)
    follow_pretrained(window, expect=(path, shown))
    panel.auto_load = False
    panel.load_model(path)
    return True


def follow_pretrained(window, expect=None) -> None:
    """Keep ``ctx.maps`` to what the Pretrained panel shows: a maps file loaded there becomes the session's
    maps, another checkpoint loaded there drops them. ``expect`` (path, ShownMaps): the load of that path
    keeps these maps (the session's, written back to a file) instead of reading them anew."""
    panel = window.panel("pretrained")
    if panel is None or not hasattr(panel, "model_loaded"):
        return
    follower = getattr(panel, "_session_maps_follower", None)
    if follower is None:
        follower = _Follower(window.ctx)
        panel._session_maps_follower = follower
        panel.model_loaded.connect(follower.on_loaded)
    follower.expect = expect


class _Follower:
    """The Pretrained panel's model_loaded -> ``ctx.set_maps``."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.expect = None

    def on_loaded(self, ckpt) -> None:
        """A session opened shows its own maps (no edit); a maps file the person opens, or another checkpoint
        that drops the maps shown, changes what File ▸ Save writes: the session becomes unsaved work."""
        expect, self.expect = self.expect, None
        if getattr(ckpt, "kind", None) != "maps":
            if self.ctx.maps is not None:
                self.ctx.set_maps(None)
                self.ctx.session.mark_dirty()
            return
        if expect is not None and os.path.abspath(str(ckpt.folder)) == os.path.abspath(expect[0]):
            self.ctx.set_maps(expect[1])
            return
        self.ctx.set_maps(ShownMaps(name=Path(ckpt.folder).name, maps=ckpt.maps))
        self.ctx.session.mark_dirty()
