"""The main window: an always-present sidebar (the panels whose spec says ``area="left"``) and a central
area showing one workspace at a time (:mod:`attnviz.ui.workspaces`), with the menus, status and
notice bars, drag and drop of files, and a layout kept across runs (one that no longer fits falls back
to the default). The panels are :data:`attnviz.ui.panels.PANELS`, built late: the sidebar and the
heatmap with the window, the shown workspace's other panels after the first result (so the heatmap is
drawn first), every other panel when its workspace is first shown.
"""

from __future__ import annotations

import traceback

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (QApplication, QDialog, QFrame, QHBoxLayout, QHeaderView, QLabel, QMainWindow,
                               QMessageBox, QSplitter, QTableWidget, QTableWidgetItem, QToolButton, QVBoxLayout,
                               QWidget)

from attnviz.model.demos import list_demos
from attnviz.model.state import ImageSource
from attnviz.ui import collector
from attnviz.ui.access_keys import set_standard_keys
from attnviz.ui.file_actions import FileActions
from attnviz.ui.panels import PANELS
from attnviz.ui.settings import AppSettings
from attnviz.ui.status import StatusBar
from attnviz.ui.theme import apply_theme, current_theme
from attnviz.ui.workspaces import workspaces_for
from attnviz.ui.workspaces.area import WorkspaceArea
from attnviz.ui.workspaces.background import BACKGROUND_IMPORTS, import_then
from attnviz.ui.workspaces.hint import HintBar
from attnviz.ui.workspaces.sidebar import DEFAULT_WIDTH as SIDEBAR_WIDTH
from attnviz.ui.workspaces.sidebar import Sidebar, placeholder
from attnviz.ui.workspaces.tabs import TabUnavailable, show_tab, split_target
from attnviz.ui.messages import Level

PANELS_FALLBACK_MS = 1500  # shown panels are built after the first result, or this long after the first paint
DEFAULT_SIZE = (1600, 1000)  # a new window, at most 92 % of the screen
SIDEBAR_MAX_SHARE = 0.5  # a saved sidebar wider than this share of the window is a broken layout
NOTICE_COLOURS = {Level.INFO: ("#2f7bd8", "#e8f1fc", "#17324f"), Level.WARNING: ("#c98a00", "#fdf4df", "#4a3500"),
                  Level.ERROR: ("#d0202a", "#fbe6e7", "#5a0d12")}
# keyboard focus must be visible: plots, tables and text views get a frame in the highlight colour
FOCUS_FRAMED = ("QGraphicsView", "QAbstractItemView", "QTextEdit", "QPlainTextEdit")


