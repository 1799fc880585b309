"""The window's panels, one module each (heatmap, inputs, settings, inspector, image, mask designer,
diagnostics, pretrained model). A module defining ``PANEL = PanelSpec(...)`` is a panel: a QWidget
built by ``factory(ctx)`` from the shared :class:`attnviz.ui.context.AppContext`. Importing a panel
module can cost a lot and most panels sit in workspaces not yet shown, so :data:`REGISTRY` repeats
each spec and :func:`discover_panels` lists every panel without importing one (an unregistered
module is still found, the slow way).
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
