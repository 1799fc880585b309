"""InterveneView: the Pretrained panel's "Intervene" tab for decoder LLMs, encoders and vision models. The
session's interventions
(``SessionState.interventions``: heads zeroed, mean-ablated or scaled; the Mask workspace's mask knocking out
attention edges in chosen layers and heads; a head's output or the residual stream patched from a clean
prompt of the same length) are edited here, each edit one undoable step, and run on the panel's input off
the GUI thread: the next-token top-k before and after, the KL divergence, the logit difference of two tokens,
the selected head's attention before | after | difference, the largest change of every head's map and the
residual stream's change per layer. The head-importance sweep ablates every head in turn (progress, Cancel)
and ranks them in a layers x heads grid; "over a corpus…" runs that sweep over every document of a corpus
on a local Dask cluster (:mod:`attnviz.corpus.sweep`) and draws each head's mean effect. "Code…" shows the
PyTorch forward-hook and TransformerLens scripts that reproduce the interventions.

On an encoder (the BERT family) or a vision model (ViT, DeiT, DINOv2, CLIP, SigLIP) the heads are ablated,
scaled or knocked out the same way (no patch) and the effect is the cosine of the pooled / class-token output
before and after, each token's cosine, the maps before | after | difference and, for a vision model with a
class token, its attention drawn over the picture before | after. The sweep ranks the heads by 1 - that
cosine. What is computed is :mod:`attnviz.checkpoints.intervention_study`.

On an encoder-decoder (MarianMT, BART, mBART) the heads are those of the attention chosen in the tab (the
session's ``Interventions.stack``), the knockout is the encoder's and the effect is the next token after the last
decoder row (:mod:`intervene_seq2seq`). A vision-language model gets a second view in its page's tabs
(:func:`install_vlm`, :mod:`intervene_vlm`), with a token's attention over the picture before | after.
"""

from __future__ import annotations

import html
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QFont, QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QBoxLayout, QCheckBox, QComboBox, QDialog, QDoubleSpinBox, QFileDialog, QFrame,
                               QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit, QProgressBar, QPushButton, QScrollArea,
                               QSizePolicy, QSpinBox, QTabWidget, QVBoxLayout, QWidget)

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.decoder_text import encode
from attnviz.checkpoints.intervention_study import EncoderEffects, encoder_study, export_code, study, sweep, token_id
from attnviz.checkpoints.intervention_swin_study import SwinEffects, is_swin, swin_study, swin_sweep
from attnviz.checkpoints.intervention_swin_study import shape as swin_shape
from attnviz.checkpoints.intervention_swin_study import swin_code
from attnviz.checkpoints.intervention_vla_study import VlaWindowEffects
from attnviz.checkpoints.interventions import ENCODER_KINDS
from attnviz.checkpoints.views import display_image, display_patch
from attnviz.model.commands import SetFields
from attnviz.model.sequence import assemble
from attnviz.model.state import Interventions
from attnviz.sources.errors import SourceError
from attnviz.ui import colormaps
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.model_view import intervene_seq2seq as s2s
from attnviz.ui.model_view import intervene_vla as vla
from attnviz.ui.model_view import intervene_vlm as vlm
from attnviz.ui.model_view.intervene_means import MeansRow
from attnviz.ui.model_view.jobs import EXPECTED, MEMORY_MESSAGE
from attnviz.ui.theme import Theme, current_theme
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.widgets.image_overlay import PatchImageView
from attnviz.ui.widgets.small_multiples import HeadGrid
from attnviz.ui.messages import Level
from attnviz.ui.widgets.message_line import MessageLine

MODES = (("zero", "zero"), ("mean", "mean over positions"), ("scale", "scale by"))
PATCHES = (("none", "no patch"), ("head", "a head's output"), ("residual", "the residual stream"))
PIECE_CHARS = 16  # a token longer than this is cut in the top-k table (the tooltip-free table stays narrow)
METRIC_NAMES = (("kl", "KL divergence"), ("logit_diff", "logit difference drop"))
ENCODER_METRICS = (("cosine", "1 − cos of the pooled output"),)
SWEEP_OVER = (("input", "over this input"), ("corpus", "over a corpus…"))
CORPUS_WORKERS = 1  # local Dask worker threads of the window's corpus sweep (the window keeps the other cores)
WORST_TOKENS = 5  # tokens listed by how far their output turned
KINDS = ("decoder", "gpt2", *ENCODER_KINDS, "seq2seq", "whisper")  # the checkpoint kinds the tab runs on


def parse_indices(text: str, stop: int, what: str) -> tuple[int, ...]:
    """``"0, 2-4"`` -> (0, 2, 3, 4), each below ``stop``; "" or "all" -> (). ValueError names the bad part."""
    text = str(text).strip()
    if text.lower() in ("", "all"):
        return ()
    out = set()
    for part in (p.strip() for p in text.replace(";", ",").split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.strip().isdigit() or (sep and not hi.strip().isdigit()):
            raise ValueError(f"{part!r} is not a {what}: write numbers and ranges, e.g. 0, 2-3 (or all)")
        a, b = int(lo), int(hi) if sep else int(lo)
        if a > b:
            a, b = b, a
        if b >= stop:
            raise ValueError(f"{what} {b} is out of range: there are {stop} (0 to {stop - 1})")
        out.update(range(a, b + 1))
    return tuple(sorted(out))


def format_indices(values) -> str:
    return ", ".join(str(v) for v in values)


def session_mask(state) -> np.ndarray:
    """The session's mask (the Mask workspace's design over the session's tokens) as a bool (T, T) matrix."""
    q, k = assemble(state)
    if q is not k:
        raise ValueError("the session is a cross-attention (queries and keys from different sources): its mask "
                         "cannot knock out a self-attention's edges")
    return np.asarray(state.mask.compile(list(q.segments), None, q.T), dtype=bool)


class _Progress(QObject):
    """Carries the sweep's progress from the worker thread to the GUI thread (a queued signal)."""

    moved = Signal(int, int, int)  # (sweep number, heads done, heads in all)


class CodeDialog(QDialog):
    """The interventions as code: a PyTorch forward-hook script and a TransformerLens script, Copy and Save."""

    def __init__(self, code: dict, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Interventions as code")
        self.tabs = QTabWidget(self)
        self.editors = {}
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        for key, title in (("pytorch", "PyTorch forward hooks"), ("lens", "TransformerLens")):
            edit = QPlainTextEdit(self)
            edit.setReadOnly(True)
            edit.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
            edit.setFont(font)
            problem = code.get(f"{key}_problem", "")
            edit.setPlainText(code.get(key) or f"# {problem}")
            self.editors[key] = edit
            self.tabs.addTab(edit, title)
        self.code = code
        self.message = QLabel(" ", self)
        self.message.setWordWrap(True)
        self.copy_button = QPushButton("&Copy", self)
        self.save_button = QPushButton("&Save…", self)
        self.close_button = QPushButton("Clos&e", self)
        buttons = QHBoxLayout()
        buttons.addWidget(self.message, 1)
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.save_button)
        buttons.addWidget(self.close_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs, 1)
        layout.addLayout(buttons)
        self.resize(760, 540)
        self.copy_button.clicked.connect(self.copy)
        self.save_button.clicked.connect(self._ask_save)
        self.close_button.clicked.connect(self.close)
        self.tabs.currentChanged.connect(lambda _i: self._sync())
        self._sync()

    def current(self) -> str:
        return ("pytorch", "lens")[self.tabs.currentIndex()]

    def text(self, key: str | None = None) -> str:
        """The script shown for ``key`` ("pytorch" / "lens"; default the tab shown), "" when it cannot be written."""
        return self.code.get(key or self.current()) or ""

    def _sync(self) -> None:
        key = self.current()
        ok = bool(self.text(key))
        self.copy_button.setEnabled(ok)
        self.save_button.setEnabled(ok)
        self.message.setText(self.code.get(f"{key}_problem", "") or " ")

    def arrays(self) -> dict:
        """{file name: array} the script shown reads beside it: a vision model's pixels, Whisper's log-mel features
        (and a patch's clean ones)."""
        out = {}
        for key in ("pixels", "features", "clean_features"):
            if self.code.get(key) is not None and self.code.get(f"{key}_file") and (
                    self.current() == "pytorch" or key != "pixels"):
                out[self.code[f"{key}_file"]] = self.code[key]
        return out

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text())
        files = list(self.arrays())
        note = f"; the script reads {', '.join(files)} beside it, which Save… writes" if files else ""
        self.message.setText("copied to the clipboard" + note)

    def save(self, path) -> bool:
        """Write the script shown to ``path``, and the arrays it reads (pixels, features) beside it."""
        arrays = self.arrays()
        side = Path(path).with_name(next(iter(arrays))) if arrays else None
        pictures = self.code.get("images") if self.current() == "pytorch" else None
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(self.text())
            for name, values in arrays.items():
                np.save(Path(path).with_name(name), values)
            if pictures:  # a vision-language model's script opens its pictures beside it
                from PIL import Image

                for rgb, name in zip(pictures, self.code["image_files"]):
                    Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(Path(path).with_name(name))
                side = Path(path).with_name(self.code["image_files"][0])
        except OSError as exc:
            self.message.setText(f"could not save {path}: {exc.strerror or exc}")
            return False
        what = "the pixels it reads" if "pixels" in self.code else "the arrays it reads"
        self.message.setText(f"saved {path}" if side is None else
                             f"saved {path} and {what}, {side.name}, beside it: run it from that folder")
        return True

    def _ask_save(self) -> None:
        name = "interventions_hooks.py" if self.current() == "pytorch" else "interventions_lens.py"
        path, _ = QFileDialog.getSaveFileName(self, "Save the script", name, "Python source (*.py)")
        if path:
            self.save(path)


