"""Tab bars whose tab texts are never cut: a tab bar with more tabs than room scrolls its tabs (the
arrow buttons) instead of shortening their texts to "…", whatever the style would do by default."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTabWidget


def keep_tab_texts_whole(tabs: QTabWidget) -> QTabWidget:
    """Make ``tabs`` scroll its tab bar rather than elide its tab texts; returns ``tabs``."""
    tabs.setElideMode(Qt.TextElideMode.ElideNone)
    tabs.setUsesScrollButtons(True)
    return tabs
