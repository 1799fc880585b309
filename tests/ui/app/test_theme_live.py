"""Every chart and the first-start hint follow the theme, both ways, live: a chart built in the light
theme once kept its dark grey titles, axes, ticks and legends on the dark theme's black, and the hint
kept its light background (then stayed dark after switching back)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication

from attnviz.ui.diagnostics.jacobian import JacobianTab
from attnviz.ui.theme import DARK, LIGHT, apply_theme, current_theme


def _luminance(c: QColor) -> float:
    def ch(v):
        v = v / 255.0
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * ch(c.red()) + 0.7152 * ch(c.green()) + 0.0722 * ch(c.blue())


def contrast(a, b) -> float:
    la, lb = sorted((_luminance(pg.mkColor(a)), _luminance(pg.mkColor(b))), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def chart_texts(window):
    """(where, colour) of every axis, tick label, title and legend text of the window's charts."""
    out = []
    for view in window.findChildren(pg.GraphicsView):
        scene = view.scene()
        if scene is None:
            continue
        for item in scene.items():
            name = f"{type(view).__name__}({view.objectName()}) {type(item).__name__}"
            if isinstance(item, pg.AxisItem) and item.isVisible():
                out.append((f"{name} text", item.textPen().color()))
                if item.pen().style() != Qt.PenStyle.NoPen:  # an axis drawn without its line shows none
                    out.append((f"{name} line", item.pen().color()))
            elif isinstance(item, pg.LegendItem):
                out.append((name, pg.mkColor(item.opts.get("labelTextColor") or pg.getConfigOption("foreground"))))
            elif isinstance(item, pg.LabelItem) and str(item.text).strip():
                out.append((f"{name} {str(item.text)[:30]!r}", pg.mkColor(item.opts.get("color")
                                                                         or pg.getConfigOption("foreground"))))
    return out


def low_contrast(window, theme):
    return [(where, c.name()) for where, c in chart_texts(window) if contrast(c, theme.plot_background) < 3.0]


@pytest.mark.slow
def test_charts_follow_the_theme_both_ways(make_window, qtbot):
    apply_theme(QApplication.instance(), "light")  # as attnviz.ui.app does before the window is built
    w = make_window("river-bank", all_panels=True)
    for name in ("attention", "qkv", "diagnostics"):
        w.show_workspace(name)
        for pid in w.area.page(name).slots:
            w.panel(pid)
        if name == "qkv":  # its maps and the Q-K scatter (which has a legend) are made over the next turns
            qtbot.waitUntil(lambda: not w.panel("inspector").drawing_in_steps, timeout=20_000)
    w.panel("diagnostics").show_tab(JacobianTab)  # line plots with titles and axis labels
    qtbot.waitUntil(lambda: any("Legend" in t for t, _ in chart_texts(w)), timeout=20_000)
    assert current_theme().name == "light"
    texts = chart_texts(w)
    assert len(texts) > 20
    assert low_contrast(w, LIGHT) == []
    try:
        w.set_theme("dark")
        assert low_contrast(w, DARK) == []
        w.set_theme("light")
        assert low_contrast(w, LIGHT) == []
    finally:
        w.set_theme("light")


def test_first_start_hint_follows_the_theme_both_ways(make_window, qtbot):
    w = make_window("river-bank")
    w.hint.setVisible(True)
    qtbot.wait(50)

    def background():
        img = w.hint.grab().toImage()
        return img.pixelColor(img.width() // 2, 1)  # above the text, inside the border

    def text_colour():
        return w.hint.label.palette().color(w.hint.label.foregroundRole())

    light_bg = background()
    assert contrast(light_bg, LIGHT.alt_base) < 1.2
    try:
        w.set_theme("dark")
        qtbot.wait(50)
        assert contrast(background(), DARK.alt_base) < 1.2, background().name()
        assert contrast(text_colour(), background()) > 4.5, text_colour().name()
        w.set_theme("light")
        qtbot.wait(50)
        assert contrast(background(), LIGHT.alt_base) < 1.2, background().name()
        assert contrast(text_colour(), background()) > 4.5, text_colour().name()
    finally:
        w.set_theme("light")
    assert QApplication.instance() is not None