class ResidualChart(QWidget):
    """Bars: the residual stream's relative change entering each layer (and leaving the last)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.plot = pg.PlotWidget(self)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(False, False)
        self.plot.setMinimumHeight(130)
        pi = self.plot.getPlotItem()
        pi.setLabel("bottom", "residual stream entering layer")
        pi.setLabel("left", "‖Δ‖ / ‖x‖")
        pi.showGrid(x=False, y=True, alpha=0.25)
        pi.getAxis("left").enableAutoSIPrefix(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)
        self.values: np.ndarray | None = None
        self.labels: list[str] | None = None
        self._theme = current_theme()
        self.on_theme_changed(self._theme)

    def set_values(self, values, labels=None) -> None:
        """``labels``: one tick per value (default: the layer numbers, "out" last)."""
        self.values = None if values is None else np.asarray(values, dtype=float)
        self.labels = None if labels is None else list(labels)
        self._draw()

    def _draw(self) -> None:
        pi = self.plot.getPlotItem()
        pi.clear()
        v = self.values
        if v is None or not v.size:
            return
        colour = "#5cb8f0" if self._theme.name == "dark" else "#0072b2"
        x = np.arange(v.size)
        pi.addItem(pg.BarGraphItem(x=x, height=v, width=0.7, brush=colour, pen=pg.mkPen(colour)))
        L = v.size - 1
        ticks = [(i, str(i) if i < L else "out") for i in range(v.size)] if self.labels is None else \
            list(enumerate(self.labels))
        pi.getAxis("bottom").setTicks([ticks] if v.size <= 33 else None)
        pi.setXRange(-0.6, v.size - 0.4, padding=0)
        top = float(v.max())
        pi.setYRange(0.0, top * 1.1 if top > 0 else 1.0, padding=0)

    def on_theme_changed(self, theme: Theme) -> None:
        self._theme = theme
        self.plot.setBackground(theme.plot_background)
        pi = self.plot.getPlotItem()
        for name in ("bottom", "left"):
            axis = pi.getAxis(name)
            axis.setPen(theme.plot_foreground)
            axis.setTextPen(theme.plot_foreground)
        self._draw()


class _Body(QWidget):
    """The tab's scrolled content: its side-by-side rows stack when the tab is narrow."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.reflow: list[tuple[QBoxLayout, int]] = []  # (row, narrowest width it stays side by side at)

    def resizeEvent(self, ev):  # noqa: N802 - Qt's name
        super().resizeEvent(ev)
        for row, width in self.reflow:
            want = QBoxLayout.Direction.LeftToRight if self.width() >= width else QBoxLayout.Direction.TopToBottom
            if row.direction() != want:
                row.setDirection(want)


def _title(text: str) -> QLabel:
    label = QLabel(text)
    label.setStyleSheet("QLabel { font-weight: bold; padding: 4px 2px 0px 2px; }")
    return label


# The view's plots, made ahead a few at a time (the Pretrained panel runs each step on a turn of the event loop
# before the view's own): together they were most of the quarter second its constructor held the window.
# Two heatmaps a step at most: four in one step took 0.1-0.17 s of the GUI thread's CPU on the long-context demo.
PART_STEPS = (
    lambda: {"heads_map": AttentionHeatmap(), "maps": [AttentionHeatmap()]},
    lambda: {"maps": [AttentionHeatmap(), AttentionHeatmap()]},  # with the first: before | after | difference
    lambda: {"importance_map": AttentionHeatmap()},
    lambda: {"later": HeadGrid(), "residual": ResidualChart()},
    lambda: {"overlays": [PatchImageView() for _ in range(2)]},
    lambda: {"vlm_overlay": vlm.VlmOverlay()},
)


def make_parts(panel, host: str, step: int) -> None:
    """Make step ``step`` of :data:`PART_STEPS` for the view of ``host`` ("panel" or "vlm") on ``panel``; a
    list made over several steps (the three maps) is extended."""
    parts = panel.__dict__.setdefault("_intervene_parts", {}).setdefault(host, {})
    for name, made in PART_STEPS[step]().items():
        if isinstance(made, list) and name in parts:
            parts[name] = [*parts[name], *made]
        else:
            parts[name] = made


def _take_parts(panel, host: str) -> dict:
    return panel.__dict__.get("_intervene_parts", {}).pop(host, {})


