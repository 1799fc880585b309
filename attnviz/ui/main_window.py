"""The main window: every panel of ``attnviz.ui.panels`` as a dock (the "center" one in the middle),
the menus (File, Edit, View, Help) with standard shortcuts, the status bar, a notice bar for
messages, drag and drop of files, and window settings (geometry, dock layout, theme) kept across
runs. Panels are discovered, never listed here, so new docks appear by adding a module.

Start-up: the central panel and the left column are built with the window; every other dock gets its
panel when it is first shown, so panels hidden behind tabs cost nothing until used (their modules
are not even imported, see :func:`attnviz.ui.panels.discover_panels`). Docks shown at start wait
until the first computed result has been delivered (or ``DOCKS_FALLBACK_MS`` after the first paint)
and are then built one per event-loop turn, so the heatmap is drawn first. ``window.panel(id)``
builds a panel on demand; ``first_painted`` is emitted once the window has painted for the first time.
"""

from __future__ import annotations

import traceback

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (QApplication, QDialog, QDockWidget, QFrame, QHBoxLayout, QHeaderView, QLabel,
                               QMainWindow, QMessageBox, QScrollArea, QTableWidget, QTableWidgetItem, QToolButton, QVBoxLayout,
                               QWidget)

from attnviz.model.demos import list_demos
from attnviz.model.state import ImageSource
from attnviz.ui.file_actions import FileActions
from attnviz.ui.panels import discover_panels
from attnviz.ui.settings import AppSettings
from attnviz.ui.status import StatusBar
from attnviz.ui.theme import apply_theme, current_theme

AREAS = {"left": Qt.DockWidgetArea.LeftDockWidgetArea, "right": Qt.DockWidgetArea.RightDockWidgetArea,
         "top": Qt.DockWidgetArea.TopDockWidgetArea, "bottom": Qt.DockWidgetArea.BottomDockWidgetArea}
DEFAULT_WIDTHS = {"left": 350, "right": 470}  # dock column widths of the default layout, in pixels
DEFAULT_HEIGHTS = {"top": 220, "bottom": 240}
EAGER_AREAS = ("left",)  # docks built with the window; the others when first shown (start-up time)
DOCKS_FALLBACK_MS = 1500  # shown docks are built after the first result, or this long after the first paint
STACKED = {"left": 2}  # docks of an area placed one above the other before further ones become tabs (else 1)
NOTICE_COLOURS = {"info": ("#2f7bd8", "#e8f1fc", "#17324f"), "warning": ("#c98a00", "#fdf4df", "#4a3500"),
                  "error": ("#d0202a", "#fbe6e7", "#5a0d12")}


class NoticeBar(QFrame):
    """A dismissable line above the heatmap for messages a person must see without a dialog."""

    INFO_MS = 6000  # information disappears by itself; warnings and errors stay until dismissed

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("notice")
        self.level = ""
        self.from_compute = False
        self.label = QLabel("", self)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.close_button = QToolButton(self)
        self.close_button.setText("✕")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip("dismiss")
        self.close_button.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 3, 4, 3)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.dismiss)
        self.setVisible(False)

    def show_notice(self, level: str, text: str, from_compute: bool = False) -> None:
        border, bg, fg = NOTICE_COLOURS.get(level, NOTICE_COLOURS["info"])
        self.setStyleSheet(f"QFrame#notice {{ background: {bg}; border: 1px solid {border}; border-radius: 3px; }}"
                           f"QFrame#notice QLabel {{ color: {fg}; }}")
        self.level, self.from_compute = level, from_compute
        self.label.setText(text)
        self.setVisible(True)
        if level == "info":
            self._timer.start(self.INFO_MS)
        else:
            self._timer.stop()

    def dismiss(self) -> None:
        self._timer.stop()
        self.level, self.from_compute = "", False
        self.setVisible(False)


class ShortcutsDialog(QDialog):
    """Every menu action with a shortcut."""

    def __init__(self, rows: list[tuple[str, str, str]], parent=None):
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        table = QTableWidget(len(rows), 3, self)
        table.setHorizontalHeaderLabels(["menu", "action", "shortcut"])
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                table.setItem(i, j, QTableWidgetItem(text))
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        table.horizontalHeader().setStretchLastSection(True)
        layout = QVBoxLayout(self)
        layout.addWidget(table)
        self.table = table
        self.resize(480, 460)


