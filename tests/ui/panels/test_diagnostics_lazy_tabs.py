"""The Diagnostics panel builds a tab only when it first shows (or is asked for): a panel just made
holds placeholders, showing it builds the tab in front and nothing else, bringing another tab forward
builds that one, and naming a nested tab (``diagnostics/rope``) still finds it. Its module does not
import the checkpoints package (0.3-0.6 s) until a translation run is aligned."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("PySide6")

from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.diagnostics.jacobian import JacobianTab  # noqa: E402
from attnviz.ui.diagnostics.normalisation import NormalisationTab  # noqa: E402
from attnviz.ui.diagnostics.positional import PositionalTab  # noqa: E402
from attnviz.ui.diagnostics.tab import DiagnosticTab  # noqa: E402
from attnviz.ui.panels.diagnostics_panel import PLACEHOLDER_NAME, TAB_TYPES, DiagnosticsPanel  # noqa: E402
from attnviz.ui.widgets.heatmap import AttentionHeatmap  # noqa: E402
from attnviz.ui.workspaces.tabs import show_tab  # noqa: E402


@pytest.fixture
def panel(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    p = DiagnosticsPanel(ctx)
    qtbot.addWidget(p)
    p.resize(1024, 700)
    yield p
    ctx.compute.shutdown()
    p.shutdown()


def placeholders(p) -> int:
    pages = [p.tabs.widget(i) for i in range(p.tabs.count())]
    return sum(1 for page in pages if page.widget().objectName() == PLACEHOLDER_NAME)


def test_a_new_panel_builds_no_tab_and_showing_it_builds_only_the_one_in_front(qtbot, panel):
    assert panel.built() == [] and placeholders(panel) == len(TAB_TYPES)
    assert panel.findChildren(DiagnosticTab) == [] and panel.findChildren(AttentionHeatmap) == []
    panel.show()
    qtbot.waitExposed(panel)
    assert panel.built() == [NormalisationTab] and placeholders(panel) == len(TAB_TYPES) - 1
    assert panel.tabs.currentWidget().widget() is panel.tab(NormalisationTab)
    maps = len(panel.findChildren(AttentionHeatmap))
    panel.tabs.setCurrentIndex(TAB_TYPES.index(JacobianTab))  # a click on its tab
    assert panel.built() == [NormalisationTab, JacobianTab]
    tab = panel.current_tab()
    assert isinstance(tab, JacobianTab) and tab.isVisible()
    assert PositionalTab not in panel.built() and len(panel.findChildren(AttentionHeatmap)) >= maps


def test_a_nested_tab_is_found_by_name_before_its_tab_was_built(qtbot, panel):
    panel.show()
    qtbot.waitExposed(panel)
    assert PositionalTab not in panel.built()
    show_tab(panel, "rope")  # a page inside the Positional encodings tab
    pos = panel.tab(PositionalTab)
    assert panel.current_tab() is pos and pos.pages.currentWidget() is pos.rope_page


def test_the_panel_module_does_not_import_the_checkpoints_package():
    code = ("import sys, attnviz.ui.panels.diagnostics_panel; "
            "print(sorted(m for m in sys.modules if m.startswith('attnviz.checkpoints')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"QT_QPA_PLATFORM": "offscreen", "PATH": ""}, check=True)
    assert out.stdout.strip() == "[]"
