"""Inner tabs by name: ``attnviz --workspace NAME/TAB`` brings a tab of a workspace's panel forward
(``diagnostics/softmax-jacobian``, ``qkv/q-k-pca``, ``pretrained/corpus``). A tab's name is
its title in lower case with every run of other characters than letters and digits as one hyphen;
the tab widgets searched are the panel's own, outermost first, so a nested tab (the positional
encodings' RoPE page) is found too.
"""

from __future__ import annotations

import re

from PySide6.QtWidgets import QTabWidget, QWidget


class TabUnavailable(ValueError):
    """The named tab is there but disabled (``panel`` and ``slug`` say which)."""

    def __init__(self, panel: QWidget, slug: str):
        super().__init__(f"the tab {slug!r} is not available for this session")
        self.panel, self.slug = panel, slug


def tab_slug(title: str) -> str:
    """``"Softmax Jacobian"`` -> ``"softmax-jacobian"``; ``"Q · K · V"`` -> ``"q-k-v"``."""
    return re.sub(r"[^0-9a-z]+", "-", title.replace("&", "").lower()).strip("-")


def split_target(target: str) -> tuple[str, str]:
    """``"diagnostics/softmax-jacobian"`` -> ``("diagnostics", "softmax-jacobian")``; no tab: ``""``."""
    name, _, tab = target.partition("/")
    return name.strip().lower(), tab_slug(tab)


def _tab_widgets(panel: QWidget) -> list[QTabWidget]:
    """Every tab widget of ``panel``, outermost first; a panel that builds its tabs on first show
    (``build_all_tabs``, the Diagnostics panel) builds them now, so that a nested tab is found by name."""
    build = getattr(panel, "build_all_tabs", None)
    if callable(build):
        build()
    found = [panel] if isinstance(panel, QTabWidget) else []
    found += panel.findChildren(QTabWidget)

    def depth(w):
        n = 0
        while w is not None and w is not panel:
            w, n = w.parentWidget(), n + 1
        return n

    return sorted(found, key=depth)


def tab_names(panel: QWidget) -> list[str]:
    """The names of every tab of ``panel``, outermost tab widget first."""
    out = []
    for tabs in _tab_widgets(panel):
        out += [tab_slug(tabs.tabText(i)) for i in range(tabs.count()) if tab_slug(tabs.tabText(i)) not in out]
    return out


def show_tab(panel: QWidget, slug: str) -> QTabWidget:
    """Bring the tab named ``slug`` of ``panel`` forward (and the tabs that hold it); returns its tab
    widget. ValueError naming the tabs there are when there is none, or it is disabled."""
    for tabs in _tab_widgets(panel):
        for i in range(tabs.count()):
            if tab_slug(tabs.tabText(i)) != slug:
                continue
            if not tabs.isTabEnabled(i):
                raise TabUnavailable(panel, slug)
            holder = tabs.parentWidget()
            while holder is not None:  # the tabs holding this tab widget, brought forward too
                if isinstance(holder, QTabWidget):
                    for j in range(holder.count()):
                        if holder.widget(j).isAncestorOf(tabs):
                            holder.setCurrentIndex(j)
                if holder is panel:
                    break
                holder = holder.parentWidget()
            tabs.setCurrentIndex(i)
            return tabs
    names = tab_names(panel)
    raise ValueError(f"no tab {slug!r}; choose one of {', '.join(names)}" if names else
                     f"no tab {slug!r}: this workspace has no tabs")
