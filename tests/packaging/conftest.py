"""The ``package`` marker and the ``bundle`` fixture of the packaging tests: tests that need the frozen
bundle built by ``make package`` (``dist/attnviz/attnviz``).

Without a bundle, or with one older than the sources, those tests skip, saying how to build one
(building takes minutes). Right after ``packaging/build.sh`` built it (``ATTNVIZ_PACKAGE_JUST_BUILT=1``)
they always run, and a missing bundle is a failure, not a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pkgpaths import BUNDLE, EXECUTABLE, ROOT


def pytest_configure(config):
    config.addinivalue_line("markers", "package: needs the frozen bundle built by `make package`")


def _newest_source() -> tuple[float, str]:
    """The newest modification time among the files the bundle is built from, and that file."""
    files = [p for p in (ROOT / "attnviz").rglob("*.py")] + [p for p in (ROOT / "resources").rglob("*") if p.is_file()]
    files += [ROOT / "packaging" / n for n in ("attnviz.spec", "bundle_contents.py", "attnviz_launcher.py")]
    newest = max(files, key=lambda p: p.stat().st_mtime)
    return newest.stat().st_mtime, str(newest.relative_to(ROOT))


@pytest.fixture(scope="session")
def bundle() -> Path:
    just_built = os.environ.get("ATTNVIZ_PACKAGE_JUST_BUILT") == "1"  # set by packaging/build.sh
    if not EXECUTABLE.is_file():
        message = (f"{EXECUTABLE.relative_to(ROOT)} is not built: `make package` builds the bundle "
                   "(a few minutes) and then runs these tests")
        if just_built:
            pytest.fail(message)
        pytest.skip(message)
    mtime, newest = _newest_source()
    if mtime > EXECUTABLE.stat().st_mtime and not just_built:
        pytest.skip(f"{EXECUTABLE.relative_to(ROOT)} is older than {newest}: `make package` rebuilds the "
                    "bundle and then runs these tests")
    return BUNDLE
