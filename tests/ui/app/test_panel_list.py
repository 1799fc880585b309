"""The panel registry: it repeats every panel module's own ``PANEL`` spec exactly, discovery lists
the panels without importing their modules, a registered factory imports its module when it builds
the panel, and a module missing from the registry is still discovered."""

from __future__ import annotations

import dataclasses
import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from attnviz.ui import panels
from attnviz.ui.panels import REGISTRY, LazyFactory, PanelSpec, discover_panels, panel_modules

FIELDS = [f.name for f in dataclasses.fields(PanelSpec) if f.name != "factory"]


def _own_spec(module: str) -> PanelSpec:
    return importlib.import_module(f"attnviz.ui.panels.{module}").PANEL


def _fields(spec) -> dict:
    return {name: getattr(spec, name) for name in FIELDS}


def test_every_panel_module_is_registered_once():
    files = sorted(p.stem for p in Path(panels.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert panel_modules() == files
    assert sorted(e.module for e in REGISTRY) == files
    assert len({e.id for e in REGISTRY}) == len(REGISTRY)


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda e: e.module)
def test_registry_entry_matches_the_modules_own_panel_spec(entry):
    own = _own_spec(entry.module)
    assert isinstance(own, PanelSpec)
    assert {name: getattr(entry, name) for name in FIELDS} == _fields(own)


def test_discovered_specs_equal_the_modules_specs_in_order():
    found = discover_panels()
    own = sorted((_own_spec(e.module) for e in REGISTRY), key=lambda s: (s.area, s.order, s.id))
    assert [_fields(s) for s in found] == [_fields(s) for s in own]
    for spec in found:
        assert isinstance(spec.factory, LazyFactory)
        assert spec.factory.load() is _own_spec(spec.factory.module)


def test_discovery_imports_no_panel_module():
    code = ("import json, sys\n"
            "from attnviz.ui.panels import discover_panels\n"
            "ids = [s.id for s in discover_panels()]\n"
            "mods = sorted(m for m in sys.modules if m.startswith('attnviz.ui.panels.'))\n"
            "print(json.dumps({'ids': ids, 'mods': mods, 'qt': 'PySide6' in sys.modules}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert sorted(got["ids"]) == sorted(e.id for e in REGISTRY)
    assert got["mods"] == []
    assert got["qt"] is False


def test_a_lazy_factory_builds_the_modules_panel(qtbot, make_ctx):
    spec = next(s for s in discover_panels() if s.id == "model")
    widget = spec.factory(make_ctx())
    qtbot.addWidget(widget)
    assert type(widget) is importlib.import_module("attnviz.ui.panels.settings_panel").SettingsPanel


def test_a_module_missing_from_the_registry_is_still_discovered(monkeypatch):
    monkeypatch.setattr(panels, "REGISTRY", tuple(e for e in REGISTRY if e.module != "image_panel"))
    found = {s.id: s for s in discover_panels()}
    assert set(found) == {e.id for e in REGISTRY}
    assert found["image"] is _own_spec("image_panel")  # imported for its PANEL
    assert isinstance(found["heatmap"].factory, LazyFactory)


def test_a_module_without_a_panel_spec_is_reported_by_its_factory(monkeypatch):
    monkeypatch.setitem(sys.modules, "attnviz.ui.panels.not_a_panel", types.ModuleType("not_a_panel"))
    with pytest.raises(RuntimeError, match="not_a_panel defines no PANEL"):
        LazyFactory("not_a_panel").load()
