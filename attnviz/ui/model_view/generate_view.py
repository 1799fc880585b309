"""GenerateView: the Pretrained panel's "Generate" tab — a decoder LLM writes, token by token, and each
new token's attention over everything before it is there to look at while it writes.

Greedy, or seeded sampling (temperature, top-k, top-p); Generate and Stop. The generation runs on a worker
thread (:class:`~attnviz.ui.latest_job.LatestJob`): each chunk it computes (the prompt, then every new
token with its own attention rows) comes back to the window's thread through a queued signal and goes into
a :class:`~attnviz.checkpoints.generation_study.GenerationStudy`, which every view here reads:

* the text, prompt then new tokens, each token clickable and shaded by the selected token's attention
  (the selected layer and head, the panel's);
* a step slider over the generated tokens;
* the layers x heads strip: one row per (layer, head) of the selected token's attention, over every key
  before it; a click on a row selects that head in the whole panel;
* the next-token top-k the step was drawn from, probabilities after the warpers, the chosen token marked;
* the logit lens at the selected position: each layer's residual stream through the final norm and the
  unembedding, its top 5, as a heat-table (computed on its own worker, newest request wins).

:func:`install` adds the tab to a ModelViewPanel; it is disabled, with a tooltip saying why, for models
that do not generate here.
"""

from __future__ import annotations

import html
import threading

import numpy as np
from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QDoubleSpinBox, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QPushButton, QSlider, QSpinBox, QSplitter, QTableWidget, QTableWidgetItem,
                               QTextBrowser, QVBoxLayout, QWidget)

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.generation_study import (MAX_NEW_TOKENS, GenerationStudy, can_generate, eos_ids,
                                                  parse_sampling)
from attnviz.ui import colormaps
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.model_view.jobs import EXPECTED, MEMORY_MESSAGE
from attnviz.ui.theme import current_theme
from attnviz.ui.widgets.fit_scroll import FitScroll
from attnviz.ui.widgets.flow_layout import FlowLayout
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.messages import Level
from attnviz.ui.widgets.message_line import MessageLine

LENS_K = 5  # tokens per layer in the logit lens
REDRAW_MS = 40  # steps arriving faster than this are drawn together
DEFAULT_NEW = 24


def visible_piece(piece: str) -> str:
    """A token's text with its whitespace made visible (a space as ·, a line break as ↵, a tab as →)."""
    return (piece.replace(" ", "·").replace("\n", "↵").replace("\t", "→").replace("\r", "␍")) or "∅"


def _blend(a: str, b: str, t: float) -> str:
    """The colour t of the way from ``a`` to ``b`` (#rrggbb each)."""
    ca, cb = QColor(a), QColor(b)
    t = float(min(max(t, 0.0), 1.0))
    mix = [round(x + (y - x) * t) for x, y in zip(ca.getRgb()[:3], cb.getRgb()[:3])]
    return "#{:02x}{:02x}{:02x}".format(*mix)


