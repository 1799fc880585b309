"""The freedesktop files of attnviz: the desktop entry, the AppStream metainfo and the shared-mime-info
type of ``.attnviz`` session files — their keys agree with each other, and the official validators
(``desktop-file-validate``, ``appstreamcli validate``, ``update-mime-database``) accept them."""

from __future__ import annotations

import ast
import configparser
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from pkgpaths import APP_ID, ICON_SIZES, LINUX, MIME_TYPE, ROOT

DESKTOP = LINUX / f"{APP_ID}.desktop"
METAINFO = LINUX / f"{APP_ID}.metainfo.xml"
MIME_XML = LINUX / f"{APP_ID}.mime.xml"
MIME_NS = "{http://www.freedesktop.org/standards/shared-mime-info}"


def _desktop_entry() -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # keys are case-sensitive in desktop entries
    parser.read(DESKTOP, encoding="utf-8")
    return dict(parser["Desktop Entry"])


def _split_list(value: str) -> list[str]:
    return [v for v in value.split(";") if v]


DEBIAN_PACKAGE = {"desktop-file-validate": "desktop-file-utils", "appstreamcli": "appstream",
                  "update-mime-database": "shared-mime-info"}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian package {DEBIAN_PACKAGE[name]}; `make test` installs it)")
    return path


# --- desktop entry ---------------------------------------------------------------------------

def test_desktop_entry_launches_attnviz_with_a_file():
    entry = _desktop_entry()
    assert entry["Type"] == "Application"
    assert entry["Name"] == "attnviz"
    assert entry["Exec"].split()[0] == "attnviz"
    assert entry["Exec"].split()[1:] == ["%f"]  # one file at a time: the app opens a single session
    assert entry["Terminal"] == "false"
    assert entry["Icon"] == APP_ID  # a themed icon name, not a path


def test_desktop_entry_declares_the_session_type_and_categories():
    entry = _desktop_entry()
    assert _split_list(entry["MimeType"]) == [MIME_TYPE]
    categories = _split_list(entry["Categories"])
    assert "Education" in categories and "DataVisualization" in categories
    assert entry["Categories"].endswith(";") and entry["MimeType"].endswith(";")


def test_desktop_file_validate_accepts_the_entry():
    tool = _tool("desktop-file-validate")
    proc = subprocess.run([tool, str(DESKTOP)], capture_output=True, text=True, timeout=60)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report
    assert "error" not in report.lower() and "warning" not in report.lower(), report


# --- AppStream metainfo -----------------------------------------------------------------------

def test_metainfo_names_the_desktop_entry_binary_and_mime_type():
    root = ET.parse(METAINFO).getroot()
    assert root.tag == "component" and root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID == DESKTOP.stem
    assert root.findtext("launchable") == DESKTOP.name
    assert root.find("launchable").get("type") == "desktop-id"
    assert root.findtext("provides/binary") == _desktop_entry()["Exec"].split()[0]
    assert [m.text for m in root.findall("provides/mediatype")] == [MIME_TYPE]
    assert root.findtext("metadata_license") == "CC0-1.0"
    assert root.findtext("project_license") == "MIT"
    assert root.find("description/p") is not None
    assert root.find("releases/release").get("version")


def test_metainfo_version_matches_the_package():
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    releases = ET.parse(METAINFO).getroot().findall("releases/release")
    assert releases[0].get("version") == version  # newest release first


def test_appstreamcli_validates_the_metainfo_pedantically():
    """Not a single remark, down to the pedantic ones (P:) and the infos (I:)."""
    tool = _tool("appstreamcli")
    proc = subprocess.run([tool, "validate", "--pedantic", "--no-net", str(METAINFO)], capture_output=True,
                          text=True, timeout=120)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report
    remarks = [line for line in report.splitlines() if re.match(r"\s*[EWIP]: ", line)]
    assert not remarks, report


def test_the_application_id_is_lower_case_and_names_every_file():
    """AppStream wants a lower-case reverse-DNS id; the desktop entry, metainfo, MIME type, icons and
    the running application (``QGuiApplication.setDesktopFileName``) all use that same id."""
    assert APP_ID == APP_ID.lower() and APP_ID.count(".") == 3
    named = sorted(p.relative_to(LINUX).as_posix() for p in LINUX.rglob("io.github.attnviz.*"))
    assert named == sorted([f"{APP_ID}.desktop", f"{APP_ID}.metainfo.xml", f"{APP_ID}.mime.xml",
                            f"icons/hicolor/scalable/apps/{APP_ID}.svg",
                            *(f"icons/hicolor/{n}x{n}/apps/{APP_ID}.png" for n in ICON_SIZES)])
    tree = ast.parse((ROOT / "attnviz" / "ui" / "app.py").read_text(encoding="utf-8"))
    names = [node.args[0].value for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "setDesktopFileName"]
    assert names == [APP_ID]


# --- shared-mime-info -------------------------------------------------------------------------

def test_mime_type_is_a_zip_subclass_with_the_attnviz_glob():
    root = ET.parse(MIME_XML).getroot()  # well-formed XML, or this raises
    assert root.tag == f"{MIME_NS}mime-info"
    types = root.findall(f"{MIME_NS}mime-type")
    assert [t.get("type") for t in types] == [MIME_TYPE]
    (mime,) = types
    assert [g.get("pattern") for g in mime.findall(f"{MIME_NS}glob")] == ["*.attnviz"]
    assert [s.get("type") for s in mime.findall(f"{MIME_NS}sub-class-of")] == ["application/zip"]
    assert mime.findtext(f"{MIME_NS}comment")
    assert mime.find(f"{MIME_NS}icon").get("name") == APP_ID


def test_update_mime_database_registers_the_glob_and_parent(tmp_path):
    tool = _tool("update-mime-database")
    packages = tmp_path / "mime" / "packages"
    packages.mkdir(parents=True)
    shutil.copy(MIME_XML, packages / MIME_XML.name)
    proc = subprocess.run([tool, str(tmp_path / "mime")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    globs = (tmp_path / "mime" / "globs2").read_text(encoding="utf-8").splitlines()
    assert any(line.split(":")[1:] == [MIME_TYPE, "*.attnviz"] for line in globs), globs
    subclasses = (tmp_path / "mime" / "subclasses").read_text(encoding="utf-8").split("\n")
    assert f"{MIME_TYPE} application/zip" in subclasses


def test_the_session_format_really_is_a_zip():
    """The mime type's parent must stay true: a saved session opens as a zip archive."""
    import zipfile

    sessions = sorted((ROOT / "tests" / "data" / "sessions").rglob("*.attnviz"))
    assert sessions, "no session fixtures found"
    for path in sessions:
        assert zipfile.is_zipfile(path), path
