"""Everything the File menu and the window's drop area do: new, open, save, recent files, export, drag
and drop, autosave and the crash-recovery offer. Files are recognised by their extension: sessions
replace the session, images, texts and ``.npy``/``.csv`` arrays become new (undoable) sources; a file
that cannot be read is reported and nothing changes. Dialogs go through a :class:`Prompts` object so
tests can answer them; the recovery offer is non-blocking so the event loop keeps running.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QColorDialog, QFileDialog, QInputDialog, QMessageBox

from attnviz.model.commands import AddSource
from attnviz.model.demos import build_demo
from attnviz.model.source_files import (IMAGE_SUFFIXES, OPEN_FILTER, SESSION_FILTER, SESSION_SUFFIX, TEXT_SUFFIXES,
                                        block_source_from_file)
from attnviz.model.source_files import classify, image_source_from_file, text_source_from_file
from attnviz.model.state import PALETTE, SessionState, TextSource
from attnviz.persist import AutosaveStore, SessionError, read_session, save_session
from attnviz.sources.errors import SourceError
from attnviz.ui import png_dialogs
from attnviz.ui.access_keys import set_standard_keys
from attnviz.ui.export import (PNG_SCALES, ExportError, export_csv, export_npy, export_png, export_svg,
                               png_size, scale_for_width)
from attnviz.ui.messages import Level

# ------------------------------------------------------------------------------------------------
# dialogs


class Prompts:
    """The questions the application asks a person; tests substitute their own answers."""

    def open_file(self, parent, caption: str, filters: str, folder: str = "") -> str | None:
        path, _ = QFileDialog.getOpenFileName(parent, caption, folder, filters)
        return path or None

    def save_file(self, parent, caption: str, filters: str, suggested: str = "") -> str | None:
        path, _ = QFileDialog.getSaveFileName(parent, caption, suggested, filters)
        return path or None

    def save_changes(self, parent, what: str) -> str:
        """"save", "discard" or "cancel" for a dirty session about to be replaced or closed."""
        box = QMessageBox(QMessageBox.Icon.Question, "Unsaved changes",
                          f"The session has unsaved changes. Save them before {what}?",
                          QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
                          | QMessageBox.StandardButton.Cancel, parent)
        box.setDefaultButton(QMessageBox.StandardButton.Save)
        set_standard_keys(box)
        answer = box.exec()
        return {QMessageBox.StandardButton.Save: "save",
                QMessageBox.StandardButton.Discard: "discard"}.get(QMessageBox.StandardButton(answer), "cancel")

    def colour(self, parent, initial: str) -> str | None:
        c = QColorDialog.getColor(QColor(initial), parent, "Source colour")
        return c.name() if c.isValid() else None

    def text(self, parent, caption: str, label: str, initial: str = "") -> str | None:
        value, ok = QInputDialog.getText(parent, caption, label, text=initial)
        return value if ok else None

    def png_resolution(self, parent, choices: list[str]) -> int | None:
        """Index of the resolution chosen among ``choices`` (the last one: a width typed next), or None."""
        d = png_dialogs.resolution_dialog(parent, choices)
        item = d.textValue() if d.exec() == QInputDialog.DialogCode.Accepted else None
        d.deleteLater()
        return choices.index(item) if item in choices else None

    def png_width(self, parent, initial: int) -> int | None:
        """A width in pixels for the exported picture, or None."""
        d = png_dialogs.width_dialog(parent, initial)
        value = d.intValue() if d.exec() == QInputDialog.DialogCode.Accepted else None
        d.deleteLater()
        return value


def _with_suffix(path: str, suffix: str) -> str:
    return path if path.lower().endswith(suffix) else path + suffix


class FileActions(QObject):
    """File operations on the window's AppContext; reports every problem through ``ctx.report``."""

    path_changed = Signal(object)  # the session's file (str) or None (untitled)
    recent_changed = Signal(list)
    session_replaced = Signal()  # a whole session was opened, recovered or started

    def __init__(self, ctx, window=None, settings=None, autosave: AutosaveStore | None = None,
                 prompts: Prompts | None = None, autosave_interval_ms: int = 30_000, heatmap=None):
        super().__init__(window)
        self.ctx = ctx
        self.window = window
        self.settings = settings
        self.autosave = autosave
        self.prompts = prompts or Prompts()
        self.heatmap = heatmap  # callable -> the heatmap panel (or None) for File > Export
        self.path: str | None = None
        self.demo: str | None = None  # the demo the session was started from (the name offered when it has no file)
        self.recovery_box: QMessageBox | None = None
        self._autosave_error_shown = False
        self.autosave_timer = QTimer(self)
        self.autosave_timer.setInterval(int(autosave_interval_ms))
        self.autosave_timer.timeout.connect(self.autosave_now)
        if autosave is not None:
            self.autosave_timer.start()

    # ------------------------------------------------------------------ sessions
    def _replace(self, state: SessionState, path: str | None, dirty: bool = False, demo: str | None = None) -> None:
        self.demo = demo
        self.ctx.undo_stack.clear()
        self.ctx.session.replace_state(state, dirty=dirty)
        self.ctx.undo_stack.setClean()
        self._set_path(path)
        self.session_replaced.emit()

    def _session_maps(self):
        """The maps file the window shows, as the session file stores it (SessionMaps), or None."""
        shown = self.ctx.maps
        return None if shown is None else shown.to_session()

    def _show_maps(self, stored) -> None:
        """Show the maps a session carries (None: drop the maps shown, they belonged to the session replaced)."""
        from attnviz.ui.session_maps import show_in_pretrained

        if stored is None:
            self.ctx.set_maps(None)
        elif self.window is not None and hasattr(self.window, "panel"):
            show_in_pretrained(self.window, stored)
        else:
            self.ctx.set_maps(stored)

    @staticmethod
    def _decode_maps(path, payload_maps):
        """The ShownMaps of a session's maps member (None without one); SessionError naming ``path`` for maps
        that are not readable (checked as any maps file is)."""
        if payload_maps is None:
            return None
        from attnviz.checkpoints.errors import CheckpointError  # (here: no checkpoint code loads before it is needed)
        from attnviz.ui.session_maps import from_session

        try:
            return from_session(payload_maps)
        except CheckpointError as exc:
            raise SessionError(f"{path}: its attention maps: {exc}") from None

    def _set_path(self, path: str | None) -> None:
        self.path = None if path is None else os.path.abspath(path)
        self.path_changed.emit(self.path)

    def maybe_save(self, what: str = "continuing") -> bool:
        """True when the current session may be replaced: it is clean, saved, or the person said so."""
        if not self.ctx.session.dirty:
            return True
        answer = self.prompts.save_changes(self.window, what)
        if answer == "save":
            return self.save()
        return answer == "discard"

    def new_session(self, demo: str | None = None) -> bool:
        """Start an empty session (or a bundled demo)."""
        if not self.maybe_save("starting a new session"):
            return False
        try:
            state = build_demo(demo) if demo else SessionState(sources=(TextSource("text", PALETTE[0], ""),))
        except ValueError as exc:
            self.ctx.report(Level.ERROR, str(exc))
            return False
        self._replace(state, None, demo=demo or None)
        self._show_maps(None)
        self.ctx.report(Level.INFO, f"opened the {demo!r} demo" if demo else "new session")
        return True

    def open_dialog(self) -> bool:
        folder = self.settings.last_folder() if self.settings else ""
        path = self.prompts.open_file(self.window, "Open", OPEN_FILTER, folder)
        return self.open_path(path) if path else False

    def open_path(self, path) -> bool:
        """Open a session or add a file's contents as a source; False (reported) when it fails."""
        path = os.fspath(path)
        kind = classify(path)
        if kind is None:
            self.ctx.report(Level.ERROR, f"cannot open {Path(path).name}: attnviz opens .attnviz sessions, images "
                                         f"({', '.join(IMAGE_SUFFIXES)}), text ({', '.join(TEXT_SUFFIXES)}) and token values "
                                         "(.npy, .csv)")
            return False
        if kind == "session":
            return self.open_session(path)
        return self.add_file(path, kind)

    def open_session(self, path) -> bool:
        if not self.maybe_save("opening another session"):
            return False
        try:
            state, payload = read_session(path)
            maps = self._decode_maps(path, payload.maps)
        except SessionError as exc:
            self.ctx.report(Level.ERROR, f"cannot open the session: {exc}")
            if self.settings is not None and not Path(path).exists():
                self.recent_changed.emit(self.settings.remove_recent(path))
            return False
        self._replace(state, path)
        self._show_maps(maps)
        self._remember(path)
        with_maps = f" with the attention maps of {maps.name}" if maps else ""
        self.ctx.report(Level.INFO, f"opened {Path(path).name}{with_maps}")
        return True

    def add_file(self, path, kind: str | None = None) -> bool:
        """Add an image, text or values file as a new source (one undo step)."""
        kind = kind or classify(path)
        state = self.ctx.session.state
        makers = {"image": image_source_from_file, "text": text_source_from_file, "values": block_source_from_file}
        if kind not in makers:
            self.ctx.report(Level.ERROR, f"{Path(path).name} is not an image, text or values file")
            return False
        try:
            src = makers[kind](state, path)
        except (SourceError, ValueError) as exc:
            self.ctx.report(Level.ERROR, f"cannot add {Path(path).name}: {exc}")
            return False
        if not self.ctx.execute(AddSource(src, label=f"Add {kind} {src.name!r}")):
            return False
        if self.settings is not None:
            self.settings.set_last_folder(path)
        self.ctx.report(Level.INFO, f"added {kind} source {src.name!r} from {Path(path).name}")
        return True

    def open_paths(self, paths) -> int:
        """Open dropped files: the first session replaces the session, the rest become sources.
        Returns how many were opened."""
        paths = [os.fspath(p) for p in paths]
        sessions = [p for p in paths if classify(p) == "session"]
        done = 0
        if sessions:
            done += int(self.open_session(sessions[0]))
            if len(sessions) > 1:
                self.ctx.report(Level.WARNING, "only one session can be open: opened the first one dropped")
        for p in paths:
            if classify(p) != "session":
                done += int(self.open_path(p))
        return done

    def suggested_stem(self) -> str:
        """The name save and export dialogs offer: the session file's, else the demo's, else "untitled"."""
        if self.path:
            return Path(self.path).stem
        return self.demo or "untitled"

    def save(self) -> bool:
        if self.path is None:
            return self.save_as()
        return self._save_to(self.path)

    def save_as(self, path=None) -> bool:
        if path is None:
            suggested = self.path or os.path.join(self.settings.last_folder() if self.settings else "",
                                                  self.suggested_stem() + SESSION_SUFFIX)
            path = self.prompts.save_file(self.window, "Save session as", SESSION_FILTER, suggested)
            if not path:
                return False
        return self._save_to(_with_suffix(os.fspath(path), SESSION_SUFFIX))

    def _save_to(self, path: str) -> bool:
        state = self.ctx.session.state
        try:
            maps = self._session_maps()
            if self.autosave is not None:
                self.autosave.save_clean(path, state, maps)
            else:
                save_session(path, state, maps=maps)
        except SessionError as exc:
            self.ctx.report(Level.ERROR, f"cannot save: {exc}")
            return False
        self.ctx.session.mark_clean()
        self.ctx.undo_stack.setClean()
        self._set_path(path)
        self._remember(path)
        self.ctx.report(Level.INFO, f"saved {Path(path).name}")
        return True

    def _remember(self, path) -> None:
        if self.settings is not None:
            self.settings.set_last_folder(path)
            self.recent_changed.emit(self.settings.add_recent(path))

    def open_recent(self, path) -> bool:
        if not Path(path).exists():
            self.ctx.report(Level.ERROR, f"{path} no longer exists; removed it from the recent files")
            if self.settings is not None:
                self.recent_changed.emit(self.settings.remove_recent(path))
            return False
        return self.open_path(path)

    # ------------------------------------------------------------------ export
    def _heatmap_panel(self):
        panel = self.heatmap() if callable(self.heatmap) else None
        if panel is None:
            self.ctx.report(Level.ERROR, "there is no heatmap panel to export")
        return panel

    def _ask(self, caption: str, filters: str, suffix: str, path, what: str = "") -> str | None:
        """``path``, or the one the person chooses (offered: the session's name, then ``what``)."""
        if path is None:
            folder = self.settings.last_folder() if self.settings else ""
            stem = self.suggested_stem() + (f"-{what}" if what else "")
            path = self.prompts.save_file(self.window, caption, filters, os.path.join(folder, stem + suffix))
            if not path:
                return None
        return _with_suffix(os.fspath(path), suffix)

    def _export(self, what: str, write) -> bool:
        try:
            written = write()
        except (ExportError, OSError, ValueError) as exc:
            self.ctx.report(Level.ERROR, f"cannot export the {what}: {exc}")
            return False
        if written is None:
            return False
        if self.settings is not None:
            self.settings.set_last_folder(written)
        self.ctx.report(Level.INFO, f"exported the {what} to {Path(written).name}")
        return True

    def export_png(self, path=None, scale: float | None = None) -> bool:
        """Write the heatmap as a PNG at ``scale`` times its on-screen size; without a scale, the
        person chooses a resolution (1x to 4x, or a width in pixels), then the file."""
        panel = self._heatmap_panel()
        if panel is None:
            return False
        widget = panel.export_widget()
        if scale is None:
            scale = 1.0 if path is not None else self.ask_png_scale(widget)
            if scale is None:
                return False

        def write():
            p = self._ask("Export heatmap as PNG", "PNG images (*.png)", ".png", path)
            return None if p is None else export_png(widget, p, scale)

        return self._export("heatmap picture", write)

    def ask_png_scale(self, widget) -> float | None:
        """The person's choice of resolution for ``widget``'s PNG (None: cancelled)."""
        choices = [f"{k}x · {'{} x {} px'.format(*png_size(widget, k))}" for k in PNG_SCALES] + ["width in pixels…"]
        index = self.prompts.png_resolution(self.window, choices)
        if index is None:
            return None
        if index < len(PNG_SCALES):
            return float(PNG_SCALES[index])
        width = self.prompts.png_width(self.window, png_size(widget, 2)[0])
        if width is None:
            return None
        try:
            return scale_for_width(widget, width)
        except ExportError as exc:
            self.ctx.report(Level.ERROR, f"cannot export the heatmap picture: {exc}")
            return None

    def export_svg(self, path=None) -> bool:
        panel = self._heatmap_panel()
        if panel is None:
            return False

        def write():
            p = self._ask("Export heatmap as SVG", "SVG drawings (*.svg)", ".svg", path)
            return None if p is None else export_svg(panel.export_widget(), p, title="attnviz heatmap")

        return self._export("heatmap drawing", write)

    def export_csv(self, path=None) -> bool:
        panel = self._heatmap_panel()
        if panel is None:
            return False

        def write():
            values, rows, cols, name = panel.current_matrix()
            p = self._ask("Export the shown matrix as CSV", "CSV tables (*.csv)", ".csv", path, name)
            return None if p is None else export_csv(values, p, rows, cols)

        return self._export("matrix", write)

    def export_npy(self, path=None) -> bool:
        panel = self._heatmap_panel()
        if panel is None:
            return False

        def write():
            array, name = panel.current_stack()
            p = self._ask("Export all heads' matrices as NPY", "NumPy arrays (*.npy)", ".npy", path, name)
            return None if p is None else export_npy(array, p)

        return self._export("matrices", write)

    # ------------------------------------------------------------------ autosave and recovery
    def autosave_now(self) -> bool:
        """Write the autosave copy when the session is dirty; True if written."""
        if self.autosave is None or not self.ctx.session.dirty or self.recovery_box is not None:
            return False
        try:
            return self.autosave.write_if_changed(self.ctx.session.state, self.path, self._session_maps())
        except SessionError as exc:
            if not self._autosave_error_shown:  # once: a full disk would otherwise report every 30 s
                self._autosave_error_shown = True
                self.ctx.report(Level.WARNING, f"autosave failed: {exc}")
            return False

    def offer_recovery(self) -> bool:
        """After a crash, show the recovery offer (non-blocking); True if one is shown."""
        if self.autosave is None:
            return False
        info = self.autosave.recoverable()
        if info is None:
            return False
        when = info.saved_at.replace("T", " ").split(".")[0].rstrip("Z") or "an unknown time"
        of = f"of {Path(info.source_path).name}" if info.source_path else "of an untitled session"
        box = QMessageBox(QMessageBox.Icon.Question, "Recover unsaved work",
                          f"attnviz did not close properly last time. An autosaved copy {of} from {when} (UTC) "
                          "can be recovered.", QMessageBox.StandardButton.NoButton, self.window)
        box.setObjectName("recovery_offer")
        self.recover_button = box.addButton("&Recover", QMessageBox.ButtonRole.AcceptRole)
        self.discard_button = box.addButton("&Discard", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(self.recover_button)
        box.finished.connect(lambda _r: self._on_recovery_answer(box.clickedButton() is self.recover_button, info))
        self.recovery_box = box
        box.open()
        return True

    def _on_recovery_answer(self, recover: bool, info) -> None:
        box, self.recovery_box = self.recovery_box, None
        if box is not None:
            box.deleteLater()
        if not recover:
            try:
                self.autosave.discard()
            except SessionError as exc:
                self.ctx.report(Level.WARNING, str(exc))
            return
        self.recover(info)

    def recover(self, info=None) -> bool:
        """Load the autosaved session (dirty: it is not saved anywhere yet)."""
        try:
            state, stored = self.autosave.load_with_maps()
            maps = self._decode_maps(self.autosave.autosave_path, stored)
        except SessionError as exc:
            self.ctx.report(Level.ERROR, f"cannot recover the autosaved session: {exc}")
            return False
        source = getattr(info, "source_path", None)
        self._replace(state, source, dirty=True)
        self._show_maps(maps)
        self.ctx.report(Level.INFO, "recovered the autosaved session; save it to keep it")
        return True

    def shutdown(self) -> None:
        """Record a clean exit (removes the autosave copy and the running marker)."""
        self.autosave_timer.stop()
        if self.autosave is not None:
            try:
                self.autosave.mark_clean_exit()
            except SessionError:
                pass  # the marker stays: the next start offers nothing, as no autosave exists
