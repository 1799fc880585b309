"""The ``package`` marker of the packaging tests: tests that need the frozen bundle built by
``make package`` (``dist/attnviz/attnviz``); they skip, saying so, when it is missing."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line("markers", "package: needs the frozen bundle built by `make package`")