class MainWindow(QMainWindow):
    """The attnviz window around one AppContext."""

    theme_changed = Signal(str)
    first_painted = Signal()  # once: the window has painted (is on screen) for the first time

    def __init__(self, ctx, settings: AppSettings | None = None, autosave=None, prompts=None,
                 autosave_interval_ms: int = 30_000, panels=None, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self.settings = settings if settings is not None else AppSettings()
        self.specs = list(panels) if panels is not None else discover_panels()
        self.panels: dict[str, QWidget] = {}
        self.docks: dict[str, QDockWidget] = {}
        self._pending: dict[str, tuple] = {}  # panel id -> (spec, scroll area) not built yet
        self._queued: list[str] = []  # shown docks whose panels wait for the first result
        self._docks_released = False  # shown docks build at once (after the first result)
        self._painted = False
        self.setObjectName("attnviz_main_window")
        self.setDockOptions(QMainWindow.DockOption.AnimatedDocks | QMainWindow.DockOption.AllowTabbedDocks
                            | QMainWindow.DockOption.AllowNestedDocks)
        self.files = FileActions(ctx, self, self.settings, autosave, prompts, autosave_interval_ms,
                                 heatmap=lambda: self.panels.get("heatmap"))
        self.notice = NoticeBar(self)
        self._build_panels()
        self.status = StatusBar(ctx, self)
        self.setStatusBar(self.status)
        self._build_menus()
        self.setAcceptDrops(True)
        ctx.message.connect(self.notify)
        ctx.response_changed.connect(self._on_response)
        ctx.response_changed.connect(self._release_docks_later)
        ctx.session.events.dirty.connect(lambda dirty: self.setWindowModified(bool(dirty)))
        self.files.path_changed.connect(lambda _p: self._update_title())
        self.files.session_replaced.connect(self.notice.dismiss)
        self._n_images = self._count_images(ctx.session.state.sources)
        ctx.session.events.sources.connect(self._on_sources_changed)
        self._update_title()
        self.restore_layout()

    # ------------------------------------------------------------------ panels
    def panel(self, panel_id: str) -> QWidget | None:
        """The panel with this id, built now if it was still waiting to be shown (None: no such panel)."""
        if panel_id in self._pending:
            self._build_pending(panel_id)
        return self.panels.get(panel_id)

    def _make(self, spec) -> QWidget:
        try:
            w = spec.factory(self.ctx)
        except Exception as exc:  # one broken panel must not take the window down
            w = QLabel(f"The {spec.title} panel could not be created:\n{exc}")
            w.setWordWrap(True)
            w.setAlignment(Qt.AlignmentFlag.AlignCenter)
            QTimer.singleShot(0, lambda: self.notify("error", f"the {spec.title} panel could not be created: {exc}"))
        if hasattr(w, "prompts"):
            w.prompts = self.files.prompts
        self.panels[spec.id] = w
        return w

    def _build_later(self, panel_id: str) -> None:
        if panel_id not in self._pending:
            return
        if self._docks_released:
            QTimer.singleShot(0, self, lambda: self._build_pending(panel_id))  # after the dock has painted
        elif panel_id not in self._queued:
            self._queued.append(panel_id)

    def _release_docks_later(self, *_args) -> None:
        if not self._docks_released:
            QTimer.singleShot(0, self, self.release_docks)  # after the result's redraw has painted

    def release_docks(self) -> None:
        """Build the panels of shown docks from now on, those already waiting one per event-loop turn."""
        if self._docks_released:
            return
        self._docks_released = True
        self._build_next_queued()

    def _build_next_queued(self) -> None:
        while self._queued:
            panel_id = self._queued.pop(0)
            if panel_id in self._pending:
                self._build_pending(panel_id)
                if self._queued:
                    QTimer.singleShot(0, self, self._build_next_queued)
                return

    def event(self, ev) -> bool:
        handled = super().event(ev)
        if not self._painted and ev.type() == QEvent.Type.Paint:
            self._painted = True
            QTimer.singleShot(0, self, self._on_first_paint)  # after the painted frame has been flushed
        return handled

    def _on_first_paint(self) -> None:
        QTimer.singleShot(DOCKS_FALLBACK_MS, self, self.release_docks)
        self.first_painted.emit()

    def _build_pending(self, panel_id: str) -> None:
        if panel_id in self._queued:
            self._queued.remove(panel_id)
        item = self._pending.pop(panel_id, None)
        if item is not None:
            spec, scroll = item
            scroll.setWidget(self._make(spec))

    def build_all_panels(self) -> None:
        """Build every panel now (tests and screenshots that visit them all)."""
        for panel_id in list(self._pending):
            self._build_pending(panel_id)

    def _build_panels(self) -> None:
        centre = [s for s in self.specs if s.area == "center"]
        holder = QWidget(self)
        layout = QVBoxLayout(holder)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.notice)
        if centre:
            layout.addWidget(self._make(centre[0]), 1)
        else:
            layout.addWidget(QLabel(""), 1)
        self.setCentralWidget(holder)
        for spec in self.specs:
            if spec.area == "center" and spec is centre[0]:
                continue
            dock = QDockWidget(spec.title, self)
            dock.setObjectName(spec.id)
            # a scroll area lets a dock shrink below its panel's minimum size, so the window fits
            # small screens whatever panels are installed
            scroll = QScrollArea(dock)
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            if spec.area in EAGER_AREAS:
                scroll.setWidget(self._make(spec))
            else:  # built when the dock is first shown (tabs behind others may never be)
                self._pending[spec.id] = (spec, scroll)
                dock.visibilityChanged.connect(lambda visible, i=spec.id: visible and self._build_later(i))
            dock.setWidget(scroll)
            dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                             | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                             | QDockWidget.DockWidgetFeature.DockWidgetClosable)
            self.docks[spec.id] = dock
        self._place_docks()

    def _place_docks(self) -> None:
        """The default arrangement: the left column stacks its first two docks, every other area
        tabs its docks (the first raised); the left column runs the full height and the bottom
        area spans the heatmap and the right column."""
        self.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.setCorner(Qt.Corner.TopLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.BottomDockWidgetArea)
        by_area: dict[str, list] = {}
        for spec in self.specs:
            if spec.id in self.docks:
                area = spec.area if spec.area in AREAS else "right"  # a second "center" panel goes right
                by_area.setdefault(area, []).append(spec)
        for area, specs in by_area.items():
            placed = []
            for spec in specs:
                dock = self.docks[spec.id]
                if len(placed) < STACKED.get(area, 1):
                    self.addDockWidget(AREAS[area], dock, Qt.Orientation.Vertical)
                else:
                    self.tabifyDockWidget(placed[-1], dock)
                placed.append(dock)
                dock.setVisible(spec.visible)
            for s in specs[:STACKED.get(area, 1)]:
                self.docks[s.id].raise_()
            if area in DEFAULT_WIDTHS:
                self.resizeDocks([placed[0]], [DEFAULT_WIDTHS[area]], Qt.Orientation.Horizontal)
            if area in DEFAULT_HEIGHTS:
                self.resizeDocks([placed[0]], [DEFAULT_HEIGHTS[area]], Qt.Orientation.Vertical)
        left = [self.docks[s.id] for s in by_area.get("left", [])[:STACKED["left"]]]
        if len(left) == 2:
            self.resizeDocks(left, [540, 420], Qt.Orientation.Vertical)

    def reset_layout(self) -> None:
        for dock in self.docks.values():
            self.removeDockWidget(dock)
        self._place_docks()
        for spec in self.specs:
            if spec.id in self.docks:
                self.docks[spec.id].setVisible(spec.visible)

    def restore_layout(self) -> None:
        geometry = self.settings.geometry()
        if geometry is None or not self.restoreGeometry(geometry):
            screen = QApplication.primaryScreen()
            avail = screen.availableGeometry() if screen is not None else None
            w, h = 1600, 1000
            if avail is not None and avail.width() > 0:
                w, h = min(w, int(avail.width() * 0.92)), min(h, int(avail.height() * 0.92))
            self.resize(w, h)
        state = self.settings.window_state()
        if state is not None:
            self.restoreState(state, self.settings.config.layout_version)

    def save_layout(self) -> None:
        self.settings.save_window(self.saveGeometry(), self.saveState(self.settings.config.layout_version))
        self.settings.sync()

    # ------------------------------------------------------------------ menus
    def _action(self, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        act = QAction(text, self)
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        if tip:
            act.setStatusTip(tip)
        act.triggered.connect(lambda _checked=False: slot())
        menu.addAction(act)
        return act

    def _build_menus(self) -> None:
        bar = self.menuBar()
        f = bar.addMenu("&File")
        K = QKeySequence.StandardKey
        self.new_action = self._action(f, "&New", lambda: self.files.new_session(), K.New, "start an empty session")
        demos = f.addMenu("New from &demo")
        for name, desc in list_demos():
            a = self._action(demos, name, lambda n=name: self.files.new_session(n))
            a.setToolTip(desc)
            a.setStatusTip(desc)
        self.open_action = self._action(f, "&Open…", self.files.open_dialog, K.Open,
                                        "open a session, or add an image, text or values file")
        self.recent_menu = f.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        self.files.recent_changed.connect(lambda _l: self._fill_recent())
        self._fill_recent()
        f.addSeparator()
        self.save_action = self._action(f, "&Save", self.files.save, K.Save)
        self.save_as_action = self._action(f, "Save &As…", self.files.save_as, K.SaveAs)
        f.addSeparator()
        ex = f.addMenu("&Export")
        self._action(ex, "Heatmap as &PNG…", self.files.export_png, "Ctrl+E")
        self._action(ex, "Heatmap as &SVG…", self.files.export_svg, "Ctrl+Shift+E")
        self._action(ex, "Shown matrix as &CSV…", self.files.export_csv)
        self._action(ex, "All heads' matrices as &NPY…", self.files.export_npy)
        f.addSeparator()
        self.quit_action = self._action(f, "&Quit", self.close, K.Quit)

        e = bar.addMenu("&Edit")
        self.undo_action = self.ctx.undo_stack.createUndoAction(self, "&Undo")
        self.undo_action.setShortcut(QKeySequence(K.Undo))
        self.redo_action = self.ctx.undo_stack.createRedoAction(self, "&Redo")
        self.redo_action.setShortcuts([QKeySequence(K.Redo), QKeySequence("Ctrl+Y")])
        e.addAction(self.undo_action)
        e.addAction(self.redo_action)

        v = bar.addMenu("&View")
        for spec in self.specs:
            dock = self.docks.get(spec.id)
            if dock is None:
                continue
            act = dock.toggleViewAction()
            act.setText(spec.title)
            if spec.shortcut:
                act.setShortcut(QKeySequence(spec.shortcut))
            v.addAction(act)
        v.addSeparator()
        self._action(v, "Reset &layout", self.reset_layout)
        v.addSeparator()
        group = QActionGroup(self)
        self.theme_actions = {}
        for name, label, key in (("light", "&Light theme", "Ctrl+Shift+L"), ("dark", "&Dark theme", "Ctrl+Shift+D")):
            act = self._action(v, label, lambda n=name: self.set_theme(n), key)
            act.setCheckable(True)
            group.addAction(act)
            self.theme_actions[name] = act
        self.theme_actions[current_theme().name].setChecked(True)

        h = bar.addMenu("&Help")
        self._action(h, "&Keyboard shortcuts", self.show_shortcuts, K.HelpContents)
        self._action(h, "&About attnviz", self.show_about)

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        files = self.settings.recent_files()
        for path in files:
            act = self.recent_menu.addAction(path)
            act.triggered.connect(lambda _c=False, p=path: self.files.open_recent(p))
        if files:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear list", lambda: (self.settings.clear_recent(), self._fill_recent()))
        else:
            a = self.recent_menu.addAction("(no recent files)")
            a.setEnabled(False)

    def shortcut_rows(self) -> list[tuple[str, str, str]]:
        rows = []
        for menu_action in self.menuBar().actions():
            menu = menu_action.menu()
            stack = [(menu_action.text().replace("&", ""), menu)]
            while stack:
                title, m = stack.pop(0)
                for a in m.actions():
                    if a.menu() is not None:
                        stack.append((f"{title} ▸ {a.text().replace('&', '')}", a.menu()))
                    elif not a.shortcut().isEmpty():
                        rows.append((title, a.text().replace("&", ""),
                                     a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)))
        return rows

    def show_shortcuts(self) -> ShortcutsDialog:
        dlg = ShortcutsDialog(self.shortcut_rows(), self)
        dlg.show()
        self._shortcuts_dialog = dlg
        return dlg

    def show_about(self) -> QMessageBox:
        from attnviz import __version__

        box = QMessageBox(QMessageBox.Icon.Information, "About attnviz",
                          f"<b>attnviz {__version__}</b><p>A desktop laboratory for the attention mechanism: "
                          "tokens, Q, K and V, masks, and live scores, weights and outputs per head from a numba "
                          "flash-attention engine.</p>", QMessageBox.StandardButton.Ok, self)
        box.open()
        self._about_box = box
        return box

    # ------------------------------------------------------------------ theme
    def set_theme(self, name: str) -> None:
        app = QApplication.instance()
        apply_theme(app, name)
        self.settings.set_theme(name)
        if name in self.theme_actions:
            self.theme_actions[name].setChecked(True)
        if self.notice.isVisible():
            self.notice.show_notice(self.notice.level, self.notice.label.text(), self.notice.from_compute)
        self.theme_changed.emit(name)

    # ------------------------------------------------------------------ messages
    def notify(self, level: str, text: str) -> None:
        """Show a message a person caused or must know: status bar, and a notice for warnings/errors."""
        resp = self.ctx.response
        from_compute = resp is not None and not resp.ok and resp.error == text
        self.status.showMessage(text, 10_000 if level == "info" else 20_000)
        if level in ("warning", "error"):
            self.notice.show_notice(level, text, from_compute)

    def _on_response(self, resp) -> None:
        if resp.ok and self.notice.from_compute:
            self.notice.dismiss()  # the problem the last computation had is gone

    def show_exception(self, exc_type, exc, tb) -> QMessageBox:
        """Report an unexpected error in a dialog; the application keeps running."""
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        box = QMessageBox(QMessageBox.Icon.Critical, "Unexpected error",
                          f"Something went wrong: {exc_type.__name__}: {exc}\n\nThe session is unchanged; you can "
                          "keep working. Please report this with the details below.", QMessageBox.StandardButton.Ok,
                          self)
        box.setDetailedText(text)
        box.setObjectName("exception_box")
        box.setModal(False)
        box.show()
        self._exception_box = box
        self.status.showMessage(f"unexpected error: {exc_type.__name__}: {exc}", 20_000)
        return box

    @staticmethod
    def _count_images(sources) -> int:
        return sum(1 for s in sources if isinstance(s, ImageSource))

    def _on_sources_changed(self, sources) -> None:
        n = self._count_images(sources)
        if n > self._n_images and "image" in self.docks:
            self.docks["image"].raise_()  # a new image: show the attention over it
        self._n_images = n

    def _update_title(self) -> None:
        import os

        name = os.path.basename(self.files.path) if self.files.path else "untitled"
        self.setWindowTitle(f"{name}[*] — attnviz")
        self.setWindowModified(self.ctx.session.dirty)

    # ------------------------------------------------------------------ drag and drop
    @staticmethod
    def _local_paths(mime) -> list[str]:
        if not mime.hasUrls():
            return []
        return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile()]

    def dragEnterEvent(self, ev):
        if self._local_paths(ev.mimeData()):
            ev.acceptProposedAction()
        else:
            ev.ignore()

    def dragMoveEvent(self, ev):
        if self._local_paths(ev.mimeData()):
            ev.acceptProposedAction()

    def dropEvent(self, ev):
        paths = self._local_paths(ev.mimeData())
        if not paths:
            ev.ignore()
            return
        ev.acceptProposedAction()
        self.files.open_paths(paths)

    # ------------------------------------------------------------------ closing
    def closeEvent(self, ev):
        if not self.files.maybe_save("closing"):
            ev.ignore()
            return
        self.save_layout()
        self.files.shutdown()
        self.stop_workers()
        ev.accept()

    def stop_workers(self) -> None:
        """Stop the compute thread and every panel's worker threads."""
        for p in self.panels.values():
            stop = getattr(p, "shutdown", None)  # panels with worker threads stop them here
            if callable(stop):
                try:
                    stop()
                except Exception:  # noqa: BLE001 - one panel's failure must not keep the others running
                    pass
        self.ctx.compute.shutdown(timeout=2.0)