class FocusRing(QWidget):
    """The focused view's frame: a 2-pixel line in the palette's highlight colour along its edge,
    drawn by a child laid over the view (it lets mouse events through)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.hide()
        self._home = parent  # where the ring waits while no view has the focus
        self._view: QWidget | None = None

    def widget(self) -> QWidget | None:
        return self._view

    def setWidget(self, view: QWidget | None) -> None:  # noqa: N802 - QFocusFrame's name
        if self._view is not None:
            try:
                self._view.removeEventFilter(self)
                self._view.destroyed.disconnect(self._on_view_destroyed)
            except (RuntimeError, TypeError):  # the view is gone
                pass
        self._view = view
        if view is None:
            self.hide()
            self.setParent(self._home)
            return
        self.setParent(view)
        view.installEventFilter(self)
        view.destroyed.connect(self._on_view_destroyed)
        self.setGeometry(view.rect())
        self.raise_()
        self.show()

    def _on_view_destroyed(self, *_args) -> None:
        self._view = None  # before the view deletes its children: the ring goes home
        self.hide()
        self.setParent(self._home)

    def eventFilter(self, obj, ev):  # noqa: N802 - Qt's name
        if obj is self._view and ev.type() == QEvent.Type.Resize:
            self.setGeometry(obj.rect())
        return False

    def paintEvent(self, _ev):  # noqa: N802 - Qt's name
        from PySide6.QtGui import QPainter, QPen

        p = QPainter(self)
        p.setPen(QPen(self.palette().highlight().color(), 2))
        p.drawRect(self.rect().adjusted(1, 1, -1, -1))
        p.end()


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

    MARGIN = 8  # from the edges of the area it floats over

    def float_over(self, host: QWidget) -> None:
        """Float at the bottom of ``host`` instead of taking a line of its layout: a notice coming or
        going never moves what is under the mouse (the mask workspace's presets once jumped 29 px)."""
        self.setParent(host)
        self._host = host
        host.installEventFilter(self)
        self.setAutoFillBackground(True)

    def eventFilter(self, obj, ev):  # noqa: N802 - Qt's name
        if obj is getattr(self, "_host", None) and ev.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False

    def _place(self) -> None:
        host = getattr(self, "_host", None)
        if host is None:
            return
        width = max(120, host.width() - 2 * self.MARGIN)
        lay = self.layout()
        height = lay.totalHeightForWidth(width) if lay.hasHeightForWidth() else self.sizeHint().height()
        height = min(max(height, self.minimumSizeHint().height()), max(40, host.height() // 3))
        self.setGeometry(self.MARGIN, host.height() - height - self.MARGIN, width, height)
        self.raise_()

    def show_notice(self, level: Level, text: str, from_compute: bool = False) -> None:
        border, bg, fg = NOTICE_COLOURS.get(level, NOTICE_COLOURS[Level.INFO])
        self.setStyleSheet(f"QFrame#notice {{ background: {bg}; border: 1px solid {border}; border-radius: 3px; }}"
                           f"QFrame#notice QLabel {{ color: {fg}; }}")
        self.level, self.from_compute = level, from_compute
        self.label.setText(text)
        self.setVisible(True)
        self._place()
        if level == Level.INFO:
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
        table.setTabKeyNavigation(False)  # Tab leaves the table; arrows move between cells
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                table.setItem(i, j, QTableWidgetItem(text))
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        table.horizontalHeader().setStretchLastSection(True)
        layout = QVBoxLayout(self)
        layout.addWidget(table)
        self.table = table
        self.resize(480, 460)


PAINT_FIRST_MS = 16  # a wanted panel's import waits this long after its workspace is shown (one frame)


class MainWindow(QMainWindow):
    """The attnviz window around one AppContext."""

    theme_changed = Signal(str)
    first_painted = Signal()  # once: the window has painted (is on screen) for the first time

    def __init__(self, ctx, settings: AppSettings | None = None, autosave=None, prompts=None,
                 autosave_interval_ms: int = 30_000, panels=None, parent=None, restore: bool = True,
                 hint: bool = True):
        super().__init__(parent)
        self.ctx = ctx
        self.settings = settings if settings is not None else AppSettings()
        self.specs = list(panels if panels is not None else PANELS)
        self.panels: dict[str, QWidget] = {}
        self._pending: dict[str, object] = {}  # panel id -> spec not built yet
        self._queued: list[str] = []  # panels of the shown workspace waiting for the first result
        self._released = False  # wanted panels build at once (after the first result)
        self._painted = False
        self.setObjectName("attnviz_main_window")
        self.focus_frame = FocusRing(self)
        app = QApplication.instance()
        if app is not None:
            app.focusChanged.connect(self._on_focus_changed)
        self.files = FileActions(ctx, self, self.settings, autosave, prompts, autosave_interval_ms,
                                 heatmap=lambda: self.panels.get("heatmap"))
        self.notice = NoticeBar(self)
        self.hint = HintBar(parent=self)
        self.hint.setVisible(hint and not self.settings.hint_dismissed())
        self.hint.dismissed.connect(self._on_hint_dismissed)
        self._build_panels()
        self.hint.set_key(self._workspace_key("mask"))
        self.hint.workspace_requested.connect(self._on_hint_link)
        self.status = StatusBar(ctx, self)
        self.setStatusBar(self.status)
        self._build_menus()
        self.setAcceptDrops(True)
        ctx.message.connect(self.notify)
        ctx.response_changed.connect(self._on_response)
        ctx.response_changed.connect(self._release_later)
        ctx.session.events.dirty.connect(lambda dirty: self.setWindowModified(bool(dirty)))
        self.files.path_changed.connect(lambda _p: self._update_title())
        self._image_added = False
        self.files.session_replaced.connect(self._on_session_replaced)
        self._n_images = self._count_images(ctx.session.state.sources)
        ctx.session.events.sources.connect(self._on_sources_changed)
        self._update_title()
        if restore:
            self.restore_layout()
        else:
            self.default_layout()

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
            why = f"the {spec.title} panel could not be created: {exc}"  # exc is unbound once the block ends
            w = placeholder(f"The {spec.title} panel could not be created:\n{exc}")
            QTimer.singleShot(0, lambda: self.notify(Level.ERROR, why))
        if hasattr(w, "prompts"):
            w.prompts = self.files.prompts
        w.setObjectName(w.objectName() or f"panel_{spec.id}")
        self.panels[spec.id] = w
        return w

    def _build_later(self, panel_id: str) -> None:
        if panel_id not in self._pending:
            return
        if self._released:
            # after the workspace has painted: a 0 ms timer often fired in the same pass as that paint, and the
            # panel module's import and the paint then held the window for one step of 100-160 ms
            QTimer.singleShot(PAINT_FIRST_MS, self, lambda: self._import_then_build(panel_id))
        elif panel_id not in self._queued:
            self._queued.append(panel_id)

    def _import_then_build(self, panel_id: str) -> None:
        """Import the panel's module on this turn and build the panel on a later one (a panel's imports,
        the Pretrained panel's checkpoints, took as long as building it: one turn for both was twice as long)."""
        spec = self._pending.get(panel_id)
        load = getattr(spec.factory, "load", None) if spec is not None else None
        if load is not None and panel_id in BACKGROUND_IMPORTS:  # imported on a worker thread instead
            import_then(self, panel_id, load, lambda: self._build_pending(panel_id))
            return
        if load is not None:
            try:
                load()
            except Exception:  # noqa: BLE001 - building it reports the problem
                pass
        QTimer.singleShot(1, self, lambda: self._build_pending(panel_id))

    def _release_later(self, *_args) -> None:
        if not self._released:
            QTimer.singleShot(0, self, self.release_panels)  # after the result's redraw has painted

    def release_panels(self) -> None:
        """Build wanted panels from now on, those already waiting one per event-loop turn."""
        if self._released:
            return
        self._released = True
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
        QTimer.singleShot(PANELS_FALLBACK_MS, self, self.release_panels)
        self.first_painted.emit()

    def _build_pending(self, panel_id: str) -> None:
        if panel_id in self._queued:
            self._queued.remove(panel_id)
        spec = self._pending.pop(panel_id, None)
        if spec is not None:
            self._place(spec.id, self._make(spec))
            if spec.id == "pretrained":  # a maps file loaded there in any way becomes the session's maps
                from attnviz.ui.session_maps import follow_pretrained

                follow_pretrained(self)
            collector.panels_built()

    def _place(self, panel_id: str, widget: QWidget) -> None:
        if panel_id in self.sidebar.scrolls:
            self.sidebar.put(panel_id, widget)
        else:
            self.area.place(panel_id, widget)

    def _build_panels(self) -> None:
        left = [s for s in self.specs if s.area == "left"]
        rest = [s for s in self.specs if s.area != "left"]
        self.sidebar = Sidebar(left, self)
        self.area = WorkspaceArea(workspaces_for(rest), self)
        self.area.layout().insertWidget(1, self.hint)
        self.notice.float_over(self.area)
        self.area.panel_wanted.connect(self._build_later)
        self.area.workspace_changed.connect(self._on_workspace_changed)
        self.body = QSplitter(Qt.Orientation.Horizontal, self)
        self.body.setObjectName("body_split")
        self.body.addWidget(self.sidebar)
        self.body.addWidget(self.area)
        self.body.setStretchFactor(0, 0)
        self.body.setStretchFactor(1, 1)
        self.body.setCollapsible(0, True)
        self.body.setCollapsible(1, False)
        self.setCentralWidget(self.body)
        centre = [s.id for s in rest if s.area == "center"][:1]  # the attention workspace's heatmap
        eager = {s.id for s in left} | set(centre)
        for spec in self.specs:
            if spec.id in eager:
                self._place(spec.id, self._make(spec))
            else:
                self._pending[spec.id] = spec
        if not left:
            self.sidebar.setVisible(False)

    def _on_focus_changed(self, _old, new) -> None:
        """Frame the focused view when the style draws no focus of its own for it."""
        framed = new is not None and self.isAncestorOf(new) and any(
            cls.__name__ in FOCUS_FRAMED for cls in type(new).__mro__)
        self.focus_frame.setWidget(new if framed else None)

    # ------------------------------------------------------------------ workspaces
    @property
    def workspace(self) -> str:
        """The name of the workspace shown."""
        return self.area.current

    def show_workspace(self, name: str) -> None:
        """Show a workspace (ValueError for an unknown name); showing the current one changes nothing.
        ``NAME/TAB`` also brings that tab of the workspace's main panel forward (built now), e.g.
        ``diagnostics/softmax-jacobian`` (:mod:`attnviz.ui.workspaces.tabs`)."""
        name, tab = split_target(name)
        self.area.show_workspace(name)
        if tab:
            panel = self.panel(self.area.page(name).workspace.main)
            try:
                show_tab(panel, tab)
            except TabUnavailable:
                if not self._show_tab_after_load(panel, tab):
                    raise

    def _show_tab_after_load(self, panel, tab: str) -> bool:
        """A tab enabled by a model the panel is about to load (the Pretrained workspace's first model, loaded
        when it first shows) comes forward once that model has loaded; False when no load is coming."""
        expects = getattr(panel, "expects_model", None)
        if not callable(expects) or not expects():
            return False

        def retry(_ckpt) -> None:
            panel.model_loaded.disconnect(retry)
            try:
                show_tab(panel, tab)
            except ValueError as exc:  # still disabled for the model that came (e.g. Generate on an encoder)
                self.ctx.report(Level.WARNING, f"{exc} with {getattr(_ckpt, 'name', 'this model')}")

        panel.model_loaded.connect(retry)
        return True

    def enter_workspace(self, name: str) -> None:
        """Show a workspace and move the keyboard focus into it (View ▸ ... workspace, Ctrl+1..6)."""
        self.show_workspace(name)
        page = self.area.page(self.workspace)
        self.panel(page.workspace.main)  # built now: the focus goes into it
        if self.focus_area_widget(page) is None:
            self.area.bar.setFocus(Qt.FocusReason.ShortcutFocusReason)  # the mode bar, at least

    # ------------------------------------------------------------------ keyboard focus
    def focus_areas(self) -> list[QWidget]:
        """The window's areas in F6 order: the sidebar (when shown), the workspace shown."""
        areas = [self.sidebar] if self.sidebar.isVisible() else []
        return areas + [self.area.page(self.workspace)]

    def focus_area(self, step: int = 1) -> QWidget | None:
        """Move the focus to the next (``step`` 1) or previous (-1) area (F6, Ctrl+Tab); returns the
        widget that took it."""
        areas = self.focus_areas()
        focused = QApplication.focusWidget()
        here = next((i for i, a in enumerate(areas) if focused is not None and a.isAncestorOf(focused)), None)
        start = 0 if here is None and step > 0 else (len(areas) - 1 if here is None else here + step)
        for k in range(len(areas)):
            target = self.focus_area_widget(areas[(start + k * step) % len(areas)])
            if target is not None:
                return target
        return None

    @staticmethod
    def focus_area_widget(area: QWidget) -> QWidget | None:
        """Give the focus to the first widget of ``area`` that takes it by Tab; returns it."""
        w = area
        for _ in range(5000):  # the window's focus chain, from the area on
            w = w.nextInFocusChain()
            if w is None or w is area:
                break
            if (area.isAncestorOf(w) and w.isVisible() and w.isEnabled()
                    and w.focusPolicy() & Qt.FocusPolicy.TabFocus == Qt.FocusPolicy.TabFocus
                    and w.focusProxy() is None):
                w.setFocus(Qt.FocusReason.TabFocusReason)
                return w
        return None

    def _workspace_key(self, name: str) -> str:
        names = self.area.names()
        return f"Ctrl+{names.index(name) + 1}" if name in names and names.index(name) < 9 else ""

    def _on_workspace_changed(self, name: str) -> None:
        act = getattr(self, "workspace_actions", {}).get(name)
        if act is not None:
            act.setChecked(True)
        for pid in self.area.page(name).slots:
            if pid in self.panels:
                continue
            self._build_later(pid)

    def _on_hint_link(self, name: str) -> None:
        if name == "text":
            inputs = self.panel("inputs")
            if inputs is not None and hasattr(inputs, "write_own_text"):
                inputs.write_own_text()
        elif name in self.area.pages:
            self.show_workspace(name)

    def _on_hint_dismissed(self) -> None:
        self.settings.set_hint_dismissed(True)
        self.settings.sync()

    def set_sidebar_visible(self, visible: bool) -> None:
        self.sidebar.setVisible(bool(visible) and bool(self.sidebar.scrolls))
        if visible and self.body.sizes()[0] == 0:
            side = self._sidebar_default_width()
            self.body.setSizes([side, max(1, self.body.width() - side)])
        if hasattr(self, "sidebar_action"):
            self.sidebar_action.setChecked(bool(visible))

    def _sidebar_default_width(self) -> int:
        return max(SIDEBAR_WIDTH, self.sidebar.minimumSizeHint().width())

    # ------------------------------------------------------------------ layout
    def default_layout(self) -> None:
        """The layout of a new window: the default size for the screen, the attention workspace, the
        sidebar at its default width, every workspace at its default shares."""
        w, h = DEFAULT_SIZE
        avail = self._available()
        if avail is not None:
            w, h = min(w, int(avail.width() * 0.92)), min(h, int(avail.height() * 0.92))
        self.resize(w, h)
        self.reset_layout()

    def reset_layout(self) -> None:
        """View ▸ Reset layout: the default workspace layout at the window's current size."""
        self.area.reset_sizes()
        self.sidebar.reset_sizes()
        self.set_sidebar_visible(True)
        side = self._sidebar_default_width()
        self.body.setSizes([side, max(1, self.width() - side)])
        if self.area.names():
            self.show_workspace(self.area.current or self.area.names()[0])

    def _available(self):
        screen = self.screen() or QApplication.primaryScreen()
        avail = screen.availableGeometry() if screen is not None else None
        return avail if avail is not None and avail.width() > 0 else None

    def _fits_screen(self) -> bool:
        avail = self._available()
        if avail is None:
            return True
        return self.width() <= avail.width() and self.height() <= avail.height()

    def _size_fits(self, size) -> bool:
        """True when a saved window size is two integers that fit the screen's available area."""
        if not (isinstance(size, list) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)):
            return False
        avail = self._available()
        return avail is None or (size[0] <= avail.width() and size[1] <= avail.height())

    def restore_layout(self) -> bool:
        """The saved layout, when there is one for this version that fits this screen (else the default);
        True when it was restored."""
        layout = self.settings.layout()
        geometry = self.settings.geometry()
        if (layout is None or geometry is None or not self._size_fits(layout.get("size"))
                or not self.restoreGeometry(geometry) or not self._fits_screen()):
            self.default_layout()
            return False
        self.reset_layout()
        side = layout.get("sidebar")
        minimum = self.sidebar.minimumSizeHint().width()
        if isinstance(side, int) and minimum <= side <= self.width() * SIDEBAR_MAX_SHARE:
            self.body.setSizes([side, max(1, self.width() - side)])
        if layout.get("sidebar_visible") is False:
            self.set_sidebar_visible(False)
        shares = layout.get("shares")
        if isinstance(shares, dict):
            self.area.set_shares(shares)
            if "sidebar" in shares:
                self.sidebar.split.set_shares(shares["sidebar"])
        name = layout.get("workspace")
        if isinstance(name, str) and name in self.area.pages:
            self.show_workspace(name)
        return True

    def layout_state(self) -> dict:
        """What :meth:`save_layout` keeps besides the geometry."""
        shares = self.area.shares()
        if self.sidebar.split.count() > 1:
            shares["sidebar"] = self.sidebar.split.shares()
        sizes = self.body.sizes()
        return {"workspace": self.workspace, "size": [self.width(), self.height()],
                "sidebar": int(sizes[0]) if sizes and sizes[0] > 0 else None,
                "sidebar_visible": self.sidebar.isVisible(), "shares": shares}

    def save_layout(self) -> None:
        self.settings.save_window(self.saveGeometry(), self.layout_state())
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
        self.hub_action = self._action(f, "Open from &Hugging Face…", self._show_hub_dialog, "Ctrl+Shift+H",
                                       "open a model from the local Hugging Face cache, or download one")
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
        spaces = QActionGroup(self)
        self.workspace_actions: dict[str, QAction] = {}
        for ws in self.area.workspaces:
            key = self._workspace_key(ws.name)
            act = self._action(v, f"{ws.title} workspace", lambda n=ws.name: self.enter_workspace(n), key or None,
                               ws.tip)
            act.setCheckable(True)
            spaces.addAction(act)
            self.workspace_actions[ws.name] = act
        if self.workspace in self.workspace_actions:
            self.workspace_actions[self.workspace].setChecked(True)
        v.addSeparator()
        self.sidebar_action = self._action(v, "&Sidebar", lambda: None, "Ctrl+B",
                                           "show or hide the sources and model settings")
        self.sidebar_action.setCheckable(True)
        self.sidebar_action.setChecked(True)
        self.sidebar_action.toggled.connect(self.set_sidebar_visible)
        self._action(v, "Reset &layout", self.reset_layout)
        v.addSeparator()
        self.next_area_action = self._action(v, "&Next area", lambda: self.focus_area(+1), "F6",
                                             "move the keyboard focus between the sidebar and the workspace")
        self.next_area_action.setShortcuts([QKeySequence("F6"), QKeySequence("Ctrl+Tab")])
        self.previous_area_action = self._action(v, "Pre&vious area", lambda: self.focus_area(-1), "Shift+F6")
        self.previous_area_action.setShortcuts([QKeySequence("Shift+F6"), QKeySequence("Ctrl+Shift+Tab")])
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

    def _show_hub_dialog(self):
        from attnviz.ui.hub_dialog import show_hub_dialog

        return show_hub_dialog(self)

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
        set_standard_keys(box)
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
    def notify(self, level: Level, text: str) -> None:
        """Show a message a person caused or must know: status bar, and a notice for warnings/errors."""
        resp = self.ctx.response
        from_compute = resp is not None and not resp.ok and resp.error == text
        self.status.showMessage(text, 10_000 if level == Level.INFO else 20_000)
        if level in (Level.WARNING, Level.ERROR):
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
        set_standard_keys(box)
        for button in box.buttons():  # "Show Details..." is the one Qt adds itself
            if box.buttonRole(button) == QMessageBox.ButtonRole.ActionRole and "&" not in button.text():
                button.setText("Show &Details…")
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
        if n > self._n_images and self.workspace == "attention" and "image" in self.area.pages:
            self._image_added = True  # an added image (not a session opened): show the attention over it
            QTimer.singleShot(0, self, self._show_added_image)
        self._n_images = n

    def _show_added_image(self) -> None:
        if self._image_added and self.workspace == "attention":
            self.show_workspace("image")
        self._image_added = False

    def _on_session_replaced(self) -> None:
        self._image_added = False  # a whole session opened: stay on the workspace shown
        self.notice.dismiss()

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
