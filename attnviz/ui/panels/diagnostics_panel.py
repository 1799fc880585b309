"""The Diagnostics panel: one tab per study the seeds describe, each drawn by its own module under
:mod:`attnviz.ui.diagnostics` from the newest response and the session state. Only the visible tab
redraws, and slow studies run off the GUI thread. Each tab sits in its own
:class:`~attnviz.ui.widgets.fit_scroll.FitScroll`: a tab that needs more room than the window gives
scrolls there, and no tab raises the window's minimum size. The Pretrained panel's "Show alignment in
Diagnostics" brings the Alignment tab forward on the translation model's cross-attention.

A tab is built the first time it is shown (or asked for by :meth:`DiagnosticsPanel.tab`): until then
its page holds a one-line placeholder. Building all seven at once (a dozen heatmaps, nine plots) held up
the window for most of a second on the workspace's first visit.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QTabWidget, QVBoxLayout, QWidget

from attnviz.ui.diagnostics.alignment import AlignmentTab
from attnviz.ui.diagnostics.flash_check import FlashCheckTab
from attnviz.ui.diagnostics.jacobian import JacobianTab
from attnviz.ui.diagnostics.model_alignment import feed_for
from attnviz.ui.diagnostics.normalisation import NormalisationTab
from attnviz.ui.diagnostics.permutation import PermutationTab
from attnviz.ui.diagnostics.positional import PositionalTab
from attnviz.ui.diagnostics.variants import VariantsTab
from attnviz.ui.widgets.fit_scroll import FitScroll
from attnviz.ui.widgets.whole_tabs import keep_tab_texts_whole

TAB_TYPES = (NormalisationTab, JacobianTab, PositionalTab, PermutationTab, FlashCheckTab, AlignmentTab,
             VariantsTab)


PLACEHOLDER_NAME = "diagnostics_placeholder"  # the object name of a page's stand-in before its tab is built


class DiagnosticsPanel(QWidget):
    """A tab widget holding every diagnostics tab, each built on its first show."""

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self.tabs = keep_tab_texts_whole(QTabWidget(self))  # seven tabs: at 1024 px wide they scroll
        self.tabs.setDocumentMode(True)
        self.by_type = {}
        self._pages: list[FitScroll] = []
        for cls in TAB_TYPES:
            page = FitScroll(self.tabs)
            page.setObjectName(f"diagnostics_page_{cls.__name__}")
            placeholder = QLabel(f"{cls.title} …", page)  # replaced by the tab when it first shows
            placeholder.setObjectName(PLACEHOLDER_NAME)
            page.setWidget(placeholder)
            self._pages.append(page)
            self.tabs.addTab(page, cls.title)
        self.tabs.currentChanged.connect(self._on_current_changed)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tabs)
        feed_for(ctx).show_requested.connect(self.show_model_alignment)

    def built(self) -> list[type]:
        """The tab types built so far, in tab order."""
        return [cls for cls in TAB_TYPES if cls in self.by_type]

    def _build(self, cls):
        """The tab of type ``cls``, built now and put in its page in place of the placeholder."""
        tab = self.by_type.get(cls)
        if tab is None:
            page = self._pages[TAB_TYPES.index(cls)]
            tab = cls(self.ctx, page)
            self.by_type[cls] = tab
            old = page.takeWidget()
            page.setWidget(tab)
            tab.show()  # a scroll area already shown does not show the widget it is given
            if old is not None:
                old.deleteLater()
        return tab

    def _on_current_changed(self, index: int) -> None:
        if 0 <= index < len(TAB_TYPES) and self.isVisible():
            self._build(TAB_TYPES[index])

    def showEvent(self, ev):  # noqa: N802 - Qt's name
        super().showEvent(ev)
        index = self.tabs.currentIndex()
        if 0 <= index < len(TAB_TYPES):
            self._build(TAB_TYPES[index])  # the tab in front is built the first time the panel shows

    def build_all_tabs(self) -> None:
        """Build every tab now: naming a nested tab (``attnviz --workspace diagnostics/rope``,
        :mod:`attnviz.ui.workspaces.tabs`) must find it."""
        for cls in TAB_TYPES:
            self._build(cls)

    def tab(self, cls):
        """The tab of type ``cls`` (e.g. ``panel.tab(AlignmentTab)``), built now if it was not yet."""
        return self._build(cls)

    def tab_at(self, index: int):
        """The diagnostic tab shown by the tab bar's ``index`` (its page is the scroll area around it),
        built now if it was not yet."""
        return self._build(TAB_TYPES[index])

    def current_tab(self):
        return self.tab_at(self.tabs.currentIndex())

    def shutdown(self) -> None:
        """Stop the tabs' worker threads (the window calls this when it closes)."""
        for tab in self.by_type.values():
            job = getattr(tab, "job", None)
            if job is not None:
                job.shutdown()

    def show_model_alignment(self) -> bool:
        """Bring the Alignment tab forward on the translation model's cross-attention (False: none has run)."""
        return self.show_tab(AlignmentTab).show_model()

    def show_tab(self, cls):
        """Bring the tab of type ``cls`` to the front and return it."""
        tab = self._build(cls)
        self.tabs.setCurrentIndex(TAB_TYPES.index(cls))
        return tab
