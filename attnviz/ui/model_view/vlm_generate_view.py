"""VlmGenerateView: the Generate tab of the Pretrained panel's vision-language page — PaliGemma, LLaVA,
Idefics3 or SmolVLM writes about the picture shown, token by token.

The tab is the decoder page's :class:`~attnviz.ui.model_view.generate_view.GenerateView` (greedy or seeded
sampling, Stop, the growing text, the step slider, the layers x heads strip, the top-k and the logit lens)
over a :class:`~attnviz.checkpoints.vlm_generation_study.VlmGenerationStudy`: the prefix is the page's
picture(s) and the tab's prompt (the page's prompt by default), computed on the worker with the rest. The
image tokens of the text are one piece per picture. While the tab is in front, the page's picture shows the
selected token's attention over the image patches (the page's "show" choice: the head, the mean over its
layer's heads, or the rollout), through :meth:`~attnviz.ui.model_view.vlm_view.VlmView.set_generated`.
"""

from __future__ import annotations

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.study import prompt_from_field
from attnviz.checkpoints.vlm_generation_study import VlmGenerationStudy, can_generate_vlm
from attnviz.ui.model_view.generate_view import GenerateView, visible_piece


MIN_WIDTH = 360  # below this the tab scrolls sideways
FRONT_SHARES = [0.42, 0.58]  # the page's picture | side split while the tab is in front


class VlmGenerateView(GenerateView):
    """The Generate tab for a vision-language model: the prefix is an image and a prompt."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.images = lambda: None  # the pictures the model sees: the page's run's
        self.prompt_edit.setPlaceholderText("the prompt as the model's family writes it (\\n: a line break)")
        self.prompt_edit.setToolTip("the prompt written after (or around) the picture shown on the left; Enter "
                                    "generates")
        # beside the picture the tab has less room than on the decoder page: narrower before it scrolls
        self.scroll.widget().setMinimumSize(MIN_WIDTH, 620)
        self.strip.setMinimumSize(190, 170)
        self.top_table.setMinimumWidth(150)

    def reason(self, ckpt) -> str | None:
        return can_generate_vlm(ckpt)

    def make_study(self, text: str) -> VlmGenerationStudy:
        reason = self.reason(self.ckpt)
        if reason is not None:
            raise CheckpointError(reason)
        images = self.images()
        if not images:
            raise CheckpointError("run the model on a picture first (Run): the generation reads the picture shown")
        return VlmGenerationStudy(self.ckpt, images, prompt_from_field(text))

    def text_spans(self) -> list[tuple[int, int, str]]:
        """One piece per run of image tokens ("[image · 256 tokens]"), one per other token."""
        s = self.study
        pieces = s.pieces()
        flags = list(s.is_image) + [False] * (len(pieces) - len(s.is_image))
        spans, i = [], 0
        while i < len(pieces):
            j = i + 1
            if flags[i]:
                while j < len(pieces) and flags[j]:
                    j += 1
                spans.append((i, j, f"[image · {j - i} tokens]"))
            else:
                spans.append((i, j, pieces[i]))
            i = j
        return spans

    def picture_values(self, result, mode: str, layer: int, head: int):
        """(T_run,) the selected token's attention on ``result``'s image tokens and who it is, or None when no
        token is selected; CheckpointError when the picture shown is of another run."""
        s, pos = self.study, self.position
        if s is None or pos is None or not s.chunks:
            return None
        values = s.values_at(pos, mode, layer, head)  # (pos + 1,)
        step = s.step_of(pos)
        piece = visible_piece(s.pieces()[pos])
        who = (f"generated {piece!r} (step {step + 1}, token {pos})" if step is not None
               else f"prompt token {pos} {piece!r}")
        return s.on_run_tokens(values, result), who


def install(panel) -> VlmGenerateView:
    """Add the Generate tab to the panel's vision-language page: it follows the loaded model, the page's head,
    prompt and colours, and draws the selected token over the page's picture while it is in front."""
    page = panel.vlm
    view = VlmGenerateView(page)
    index = page.tabs.addTab(view, "Generate")
    view.images = lambda: None if page.result is None else list(page.result.images)

    def source(mode: str, layer: int, head: int):
        return view.picture_values(page.result, mode, layer, head)

    kept = []  # the page's own picture | side shares while the tab is in front

    def sync(_index=None) -> None:
        front = page.tabs.currentWidget() is view
        page.chart.setVisible(not front)  # the tab takes the chart's height while it is in front
        if front and not kept:  # and more of the width; the page's own split comes back after
            kept.append(page.body.shares())
            page.body.set_shares(FRONT_SHARES)
        elif not front and kept:
            page.body.set_shares(kept.pop())
        on = front and view.study is not None and view.position is not None and page.result is not None
        page.set_generated(source if on else None)

    def on_model(ckpt) -> None:
        vlm = getattr(ckpt, "kind", None) == "vlm"
        view.set_checkpoint(ckpt if vlm else None)
        if vlm:  # a new model's prompt is its page's (its family writes it its own way)
            view.set_prompt(prompt.text(), edited=False)
        reason = view.reason(ckpt)
        page.tabs.setTabEnabled(index, reason is None)
        page.tabs.setTabToolTip(index, reason or "watch the model write about the picture: each new token's "
                                                 "attention (over the picture too), top-k and logit lens")
        if reason is not None and page.tabs.currentIndex() == index:
            page.tabs.setCurrentIndex(0)
        sync()

    prompt = panel.vlm_inputs.prompt_edit
    page.tabs.setTabEnabled(index, False)
    page.tabs.setTabToolTip(index, view.reason(None))
    panel.model_loaded.connect(on_model)
    panel.head_selected.connect(view.set_head)
    view.head_clicked.connect(lambda layer, head: panel.select_head(layer, head) if panel.outcome is not None
                              else None)
    view.selection_changed.connect(sync)
    page.tabs.currentChanged.connect(sync)
    view.offer_prompt(prompt.text())
    prompt.textChanged.connect(view.offer_prompt)
    view.set_colormap(panel.ctx.session.state.view.colormap)
    panel.ctx.session.events.view.connect(view._on_view_changed)
    return view