class InterveneView(QWidget):
    """The Intervene tab (see the module doc); ``panel`` is the ModelViewPanel it belongs to; ``parts``: plots
    made ahead by :func:`make_parts` (by name), the others are made here."""

    effects_ready = Signal(object)  # the Effects drawn
    sweep_ready = Signal(object)  # the Sweep drawn (complete or cancelled)
    failed = Signal(str)

    def __init__(self, panel, parent=None, host: str = "panel", parts: dict | None = None):
        super().__init__(parent)
        made = dict(parts or {})

        def part(name, make):
            got = made.pop(name, None)
            return make() if got is None else got

        self.panel = panel
        self.host = host  # "panel": the panel's tabs; "vlm": the vision-language page's (intervene_vlm.install)
        self.ctx = panel.ctx
        self.effects = None  # the Effects drawn
        self.sweep_result = None  # the Sweep drawn
        self.selected: tuple[int, int] = (0, 0)
        self._syncing = False
        self._stale = False  # an encoder's run waits for the tab to be shown
        self._means_problem = ""  # why the head means file chosen last cannot be used
        self._sweep_model = None  # the checkpoint the running or last sweep measures
        self._stop = threading.Event()  # the running sweep's cancel flag
        self._sweep_no = 0
        self._sweep_ids: np.ndarray | None = None  # the input the sweep shown was run on
        self._sweep_stack = "decoder"  # the attention an encoder-decoder's sweep shown ablated
        self.job = LatestJob("attnviz-intervene", self, expected=EXPECTED, memory_message=MEMORY_MESSAGE)
        self.sweep_job = LatestJob("attnviz-intervene-sweep", self, expected=EXPECTED, memory_message=MEMORY_MESSAGE)
        self._progress = _Progress(self)

        # -- what is changed
        self.mode_combo = QComboBox(self)
        for key, text in MODES:
            self.mode_combo.addItem(text, key)
        self.mode_combo.setToolTip("what happens to the chosen heads' outputs (before the output projection)")
        self.factor_spin = QDoubleSpinBox(self)
        self.factor_spin.setRange(-100.0, 100.0)
        self.factor_spin.setDecimals(3)
        self.factor_spin.setSingleStep(0.1)
        self.factor_spin.setToolTip("the factor the chosen heads' outputs are multiplied by")
        self.clear_button = QPushButton("Clear", self)
        self.clear_button.setToolTip("remove every intervention (one undo step)")
        self.code_button = QPushButton("Code…", self)
        self.code_button.setToolTip("the interventions as a PyTorch forward-hook script and a TransformerLens script")
        self.busy = QProgressBar(self)
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(60)
        self.busy.setTextVisible(False)
        self.busy.setVisible(False)
        self.heads_line = QLabel("", self)
        self.heads_line.setWordWrap(True)
        self.heads_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.means_row = MeansRow(self)  # where a mean ablation's means come from (shown with mode mean)
        self.stack_row = s2s.StackRow(self)  # an encoder-decoder's attention whose heads are edited

        self.knockout_check = QCheckBox("knock out the mask's edges in layers", self)
        self.knockout_check.setToolTip("edges the Mask workspace's mask forbids are removed before the softmax "
                                       "(each row renormalises), on top of the model's causal mask")
        self.ko_layers = QLineEdit(self)
        self.ko_layers.setPlaceholderText("all")
        self.ko_layers.setToolTip("layers, e.g. 0, 2-3 (empty or all: every layer)")
        self.ko_heads = QLineEdit(self)
        self.ko_heads.setPlaceholderText("all")
        self.ko_heads.setToolTip("heads of those layers, e.g. 1, 3 (empty or all: every head)")
        for e in (self.ko_layers, self.ko_heads):
            e.setMaximumWidth(90)

        self.patch_combo = QComboBox(self)
        for key, text in PATCHES:
            self.patch_combo.addItem(text, key)
        self.patch_combo.setToolTip("copy from the clean prompt's pass into this input's pass")
        self.patch_layer = QSpinBox(self)
        self.patch_layer.setToolTip("the layer: its head's output, or the residual stream entering it")
        self.patch_head = QSpinBox(self)
        self.patch_head.setToolTip("the head whose output is patched")
        self.patch_positions = QLineEdit(self)
        self.patch_positions.setPlaceholderText("all")
        self.patch_positions.setToolTip("token positions of the residual patch, e.g. 3, 5-6 (empty or all: every one)")
        self.patch_positions.setMaximumWidth(90)
        self.clean_edit = QLineEdit(self)
        self.clean_edit.setPlaceholderText("the clean prompt (as many tokens as the input)")
        self.clean_edit.setToolTip("the clean prompt the patch is taken from; Enter applies it")

        self.token_a = QLineEdit(self)
        self.token_b = QLineEdit(self)
        for e, tip in ((self.token_a, "first token (a piece, a one-token word with its space, or #ID)"),
                       (self.token_b, "second token")):
            e.setToolTip(tip)
            e.setMaximumWidth(110)

        self.message = MessageLine(self, style="QLabel { color: #e05050; padding: 2px 2px; }")
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.setVisible(False)

        # -- heads and effects
        self.heads_map = part("heads_map", lambda: AttentionHeatmap(self))  # (L, nh): |Δ| of each map; edited heads hatched; click toggles
        self.heads_map.setMinimumSize(220, 190)
        self.results = QLabel("", self)
        self.results.setTextFormat(Qt.TextFormat.RichText)
        self.results.setWordWrap(True)
        self.results.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.results.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.results.setMinimumWidth(230)
        self.maps_title = QLabel(" ", self)
        self.maps_title.setWordWrap(True)
        self.maps = part("maps", lambda: [AttentionHeatmap(self) for _ in range(3)])  # before | after | difference
        for m in self.maps:
            m.setMinimumSize(150, 230)
        self.later_title = QLabel(" ", self)
        self.later_title.setWordWrap(True)
        self.later = part("later", lambda: HeadGrid(self))  # the selected head in the first edited layer and every later one
        self.later.setMinimumHeight(150)
        self._later_first = 0
        self.residual = part("residual", lambda: ResidualChart(self))

        # -- importance sweep
        self.metric_combo = QComboBox(self)
        for key, text in METRIC_NAMES:
            self.metric_combo.addItem(text, key)
        self.metric_combo.setToolTip("the effect measured for each head ablated alone (the logit difference of "
                                     "the two tokens above: how much it drops)")
        self.sweep_button = QPushButton("Sweep every head", self)
        self.sweep_button.setToolTip("ablate every head in turn (with the mode above) and rank the heads")
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setEnabled(False)
        self.sweep_bar = QProgressBar(self)
        self.sweep_bar.setRange(0, 1)
        self.sweep_bar.setValue(0)
        self.sweep_bar.setFormat("%v / %m heads")
        self.over_combo = QComboBox(self)
        for key, text in SWEEP_OVER:
            self.over_combo.addItem(text, key)
        self.over_combo.setToolTip("sweep the panel's input, or every document of a corpus (a text file with a "
                                   "document per line, a folder of .txt files, a .parquet or .jsonl file) on a "
                                   "local Dask cluster: each head's mean effect over the documents")
        self.corpus_edit = QLineEdit(self)
        self.corpus_edit.setPlaceholderText("corpus: a text file (a document per line), a folder, .parquet or .jsonl")
        self.browse_button = QPushButton("Browse…", self)
        self.corpus_row = QWidget(self)
        self.importance_map = part("importance_map", lambda: AttentionHeatmap(self))
        self.importance_map.setMinimumSize(220, 190)
        self.corpus_result = None  # the CorpusSweep drawn, when the sweep ran over a corpus
        # -- a vision model's class-token overlay before | after
        self.overlay_title = QLabel(" ", self)
        self.overlay_title.setWordWrap(True)
        self.overlays = part("overlays", lambda: [PatchImageView(self) for _ in range(2)])
        for v in self.overlays:
            v.setMinimumSize(150, 200)
        self.overlay_box = QWidget(self)
        self.vlm_overlay = part("vlm_overlay", lambda: vlm.VlmOverlay(self))  # a vision-language model's last token over the picture
        self.ranking = QLabel(" ", self)
        self.ranking.setWordWrap(True)
        self.ranking.setTextFormat(Qt.TextFormat.RichText)
        self.ranking.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.ranking.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.ranking.setMinimumWidth(200)

        self._build_layout()
        self._connect()
        self.set_colormap(self.ctx.session.state.view.colormap)
        self._sync_controls(self.ctx.session.state.interventions)
        self._show_idle("Load a decoder LLM and run it on a text: its interventions are computed here.")

    # ------------------------------------------------------------------ layout
    def _build_layout(self) -> None:
        body = _Body(self)
        col = QVBoxLayout(body)
        col.setContentsMargins(6, 4, 6, 6)
        col.setSpacing(4)
        row1 = QHBoxLayout()
        row1.addWidget(QLabel("heads:", body))
        row1.addWidget(self.mode_combo)
        row1.addWidget(self.factor_spin)
        row1.addStretch(1)
        row1.addWidget(self.busy)
        row1.addWidget(self.clear_button)
        row1.addWidget(self.code_button)
        col.addLayout(row1)
        col.addWidget(self.stack_row)
        col.addWidget(self.heads_line)
        col.addWidget(self.means_row)
        row2 = QHBoxLayout()
        row2.addWidget(self.knockout_check)
        row2.addWidget(self.ko_layers)
        row2.addWidget(QLabel("heads", body))
        row2.addWidget(self.ko_heads)
        row2.addStretch(1)
        col.addLayout(row2)
        self.decoder_rows = QWidget(body)  # patching and the logit difference: decoder LLMs only
        drows = QVBoxLayout(self.decoder_rows)
        drows.setContentsMargins(0, 0, 0, 0)
        drows.setSpacing(4)
        row3 = QHBoxLayout()
        row3.addWidget(QLabel("patch", body))
        row3.addWidget(self.patch_combo)
        row3.addWidget(QLabel("layer", body))
        row3.addWidget(self.patch_layer)
        row3.addWidget(QLabel("head", body))
        row3.addWidget(self.patch_head)
        row3.addWidget(QLabel("positions", body))
        row3.addWidget(self.patch_positions)
        row3.addStretch(1)
        drows.addLayout(row3)
        row4 = QHBoxLayout()
        row4.addWidget(QLabel("clean prompt", body))
        row4.addWidget(self.clean_edit, 1)
        drows.addLayout(row4)
        self.logit_row = QWidget(self.decoder_rows)  # a next token to read: not a robot policy's
        row5 = QHBoxLayout(self.logit_row)
        row5.setContentsMargins(0, 0, 0, 0)
        row5.addWidget(QLabel("logit difference of", body))
        row5.addWidget(self.token_a)
        row5.addWidget(QLabel("−", body))
        row5.addWidget(self.token_b)
        row5.addStretch(1)
        drows.addWidget(self.logit_row)
        col.addWidget(self.decoder_rows)
        col.addWidget(self.message)

        col.addWidget(_title("Heads (click to edit a head) and the effect"))
        top = QHBoxLayout()
        top.addWidget(self.heads_map, 3)
        top.addWidget(self.results, 2)
        col.addLayout(top)
        col.addWidget(self.maps_title)
        maps = QHBoxLayout()
        for m in self.maps:
            maps.addWidget(m, 1)
        col.addLayout(maps)
        obox = QVBoxLayout(self.overlay_box)
        obox.setContentsMargins(0, 0, 0, 0)
        obox.addWidget(_title("The class token's attention over the picture"))
        obox.addWidget(self.overlay_title)
        orow = QHBoxLayout()
        for v, what in zip(self.overlays, ("before", "after")):
            pic = QVBoxLayout()
            caption = QLabel(what, self.overlay_box)
            caption.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            pic.addWidget(caption)
            pic.addWidget(v, 1)
            orow.addLayout(pic, 1)
        obox.addLayout(orow)
        self.overlay_box.setVisible(False)
        col.addWidget(self.overlay_box)
        col.addWidget(self.vlm_overlay)
        col.addWidget(self.later_title)
        col.addWidget(self.later)
        col.addWidget(_title("Residual stream change per layer"))
        col.addWidget(self.residual)
        self.sweep_title = _title("Head importance: every head ablated in turn")
        col.addWidget(self.sweep_title)
        row6 = QHBoxLayout()
        row6.addWidget(self.metric_combo)
        row6.addWidget(self.over_combo)
        row6.addWidget(self.sweep_button)
        row6.addWidget(self.sweep_bar, 1)
        row6.addWidget(self.cancel_button)
        col.addLayout(row6)
        row7 = QHBoxLayout(self.corpus_row)
        row7.setContentsMargins(0, 0, 0, 0)
        row7.addWidget(self.corpus_edit, 1)
        row7.addWidget(self.browse_button)
        self.corpus_row.setVisible(False)
        col.addWidget(self.corpus_row)
        bottom = QHBoxLayout()
        bottom.addWidget(self.importance_map, 3)
        bottom.addWidget(self.ranking, 2)
        col.addLayout(bottom)
        body.reflow = [(top, 560), (bottom, 520), (maps, 460)]
        col.addStretch(1)

        self.scroll = QScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll.setWidget(body)
        body.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self.scroll)
        self.body = body

    def _connect(self) -> None:
        self.mode_combo.activated.connect(lambda _i: self._edit_from_controls("Change the intervention mode"))
        self.factor_spin.editingFinished.connect(lambda: self._edit_from_controls("Change the scale factor"))
        self.knockout_check.toggled.connect(lambda _on: self._edit_from_controls("Knock out the mask's edges"))
        self.ko_layers.editingFinished.connect(lambda: self._on_knockout_typed("Change the knockout layers"))
        self.ko_heads.editingFinished.connect(lambda: self._on_knockout_typed("Change the knockout heads"))
        self.patch_combo.activated.connect(lambda _i: self._edit_from_controls("Change the patch"))
        self.patch_layer.editingFinished.connect(lambda: self._edit_from_controls("Change the patched layer"))
        self.patch_head.editingFinished.connect(lambda: self._edit_from_controls("Change the patched head"))
        self.patch_positions.editingFinished.connect(lambda: self._edit_from_controls("Change the patch positions"))
        self.clean_edit.editingFinished.connect(lambda: self._edit_from_controls("Change the clean prompt"))
        self.token_a.editingFinished.connect(self._draw_results)
        self.token_b.editingFinished.connect(self._draw_results)
        self.means_row.changed.connect(self._on_means_changed)
        self.stack_row.chosen.connect(self._on_stack_chosen)
        self.means_row.refused.connect(self._on_means_refused)
        self.clear_button.clicked.connect(self.clear_interventions)
        self.code_button.clicked.connect(self.show_code)
        self.heads_map.cell_clicked.connect(self.toggle_head)
        self.importance_map.cell_clicked.connect(self._pick)
        self.later.head_clicked.connect(lambda r, _c: self._pick(self._later_first + r, self.selected[1]))
        self.sweep_button.clicked.connect(self.run_sweep)
        self.over_combo.currentIndexChanged.connect(lambda _i: self._sync_sweep_controls())
        self.browse_button.clicked.connect(self._browse_corpus)
        self.cancel_button.clicked.connect(self.cancel_sweep)
        self.job.done.connect(self._on_done)
        self.job.failed.connect(self._on_failed)
        self.job.busy_changed.connect(self.busy.setVisible)
        self.sweep_job.done.connect(self._on_sweep_done)
        self.sweep_job.failed.connect(self._on_sweep_failed)
        self._progress.moved.connect(self._on_progress)
        self.ctx.session.events.interventions.connect(self._on_interventions_changed)
        self.ctx.session.events.mask.connect(self._on_mask_changed)
        self.ctx.session.events.sources.connect(self._on_mask_changed)

    # ------------------------------------------------------------------ public API
    @property
    def progress_moved(self):
        """The sweep's progress on the GUI thread: (sweep number, heads done, heads in all)."""
        return self._progress.moved

    @property
    def stale(self) -> bool:
        """True while a run waits for the tab to be shown (an encoder's: no extra passes behind another tab)."""
        return self._stale

    @property
    def spec(self) -> Interventions:
        return self.ctx.session.state.interventions

    def ready(self) -> bool:
        """A decoder LLM (its run on an input shown, with every map held), an encoder or a vision model (its run
        shown) is loaded."""
        ck, out = self.panel.ckpt, self.panel.outcome
        if ck is None or out is None:
            return False
        if ck.kind == "decoder":
            return not self.panel.study.long and getattr(out.result, "decoder", None) is not None
        if ck.kind == "gpt2":
            return getattr(out.result, "kind", None) == "gpt2" and getattr(out.result, "ids", None) is not None
        if ck.kind in ENCODER_KINDS and getattr(out.result, "kind", None) == ck.kind:
            return self._encoder_input() is not None
        if s2s.is_seq2seq(ck):
            return s2s.supported(ck) and s2s.run_result(self.panel) is not None
        if ck.kind == "vlm" and vla.supported(ck):
            return self.host == "vlm" and vla.result(self.panel) is not None
        if ck.kind == "vlm":
            return self.host == "vlm" and vlm.supported(ck) and vlm.result(self.panel) is not None
        return False

    def vlm(self) -> bool:
        """A vision-language model (not a robot policy) is loaded and this is its page's tab."""
        return self.host == "vlm" and getattr(self.panel.ckpt, "kind", None) == "vlm" and not self.vla()

    def vla(self) -> bool:
        """A SmolVLA robot policy is loaded and this is its page's tab (its heads: those of the chosen stack)."""
        return self.host == "vlm" and vla.supported(self.panel.ckpt)

    def tabs(self):
        """The tab widget this view is a tab of."""
        return self.panel.vlm.tabs if self.host == "vlm" else self.panel.tabs

    def seq2seq(self) -> bool:
        """The model loaded is an encoder-decoder (its heads: those of the chosen stack)."""
        return s2s.is_seq2seq(self.panel.ckpt)

    def shape(self) -> tuple[int, int] | None:
        """(layers, heads) the edited heads are counted in: the model's, an encoder-decoder's chosen stack's."""
        ck = self.panel.ckpt
        if ck is not None and vla.supported(ck):
            return vla.shape(ck, self.spec)
        if ck is not None and ck.kind == "vlm" and vlm.supported(ck):
            return ck.spec.text.n_layer, ck.spec.text.n_head
        if ck is None or ck.kind not in KINDS:
            return None
        if self.seq2seq():
            return s2s.shape(ck, self.spec.stack)
        if is_swin(ck.config):  # every stage's blocks, the most heads of a stage
            x = self._encoder_input()
            return swin_shape(ck.config, x.shape) if x is not None else (ck.config.n_layer, ck.config.n_head)
        return ck.config.n_layer, ck.config.n_head

    def encoder(self) -> bool:
        """The model loaded is an encoder or a vision model (effects: the pooled output's cosine)."""
        ck = self.panel.ckpt
        return ck is not None and getattr(ck, "kind", None) in ENCODER_KINDS

    def _encoder_input(self):
        """The token ids (T,) or pixels (C, H, W) the panel's encoder run saw, None without one."""
        r = self.panel.outcome.result if self.panel.outcome is not None else None
        if r is None:
            return None
        return r.pixels if self.panel.ckpt.kind == "vit" else r.ids

    def set_interventions(self, spec: Interventions, label: str = "Edit the interventions") -> bool:
        """Replace the session's interventions (one undo step); False when nothing changed or it was refused."""
        if spec == self.spec:
            return False
        return self.ctx.execute(SetFields((("interventions", spec),), label=label))

    def toggle_head(self, layer: int, head: int) -> bool:
        """Add (layer, head) to the edited heads, or remove it; one undo step."""
        heads = set(self.spec.heads)
        key = (int(layer), int(head))
        verb = "Restore" if key in heads else ("Scale" if self.spec.mode == "scale" else "Ablate")
        heads ^= {key}
        return self.set_interventions(replace(self.spec, heads=tuple(sorted(heads))), f"{verb} head {layer}.{head}")

    def clear_interventions(self) -> bool:
        return self.set_interventions(Interventions(), "Remove the interventions")

    def refresh(self) -> int | None:
        """Run the session's interventions on the panel's input (off the GUI thread); returns the job id. On an
        encoder, a vision model, an encoder-decoder or a vision-language model the run waits until the tab is
        shown (their runs in the other tabs do not pay for two more passes)."""
        if not self.ready():
            self.effects = None
            self._show_idle(self._why_not_ready())
            return None
        if (self.encoder() or self.vlm() or self.vla() or self.seq2seq()) and not self.isVisible():
            self._stale = True
            return None
        self._stale = False
        ck = self.panel.ckpt
        spec = self.spec
        allowed = None
        if spec.knockout_layers:
            try:
                allowed = session_mask(self.ctx.session.state)
            except (ValueError, SourceError) as exc:
                self._fail(f"The session's mask cannot be used: {exc}")
                return None
        means = self.means()
        if self.seq2seq():
            self.message.clear()
            return self.job.submit(s2s.study_job(ck, self.panel, spec, spec.stack, allowed))
        if self.vla():
            try:
                job = vla.study_job(ck, self.panel, spec, allowed)
            except CheckpointError as exc:
                self._fail(f"The intervention cannot run: {exc}")
                return None
            self.message.clear()
            return self.job.submit(job)
        if self.vlm():
            self.message.clear()
            return self.job.submit(vlm.study_job(ck, self.panel, spec, allowed, means))
        if self.encoder():
            x = self._encoder_input()
            self.message.clear()
            if is_swin(ck.config):
                classifier = self._swin_classifier(ck)
                return self.job.submit(lambda: swin_study(ck.config, ck.weights, x, spec, allowed=allowed,
                                                          classifier=classifier))
            return self.job.submit(lambda: encoder_study(ck.config, ck.weights, x, spec, allowed=allowed, means=means))
        ids = self._text_ids()
        chat = bool(getattr(self.panel.outcome.result.decoder, "chat", False)) if ck.kind == "decoder" else False

        def job():
            clean_ids = None
            if spec.patch != "none" and spec.clean:
                limit = ck.config.max_positions or (1 << 20)
                if ck.kind == "gpt2":
                    clean_ids = ck.tokenizer.encode(spec.clean, add_special_tokens=True,
                                                    max_tokens=ck.config.max_tokens).ids
                else:
                    clean_ids = encode(ck.tokenizer, ck.special_tokens, spec.clean, limit, chat=chat,
                                       model=ck.name).ids
            return study(ck.config, ck.weights, ids, spec, allowed=allowed, clean_ids=clean_ids, means=means)

        self.message.clear()
        return self.job.submit(job)

    def run_sweep(self) -> int | None:
        """Start the head-importance sweep over the panel's input; returns the job id (None: nothing to sweep)."""
        if self.over_combo.currentData() == "corpus":
            return self.run_corpus_sweep()
        if not self.ready():
            self._fail(self._why_not_ready())
            return None
        ck = self.panel.ckpt
        ids = self._ids()
        metric = self.metric_combo.currentData()
        tokens = None
        if metric == "logit_diff":
            try:
                tokens = self._tokens()
            except CheckpointError as exc:
                self._fail(str(exc))
                return None
            if tokens is None:
                self._fail("The logit difference needs two tokens: fill in both fields above.")
                return None
        spec = self.spec
        self._sweep_ids = ids
        self._sweep_stack = vla.stack(spec) if self.vla() else spec.stack  # the sweep is of one attention
        self._stop.set()  # a sweep still running stops at its next head
        stop = self._stop = threading.Event()
        self._sweep_no += 1
        number, signal = self._sweep_no, self._progress.moved
        n_layer, n_head = self.shape()
        total = n_layer * n_head
        self.sweep_bar.setRange(0, total)
        self.sweep_bar.setValue(0)
        self.sweep_bar.setFormat("%v / %m heads")
        self.cancel_button.setEnabled(True)
        self.sweep_button.setEnabled(False)
        self.message.clear()
        self._sweep_model = ck
        means = self.means()
        if self.vla():
            try:
                job = vla.sweep_job(ck, self.panel, spec, metric, stop, lambda i, n: signal.emit(number, i, n))
            except CheckpointError as exc:
                self._on_sweep_failed(0, str(exc))
                return None
            return self.sweep_job.submit(job)
        if self.vlm():
            return self.sweep_job.submit(vlm.sweep_job(ck, self.panel, spec, metric, tokens, stop,
                                                       lambda i, n: signal.emit(number, i, n)))
        if self.seq2seq():
            return self.sweep_job.submit(s2s.sweep_job(ck, self.panel, spec, spec.stack, metric, tokens, stop,
                                                       lambda i, n: signal.emit(number, i, n)))
        if is_swin(ck.config):
            return self.sweep_job.submit(lambda: swin_sweep(ck.config, ck.weights, ids, mode=spec.mode,
                                                            factor=spec.factor, cancelled=stop.is_set,
                                                            progress=lambda i, n: signal.emit(number, i, n)))
        return self.sweep_job.submit(lambda: sweep(ck.config, ck.weights, ids, mode=spec.mode, factor=spec.factor,
                                                   metric=metric, tokens=tokens, cancelled=stop.is_set,
                                                   progress=lambda i, n: signal.emit(number, i, n), means=means))

    def run_corpus_sweep(self, path: str | None = None) -> int | None:
        """Start the sweep over every document of the corpus at ``path`` (default: the corpus field) on a local
        Dask cluster, off the GUI thread; returns the job id (None: it cannot start, the message says why)."""
        ck = self.panel.ckpt
        if ck is None or ck.kind not in ("decoder", "bert"):
            self._fail("The corpus sweep runs on the decoder LLMs of the Llama family and on text encoders (the BERT "
                       "family); GPT-2, encoder-decoders and vision models sweep this input.")
            return None
        path = (self.corpus_edit.text() if path is None else str(path)).strip()
        if not path:
            self._fail("Name the corpus: a text file with a document per line, a folder of .txt files, or a "
                       ".parquet or .jsonl file with a 'text' column.")
            return None
        spec = self.spec
        if spec.mode not in ("zero", "mean"):
            self._fail("The corpus sweep zero- or mean-ablates each head: choose zero or mean above.")
            return None
        metric = self.metric_combo.currentData()
        tokens = None
        if metric == "logit_diff":
            try:
                tokens = self._tokens()
            except CheckpointError as exc:
                self._fail(str(exc))
                return None
            if tokens is None:
                self._fail("The logit difference needs two tokens: fill in both fields above.")
                return None
        from attnviz.corpus.sweep import run_sweep

        self._stop.set()
        stop = self._stop = threading.Event()
        self._sweep_no += 1
        number, signal = self._sweep_no, self._progress.moved
        self._sweep_ids = None
        self.sweep_bar.setRange(0, 0)  # counting the documents
        self.sweep_bar.setFormat("%v / %m docs")
        self.cancel_button.setEnabled(True)
        self.sweep_button.setEnabled(False)
        self.message.clear()
        folder = str(ck.folder)
        name = ck.name if ck.name != ck.folder.name else None
        # a document per partition: Cancel is asked after each document
        self._sweep_model = ck
        means = self.means()
        return self.sweep_job.submit(lambda: run_sweep(folder, name, path, None, mode=spec.mode, metric=metric,
                                                       tokens=tokens, scheduler="threads", workers=CORPUS_WORKERS,
                                                       batch=1, cancelled=stop.is_set, means=means,
                                                       progress=lambda p: signal.emit(number, p.done, p.total)))

    def _browse_corpus(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a corpus", "", "Corpora (*.txt *.parquet *.jsonl);;All files (*)")
        if path:
            self.corpus_edit.setText(path)

    def _sync_sweep_controls(self) -> None:
        corpus = self.over_combo.currentData() == "corpus"
        self.corpus_row.setVisible(corpus)
        self.sweep_button.setText("Sweep the corpus" if corpus else "Sweep every head")

    def cancel_sweep(self) -> None:
        """Stop the sweep at the next head; the heads done so far are shown."""
        self._stop.set()
        self.cancel_button.setEnabled(False)

    def code(self) -> dict:
        """The export of :func:`intervention_study.export_code` for the session's interventions on this input."""
        if not self.ready():
            raise CheckpointError(self._why_not_ready())
        ck = self.panel.ckpt
        if self.seq2seq():
            return self._seq2seq_code(ck)
        if self.vla():
            return vla.code(ck, self.panel, self.spec, self._session_mask_or_none())
        allowed = None
        if self.spec.knockout_layers:
            try:
                allowed = session_mask(self.ctx.session.state)
            except (ValueError, SourceError) as exc:
                raise CheckpointError(f"the session's mask cannot be used: {exc}") from None
        if self.vlm():
            return vlm.code(ck, self.panel, self.spec, allowed, self.means())
        if self.encoder() and is_swin(ck.config):
            return swin_code(ck, self._encoder_input(), self.spec, allowed, self._swin_classifier(ck) is not None)
        ids = self._encoder_input() if self.encoder() else self._text_ids()
        return export_code(str(ck.folder), ids, self.spec, ck.config, allowed=allowed, means=self.means())

    def _session_mask_or_none(self):
        """The session's mask when the interventions knock edges out, else None; one line when it cannot be used."""
        if not self.spec.knockout_layers:
            return None
        try:
            return session_mask(self.ctx.session.state)
        except (ValueError, SourceError) as exc:
            raise CheckpointError(f"the session's mask cannot be used: {exc}") from None

    def _seq2seq_code(self, ck) -> dict:
        """The encoder-decoder's scripts (:func:`intervention_seq2seq_code.seq2seq_script`) of the session's
        interventions on the panel's run."""
        from attnviz.checkpoints.intervention_seq2seq_code import seq2seq_script

        spec = self.spec
        src, dec = s2s.ids(self.panel)
        allowed = None
        if spec.knockout_layers:
            try:
                allowed = session_mask(self.ctx.session.state)
            except (ValueError, SourceError) as exc:
                raise CheckpointError(f"the session's mask cannot be used: {exc}") from None
        clean = None
        if spec.patch == "head" and spec.clean.strip():
            try:
                clean = s2s.clean_source(ck, spec.clean)
            except SourceError as exc:
                raise CheckpointError(f"the clean source: {exc}") from None
        folder = Path(ck.folder)
        model = str(folder.resolve()) if folder.is_dir() else str(folder)  # the script runs from where it is saved
        return seq2seq_script(ck, src, dec, spec.stack, spec, allowed=allowed, clean=clean, folder=model)

    def means(self) -> np.ndarray | None:
        """(L, nh, hd) the heads are set to by a mean ablation (a sweep file's), None: their means over the input."""
        return self.means_row.means if self.spec.mode == "mean" and not (self.seq2seq() or self.vla()) else None

    def _on_means_refused(self, text: str) -> None:
        self._means_problem = f"The head means cannot be used: {text}"  # kept over the pass that follows
        self._fail(self._means_problem)

    def _on_means_changed(self) -> None:
        """A file chosen (or the positions) in the row: the session's means file, one undo step."""
        if self.means_row.means is not None:
            self._means_problem = ""
        mf = self.means_row.fingerprint
        if mf != self.spec.means_file:
            label = (f"Take the head means from {Path(mf.path).name}" if mf is not None else
                     "Take the head means over the positions")
            if self.set_interventions(replace(self.spec, means_file=mf), label):
                return  # the session's event syncs and runs
        self._sync_controls(self.spec)
        if self.spec.mode == "mean" and self.spec.heads:
            self.refresh()

    def _sync_means(self, spec: Interventions, again: bool = False) -> None:
        """The row follows the session's means file (an undo, a session opened, ``again``: another model): read
        again and checked, or one line why it is not used."""
        mf = spec.means_file
        if mf == self.means_row.fingerprint and not again:
            return
        if mf is None:
            if self.means_row.means is not None or again:
                blocked = self.means_row.blockSignals(True)
                self.means_row.use_positions()
                self.means_row.blockSignals(blocked)
            self._means_problem = ""
            return
        self._means_problem = self.means_row.restore(mf)
        if self._means_problem:
            self._means_problem = self._means_problem[0].upper() + self._means_problem[1:] + "."
            self._fail(self._means_problem)

    def show_code(self) -> CodeDialog | None:
        try:
            code = self.code()
        except CheckpointError as exc:
            self._fail(str(exc))
            return None
        dialog = CodeDialog(code, self)
        dialog.setModal(False)
        dialog.show()
        self.code_dialog = dialog
        return dialog

    def _pick(self, layer: int, head: int) -> None:
        """A head clicked in the tab: the panel selects it (an encoder-decoder's heads are the tab's stack's, which
        the panel's grid may not show: the tab alone shows it)."""
        if self.seq2seq() and self.panel.seq2seq.stack() != self.spec.stack:
            self.set_selected(layer, head)
        else:
            self.panel.select_head(layer, head)

    def set_selected(self, layer: int, head: int) -> None:
        self.selected = (int(layer), int(head))
        self._draw_maps()
        self._draw_overlay()

    def set_colormap(self, name: str) -> None:
        if name in colormaps.NAMES:
            for m in (self.heads_map, self.importance_map, *self.maps, self.later, self.vlm_overlay):
                m.set_colormap(name)

    def message_text(self) -> str:
        return self.message.text() if self.message.isVisible() else ""

    def showEvent(self, ev):  # noqa: N802 - Qt's name
        super().showEvent(ev)
        if self._stale:
            self.refresh()

    def shutdown(self) -> None:
        self._stop.set()
        self.job.shutdown()
        self.sweep_job.shutdown()

    # ------------------------------------------------------------------ the panel's signals
    def on_model_loaded(self, ckpt) -> None:
        kind = getattr(ckpt, "kind", None)
        decoder, encoder = kind in ("decoder", "gpt2"), kind in ENCODER_KINDS
        seq = s2s.supported(ckpt)
        policy = False
        if self.host == "vlm":  # the vision-language page's tab: those models only
            decoder, encoder, seq, policy = vlm.supported(ckpt), False, False, vla.supported(ckpt)
        tabs = self.tabs()
        index = tabs.indexOf(self)
        if index >= 0:
            tabs.setTabEnabled(index, decoder or encoder or seq or policy)
            tabs.setTabToolTip(index, "" if decoder or encoder or seq or policy else
                                          "interventions run on decoder LLMs (GPT-2, Llama, Mistral, Qwen2, Qwen3, "
                                          "Gemma), encoder-decoders (MarianMT, BART, mBART, T5, Whisper), "
                                          "the BERT family and vision transformers")
        self._stop.set()  # a sweep of the previous model is not wanted
        self.sweep_result = None
        self.corpus_result = None
        self.effects = None
        self.importance_map.clear("no sweep yet")
        self.ranking.setText(" ")
        self.overlay_box.setVisible(False)
        metrics = ENCODER_METRICS if encoder else vla.METRIC_NAMES if policy else METRIC_NAMES
        if [self.metric_combo.itemData(i) for i in range(self.metric_combo.count())] != [k for k, _t in metrics]:
            self.metric_combo.clear()
            for key, text in metrics:
                self.metric_combo.addItem(text, key)
        corpus_item = self.over_combo.model().item(self.over_combo.findData("corpus"))
        corpus_item.setEnabled(kind in ("decoder", "gpt2", "bert"))  # the corpus sweep reads text
        if kind not in ("decoder", "gpt2", "bert") and self.over_combo.currentData() == "corpus":
            self.over_combo.setCurrentIndex(self.over_combo.findData("input"))
        self.decoder_rows.setVisible(not encoder)  # no patch and no next token on an encoder or a vision model
        self.logit_row.setVisible(not policy)  # a policy's effect is its action chunk
        if policy:
            self.stack_row.set_stacks(list(vla.STACK_LABELS.items()),
                                      "the policy's stack whose heads are edited, knocked out, patched and swept: the "
                                      "VLM's layers over the prefix or the action expert's over the action rows")
        elif seq:
            self.stack_row.set_stacks([(k, s2s.STACK_LABELS[k]) for k in s2s.STACK_ORDER], s2s.SEQ2SEQ_TIP)
        self.stack_row.setVisible(seq or policy)
        residual = self.patch_combo.model().item(self.patch_combo.findData("residual"))
        residual.setEnabled(not (seq or policy))  # an encoder-decoder and a policy patch a head's output
        self.code_button.setEnabled(True)
        self.code_button.setToolTip("the interventions as a PyTorch forward-hook script and a TransformerLens script"
                                    if not encoder else "the interventions as a PyTorch forward-hook script (and, for "
                                    "BERT, RoBERTa and XLM-R, a TransformerLens script) printing the pooled output "
                                    "before and after")
        self.means_row.set_config((getattr(ckpt.spec, "text", None) if kind == "vlm" else ckpt.config)
                                  if decoder or encoder else None)
        if self.spec.means_file is not None and (decoder or encoder):
            self._sync_means(self.spec, again=True)  # the file is checked against this model's heads
        self._sync_controls(self.spec)

    def on_attention_ready(self, _result) -> None:
        ids = self._ids()
        if self.sweep_result is not None and self.corpus_result is None and (
                ids is None or self._sweep_ids is None or not np.array_equal(ids, self._sweep_ids)):
            self._stop.set()
            self.sweep_result = None
            self.importance_map.clear("the input changed: sweep again")
            self.ranking.setText(" ")
        self.refresh()

    def _ids(self) -> np.ndarray | None:
        """The token ids of the panel's decoder or encoder run (a vision model's pixels; an encoder-decoder's source
        and decoder ids), None without one."""
        if not self.ready():
            return None
        if self.seq2seq():
            return s2s.fingerprint(self.panel)
        if self.vla():
            return vla.fingerprint(self.panel.ckpt, self.panel)
        if self.vlm():
            return np.asarray(vlm.result(self.panel).ids)
        if self.encoder():
            return np.asarray(self._encoder_input())
        return self._text_ids()

    def _text_ids(self) -> np.ndarray:
        """The token ids (T,) of the panel's decoder LLM or GPT-2 run."""
        r = self.panel.outcome.result
        return np.asarray(r.ids if self.panel.ckpt.kind == "gpt2" else r.decoder.ids, dtype=np.int64)

    # ------------------------------------------------------------------ edits
    def _on_interventions_changed(self, spec) -> None:
        if (self.seq2seq() or self.vla()) and self.sweep_result is not None and spec.stack != self._sweep_stack:
            self._stop.set()
            self.sweep_result = None
            self.importance_map.clear("another attention: sweep again")
            self.ranking.setText(" ")
        self._sync_means(spec)
        self._sync_controls(spec)
        self.refresh()

    def _on_stack_chosen(self, stack: str) -> None:
        """Another attention of an encoder-decoder: its heads are edited from now on (the heads and patch of the
        previous one are dropped: they name other heads); one undo step. The sweep shown was another stack's."""
        if stack == self.spec.stack:
            return
        if self.seq2seq():
            n_layer, n_head = s2s.shape(self.panel.ckpt, stack)
        elif self.vla():
            n_layer, n_head = vla.shape(self.panel.ckpt, replace(self.spec, stack=stack))
        else:
            n_layer, n_head = 1 << 10, 1 << 8
        spec = replace(self.spec, stack=stack, heads=tuple((a, b) for a, b in self.spec.heads
                                                            if a < n_layer and b < n_head),
                       patch_layer=min(self.spec.patch_layer, n_layer - 1),
                       patch_head=min(self.spec.patch_head, n_head - 1))
        if not self.set_interventions(spec, f"Edit the heads of the {stack} attention"):
            self._sync_controls(self.spec)

    def _on_mask_changed(self, _value) -> None:
        if self.spec.knockout_layers:
            self.refresh()

    def _sync_controls(self, spec: Interventions) -> None:
        self._syncing = True
        try:
            self.mode_combo.setCurrentIndex(self.mode_combo.findData(spec.mode))
            self.factor_spin.setValue(spec.factor)
            self.factor_spin.setVisible(spec.mode == "scale")
            self.knockout_check.setChecked(bool(spec.knockout_layers))
            n_layer = self._n_layer()
            every = n_layer is not None and spec.knockout_layers == tuple(range(n_layer))
            self.ko_layers.setText("" if every or not spec.knockout_layers else format_indices(spec.knockout_layers))
            self.ko_heads.setText(format_indices(spec.knockout_heads))
            self.patch_combo.setCurrentIndex(self.patch_combo.findData(spec.patch))
            self.patch_layer.setValue(spec.patch_layer)
            self.patch_head.setValue(spec.patch_head)
            self.patch_positions.setText(format_indices(spec.patch_positions))
            self.stack_row.set_stack(spec.stack)
            if self.clean_edit.text() != spec.clean:
                self.clean_edit.setText(spec.clean)
            shape = self.shape()
            if shape is not None:
                self.patch_layer.setRange(0, shape[0] - 1)
                self.patch_head.setRange(0, shape[1] - 1)
                self.patch_layer.setValue(spec.patch_layer)
                self.patch_head.setValue(spec.patch_head)
            patching = spec.patch != "none" and not self.encoder()
            for w in (self.patch_layer, self.patch_head, self.patch_positions):
                w.setEnabled(patching)
            self.patch_head.setEnabled(patching and spec.patch == "head")
            self.patch_positions.setEnabled(patching and spec.patch == "residual")
            names = ", ".join(f"{a}.{b}" for a, b in spec.heads)
            self.means_row.setVisible(spec.mode == "mean" and not (self.seq2seq() or self.vla()))
            what = {"zero": "zeroed", "mean": "set to their mean over the positions" if self.seq2seq() else
                    self.means_row.describe(), "scale": f"scaled by {spec.factor:g}"}[spec.mode]
            self.heads_line.setText(f"heads {what}: {names}" if names else
                                    "no head edited: click heads in the grid below")
        finally:
            self._syncing = False

    def _on_knockout_typed(self, label: str) -> None:
        """Layers or heads typed while the knockout is off turn it on (what was typed is what is meant)."""
        if self._syncing:
            return
        if not self.knockout_check.isChecked() and (self.ko_layers.text().strip() or self.ko_heads.text().strip()):
            self.knockout_check.setChecked(True)  # its toggled signal makes the edit, with the typed lists
            return
        self._edit_from_controls(label)

    def _n_layer(self) -> int | None:
        """The layers a knockout names (an encoder-decoder's: its encoder's)."""
        ck = self.panel.ckpt
        if ck is not None and s2s.is_seq2seq(ck):
            return ck.spec.enc_layers
        if ck is not None and vla.supported(ck):
            return vla.shape(ck, self.spec)[0]
        if ck is not None and ck.kind == "vlm":  # a checkpoint without its language model's spec: none to name
            text = getattr(ck.spec, "text", None)
            return None if text is None else text.n_layer
        return ck.config.n_layer if ck is not None and ck.kind in KINDS else None

    def _ko_heads(self) -> int:
        ck = self.panel.ckpt
        if ck is not None and s2s.is_seq2seq(ck):
            return ck.spec.enc_heads
        if ck is not None and vla.supported(ck):
            return vla.shape(ck, self.spec)[1]
        if ck is not None and ck.kind == "vlm":
            text = getattr(ck.spec, "text", None)
            return 256 if text is None else text.n_head
        return ck.config.n_head if ck is not None and ck.kind in KINDS else 256

    def _edit_from_controls(self, label: str) -> None:
        if self._syncing:
            return
        try:
            spec = self._spec_from_controls()
        except ValueError as exc:
            self._fail(str(exc))
            return
        if not self.set_interventions(spec, label):
            self._sync_controls(self.spec)  # nothing changed, or refused (the app said why)

    def _spec_from_controls(self) -> Interventions:
        n_layer = self._n_layer() or 1024
        n_head = self._ko_heads()
        layers = ()
        if self.knockout_check.isChecked():
            layers = parse_indices(self.ko_layers.text(), n_layer, "layer") or tuple(range(n_layer))
        return replace(self.spec, mode=self.mode_combo.currentData(), factor=float(self.factor_spin.value()),
                       knockout_layers=layers, knockout_heads=parse_indices(self.ko_heads.text(), n_head, "head"),
                       patch=self.patch_combo.currentData(), patch_layer=int(self.patch_layer.value()),
                       patch_head=int(self.patch_head.value()),
                       patch_positions=parse_indices(self.patch_positions.text(), 1 << 16, "position"),
                       clean=self.clean_edit.text())

    # ------------------------------------------------------------------ results
    def _on_done(self, _jid: int, effects) -> None:
        self.effects = effects
        self.message.clear()
        if self._means_problem:  # said once (failed), shown until it is dealt with
            self.message.say(Level.ERROR, self._means_problem)
        self._draw_results()
        self._draw_heads()
        self._draw_maps()
        self._draw_overlay()
        self.residual.set_values(effects.residual_change, getattr(effects, "residual_labels", None))
        self.effects_ready.emit(effects)

    def _on_failed(self, _jid: int, message: str) -> None:
        self._fail(f"The intervention cannot run: {message}")

    def _fail(self, text: str) -> None:
        self.message.say(Level.ERROR, text)
        self.failed.emit(text)

    def _why_not_ready(self) -> str:
        ck = self.panel.ckpt
        if ck is None:
            return "Load a decoder LLM and run it on a text: its interventions are computed here."
        if ck.kind not in KINDS:
            return (f"{ck.name} is not a decoder LLM, an encoder-decoder, an encoder or a vision model: interventions "
                    "run on GPT-2, Llama, Mistral, Qwen2, Qwen3, Gemma, MarianMT, BART, mBART, T5, Whisper, the BERT "
                    "family and vision transformers.")
        if s2s.is_seq2seq(ck):
            return s2s.why_not_ready(ck, self.panel)
        if ck.kind == "vlm" and vla.supported(ck):
            return vla.why_not_ready(ck)
        if ck.kind == "vlm":
            return vlm.why_not_ready(ck)
        if self.panel.outcome is None or (ck.kind in ENCODER_KINDS and self._encoder_input() is None):
            return "Run the model on an image first." if ck.kind == "vit" else "Run the model on a text first."
        return ("This input is too long for every map to be held; interventions need them: shorten the text.")

    def _show_idle(self, text: str) -> None:
        self.results.setText(html.escape(text))
        self.heads_map.clear()
        for m in self.maps:
            m.clear()
        self.maps_title.setText(" ")
        self.residual.set_values(None)
        self.overlay_box.setVisible(False)

    def _piece(self, t: int) -> str:
        tok = self.panel.ckpt.tokenizer if self.panel.ckpt is not None else None
        if tok is None:
            piece = f"#{t}"
        elif self.seq2seq():
            piece = s2s.piece(self.panel.ckpt, t)
        else:
            piece = tok.id_to_piece(int(t))
        shown = repr(piece)[1:-1] if piece.strip() == piece else repr(piece)
        return html.escape(shown if len(shown) <= PIECE_CHARS else shown[:PIECE_CHARS - 1] + "…")

    def _tokens(self) -> tuple[int, int] | None:
        a, b = self.token_a.text(), self.token_b.text()
        if not a and not b:
            return None
        ck = self.panel.ckpt
        if self.seq2seq():
            return s2s.tokens(ck, a, b)
        if self.vlm():
            return vlm.tokens(ck, a, b)
        return token_id(ck, a), token_id(ck, b)

    def _draw_results(self) -> None:
        eff = self.effects
        if eff is None:
            return
        if isinstance(eff, (EncoderEffects, SwinEffects)):
            self._draw_encoder_results(eff)
            return
        if isinstance(eff, VlaWindowEffects):
            self.results.setText(vla.results_html(eff))
            return
        before, after = eff.top("before"), eff.top("after")
        rows = []
        for (tb, pb), (ta, pa) in zip(before, after):
            rows.append(f"<tr><td>{self._piece(tb)}</td><td align='right'>{pb:.3f}</td><td>&nbsp;&nbsp;</td>"
                        f"<td>{self._piece(ta)}</td><td align='right'>{pa:.3f}</td></tr>")
        applied = "; ".join(eff.applied) or "nothing changed (no intervention)"
        where = ("<p>the next token after the last decoder row (teacher-forced on the target)</p>"
                 if self.seq2seq() else "")
        text = (f"{where}<table cellspacing='2'><tr><th align='left'>before</th><th></th><th></th>"
                f"<th align='left'>after</th><th></th></tr>{''.join(rows)}</table>"
                f"<p>KL(before ‖ after) = <b>{eff.kl:.4g}</b> nats</p>")
        try:
            tokens = self._tokens()
        except CheckpointError as exc:
            tokens = None
            text += f"<p style='color:#e05050'>{html.escape(str(exc))}</p>"
        if tokens is not None:
            a, b = tokens
            lb, la = eff.logit_difference(a, b)
            text += (f"<p>logit({self._piece(a)}) − logit({self._piece(b)}): {lb:+.4f} → <b>{la:+.4f}</b> "
                     f"(Δ {la - lb:+.4f})</p>")
        text += f"<p><i>{html.escape(applied)}</i></p>"
        self.results.setText(text)

    def _draw_encoder_results(self, eff: EncoderEffects) -> None:
        labels = self._labels(eff.before.hidden.shape[0])
        pooled = "the class token" if getattr(eff.before, "n_extra", 0) else "the mean over the tokens"
        order = np.argsort(eff.token_cosine, kind="stable")[:WORST_TOKENS]
        rows = "".join(f"<tr><td>{html.escape(labels[t]) if labels else t}</td>"
                       f"<td align='right'>{eff.token_cosine[t]:.5f}</td></tr>" for t in order)
        applied = "; ".join(eff.applied) or "nothing changed (no intervention)"
        classes = ""
        logits = getattr(eff, "logits", None)  # Swin with a classifier: its top classes before and after
        if logits is not None:
            pb, pa = (np.exp(z - z.max()) / np.exp(z - z.max()).sum() for z in logits)
            top = np.argsort(-pb, kind="stable")[:3]
            classes = ("<p>classes (before → after): " + ", ".join(f"#{c} {pb[c]:.3f} → {pa[c]:.3f}" for c in top)
                       + "</p>")
        self.results.setText(f"<p>cosine of the pooled output ({pooled}) before and after: <b>{eff.cosine:.6f}</b> "
                             f"(1 − cos = {1.0 - eff.cosine:.3g})</p>{classes}"
                             f"<table cellspacing='2'><tr><th align='left'>token</th><th align='right'>cosine</th>"
                             f"</tr>{rows}</table><p><i>{html.escape(applied)}</i></p>")

    def _swin_classifier(self, ck):
        """Swin's classifier (weight, bias) read once per checkpoint from its folder, None without one."""
        cached = getattr(self, "_classifier", (None, None))
        if cached[0] is not ck:
            from attnviz.checkpoints.intervention_swin import swin_classifier

            try:
                cached = (ck, swin_classifier(ck.folder))
            except CheckpointError:
                cached = (ck, None)
            self._classifier = cached
        return cached[1]

    def _labels(self, T: int) -> list[str] | None:
        labels = list(self.panel.outcome.result.labels) if self.panel.outcome is not None else None
        return labels if labels is not None and len(labels) == T else None

    def _draw_overlay(self) -> None:
        """A vision model's class-token attention over the picture, before | after, for the selected head."""
        eff = self.effects
        if self.vlm():
            self.vlm_overlay.show_effects(eff, *self.selected, query=self.panel.vlm.query)
        else:
            self.vlm_overlay.setVisible(False)
        show = isinstance(eff, EncoderEffects) and eff.has_overlay and self.panel.ckpt is not None \
            and self.panel.ckpt.image is not None
        self.overlay_box.setVisible(bool(show))
        if not show:
            return
        L, nh = eff.before.attentions.shape[:2]
        layer, head = self.selected
        if not (layer < L and head < nh):
            layer, head = 0, 0
        before, after = eff.overlay(layer, head)
        grid = eff.before.grid
        P = display_patch(grid, 224)
        out = self.panel.outcome
        img = display_image(getattr(out, "rgb", None), out.result.pixels, self.panel.ckpt.image, grid, P, False,
                            self.panel.ckpt.config.patch_size)
        top = max(float(before.max()), float(after.max()), 1e-6)
        for view, values in zip(self.overlays, (before, after)):
            view.set_image(img, grid=grid, patch=P)
            view.set_overlay(values, levels=(0.0, top))
        moved = 0.5 * float(np.abs(after - before).sum())
        self.overlay_title.setText(f"layer {layer} · head {head}: before | after, one colour scale (0 to {top:.3g}); "
                                   f"{moved:.1%} of the class token's attention moved between patches or to the "
                                   "extra tokens")

    def _draw_heads(self) -> None:
        eff = self.effects
        if eff is None:
            return
        change = eff.attention_change()  # (L, nh); NaN: a head a Swin stage does not have
        L, nh = change.shape
        allowed = np.isfinite(change)  # Swin's missing heads are drawn hatched, as an edited head is
        for layer, h in self.spec.heads:
            if layer < L and h < nh:
                allowed[layer, h] = False  # an edited head is drawn hatched
        change = np.where(np.isfinite(change), change, 0.0)
        title = ("|Δ weight| · hatched: edited, or not in the stage" if isinstance(eff, SwinEffects) else
                 "|Δ weight| per head · edited: hatched")
        self.heads_map.set_matrix(change, mask=allowed, row_labels=[f"L{i}" for i in range(L)],
                                  col_labels=[f"h{j}" for j in range(nh)], levels=(0.0, max(float(change.max()), 1e-6)),
                                  title=title, value_label="|Δ|")
        layer, head = self.selected
        if layer < L:
            self.heads_map.set_selected_row(layer)

    def _draw_maps(self) -> None:
        eff = self.effects
        if eff is None:
            return
        L, nh = eff.attention_change().shape
        layer, head = self.selected
        if not (layer < L and head < nh):
            layer, head = 0, 0
        if isinstance(eff, SwinEffects) and head >= eff.heads_per_layer[layer]:
            head = 0  # this stage has fewer heads
        b, a, d = eff.attention(layer, head)
        stack = getattr(eff, "stack", None)  # an encoder-decoder's, a policy's
        if isinstance(eff, VlaWindowEffects):
            rows, cols = vla.labels(self.panel, stack, *b.shape)
            causal = eff.mask
        elif stack is not None:
            rows, cols = s2s.labels(self.panel, stack, *b.shape)
            causal = np.tril(np.ones(b.shape, dtype=bool)) if stack == "decoder" else None
        else:
            rows = cols = self._labels(b.shape[0])
            causal = None if isinstance(eff, (EncoderEffects, SwinEffects)) else np.tril(np.ones(b.shape, dtype=bool))
            if getattr(eff, "mask", None) is not None:  # a vision-language model's own (PaliGemma: prefix both ways)
                causal = np.asarray(eff.mask, dtype=bool)
        top = max(float(b.max()), float(a.max()), 1e-6)
        span = max(float(np.abs(d).max()), 1e-6)
        for m, values, title, levels, what in ((self.maps[0], b, "before", (0.0, top), "weight"),
                                               (self.maps[1], a, "after", (0.0, top), "weight"),
                                               (self.maps[2], d, "difference", (-span, span), "Δ weight")):
            m.set_matrix(values, mask=causal, row_labels=rows, col_labels=cols, levels=levels, title=title,
                         value_label=what)
        named = (f"{vla.STACK_LABELS[stack]} " if isinstance(eff, VlaWindowEffects) else
                 f"{s2s.STACK_LABELS[stack]} " if stack is not None else "")
        self.maps_title.setText(f"layer {layer} · head {head}: {named}attention before | after | difference "
                                f"(largest change {span:.3g})")
        first = self._first_edited_layer()
        self._later_first = first
        stack = []
        later = range(first, L)
        if isinstance(eff, SwinEffects):  # one stage's layers share a size: the selected layer's stage
            stage = eff.before.layout.stage
            later = [i for i in later if stage[i] == stage[layer]] or [layer]
            first = later[0]
            self._later_first = first
        for i in later:
            bi, ai, di = eff.attention(i, head)
            stack.append([bi, ai, di])
        self.later.setMinimumHeight(min(640, 60 + 80 * len(stack)))  # a few layers: large enough tiles
        self.later.set_matrices(np.asarray(stack), [f"L{i}" for i in later],
                                ["before", "after", "difference"], mask=causal)
        if first <= layer:
            self.later.set_selected(layer - first, 1)
        else:
            self.later.set_selected(None)
        self.later_title.setText(f"head {head} in layer {first} (the first edited) and every later layer: "
                                 "before | after | difference, each map on its own colour scale (click one to "
                                 "show it large)")

    def _first_edited_layer(self) -> int:
        """The earliest layer the interventions touch (0 when none): no map before it changes."""
        spec = self.spec
        if self.seq2seq():
            return s2s.first_edited_layer(spec, spec.stack, (self.shape() or (1, 1))[0])
        layers = [layer for layer, _h in spec.heads] + list(spec.knockout_layers)
        if spec.patch != "none":
            layers.append(spec.patch_layer)
        n = self._n_layer() or 1
        return min([min(layers), n - 1]) if layers else 0

    # ------------------------------------------------------------------ sweep
    def _on_progress(self, number: int, done: int, total: int) -> None:
        if number == self._sweep_no:
            self.sweep_bar.setRange(0, total)
            self.sweep_bar.setValue(done)

    def _on_sweep_done(self, _jid: int, result) -> None:
        self.cancel_button.setEnabled(False)
        self.sweep_button.setEnabled(True)
        if self._sweep_model is not self.panel.ckpt:  # stopped when another model was loaded: not this one's
            return
        corpus = None
        if not hasattr(result, "grid"):  # a CorpusSweep: its means over the documents
            corpus, result = result, result.as_sweep()
        self.corpus_result = corpus
        self.sweep_result = result
        grid = result.grid
        L, nh = grid.shape
        drawn = np.where(np.isfinite(grid), grid, -np.inf)  # heads not reached: hatched
        short = {"kl": "KL", "logit_diff": "logit diff drop", "cosine": "1 − cos", "action_change": "max |Δ action|",
                 "action_cosine": "1 − cos of the actions"}[result.metric]
        state = "" if result.complete else f" · cancelled after {result.done} of {grid.size}"
        if corpus is not None:
            short = f"mean {short}, {corpus.documents:,} docs"
            state = "" if corpus.complete else f" · cancelled after {corpus.documents:,} of {corpus.total:,}"
            if corpus.failed:
                state += f" · {len(corpus.failed):,} failed"
        finite = grid[np.isfinite(grid)]
        lo = min(0.0, float(finite.min())) if finite.size else 0.0
        hi = float(finite.max()) if finite.size and finite.max() > lo else lo + 1e-6
        if self.seq2seq():
            short = f"{s2s.STACK_LABELS[self._sweep_stack]} · {short}"
        elif self.vla():
            short = f"{vla.STACK_LABELS[self._sweep_stack]} · {short}"
        self.importance_map.set_matrix(drawn, row_labels=[f"L{i}" for i in range(L)],
                                       col_labels=[f"h{j}" for j in range(nh)], levels=(lo, hi),
                                       title=f"{short} · each head {result.mode}-ablated{state}",
                                       value_label={"kl": "nats", "logit_diff": "Δ logit", "cosine": "1 − cos",
                                                    "action_change": "|Δ v|",
                                                    "action_cosine": "1 − cos"}[result.metric])
        ranks = result.ranks()
        spread = corpus.std if corpus is not None else None
        self.importance_map.set_readout_provider(
            lambda r, c: (f"head {r}.{c}: {grid[r, c]:.4g}"
                          + (f" ± {spread[r, c]:.2g} (std)" if spread is not None else "")
                          + f", rank {ranks[r, c]} of {result.done}"
                          if np.isfinite(grid[r, c]) else f"head {r}.{c}: not reached"))
        lines = [f"{i}. head <b>{layer}.{h}</b> &nbsp;{v:.4g}"
                 + (f" ± {corpus.std[layer, h]:.2g}" if corpus is not None else "")
                 for i, (layer, h, v) in enumerate(result.ranking()[:10], start=1)]
        self.ranking.setText("<br>".join(lines) or " ")
        self.sweep_ready.emit(result)

    def _on_sweep_failed(self, _jid: int, message: str) -> None:
        self.cancel_button.setEnabled(False)
        self.sweep_button.setEnabled(True)
        self._fail(f"The sweep cannot run: {message}")

    def _on_view_changed(self, view) -> None:
        self.set_colormap(view.colormap)


def install(panel) -> InterveneView:
    """Add the view as an "Intervene" tab of a ModelViewPanel (enabled for decoder LLMs, encoders and vision
    models), following its model, its runs, its selected head and the session's colours."""
    view = InterveneView(panel, parts=_take_parts(panel, "panel"))
    index = panel.tabs.addTab(view, "Intervene")
    panel.tabs.setTabEnabled(index, False)
    panel.model_loaded.connect(view.on_model_loaded)
    panel.attention_ready.connect(view.on_attention_ready)
    panel.head_selected.connect(view.set_selected)
    panel.ctx.session.events.view.connect(view._on_view_changed)
    return view


def install_vlm(panel) -> InterveneView:
    """The Intervene tab of the panel's vision-language page (enabled for PaliGemma, LLaVA, Idefics3 and SmolVLM;
    the panel's own tabs are hidden while such a model is loaded): :mod:`intervene_vlm`."""
    page = panel.vlm
    view = InterveneView(panel, host="vlm", parts=_take_parts(panel, "vlm"))
    index = page.tabs.addTab(view, "Intervene")
    page.tabs.setTabEnabled(index, False)
    panel.model_loaded.connect(view.on_model_loaded)
    panel.attention_ready.connect(view.on_attention_ready)
    panel.head_selected.connect(view.set_selected)
    panel.ctx.session.events.view.connect(view._on_view_changed)
    vlm.follow_page(panel, view)
    return view
