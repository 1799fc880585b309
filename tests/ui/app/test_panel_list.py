"""The panel list: it names every panel module of the package once, in the window's (area, order, id)
order; listing the panels imports none of their modules, and a panel's factory imports its module and
builds its class when the panel is built."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnviz.ui import panels
from attnviz.ui.panels import PANELS, LazyFactory, panel_modules


def test_every_panel_module_is_listed_once():
    files = sorted(p.stem for p in Path(panels.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert panel_modules() == files
    assert sorted(s.factory.module for s in PANELS) == files
    assert len({s.id for s in PANELS}) == len(PANELS)


def test_the_list_is_in_the_windows_order():
    assert list(PANELS) == sorted(PANELS, key=lambda s: (s.area, s.order, s.id))


def test_the_panels_ids_titles_and_places():
    # the window's panels as the saved layouts, the workspaces and the tabs know them
    assert [(s.id, s.title, s.area, s.order) for s in PANELS] == [
        ("diagnostics", "Diagnostics", "bottom", 50),
        ("heatmap", "Attention heatmap", "center", 0),
        ("pretrained", "Pretrained model", "center", 30),
        ("inputs", "Inputs", "left", 10),
        ("model", "Model", "left", 20),
        ("inspector", "Q/K/V inspector", "right", 20),
        ("mask_designer", "Mask designer", "right", 30),
        ("image", "Attention over the image", "right", 40),
    ]


@pytest.mark.parametrize("spec", PANELS, ids=lambda s: s.id)
def test_each_factory_names_a_widget_class_of_its_module(spec):
    from PySide6.QtWidgets import QWidget

    cls = spec.factory.load()
    assert isinstance(cls, type) and issubclass(cls, QWidget)
    assert cls is getattr(importlib.import_module(f"attnviz.ui.panels.{spec.factory.module}"), spec.factory.name)


def test_listing_the_panels_imports_no_panel_module():
    code = ("import json, sys\n"
            "from attnviz.ui.panels import PANELS\n"
            "ids = [s.id for s in PANELS]\n"
            "mods = sorted(m for m in sys.modules if m.startswith('attnviz.ui.panels.'))\n"
            "print(json.dumps({'ids': ids, 'mods': mods, 'qt': 'PySide6' in sys.modules}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["ids"] == [s.id for s in PANELS]
    assert got["mods"] == []
    assert got["qt"] is False


def test_a_lazy_factory_builds_the_modules_panel(qtbot, make_ctx):
    spec = next(s for s in PANELS if s.id == "model")
    widget = spec.factory(make_ctx())
    qtbot.addWidget(widget)
    assert type(widget) is importlib.import_module("attnviz.ui.panels.settings_panel").SettingsPanel


def test_a_factory_naming_a_missing_class_fails_when_it_builds():
    factory = LazyFactory("settings_panel", "NoSuchPanel")
    assert repr(factory) == "LazyFactory('settings_panel', 'NoSuchPanel')"
    with pytest.raises(AttributeError, match="NoSuchPanel"):
        factory(None)
