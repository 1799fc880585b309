"""The Intervene tab on a vision-language model (PaliGemma, LLaVA, Idefics3, SmolVLM): a second
:class:`~attnviz.ui.model_view.intervene_view.InterveneView` installed in the panel's vision-language page (whose
tabs replace the panel's while such a model is loaded), its language model's heads ablated, scaled, knocked
out with the session's mask or patched from a clean prompt over the same picture, as
:mod:`attnviz.checkpoints.intervention_vlm` computes it; and the overlay drawn here: the last token's attention
(the one predicting the next token), or the token selected in the page's strip, over the picture's patches
before | after, for the selected head, on one colour scale.
"""

from __future__ import annotations

import types

import numpy as np
from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.intervention_study import token_id
from attnviz.checkpoints.intervention_vlm import FAMILIES, export_vlm_code, vlm_study, vlm_sweep
from attnviz.checkpoints.study import prompt_from_field
from attnviz.model.display.patch_groups import Placed, pages
from attnviz.ui.widgets.patch_groups_view import PatchGroupsView


def supported(ckpt) -> bool:
    return (getattr(ckpt, "kind", None) == "vlm" and getattr(ckpt, "family", None) in FAMILIES
            and getattr(getattr(ckpt, "spec", None), "text", None) is not None)  # its language model to edit


def result(panel):
    """The MultimodalAttention of the page's run, None without one."""
    out = panel.outcome
    r = getattr(out, "result", None)
    return r if r is not None and hasattr(r, "patches") else None


def prompt(panel) -> str:
    return prompt_from_field(panel.vlm_inputs.prompt_edit.text())


def why_not_ready(ckpt) -> str:
    if not supported(ckpt):
        return (f"{ckpt.name} is a {getattr(ckpt, 'family', '?')} policy: interventions on a vision-language model "
                "run on PaliGemma, LLaVA, Idefics3 and SmolVLM")
    return "Run the model on a picture and a prompt first."


def study_job(ckpt, panel, spec, allowed, means):
    r = result(panel)
    images, text = list(r.images), prompt(panel)
    return lambda: vlm_study(ckpt, images, text, spec, allowed=allowed, clean_text=spec.clean, means=means, result=r)


def sweep_job(ckpt, panel, spec, metric, tokens, stop, progress):
    r = result(panel)
    images, text = list(r.images), prompt(panel)
    return lambda: vlm_sweep(ckpt, images, text, mode=spec.mode, factor=spec.factor, metric=metric, tokens=tokens,
                             cancelled=stop.is_set, progress=progress)


def code(ckpt, panel, spec, allowed, means) -> dict:
    r = result(panel)
    return export_vlm_code(str(ckpt.folder), list(r.images), prompt(panel), spec, ckpt, allowed=allowed, means=means,
                           clean_text=spec.clean)


def tokens(ckpt, a: str, b: str) -> tuple[int, int]:
    """Two ids of the language model's vocabulary, named as for a decoder LLM."""
    shim = types.SimpleNamespace(config=ckpt.spec.text, tokenizer=ckpt.tokenizer)
    return token_id(shim, a), token_id(shim, b)


class VlmOverlay(QWidget):
    """A query's attention over the picture's patches, before | after, for one head (one colour scale)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.title = QLabel(" ", self)
        self.title.setWordWrap(True)
        self.views = [PatchGroupsView(self) for _ in range(2)]
        heading = QLabel("A token's attention over the picture (select it in the token strip)", self)
        heading.setStyleSheet("QLabel { font-weight: bold; padding: 4px 2px 0px 2px; }")
        col = QVBoxLayout(self)
        col.setContentsMargins(0, 0, 0, 0)
        col.addWidget(heading)
        col.addWidget(self.title)
        row = QHBoxLayout()
        for v, what in zip(self.views, ("before", "after")):
            v.setMinimumSize(150, 200)
            pic = QVBoxLayout()
            caption = QLabel(what, self)
            caption.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            pic.addWidget(caption)
            pic.addWidget(v, 1)
            row.addLayout(pic, 1)
        col.addLayout(row)
        self.maps: tuple[list, list] | None = None  # (before, after): a (gh, gw) map per patch group
        self.setVisible(False)

    def show_effects(self, eff, layer: int, head: int, query: int | None = None) -> bool:
        """Draw ``eff``'s overlay of ``layer``, ``head`` for token ``query`` (None: the last, which predicts the
        next token); False, hidden, when the prompt has no picture."""
        if eff is None or not getattr(eff, "patches", None) or not eff.images:
            self.setVisible(False)
            self.maps = None
            return False
        L, nh = eff.before.attentions.shape[:2]
        if not (0 <= layer < L and 0 <= head < nh):
            layer, head = 0, 0
        T = int(eff.before.attentions.shape[2])
        q = T - 1 if query is None or not 0 <= int(query) < T else int(query)
        try:
            pairs = [eff.overlay(layer, head, q, g) for g in range(len(eff.patches))]
        except CheckpointError as exc:
            self.title.setText(str(exc))
            self.setVisible(True)
            return False
        before, after = [p[0] for p in pairs], [p[1] for p in pairs]
        self.maps = (before, after)
        placed = [Placed(g.image, g.name, g.grid, g.box) for g in eff.patches]
        page = pages(placed)[0]
        top = max(max(float(m.max()) for m in before), max(float(m.max()) for m in after), 1e-6)
        for view, maps in zip(self.views, (before, after)):
            view.set_picture(eff.images[page.image], placed, page.groups)
            view.set_maps(maps, (0.0, top), value_label="weight")
        on_b = sum(float(m.sum()) for m in before)
        on_a = sum(float(m.sum()) for m in after)
        moved = 0.5 * sum(float(np.abs(a - b).sum()) for a, b in zip(before, after))
        who = "the last token" if q == T - 1 else f"token {q}"
        self.title.setText(f"layer {layer} · head {head} · {who} ({eff.tokens[q]!r}): {on_b:.3g} of its "
                           f"attention on the picture before, {on_a:.3g} after; {moved:.3g} moved between patches "
                           f"or to the text · colour 0 … {top:.3g}")
        self.setVisible(True)
        return True

    def set_colormap(self, name: str) -> None:
        for v in self.views:
            v.set_colormap(name)

    def on_theme_changed(self, theme) -> None:
        for v in self.views:
            v.on_theme_changed(theme)


def follow_page(panel, view) -> None:
    """``view`` (an InterveneView with host "vlm"), a tab of the panel's vision-language page: it takes the share
    chart's height while it is in front, as Generate does (the page shows the chart again on its own updates:
    each time it does so while this tab is in front, it is hidden again)."""
    page = panel.vlm

    def hide_chart() -> None:
        if page.tabs.currentWidget() is view and page.chart.isVisible():
            page.chart.setVisible(False)

    class _Shown(QObject):
        def eventFilter(self, obj, ev):  # noqa: N802 - Qt's name
            if ev.type() == QEvent.Type.Show:
                QTimer.singleShot(0, hide_chart)
            return False

    view._chart_filter = _Shown(view)
    page.chart.installEventFilter(view._chart_filter)
    page.tabs.currentChanged.connect(lambda _i: QTimer.singleShot(0, hide_chart))
    page.query_changed.connect(lambda _q: view._draw_overlay())  # a token chosen in the strip: its overlay
