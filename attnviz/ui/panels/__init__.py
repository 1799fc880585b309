"""The window's dockable panels, discovered by convention.

Every module in this package that defines ``PANEL = PanelSpec(...)`` is a dock of the main window.
A panel is a QWidget built by ``factory(ctx)`` from the shared :class:`attnviz.ui.context.AppContext`;
it subscribes to the session's per-field events and to ``ctx.response_changed`` and edits only through
``ctx.execute`` / ``ctx.set_view``. Each panel module can run alone with a demo session under
``if __name__ == "__main__":`` (see :func:`run_panel_alone`).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class PanelSpec:
    """How a panel appears in the main window."""

    id: str  # stable object name of the dock (saved window layouts refer to it)
    title: str  # dock title and View-menu entry
    factory: Callable  # factory(ctx) -> QWidget
    area: str = "right"  # initial dock area: "left", "right", "top", "bottom" or "center"
    order: int = 100  # position among panels of the same area (tabs are created in this order)
    shortcut: str = ""  # optional View-menu shortcut that shows/raises the panel, e.g. "Ctrl+1"
    visible: bool = True  # shown on first start


def discover_panels() -> list[PanelSpec]:
    """All PanelSpecs of this package's modules, sorted by (area, order)."""
    specs = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(module, "PANEL", None)
        if isinstance(spec, PanelSpec):
            specs.append(spec)
    ids = [s.id for s in specs]
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"two panels share an id: {sorted(ids)}")
    return sorted(specs, key=lambda s: (s.area, s.order, s.id))


def run_panel_alone(factory, demo: str = "river-bank", size=(900, 650)) -> int:
    """Show one panel in its own window on a demo session (for ``python -m attnviz.ui.panels.x``)."""
    import sys

    from PySide6.QtWidgets import QApplication

    from attnviz.model.demos import build_demo
    from attnviz.model.session import Session
    from attnviz.ui.context import AppContext

    app = QApplication.instance() or QApplication(sys.argv)
    demo_name = sys.argv[1] if len(sys.argv) > 1 else demo
    ctx = AppContext(Session(build_demo(demo_name)))
    w = factory(ctx)
    w.resize(*size)
    w.show()
    ctx.recompute(now=True)
    return app.exec()
