"""The wheel's configuration: every package folder is listed, resources/ is attnviz.resources, and the
wheel's layout is where the code looks first; packaging/wheel_contents.py names what a build left out."""

from __future__ import annotations

import importlib.util
import io
import shutil
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_every_package_folder_is_listed_and_resources_is_mapped():
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "attnviz").rglob("__init__.py")
               if "__pycache__" not in p.parts}
    listed = set(SETUPTOOLS["packages"])
    assert listed - {"attnviz.resources"} == on_disk, "pyproject.toml [tool.setuptools] packages: add or drop " \
        f"{sorted(on_disk ^ (listed - {'attnviz.resources'}))}"
    assert SETUPTOOLS["package-dir"]["attnviz.resources"] == "resources"
    assert SETUPTOOLS["package-data"]["attnviz.resources"] == ["**/*"]
    assert not (ROOT / "attnviz" / "resources").exists()  # a checkout reads resources/ directly


def test_the_wheel_layout_is_found_before_anything_else(tmp_path):
    """Installed, attnviz/resources beside resources_path.py wins (a stray resources/ above it is ignored)."""
    pkg = tmp_path / "site" / "attnviz"
    pkg.mkdir(parents=True)
    shutil.copy(ROOT / "attnviz" / "resources_path.py", pkg / "resources_path.py")
    (pkg / "resources" / "icons").mkdir(parents=True)
    (tmp_path / "site" / "resources").mkdir()  # what a checkout would have
    module = _load(pkg / "resources_path.py", "wheel_layout_resources_path")
    try:
        assert module.resources_root() == (pkg / "resources").resolve()
        assert module.resource_path("icons", "x.svg") == (pkg / "resources" / "icons" / "x.svg").resolve()
    finally:
        del sys.modules["wheel_layout_resources_path"]


def _dists(folder: Path, tree: Path, wheel_files, sdist_files) -> None:
    folder.mkdir()
    with zipfile.ZipFile(folder / "attnviz-0.1.0-py3-none-any.whl", "w") as z:
        for name in [*wheel_files, "attnviz-0.1.0.dist-info/METADATA"]:
            z.writestr(name, "x")
    with tarfile.open(folder / "attnviz-0.1.0.tar.gz", "w:gz") as t:
        for name in sdist_files:
            data = (tree / name).read_bytes()
            info = tarfile.TarInfo("attnviz-0.1.0/" + name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


@pytest.fixture
def contents():
    module = _load(ROOT / "packaging" / "wheel_contents.py", "wheel_contents_under_test")
    yield module
    del sys.modules["wheel_contents_under_test"]


def test_wheel_contents_names_what_is_missing_and_what_is_extra(tmp_path, contents, capsys):
    tree = tmp_path / "src"
    for name in ("attnviz/__init__.py", "attnviz/ui/style.qss", "resources/icons/a.svg"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("x")
    (tree / "attnviz" / "__pycache__").mkdir()
    (tree / "attnviz" / "__pycache__" / "m.cpython-311.pyc").write_text("x")  # never expected
    every = ["attnviz/__init__.py", "attnviz/ui/style.qss", "attnviz/resources/icons/a.svg"]
    sources = ["attnviz/__init__.py", "attnviz/ui/style.qss", "resources/icons/a.svg"]
    _dists(tmp_path / "good", tree, every, sources)
    assert contents.check(tree, tmp_path / "good") == []
    assert "3 expected (2 data files" in capsys.readouterr().out
    _dists(tmp_path / "bad", tree, ["attnviz/__init__.py", "tests/test_x.py"], sources[:1])
    problems = contents.check(tree, tmp_path / "bad")
    assert "missing from the wheel: attnviz/resources/icons/a.svg" in problems
    assert "missing from the wheel: attnviz/ui/style.qss" in problems
    assert "in the wheel but not a file of attnviz/ or resources/: tests/test_x.py" in problems
    assert "missing from the sdist: resources/icons/a.svg" in problems
    assert contents.main([str(tree), str(tmp_path / "bad")]) == 1
