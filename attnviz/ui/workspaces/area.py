"""WorkspaceArea: the mode bar (one tab per workspace) over a stack of workspaces, each a splitter
of its main view and a column of side views.

A panel lives in one slot at a time; a panel named by two workspaces moves to the one being shown,
into a slot that kept its place in that workspace's splitters, so neither workspace's sizes change
when it leaves. Sizes are kept per workspace as shares of the splitter (:class:`ShareSplitter`), so
they follow the window from a laptop to a 4K screen; shares that are not a valid split (wrong count,
a pane below 5 %, not summing to 1) are refused, and the workspace keeps its default.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QSplitter, QStackedWidget, QTabBar, QVBoxLayout, QWidget

from attnviz.ui.widgets.fit_scroll import FitScroll
from attnviz.ui.workspaces import Workspace

MIN_SHARE = 0.05  # a saved pane narrower than this share of its splitter is a broken layout
# a main panel's own ShareSplitters a workspace remembers (settings key -> the panel's attribute); the
# panel's ``default_shares(key)`` gives their defaults
PANEL_SPLITTERS = {"panel": "splitter", "panel_side": "side_splitter", "panel_body": "body"}


def valid_shares(shares, count: int) -> bool:
    """True when ``shares`` is ``count`` fractions, each at least MIN_SHARE, summing to 1."""
    try:
        values = [float(s) for s in shares]
    except (TypeError, ValueError):
        return False
    return len(values) == count and all(v >= MIN_SHARE for v in values) and abs(sum(values) - 1.0) < 0.01


class ShareSplitter(QSplitter):
    """A splitter whose sizes are set and read as shares of its length. Shares that were set hold
    at every size (a window resized, moved to a 4K screen, a panel laid out late) until the person
    drags a handle; from then on the dragged sizes hold, and are what :meth:`shares` reports."""

    def __init__(self, orientation, parent=None):
        super().__init__(orientation, parent)
        self.setChildrenCollapsible(False)
        self._target: list[float] | None = None  # shares kept at every size until a handle is dragged
        self.splitterMoved.connect(self._on_moved)

    def _length(self) -> int:
        horizontal = self.orientation() == Qt.Orientation.Horizontal
        return (self.width() if horizontal else self.height()) - self.handleWidth() * max(0, self.count() - 1)

    def set_shares(self, shares) -> bool:
        """Use these shares (False, and nothing changes, when they are not a valid split)."""
        if not valid_shares(shares, self.count()):
            return False
        self._target = [float(s) for s in shares]
        self._apply()
        return True

    def shares(self) -> list[float]:
        if self._target is not None:
            return list(self._target)
        sizes = self.sizes()
        total = sum(sizes)
        if total <= 0:
            return [1.0 / max(1, self.count())] * self.count()
        return [s / total for s in sizes]

    def _on_moved(self, *_args) -> None:
        if not self.signalsBlocked():
            self._target = None  # the person's sizes from now on

    def _apply(self) -> None:
        length = self._length()
        if self._target is None or length <= 0 or len(self._target) != self.count():
            return
        self.setSizes([max(1, int(round(s * length))) for s in self._target])

    def resizeEvent(self, ev):  # noqa: N802 - Qt's name
        super().resizeEvent(ev)
        self._apply()

    def showEvent(self, ev):  # noqa: N802 - Qt's name
        super().showEvent(ev)
        self._apply()


class PanelSlot(QWidget):
    """The place of one panel in one workspace (empty while the panel is elsewhere or not built). The
    panel sits in a :class:`FitScroll`: one that needs more room than the window gives it scrolls
    there, and never raises the window's minimum size."""

    def __init__(self, panel_id: str, parent=None):
        super().__init__(parent)
        self.panel_id = panel_id
        self.setObjectName(f"slot_{panel_id}")
        self.scroll = FitScroll(self)
        self.scroll.setObjectName(f"fit_{panel_id}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.scroll)

    def widget(self) -> QWidget | None:
        return self.scroll.widget()

    def put(self, widget: QWidget) -> None:
        self.scroll.put(widget)


class WorkspacePage(QWidget):
    """One workspace: its main view and, when it has side views, a column of them to the right."""

    def __init__(self, ws: Workspace, parent=None):
        super().__init__(parent)
        self.workspace = ws
        self.setObjectName(f"workspace_{ws.name}")
        self.slots = {pid: PanelSlot(pid, self) for pid in ws.panel_ids}
        self.splitter = ShareSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setObjectName(f"{ws.name}_split")
        self.splitter.addWidget(self.slots[ws.main])
        self.side: ShareSplitter | None = None
        self.adopted: QWidget | None = None  # the main panel, once built (its own splitters are remembered)
        self.saved: dict = {}  # shares restored from the settings, by splitter key
        if ws.side:
            self.side = ShareSplitter(Qt.Orientation.Vertical, self)
            self.side.setObjectName(f"{ws.name}_side")
            for pid in ws.side:
                self.side.addWidget(self.slots[pid])
            self.splitter.addWidget(self.side)
            self.splitter.setStretchFactor(0, 1)
            self.splitter.setStretchFactor(1, 0)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.splitter)
        self.reset_sizes()

    def adopt(self, panel: QWidget) -> None:
        """The main panel is built: its own splitters (:data:`PANEL_SPLITTERS`) are this workspace's
        too, and a panel with a column of its own (``add_side_view``, the mask designer) takes the side
        views into that column instead of a column beside it."""
        if self.adopted is not None:
            return
        self.adopted = panel
        if self.side is not None and hasattr(panel, "add_side_view"):
            panel.add_side_view(self.side)
        self.set_shares(self.saved)  # the panel's own splitters, saved before it was built

    def set_shares(self, saved: dict) -> list[str]:
        """Use saved shares (``{splitter key: shares}``); returns the keys refused (each keeps its
        default). Keys of a panel's splitters wait until that panel is built."""
        self.saved = dict(saved)
        refused = []
        for key, split in self.splitters().items():
            value = saved.get(key)
            if value is not None and not split.set_shares(value):
                refused.append(key)
        return refused

    def splitters(self) -> dict[str, ShareSplitter]:
        """The page's splitters by their settings key."""
        out = {"main": self.splitter}
        if self.side is not None:
            out["side"] = self.side
        if self.adopted is not None:
            for key, name in PANEL_SPLITTERS.items():
                split = getattr(self.adopted, name, None)
                if isinstance(split, ShareSplitter):
                    out[key] = split
        return out

    def default_shares(self, key: str) -> list[float] | None:
        if key == "main":
            return [self.workspace.main_share, 1.0 - self.workspace.main_share]
        if key == "side":
            n = self.side.count()
            return [1.0 / n] * n
        return getattr(self.adopted, "default_shares", lambda _k: None)(key)

    def reset_sizes(self) -> None:
        self.saved = {}
        for key, split in self.splitters().items():
            shares = self.default_shares(key)
            if split.count() > 1 and shares is not None:
                split.set_shares(shares)


