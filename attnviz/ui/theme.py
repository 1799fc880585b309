"""Light and dark themes: explicit Fusion palettes (a platform colour-scheme hint does nothing
headless), the matching pyqtgraph background/foreground, and the few colours the widgets draw with
themselves (masked cells, selection, fully-masked-row markers)."""

from __future__ import annotations

from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication


@dataclass(frozen=True)
class Theme:
    """Colours of one theme, as ``#rrggbb`` strings."""

    name: str  # "light" or "dark"; what apply_theme was asked for
    window: str  # panel background
    base: str  # background of text fields and lists
    alt_base: str  # alternating rows
    text: str  # ordinary text
    muted_text: str  # secondary text (ids under token chips, disabled items)
    button: str  # button face
    highlight: str  # selection fill and the selected-row outline on heatmaps
    highlight_text: str  # text on the selection fill
    plot_background: str  # pyqtgraph view background
    plot_foreground: str  # axes, tick labels
    masked: str  # base colour of masked cells (not a colour of the grey-free colormaps)
    masked_stripe: str  # hatch stripes over masked cells
    masked_alt: str  # masked-cell colour for colormaps that contain greys (gray, cividis)
    masked_alt_stripe: str  # its hatch stripes
    marker: str  # fully masked row marker
    hover: str  # outline of a hovered item


LIGHT = Theme(
    name="light", window="#efefef", base="#ffffff", alt_base="#f5f5f5", text="#1e1e1e",
    muted_text="#6e6e6e", button="#e6e6e6", highlight="#2f7bd8", highlight_text="#ffffff",
    plot_background="#ffffff", plot_foreground="#303030", masked="#d2d2d2", masked_stripe="#a8a8a8",
    masked_alt="#e3b5bf", masked_alt_stripe="#c4808f", marker="#e0202a", hover="#ff9f1c",
)

DARK = Theme(
    name="dark", window="#2b2b2b", base="#1f1f1f", alt_base="#262626", text="#e4e4e4",
    muted_text="#9a9a9a", button="#353535", highlight="#3d8ee8", highlight_text="#ffffff",
    plot_background="#1b1b1b", plot_foreground="#d0d0d0", masked="#4a4a4a", masked_stripe="#6e6e6e",
    masked_alt="#6a3a46", masked_alt_stripe="#935563", marker="#ff4040", hover="#ffb347",
)

THEMES = {"light": LIGHT, "dark": DARK}
_current = LIGHT


def current_theme() -> Theme:
    """The theme last applied (light until apply_theme is called)."""
    return _current


def get_theme(name: str) -> Theme:
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r}; choose 'light' or 'dark'")
    return THEMES[name]


def palette(theme: Theme) -> QPalette:
    """An explicit QPalette for the Fusion style, including the disabled colour group."""
    P = QPalette
    pal = QPalette()
    roles = {
        P.ColorRole.Window: theme.window, P.ColorRole.WindowText: theme.text,
        P.ColorRole.Base: theme.base, P.ColorRole.AlternateBase: theme.alt_base,
        P.ColorRole.ToolTipBase: theme.base, P.ColorRole.ToolTipText: theme.text,
        P.ColorRole.PlaceholderText: theme.muted_text, P.ColorRole.Text: theme.text,
        P.ColorRole.Button: theme.button, P.ColorRole.ButtonText: theme.text,
        P.ColorRole.BrightText: "#ff5555", P.ColorRole.Highlight: theme.highlight,
        P.ColorRole.HighlightedText: theme.highlight_text, P.ColorRole.Link: theme.highlight,
        P.ColorRole.Light: theme.button, P.ColorRole.Midlight: theme.button,
        P.ColorRole.Mid: theme.muted_text, P.ColorRole.Dark: theme.window,
        P.ColorRole.Shadow: "#000000",
    }
    for role, colour in roles.items():
        pal.setColor(role, QColor(colour))
    for role in (P.ColorRole.WindowText, P.ColorRole.Text, P.ColorRole.ButtonText):
        pal.setColor(P.ColorGroup.Disabled, role, QColor(theme.muted_text))
    return pal


def _colour_map(old: Theme, new: Theme) -> dict[str, str]:
    """``#rrggbb`` of the old theme's text colours -> the new theme's (what a chart drew in the old
    theme's foreground follows the new one; a colour of its own, a query's orange, stays)."""
    out = {}
    for field in ("muted_text", "text", "plot_foreground"):
        out[QColor(getattr(old, field)).name()] = getattr(new, field)
    return out


def _mapped(colour, mapping: dict[str, str]):
    """The new theme's colour for ``colour`` (None: pyqtgraph's default, the old foreground), or None
    when ``colour`` is one of its own."""
    if colour is None:
        return mapping.get("default")
    return mapping.get(pg.mkColor(colour).name())


def restyle_plot(view, old: Theme, new: Theme) -> None:
    """Recolour what a pyqtgraph view drew in ``old``'s text colours: axes, their ticks and labels,
    titles and other labels, legends (a chart built in one theme would keep that theme's dark grey
    on the other's black)."""
    mapping = _colour_map(old, new)
    mapping["default"] = new.plot_foreground
    scene = view.scene()
    if scene is None:
        return
    for item in scene.items():
        if isinstance(item, pg.AxisItem):
            pen = _mapped(None if item._pen is None else item._pen.color(), mapping)
            if pen is not None:
                item.setPen(pen)
            text = _mapped(None if item._textPen is None else item._textPen.color(), mapping)
            if text is not None:
                item.setTextPen(text)
        elif isinstance(item, pg.LegendItem):
            colour = _mapped(item.opts.get("labelTextColor"), mapping)
            if colour is not None:
                item.setLabelTextColor(colour)
        elif isinstance(item, pg.LabelItem):
            colour = _mapped(item.opts.get("color"), mapping)
            if colour is not None:
                item.setText(item.text, color=colour)


def apply_theme(app: QApplication, name: str) -> Theme:
    """Switch ``app`` to the Fusion style with the ``name`` palette, set pyqtgraph's default
    colours, and restyle live widgets: pyqtgraph views get the new background and their axes, titles
    and legends the new foreground, style sheets that name palette colours are applied again, and any
    widget with an ``on_theme_changed(theme)`` method is told."""
    global _current
    old = _current
    theme = get_theme(name)
    _current = theme
    app.setStyle("Fusion")
    app.setPalette(palette(theme))
    pg.setConfigOptions(background=theme.plot_background, foreground=theme.plot_foreground)
    for w in app.allWidgets():
        if isinstance(w, pg.GraphicsView):
            w.setBackground(theme.plot_background)
            restyle_plot(w, old, theme)
        sheet = w.styleSheet()
        if "palette(" in sheet:  # "color: palette(mid)" is resolved once, when the sheet is set
            w.setStyleSheet("")
            w.setStyleSheet(sheet)
        hook = getattr(w, "on_theme_changed", None)
        if callable(hook):
            hook(theme)
    return theme
