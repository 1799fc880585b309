"""The window's panels, one module each (heatmap, inputs, settings, inspector, image, mask designer,
diagnostics, pretrained model). :data:`PANELS` lists them: a panel is a QWidget built by
``factory(ctx)`` from the shared :class:`attnviz.ui.context.AppContext`. Importing a panel module can
cost a lot and most panels sit in workspaces not yet shown, so the list names each panel's module and
class and its factory imports the module only when the panel is built.
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


class LazyFactory:
    """``factory(ctx)`` of a listed panel: imports the panel's module on the first call and builds
    the panel with its class."""

    def __init__(self, module: str, name: str):
        self.module = module  # module name inside this package, e.g. "heatmap_panel"
        self.name = name  # the panel's class in that module, e.g. "HeatmapPanel"

    def load(self) -> type:
        """The panel's class (imports its module)."""
        return getattr(importlib.import_module(f"{__name__}.{self.module}"), self.name)

    def __call__(self, ctx):
        return self.load()(ctx)

    def __repr__(self) -> str:
        return f"LazyFactory({self.module!r}, {self.name!r})"


# every panel, sorted by (area, order, id); tests/ui/app/test_panel_list.py keeps it complete and sorted
PANELS: tuple[PanelSpec, ...] = (
    PanelSpec("diagnostics", "Diagnostics", LazyFactory("diagnostics_panel", "DiagnosticsPanel"), "bottom", 50),
    PanelSpec("heatmap", "Attention heatmap", LazyFactory("heatmap_panel", "HeatmapPanel"), "center", 0),
    PanelSpec("pretrained", "Pretrained model", LazyFactory("model_view_panel", "ModelViewPanel"), "center", 30),
    PanelSpec("inputs", "Inputs", LazyFactory("inputs_panel", "InputsPanel"), "left", 10),
    PanelSpec("model", "Model", LazyFactory("settings_panel", "SettingsPanel"), "left", 20),
    PanelSpec("inspector", "Q/K/V inspector", LazyFactory("inspector_panel", "InspectorPanel"), "right", 20),
    PanelSpec("mask_designer", "Mask designer", LazyFactory("mask_designer_panel", "MaskDesignerPanel"), "right", 30),
    PanelSpec("image", "Attention over the image", LazyFactory("image_panel", "ImagePanel"), "right", 40),
)


def panel_modules() -> list[str]:
    """Names of this package's modules (listed, not imported; a frozen bundle's start-up report shows
    them, to prove every panel module was shipped)."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__))