class WorkspaceArea(QWidget):
    """The mode bar and the shown workspace. ``provide(panel_id)`` gives a built panel or None (the
    window builds it later and calls :meth:`place`)."""

    workspace_changed = Signal(str)
    panel_wanted = Signal(str)  # a shown workspace needs this panel, which is not built yet

    def __init__(self, workspaces: list[Workspace], parent=None):
        super().__init__(parent)
        self.workspaces = list(workspaces)
        self.bar = QTabBar(self)
        self.bar.setObjectName("mode_bar")
        self.bar.setDocumentMode(True)
        self.bar.setExpanding(False)
        self.bar.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.stack = QStackedWidget(self)
        self.pages: dict[str, WorkspacePage] = {}
        self.panels: dict[str, QWidget] = {}
        for ws in self.workspaces:
            page = WorkspacePage(ws, self.stack)
            self.pages[ws.name] = page
            self.stack.addWidget(page)
            i = self.bar.addTab(ws.title)
            self.bar.setTabToolTip(i, ws.tip)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.bar)
        layout.addWidget(self.stack, 1)
        self.bar.currentChanged.connect(self._on_tab)

    @property
    def current(self) -> str:
        page = self.stack.currentWidget()
        return page.workspace.name if page is not None else ""

    def names(self) -> list[str]:
        return [w.name for w in self.workspaces]

    def page(self, name: str) -> WorkspacePage:
        return self.pages[name]

    def show_workspace(self, name: str) -> None:
        """Show this workspace (never hides it: showing the current one again changes nothing)."""
        if name not in self.pages:
            raise ValueError(f"no workspace {name!r}; choose one of {', '.join(self.pages)}")
        self._gather(name)
        self.bar.setCurrentIndex(self.names().index(name))  # -> _on_tab
        if self.stack.currentWidget() is not self.pages[name]:
            self._on_tab(self.names().index(name))

    def _on_tab(self, index: int) -> None:
        if not 0 <= index < len(self.workspaces):
            return
        name = self.workspaces[index].name
        self._gather(name)
        if self.stack.currentIndex() != index:
            self.stack.setCurrentIndex(index)
            self.workspace_changed.emit(name)

    def _gather(self, name: str) -> None:
        """Put the workspace's panels into its slots (moving shared ones from another workspace)."""
        page = self.pages[name]
        for pid, slot in page.slots.items():
            panel = self.panels.get(pid)
            if panel is None:
                self.panel_wanted.emit(pid)
            elif slot.widget() is not panel:
                slot.put(panel)
                if pid == page.workspace.main:
                    page.adopt(panel)

    def place(self, panel_id: str, panel: QWidget) -> None:
        """A panel is built: it goes into the current workspace's slot for it, else its first one."""
        self.panels[panel_id] = panel
        page = self.pages.get(self.current)
        pages = [page] if page is not None and panel_id in page.slots else []
        pages += [p for p in self.pages.values() if panel_id in p.slots and p is not page]
        if pages:
            pages[0].slots[panel_id].put(panel)
        for p in self.pages.values():
            if p.workspace.main == panel_id:
                p.adopt(panel)  # built once, placed in its own workspace's layout from the start

    # -- sizes -----------------------------------------------------------------------------------
    def shares(self) -> dict[str, list[float]]:
        """``{"<workspace>/<splitter>": shares}`` of every workspace with more than one pane."""
        out = {}
        for name, page in self.pages.items():
            for key, split in page.splitters().items():
                if split.count() > 1:
                    out[f"{name}/{key}"] = split.shares()
        return out

    def set_shares(self, saved: dict) -> list[str]:
        """Restore saved shares; returns the keys refused (each keeps its default)."""
        refused = []
        for name, page in self.pages.items():
            mine = {k.split("/", 1)[1]: v for k, v in saved.items() if k.startswith(f"{name}/")}
            refused += [f"{name}/{k}" for k in page.set_shares(mine)]
        return refused

    def reset_sizes(self) -> None:
        for page in self.pages.values():
            page.reset_sizes()
