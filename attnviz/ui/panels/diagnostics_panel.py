"""The Diagnostics panel: one tab per study the seeds describe, each drawn by its own module under
:mod:`attnviz.ui.diagnostics` from the newest response and the session state. Only the visible tab
redraws, and slow studies run off the GUI thread. Each tab sits in its own
:class:`~attnviz.ui.widgets.fit_scroll.FitScroll`: a tab that needs more room than the window gives
scrolls there, and no tab raises the window's minimum size. The Pretrained panel's "Show alignment in
Diagnostics" brings the Alignment tab forward on the translation model's cross-attention.
"""

from __future__ import annotations

from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from attnviz.ui.diagnostics.alignment import AlignmentTab
from attnviz.ui.diagnostics.flash_check import FlashCheckTab
from attnviz.ui.diagnostics.jacobian import JacobianTab
from attnviz.ui.diagnostics.model_alignment import feed_for
from attnviz.ui.diagnostics.normalisation import NormalisationTab
from attnviz.ui.diagnostics.permutation import PermutationTab
from attnviz.ui.diagnostics.positional import PositionalTab
from attnviz.ui.diagnostics.variants import VariantsTab
from attnviz.ui.widgets.fit_scroll import FitScroll

TAB_TYPES = (NormalisationTab, JacobianTab, PositionalTab, PermutationTab, FlashCheckTab, AlignmentTab,
             VariantsTab)


class DiagnosticsPanel(QWidget):
    """A tab widget holding every diagnostics tab."""

    def __init__(self, ctx, parent=None):
        super().__init__(parent)
        self.ctx = ctx
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.by_type = {}
        self._pages: list[FitScroll] = []
        for cls in TAB_TYPES:
            page = FitScroll(self.tabs)
            page.setObjectName(f"diagnostics_page_{cls.__name__}")
            tab = cls(ctx, page)
            page.setWidget(tab)
            self.by_type[cls] = tab
            self._pages.append(page)
            self.tabs.addTab(page, cls.title)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tabs)
        feed_for(ctx).show_requested.connect(self.show_model_alignment)

    def tab(self, cls):
        """The tab of type ``cls`` (e.g. ``panel.tab(AlignmentTab)``)."""
        return self.by_type[cls]

    def tab_at(self, index: int):
        """The diagnostic tab shown by the tab bar's ``index`` (its page is the scroll area around it)."""
        return self._pages[index].widget()

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
        tab = self.by_type[cls]
        self.tabs.setCurrentIndex(list(self.by_type).index(cls))
        return tab