class GenerateView(QWidget):
    """The Generate tab: controls, the growing text, the step slider, the strip, the top-k and the lens."""

    head_clicked = Signal(int, int)  # (layer, head) clicked in the strip
    step_shown = Signal(int)  # the generated token shown (its step)
    finished = Signal(str)  # how a generation ended: "eos", "length", "cancelled", or the problem
    selection_changed = Signal()  # the selected token, layer or head changed (its row is drawn anew)
    progress_moved = Signal(int, object)  # (run id, Progress): worker -> the window's thread (queued)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.ckpt = None
        self.study: GenerationStudy | None = None
        self.layer, self.head = 0, 0
        self.position: int | None = None  # the selected token's place in the sequence
        self._run = 0  # id of the newest generation; chunks of older ones are dropped
        self._cancel = threading.Event()
        self._follow = True  # the slider follows the newest step while generating
        self._prompt_edited = False
        self.chat = lambda: False  # whether the prompt goes through the chat template (the panel's box)
        self.job = LatestJob("attnviz-generate", self, expected=EXPECTED + (CheckpointError,),
                             memory_message=MEMORY_MESSAGE)
        self.lens_job = LatestJob("attnviz-generate-lens", self, expected=EXPECTED + (CheckpointError,),
                                  memory_message=MEMORY_MESSAGE)
        self._redraw = QTimer(self)
        self._redraw.setSingleShot(True)
        self._redraw.setInterval(REDRAW_MS)
        self._redraw.timeout.connect(self._refresh)

        # -- controls
        self.prompt_edit = QLineEdit(self)
        self.prompt_edit.setPlaceholderText("the text the model continues (the panel's text by default)")
        self.prompt_edit.setToolTip("the prompt; Enter generates")
        self.generate_button = QPushButton("Generate", self)
        self.generate_button.setToolTip("write up to 'max new' tokens after the prompt (Enter in the prompt)")
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setToolTip("stop after the token being computed; what was written stays")
        self.stop_button.setEnabled(False)
        self.max_new = QSpinBox(self)
        self.max_new.setRange(1, MAX_NEW_TOKENS)
        self.max_new.setValue(DEFAULT_NEW)
        self.max_new.setToolTip("stop after this many new tokens (or at the end-of-sequence token)")
        self.mode = QComboBox(self)
        self.mode.addItem("greedy", False)
        self.mode.addItem("sample", True)
        self.mode.setToolTip("greedy: the most probable token each step; sample: drawn after temperature, top-k, "
                             "top-p (in transformers' order), from the seed")
        self.temperature = QDoubleSpinBox(self)
        self.temperature.setRange(0.05, 20.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setValue(1.0)
        self.temperature.setToolTip("the logits are divided by it before the softmax (sampling)")
        self.top_k = QSpinBox(self)
        self.top_k.setRange(0, 100000)
        self.top_k.setSpecialValueText("off")
        self.top_k.setToolTip("keep the k most probable tokens (sampling; off: all)")
        self.top_p = QDoubleSpinBox(self)
        self.top_p.setRange(0.01, 1.0)
        self.top_p.setSingleStep(0.05)
        self.top_p.setValue(1.0)
        self.top_p.setToolTip("keep the most probable tokens whose probabilities sum to p (sampling; 1: all)")
        self.seed = QSpinBox(self)
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setToolTip("the seed of the draws: the same seed writes the same text")
        self._sampling_widgets = []
        bar = FlowLayout()
        bar.addWidget(self.generate_button)
        bar.addWidget(self.stop_button)
        for label, w in (("max new", self.max_new), ("", self.mode), ("temperature", self.temperature),
                         ("top-k", self.top_k), ("top-p", self.top_p), ("seed", self.seed)):
            box = QWidget(self)
            row = QHBoxLayout(box)
            row.setContentsMargins(0, 0, 0, 0)
            row.setSpacing(3)
            if label:
                row.addWidget(QLabel(label, box))
            row.addWidget(w)
            bar.addWidget(box)
            if w in (self.temperature, self.top_k, self.top_p, self.seed):
                self._sampling_widgets.append(box)
        self.message = MessageLine(self, style="QLabel { color: #e57373; padding: 2px 2px; }")
        self.message.setVisible(False)
        self.status = QLabel("", self)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        # -- the text and the step slider
        self.text_view = QTextBrowser(self)
        self.text_view.setOpenLinks(False)
        self.text_view.setOpenExternalLinks(False)
        self.text_view.setMinimumHeight(64)
        self.text_view.setMaximumHeight(110)
        self.text_view.setToolTip("prompt (dim) and the generated tokens; click a token to select it. The shading "
                                  "is the selected token's attention over the tokens before it (layer and head "
                                  "as selected)")
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setRange(0, 0)
        self.slider.setEnabled(False)
        self.slider.setToolTip("which generated token: its attention row, the top-k it was drawn from, its lens")
        self.step_label = QLabel("step –", self)
        self.step_label.setMinimumWidth(140)
        srow = QHBoxLayout()
        srow.setContentsMargins(0, 0, 0, 0)
        srow.addWidget(QLabel("step", self))
        srow.addWidget(self.slider, 1)
        srow.addWidget(self.step_label)

        # -- the strip, the top-k and the lens
        self.strip = AttentionHeatmap(self)
        self.strip.setMinimumSize(240, 170)
        self.top_table = QTableWidget(0, 3, self)
        self.top_table.setHorizontalHeaderLabels(["", "next token", "p"])
        self.lens_table = QTableWidget(0, LENS_K, self)
        self.lens_table.setHorizontalHeaderLabels([f"#{i + 1}" for i in range(LENS_K)])
        for table in (self.top_table, self.lens_table):
            table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
            table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
            table.verticalHeader().setDefaultSectionSize(20)
            table.setMinimumHeight(120)
        self.top_table.verticalHeader().setVisible(False)
        self.top_table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.top_table.setColumnWidth(0, 22)
        self.top_table.setColumnWidth(2, 58)
        self.top_table.setMinimumWidth(170)
        self.lens_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.lens_title = QLabel("logit lens", self)
        self.lens_title.setWordWrap(True)
        self.top_title = QLabel("next-token top-k", self)
        self.top_title.setWordWrap(True)
        right = QWidget(self)
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.setSpacing(2)
        rl.addWidget(self.top_title)
        rl.addWidget(self.top_table, 1)
        self.upper = QSplitter(Qt.Orientation.Horizontal, self)
        self.upper.addWidget(self.strip)
        self.upper.addWidget(right)
        self.upper.setChildrenCollapsible(False)
        self.upper.setStretchFactor(0, 3)
        self.upper.setStretchFactor(1, 2)
        self.upper.setSizes([600, 400])
        lens_box = QWidget(self)
        ll = QVBoxLayout(lens_box)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.setSpacing(2)
        ll.addWidget(self.lens_title)
        ll.addWidget(self.lens_table, 1)
        self.lower = QSplitter(Qt.Orientation.Vertical, self)
        self.lower.addWidget(self.upper)
        self.lower.addWidget(lens_box)
        self.lower.setChildrenCollapsible(False)
        self.lower.setStretchFactor(0, 3)
        self.lower.setStretchFactor(1, 2)
        self.lower.setSizes([550, 450])

        content = QWidget(self)
        content.setMinimumSize(430, 620)  # below this the tab scrolls instead of squeezing the tables
        layout = QVBoxLayout(content)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(3)
        prow = QHBoxLayout()
        prow.setContentsMargins(0, 0, 0, 0)
        prow.addWidget(QLabel("prompt", self))
        prow.addWidget(self.prompt_edit, 1)
        layout.addLayout(prow)
        layout.addLayout(bar)
        layout.addWidget(self.message)
        layout.addWidget(self.status)
        layout.addWidget(self.text_view)
        layout.addLayout(srow)
        layout.addWidget(self.lower, 1)
        self.scroll = FitScroll(self)
        self.scroll.put(content)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll)

        self.generate_button.clicked.connect(lambda: self.generate())
        self.prompt_edit.returnPressed.connect(lambda: self.generate())
        self.prompt_edit.textEdited.connect(self._on_prompt_edited)
        self.stop_button.clicked.connect(self.stop)
        self.mode.currentIndexChanged.connect(lambda _i: self._sync_sampling())
        self.slider.valueChanged.connect(self._on_slider)
        self.text_view.anchorClicked.connect(self._on_anchor)
        self.strip.cell_clicked.connect(self._on_strip_clicked)
        self.progress_moved.connect(self._on_progress, Qt.ConnectionType.QueuedConnection)  # always via the event loop
        self.job.done.connect(self._on_done)
        self.job.failed.connect(self._on_failed)
        self.lens_job.done.connect(self._on_lens)
        self.lens_job.failed.connect(lambda _jid, msg: self.lens_title.setText(f"logit lens: {msg}"))
        self.destroyed.connect(self._cancel.set)
        self._sync_sampling()
        self.set_checkpoint(None)

    # ------------------------------------------------------------------ public API
    def set_checkpoint(self, ckpt) -> None:
        """The panel's model: a running generation stops, what was shown is cleared."""
        self.stop()
        self.ckpt = ckpt
        self.study = None
        self.position = None
        reason = self.reason(ckpt)
        self.generate_button.setEnabled(reason is None)
        self.generate_button.setToolTip(reason or "write up to 'max new' tokens after the prompt")
        self._clear_views()
        self.status.setText("" if reason else "Generate writes after the prompt; the text grows here token by token.")

    def reason(self, ckpt) -> str | None:
        """None when ``ckpt`` writes in this tab, else why not (a decoder LLM here)."""
        return can_generate(ckpt)

    def make_study(self, text: str):
        """The study of a generation after the prompt field's ``text`` (CheckpointError: why not)."""
        if self.ckpt is None:
            raise CheckpointError(self.reason(None))
        return GenerationStudy.for_text(self.ckpt, text, chat=bool(self.chat()))

    def text_spans(self) -> list[tuple[int, int, str]]:
        """The text drawn: (start, stop, text) per clickable piece, one per token here."""
        return [(i, i + 1, piece) for i, piece in enumerate(self.study.pieces())]

    def set_prompt(self, text: str, edited: bool = True) -> None:
        """The prompt field's text; ``edited`` False: as the panel's default (a later panel text replaces it)."""
        self.prompt_edit.setText(text)
        self._prompt_edited = bool(edited)

    def offer_prompt(self, text: str) -> None:
        """The panel's text, taken as the prompt unless the prompt was typed here."""
        if not self._prompt_edited:
            self.prompt_edit.setText(text)

    def set_sampling(self, sample: bool, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                     seed: int = 0) -> None:
        self.mode.setCurrentIndex(1 if sample else 0)
        self.temperature.setValue(temperature)
        self.top_k.setValue(top_k)
        self.top_p.setValue(top_p)
        self.seed.setValue(seed)

    def generate(self, prompt: str | None = None, max_new_tokens: int | None = None, **sampling) -> int | None:
        """Start writing after ``prompt`` (default: the prompt field); ``sampling`` keywords (sample, temperature,
        top_k, top_p, seed) override the fields. Returns the run id, None when refused (the message says why)."""
        self.message.clear()
        text = self.prompt_edit.text() if prompt is None else prompt
        fields = dict(sample=bool(self.mode.currentData()), temperature=self.temperature.value(),
                      top_k=self.top_k.value(), top_p=self.top_p.value(), seed=self.seed.value())
        fields.update(sampling)
        n = self.max_new.value() if max_new_tokens is None else max_new_tokens
        try:
            how = parse_sampling(**fields)
            study = self.make_study(text)
            eos = eos_ids(self.ckpt)
            self.stop()
            self._run += 1
            run, cancel = self._run, threading.Event()
            self._cancel = cancel
            self.destroyed.connect(cancel.set)

            def emit(progress) -> None:
                try:
                    self.progress_moved.emit(run, progress)
                except RuntimeError:  # the view was deleted while the model wrote: nobody is waiting
                    cancel.set()

            fn = study.job(n, how, eos, cancelled=cancel.is_set, on_progress=emit)
        except (CheckpointError, TypeError, ValueError) as exc:
            self.message.say(Level.ERROR, f"Cannot generate: {exc}")
            return None
        self.study = study
        self.position = None
        self._follow = True
        self._clear_views()
        self.status.setText(f"{study.n_prompt} prompt tokens · generating…" if study.n_prompt else study.describe())
        self.stop_button.setEnabled(True)
        self.job.submit(fn)
        return run

    def stop(self) -> None:
        """Stop the running generation after its current token (what was written stays shown)."""
        self._cancel.set()
        self.stop_button.setEnabled(False)

    @property
    def running(self) -> bool:
        return self.job.busy

    def shutdown(self) -> None:
        self._cancel.set()
        self.job.shutdown()
        self.lens_job.shutdown()

    def set_head(self, layer: int, head: int) -> None:
        """The layer and head whose row shades the text and is outlined in the strip."""
        if self.study is not None:
            L, nh = self.study.shape
            if not (0 <= layer < L and 0 <= head < nh):
                return
        self.layer, self.head = int(layer), int(head)
        self._draw_selection()

    def show_step(self, step: int) -> None:
        """Select generated token ``step`` (as the slider does)."""
        if self.study is None or not 0 <= step < self.study.n_steps:
            raise ValueError(f"step {step} is not one of the {0 if self.study is None else self.study.n_steps} "
                             "generated tokens")
        self._follow = step == self.study.n_steps - 1
        if self.slider.value() != step:
            self.slider.setValue(step)
        else:
            self.select_position(self.study.position(step))

    def select_position(self, position: int, lens: bool = True) -> None:
        """Select the token at ``position`` (a prompt token too): its row, top-k (generated tokens) and lens
        (``lens`` False: not yet — the newest step followed while the model writes leaves the cores to it)."""
        s = self.study
        if s is None or not 0 <= position < s.T:
            return
        self.position = int(position)
        step = s.step_of(position)
        if step is not None and self.slider.value() != step:
            self.slider.blockSignals(True)
            self.slider.setValue(step)
            self.slider.blockSignals(False)
        self._draw_selection()
        self._draw_top(step)
        if lens:
            self._request_lens()
        else:
            self.lens_table.setRowCount(0)
            self.lens_title.setText("logit lens: shown when the model stops, or for a token you pick")
        if step is not None:
            self.step_shown.emit(step)

    def shown_row(self) -> np.ndarray | None:
        """(position + 1,) the selected head's row of the selected token, as the text is shaded with it."""
        if self.study is None or self.position is None:
            return None
        return self.study.row_at(self.position, self.layer, self.head)

    def strip_matrix(self) -> np.ndarray | None:
        """(L * nh, position + 1) the strip as drawn."""
        if self.study is None or self.position is None:
            return None
        rows = self.study.rows_at(self.position)
        return rows.reshape(-1, rows.shape[-1])

    def message_text(self) -> str:
        return self.message.text() if self.message.isVisibleTo(self) else ""

    def set_colormap(self, name: str) -> None:
        if name in colormaps.NAMES:
            self.strip.set_colormap(name)

    def on_theme_changed(self, _theme) -> None:
        """The text and the tables draw their own colours from the theme: redrawn in the new one."""
        if self.study is not None and self.position is not None:
            self.select_position(self.position)

    # ------------------------------------------------------------------ arriving steps
    def _on_progress(self, run: int, progress) -> None:
        if run != self._run or self.study is None:
            return
        try:
            self.study.add(progress)
        except CheckpointError as exc:  # out of order: an internal fault, said and the run stopped
            self._cancel.set()
            self.message.say(Level.ERROR, f"internal error: {exc}")
            return
        if not self._redraw.isActive():
            self._redraw.start()

    def _refresh(self) -> None:
        s = self.study
        if s is None:
            return
        n = s.n_steps
        self.status.setText(s.describe())
        if n == 0:
            self._draw_text()
            return
        self.slider.blockSignals(True)
        self.slider.setRange(0, n - 1)
        self.slider.setEnabled(True)
        self.slider.blockSignals(False)
        if self._follow or self.position is None:
            self.select_position(s.position(n - 1), lens=not self.job.busy)
        else:
            self._draw_text()
            self._update_step_label()

    def _on_done(self, _jid: int, generation) -> None:
        self.stop_button.setEnabled(False)
        s = self.study
        if s is None:
            return
        try:
            s.finish(generation)
        except CheckpointError as exc:
            self.message.say(Level.ERROR, f"internal error: {exc}")
        self._refresh()
        self.finished.emit(generation.stopped)

    def _on_failed(self, _jid: int, message: str) -> None:
        self.stop_button.setEnabled(False)
        self.message.say(Level.ERROR, f"Could not generate: {message}")
        if self.study is not None:
            self.status.setText(self.study.describe().replace("generating…", "failed"))
        self.finished.emit(message)

    # ------------------------------------------------------------------ drawing
    def _clear_views(self) -> None:
        self._redraw.stop()
        self.text_view.clear()
        self.slider.blockSignals(True)
        self.slider.setRange(0, 0)
        self.slider.blockSignals(False)
        self.slider.setEnabled(False)
        self.step_label.setText("step –")
        self.strip.clear("layers × heads: the selected token's row")
        self.top_table.setRowCount(0)
        self.lens_table.setRowCount(0)
        self.top_title.setText("next-token top-k")
        self.lens_title.setText("logit lens")

    def _update_step_label(self) -> None:
        s = self.study
        if s is None or self.position is None:
            self.step_label.setText("step –")
            return
        step = s.step_of(self.position)
        piece = visible_piece(s.pieces()[self.position])
        where = f"{step + 1}/{s.n_steps}" if step is not None else f"prompt token {self.position}"
        self.step_label.setText(f"{where} · {piece!r}")

    def _draw_selection(self) -> None:
        self._draw_text()
        self._update_step_label()
        self._draw_strip()
        self.selection_changed.emit()

    def _draw_text(self) -> None:
        s = self.study
        if s is None:
            return
        t = current_theme()
        spans = self.text_spans()
        row = self.shown_row()
        got = [float(row[i:min(j, row.size)].sum()) if row is not None and i < row.size else None
               for i, j, _piece in spans]  # what each piece gets of the selected row
        peak = max((g for g in got if g is not None), default=0.0) or 1.0
        parts = []
        for (i, j, piece), weight in zip(spans, got):
            colour = t.muted_text if i < s.n_prompt else t.text
            style = [f"color:{colour}", "text-decoration:none"]
            if weight is not None:
                share = weight / peak
                style.append(f"background-color:{_blend(t.base, t.highlight, share)}")
                if share > 0.55:  # on a dark fill the text turns light, whatever its own colour
                    style[0] = f"color:{t.highlight_text}"
            if i <= (self.position if self.position is not None else -1) < j:
                style += ["font-weight:bold", "text-decoration:underline", f"color:{t.hover}"]
            where = f"token {i}" if j == i + 1 else f"tokens {i}–{j - 1}"
            tip = f"{where}: {piece!r}" + (f" · weight {weight:.4f}" if weight is not None else "")
            text = html.escape(piece.replace("\n", "↵") or "∅").replace(" ", "&nbsp;")
            parts.append(f'<a href="tok:{i}" title="{html.escape(tip)}" style="{";".join(style)}">{text}</a>')
        bar = self.text_view.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        # a hair space between tokens shows where one ends; the text itself keeps its own spaces
        self.text_view.setHtml(f'<div style="line-height:150%">{chr(0x200A).join(parts)}</div>')
        if at_end:
            bar.setValue(bar.maximum())

    def _draw_strip(self) -> None:
        s = self.study
        if s is None or self.position is None:
            return
        m = self.strip_matrix()  # (L * nh, p + 1)
        L, nh = s.shape
        labels = [f"L{layer} h{head}" for layer in range(L) for head in range(nh)]
        keys = [visible_piece(p) for p in s.pieces()[:self.position + 1]]
        piece = visible_piece(s.pieces()[self.position])
        self.strip.set_matrix(m, row_labels=labels, col_labels=keys, levels=(0.0, max(float(m.max()), 1e-6)),
                              title=f"token {self.position} {piece!r}: every head", value_label="weight")
        self.strip.set_selected_row(self.layer * nh + self.head)

    def _draw_top(self, step: int | None) -> None:
        s = self.study
        table = self.top_table
        if s is None or step is None:
            table.setRowCount(0)
            self.top_title.setText("next-token top-k: a prompt token was not chosen by a step" if s else
                                   "next-token top-k")
            return
        view = s.top(step)
        t = current_theme()
        rows = list(zip(view.top_pieces, view.top_probs, view.top_ids))
        extra = view.chosen_rank is None
        table.setRowCount(len(rows) + (1 if extra else 0))
        bold = QFont(table.font())
        bold.setBold(True)
        for r, (piece, p, tid) in enumerate(rows):
            chosen = int(tid) == view.token
            self._set_row(table, r, "▶" if chosen else "", visible_piece(piece), p, chosen, bold, t)
        if extra:
            self._set_row(table, len(rows), "▶", f"{visible_piece(view.piece)} (outside the top)", view.chosen_prob,
                          True, bold, t)
        self.top_title.setText(f"step {step + 1}: the next token after token {view.position - 1}, "
                               f"p = {view.chosen_prob:.3f} for the one chosen (▶)")

    @staticmethod
    def _set_row(table, r: int, mark: str, piece: str, p: float, chosen: bool, bold, t) -> None:
        items = [QTableWidgetItem(mark), QTableWidgetItem(piece), QTableWidgetItem(f"{p:.4f}")]
        fill = QBrush(QColor(_blend(t.base, t.highlight, 0.25 + 0.75 * float(p)))) if chosen else None
        for c, item in enumerate(items):
            if chosen:
                item.setFont(bold)
            if fill is not None:
                item.setBackground(fill)
            if c == 2:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            table.setItem(r, c, item)

    def _request_lens(self) -> None:
        s, pos = self.study, self.position
        if s is None or pos is None:
            return
        self.lens_title.setText(f"logit lens at token {pos}: computing…")
        self.lens_job.submit(lambda: (s, pos, s.lens(pos, LENS_K)))

    def _on_lens(self, _jid: int, result) -> None:
        s, pos, lens = result
        if s is not self.study or pos != self.position:
            return
        t = current_theme()
        labels = s.lens_labels()
        table = self.lens_table
        table.setRowCount(len(labels))
        table.setVerticalHeaderLabels(labels)
        nxt = int(s.ids[pos + 1]) if pos + 1 < s.T else None
        bold = QFont(table.font())
        bold.setBold(True)
        for r in range(len(labels)):
            for c in range(lens.top_ids.shape[1]):
                tid, p = int(lens.top_ids[r, c]), float(lens.top_probs[r, c])
                item = QTableWidgetItem(f"{visible_piece(s.ckpt.tokenizer.id_to_piece(tid))}  {p:.2f}")
                item.setBackground(QBrush(QColor(_blend(t.base, t.highlight, p))))
                item.setForeground(QBrush(QColor(t.highlight_text if p > 0.55 else t.text)))
                item.setToolTip(f"id {tid}, p = {p:.5f}" + (" · the token that came next" if tid == nxt else ""))
                if tid == nxt:
                    item.setFont(bold)
                table.setItem(r, c, item)
        piece = visible_piece(s.pieces()[pos])
        after = "" if nxt is None else f"; bold: {visible_piece(s.pieces()[pos + 1])!r}, which came next"
        self.lens_title.setText(f"logit lens at {piece!r} (token {pos}): each layer's guess of the next token{after}")

    # ------------------------------------------------------------------ input
    def _sync_sampling(self) -> None:
        sample = bool(self.mode.currentData())
        for w in self._sampling_widgets:
            w.setEnabled(sample)

    def _on_prompt_edited(self, _text: str) -> None:
        self._prompt_edited = True

    def _on_slider(self, value: int) -> None:
        s = self.study
        if s is None or not 0 <= value < s.n_steps:
            return
        self._follow = value == s.n_steps - 1
        self.select_position(s.position(value))

    def _on_anchor(self, url: QUrl) -> None:
        text = url.toString()
        if text.startswith("tok:"):
            try:
                position = int(text[4:])
            except ValueError:
                return
            if self.study is not None and position >= self.study.n_prompt:
                self._follow = position == self.study.T - 1
            self.select_position(position)

    def _on_strip_clicked(self, row: int, _col: int) -> None:
        if self.study is None:
            return
        layer, head = divmod(int(row), self.study.shape[1])
        self.set_head(layer, head)
        self.head_clicked.emit(layer, head)

    def _on_view_changed(self, view) -> None:
        self.set_colormap(view.colormap)


