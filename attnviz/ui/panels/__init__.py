"""The window's panels: their specs, a registry read without importing them, and discovery.

Every module in this package that defines ``PANEL = PanelSpec(...)`` is a panel of the main window (in the sidebar or a workspace).
A panel is a QWidget built by ``factory(ctx)`` from the shared :class:`attnviz.ui.context.AppContext`;
it subscribes to the session's per-field events and to ``ctx.response_changed`` and edits only through
``ctx.execute`` / ``ctx.set_view``.

Start-up: importing a panel module can cost a lot (plots, the engine, checkpoint readers), and most
panels sit in workspaces not yet shown. :data:`REGISTRY` repeats each module's spec (module, id, title, area,
order, visible) so :func:`discover_panels` lists every panel without importing one; a
spec's factory imports its module when the panel is first built. A test checks the registry against
the modules' own ``PANEL`` specs, and a module missing from the registry is still found (imported
at discovery, the slow way), so a new panel appears even before it is registered.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class PanelSpec:
    """How a panel appears in the main window."""

    id: str  # stable object name of the panel (workspaces and saved layouts refer to it)
    title: str  # panel title
    factory: Callable  # factory(ctx) -> QWidget
    area: str = "right"  # "left": in the sidebar; any other value: in a workspace
    order: int = 100  # position among panels of the same area (tabs are created in this order)
    visible: bool = True  # shown on first start


@dataclass(frozen=True)
class PanelEntry:
    """A panel module's spec as the registry records it (everything but the factory)."""

    module: str  # module name inside this package, e.g. "heatmap_panel"
    id: str  # as PanelSpec.id
    title: str  # as PanelSpec.title
    area: str  # as PanelSpec.area
    order: int  # as PanelSpec.order
    visible: bool = True  # as PanelSpec.visible


# every panel module's PANEL, without importing it (tests/ui/app/test_startup_registry.py keeps it true)
REGISTRY: tuple[PanelEntry, ...] = (
    PanelEntry("diagnostics_panel", "diagnostics", "Diagnostics", "bottom", 50),
    PanelEntry("heatmap_panel", "heatmap", "Attention heatmap", "center", 0),
    PanelEntry("image_panel", "image", "Attention over the image", "right", 40),
    PanelEntry("inputs_panel", "inputs", "Inputs", "left", 10),
    PanelEntry("inspector_panel", "inspector", "Q/K/V inspector", "right", 20),
    PanelEntry("mask_designer_panel", "mask_designer", "Mask designer", "right", 30),
    PanelEntry("model_view_panel", "pretrained", "Pretrained model", "center", 30),
    PanelEntry("settings_panel", "model", "Model", "left", 20),
)


class LazyFactory:
    """``factory(ctx)`` of a registered panel: imports the panel module on the first call and
    builds the panel with the module's own ``PANEL.factory``."""

    def __init__(self, module: str):
        self.module = module

    def load(self) -> PanelSpec:
        """The module's own PANEL spec (imports the module)."""
        spec = getattr(importlib.import_module(f"{__name__}.{self.module}"), "PANEL", None)
        if not isinstance(spec, PanelSpec):
            raise RuntimeError(f"panel module {self.module} defines no PANEL = PanelSpec(...)")
        return spec

    def __call__(self, ctx):
        return self.load().factory(ctx)

    def __repr__(self) -> str:
        return f"LazyFactory({self.module!r})"


def panel_modules() -> list[str]:
    """Names of this package's modules (listed, not imported)."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__))


def discover_panels() -> list[PanelSpec]:
    """All PanelSpecs of this package's modules, sorted by (area, order). Registered modules are not
    imported (their factories import them); an unregistered module is imported for its PANEL."""
    registered = {e.module: e for e in REGISTRY}
    specs = []
    for name in panel_modules():
        entry = registered.get(name)
        if entry is not None:
            specs.append(PanelSpec(id=entry.id, title=entry.title, factory=LazyFactory(name), area=entry.area,
                                   order=entry.order, visible=entry.visible))
            continue
        spec = getattr(importlib.import_module(f"{__name__}.{name}"), "PANEL", None)
        if isinstance(spec, PanelSpec):
            specs.append(spec)
    ids = [s.id for s in specs]
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"two panels share an id: {sorted(ids)}")
    return sorted(specs, key=lambda s: (s.area, s.order, s.id))