def install(panel) -> GenerateView:
    """Add the Generate tab to a ModelViewPanel: it follows the loaded model, the selected head, the panel's
    text (as the default prompt) and colours; disabled, with the reason as its tooltip, for other models."""
    view = GenerateView(panel)
    index = panel.tabs.addTab(view, "Generate")

    def on_model(ckpt) -> None:
        view.set_checkpoint(ckpt)
        reason = can_generate(ckpt)
        panel.tabs.setTabEnabled(index, reason is None)
        panel.tabs.setTabToolTip(index, reason or "watch the model write: each new token's attention, top-k and "
                                                  "logit lens")
        if reason is not None and panel.tabs.currentIndex() == index:
            panel.tabs.setCurrentIndex(0)

    panel.tabs.setTabEnabled(index, False)
    panel.tabs.setTabToolTip(index, can_generate(None))
    panel.model_loaded.connect(on_model)
    panel.head_selected.connect(view.set_head)
    view.head_clicked.connect(lambda layer, head: panel.select_head(layer, head) if panel.outcome is not None
                              else None)
    view.chat = panel.chat_box.wanted  # a chat model's prompt as the panel's "chat template" box says
    view.offer_prompt(panel.text_edit.text())
    panel.text_edit.textChanged.connect(view.offer_prompt)
    view.set_colormap(panel.ctx.session.state.view.colormap)
    panel.ctx.session.events.view.connect(view._on_view_changed)
    return view
