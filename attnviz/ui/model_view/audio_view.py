"""AudioView: the Pretrained panel's "Audio" tab for Whisper checkpoints. A clip (the bundled demo, or a
file) goes through the model, teacher-forced on a target text or transcribed by the model itself (the text
grows token by token; Stop keeps what was written); then

* the clip's log-mel spectrogram along a time axis (seconds), the encoder's frames as tokens on that axis
  (one box per 20 ms frame, numbered), and under it the selected written token's cross-attention over the
  frames (the word-to-audio alignment) for the chosen layer and head or the mean over the layer's heads;
* the written tokens as chips (click one to select it);
* the tokens x frames alignment heatmap (click a row to select its token).

The options row asks for what the checkpoint allows: the spoken language (or detection) and the task of a
multilingual model, timestamps (the segments are listed under the status) and beam search for a transcript.
Each run also goes to the panel's layers x heads grid and detail map as an encoder-decoder's three stacks
(encoder self-attention over the audio frames, decoder self-attention, cross-attention), the stack chosen
here; the tab takes the width while it is shown, the grid and the detail map theirs on the other tabs. The
cross-attention also goes to the Diagnostics alignment view, whose *Align* runs this tab on its target.

Runs go through :class:`~attnviz.ui.latest_job.LatestJob`; the numbers come from
:mod:`attnviz.checkpoints.whisper_study`. :func:`install` adds the tab and follows ``panel.model_loaded``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QSizePolicy, QSpinBox, QVBoxLayout, QWidget)

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints import whisper_study as ws
from attnviz.checkpoints.seq2seq_study import STACK_SHORT, STACKS
from attnviz.resources_path import resource_path
from attnviz.sources.errors import SourceError
from attnviz.ui import colormaps
from attnviz.ui.latest_job import LatestJob
from attnviz.ui.theme import current_theme
from attnviz.ui.widgets.fit_scroll import FitScroll
from attnviz.ui.widgets.flow_layout import flow_row, labelled
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.widgets.token_chips import TokenChips
from attnviz.ui.messages import Level
from attnviz.ui.widgets.message_line import MessageLine

DEMO_CLIP = ("demo: chirps.wav", ("audio", "chirps.wav"))
FILTER = "Audio (*.wav *.flac *.ogg *.oga *.aiff *.aif *.mp3 *.opus);;All files (*)"
ATTENTION_COLOUR = "#ffb347"
WIDE_SHARES = [0.94, 0.06]  # the tab's column and its neighbour while the tab is shown
MAX_BEAMS_OFFERED = 8  # beams the spin box goes up to (each multiplies a step's work)
DEFAULT = None  # the language / task combo's first item: what the generation config says (or detection)


def demo_clip() -> Path:
    return resource_path(*DEMO_CLIP[1])


class _FrameAxis(pg.AxisItem):
    """The bottom axis of the frame strip: frame numbers at the frames' starts (seconds on the plot)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.frame_seconds = 0.02

    def tickStrings(self, values, scale, spacing):
        return [f"f{int(round(v / self.frame_seconds))}" for v in values]

    def tickValues(self, minVal, maxVal, size):
        fs = self.frame_seconds
        n = max(1.0, (maxVal - minVal) / fs)
        step = next(s for s in (1, 2, 5, 10, 20, 25, 50, 100, 250, 500, 1000) if n / s <= max(2, size / 60) or s == 1000)
        first = int(np.ceil(minVal / fs / step)) * step
        return [(step * fs, [k * fs for k in range(first, int(maxVal / fs) + 1, step)])]


class AudioView(QWidget):
    """The Audio tab: clip and text controls over the spectrogram, the alignment and the heatmap."""

    outcome_ready = Signal(object)  # AudioOutcome, once drawn
    failed = Signal(str)
    _token = Signal(str)  # a token written, from the worker thread (queued onto the GUI thread)

    def __init__(self, parent=None, heatmap: AttentionHeatmap | None = None):
        super().__init__(parent)  # heatmap: the one made ahead (see install), else made here
        self.ckpt = None
        self.outcome: ws.AudioOutcome | None = None
        self.selected = 0  # written token
        self._stop: threading.Event | None = None
        self._streamed: list[str] = []
        self.job = LatestJob("attnviz-audio", self, expected=(CheckpointError, SourceError, ValueError))
        self.job.done.connect(self._on_done)
        self.job.failed.connect(self._on_failed)
        self.job.busy_changed.connect(self._on_busy)
        self._token.connect(self._on_token)

        self.clip_combo = QComboBox(self)
        self.clip_combo.addItem(DEMO_CLIP[0], str(demo_clip()))
        self.clip_combo.setToolTip("the audio the model hears (any rate and channels: averaged to mono, "
                                   "resampled to 16 kHz)")
        self.open_button = QPushButton("Open audio…", self)
        self.target_edit = QLineEdit(self)
        self.target_edit.setPlaceholderText("target text to align (empty: the model's own transcript)")
        self.target_edit.setToolTip("teacher-forced after the model's decoder prompt; leave empty to transcribe")
        self.run_button = QPushButton("Transcribe", self)
        self.stop_button = QPushButton("Stop", self)
        self.stop_button.setEnabled(False)
        self.stop_button.setToolTip("stop the transcript here and show what was written")
        top = QHBoxLayout()
        top.setContentsMargins(6, 4, 6, 0)
        top.addWidget(self.clip_combo)
        top.addWidget(self.open_button)
        top.addWidget(self.target_edit, 1)
        top.addWidget(self.run_button)
        top.addWidget(self.stop_button)

        self.layer_combo = QComboBox(self)
        self.layer_combo.setToolTip("decoder layer whose cross-attention is drawn")
        self.head_combo = QComboBox(self)
        self.head_combo.setToolTip("one head, or the mean over the layer's heads")
        self.language_combo = QComboBox(self)
        self.language_combo.setToolTip("the spoken language put into the decoder prompt (multilingual models); "
                                       "the first item: detected, or as the generation config says")
        self.task_combo = QComboBox(self)
        self.task_combo.setToolTip("transcribe, or translate into English (multilingual models)")
        self.timestamps_box = QCheckBox("timestamps", self)
        self.timestamps_box.setToolTip("the model writes timestamp tokens; its segments (start, end, text) are "
                                       "listed under the status")
        self.beams_spin = QSpinBox(self)
        self.beams_spin.setRange(1, MAX_BEAMS_OFFERED)
        self.beams_spin.setToolTip("beam search over this many beams for a transcript (1: greedy); the maps are "
                                   "the chosen beam's")
        self.stack_combo = QComboBox(self)
        for key in STACKS:
            self.stack_combo.addItem(STACK_SHORT[key], key)
        self.stack_combo.setCurrentIndex(STACKS.index("cross"))
        self.stack_combo.setToolTip("the attention the Layers × heads grid and the detail map show for this run")
        self.status = QLabel("Load a Whisper checkpoint to hear a clip.", self)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        second = flow_row([labelled("cross-attention of", self.layer_combo, self), self.head_combo,
                           labelled("language", self.language_combo, self), labelled("task", self.task_combo, self),
                           self.timestamps_box, labelled("beams", self.beams_spin, self),
                           labelled("grid", self.stack_combo, self)])
        second.setContentsMargins(6, 0, 6, 0)
        self.status.setWordWrap(True)
        self.status.setContentsMargins(6, 0, 6, 0)
        self.segments = QLabel("", self)
        self.segments.setWordWrap(True)
        self.segments.setContentsMargins(6, 0, 6, 0)
        self.segments.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.segments.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.segments.setVisible(False)
        self.message = MessageLine(self, style="QLabel { color: #e57373; padding: 2px 6px; }")
        self.message.setVisible(False)

        self.plots = pg.GraphicsLayoutWidget(self)
        self.plots.setMinimumHeight(260)
        self.spec_plot = self.plots.addPlot(row=0, col=0)
        self.spec_plot.setLabel("left", "mel band")
        self.spec_plot.hideAxis("bottom")
        self.spec_plot.setMouseEnabled(x=True, y=False)
        self.spec_image = pg.ImageItem()
        self.spec_plot.addItem(self.spec_image)
        self.peak_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(ATTENTION_COLOUR, width=1.5))
        self.spec_plot.addItem(self.peak_line)
        self.peak_line.setVisible(False)
        self.frame_axis = _FrameAxis("bottom")
        self.frame_plot = self.plots.addPlot(row=1, col=0, axisItems={"bottom": self.frame_axis})
        self.frame_plot.setMaximumHeight(44)
        self.frame_plot.hideAxis("left")
        self.frame_plot.setMouseEnabled(x=True, y=False)
        self.frame_plot.setXLink(self.spec_plot)
        self.frame_plot.showAxis("left")
        self.frame_plot.getAxis("left").setTicks([[]])
        self.frame_boxes = pg.BarGraphItem(x0=[], width=[], height=[], y0=[], brushes=[])
        self.frame_plot.addItem(self.frame_boxes)
        self.attn_plot = self.plots.addPlot(row=2, col=0)
        self.attn_plot.setXLink(self.spec_plot)
        self.attn_plot.setLabel("bottom", "time", units="s")
        self.attn_plot.setLabel("left", "weight")
        self.attn_plot.setMouseEnabled(x=True, y=False)
        self.attn_bars = pg.BarGraphItem(x0=[], width=[], height=[], brush=ATTENTION_COLOUR)
        self.attn_plot.addItem(self.attn_bars)
        for p in (self.spec_plot, self.frame_plot, self.attn_plot):
            p.getAxis("left").setWidth(48)
        self.plots.ci.layout.setRowStretchFactor(0, 5)
        self.plots.ci.layout.setRowStretchFactor(2, 3)

        self.chips = TokenChips(self)
        self.chips.setMinimumHeight(44)
        self.chips.setMaximumHeight(64)
        self.heatmap = heatmap if heatmap is not None else AttentionHeatmap()
        self.heatmap.setParent(self)
        self.heatmap.setMinimumHeight(150)

        body = QWidget(self)
        col = QVBoxLayout(body)
        col.setContentsMargins(0, 0, 0, 0)
        col.addWidget(self.plots, 5)
        col.addWidget(self.chips)
        col.addWidget(self.heatmap, 3)
        self.scroll = FitScroll(self)
        self.scroll.put(body)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        layout.addLayout(top)
        layout.addLayout(second)
        layout.addWidget(self.status)
        layout.addWidget(self.segments)
        layout.addWidget(self.message)
        layout.addWidget(self.scroll, 1)

        self.open_button.clicked.connect(self._on_open)
        self.run_button.clicked.connect(self.run)
        self.stop_button.clicked.connect(self.stop)
        self.target_edit.returnPressed.connect(self.run)
        self.target_edit.textChanged.connect(self._on_target_changed)
        self.clip_combo.currentIndexChanged.connect(lambda _i: self.ckpt is not None and self.run())
        self.layer_combo.currentIndexChanged.connect(lambda _i: self._redraw())
        self.head_combo.currentIndexChanged.connect(lambda _i: self._redraw())
        self.chips.token_clicked.connect(self.select_token)
        self.heatmap.row_clicked.connect(self.select_token)
        self.colormap = "magma"

    def sizeHint(self) -> QSize:
        return QSize(760, 560)

    def shutdown(self) -> None:
        if self._stop is not None:
            self._stop.set()
        self.job.shutdown()

    # ------------------------------------------------------------------ the model and the clip
    def set_checkpoint(self, ckpt) -> None:
        """Follow a loaded checkpoint: a Whisper one is kept (and its layers offered), any other clears."""
        self.ckpt = ckpt if getattr(ckpt, "kind", None) == "whisper" else None
        self.outcome = None
        self._clear()
        if self.ckpt is None:
            self.status.setText("The Audio tab runs Whisper checkpoints.")
            return
        s = self.ckpt.spec
        for combo, items, pick in ((self.layer_combo, [f"layer {i}" for i in range(s.dec_layers)], s.dec_layers - 1),
                                   (self.head_combo, ["mean over heads"] + [f"head {h}" for h in range(s.dec_heads)],
                                    0)):
            blocked = combo.blockSignals(True)
            combo.clear()
            combo.addItems(items)
            combo.setCurrentIndex(pick)
            combo.blockSignals(blocked)
        self._offer_options(self.ckpt.rules)
        self.status.setText(self.ckpt.describe())

    def _offer_options(self, rules) -> None:
        """Language, task, timestamps and beams as far as the model allows them."""
        allowed = rules.choices()
        first_language = "detect" if rules.multilingual and rules.language is None and not any(rules.forced) \
            else "as configured"
        for combo, first, items in ((self.language_combo, first_language, allowed["languages"]),
                                    (self.task_combo, "as configured", allowed["tasks"])):
            combo.clear()
            combo.addItem(first, DEFAULT)
            for item in items:
                combo.addItem(item, item)
            combo.setEnabled(bool(items))
        self.timestamps_box.setChecked(False)
        self.timestamps_box.setEnabled(allowed["timestamps"])
        self.timestamps_box.setToolTip(self.timestamps_box.toolTip() if allowed["timestamps"] else
                                       "this model has no timestamp tokens")
        self.beams_spin.setValue(1)
        self._on_target_changed(self.target_edit.text())

    def options(self) -> ws.AudioOptions:
        """What the options row asks of the next run (beams only for a transcript)."""
        transcript = not self.target_edit.text().strip()
        return ws.AudioOptions(language=self.language_combo.currentData(), task=self.task_combo.currentData(),
                               timestamps=self.timestamps_box.isEnabled() and self.timestamps_box.isChecked(),
                               beams=self.beams_spin.value() if transcript else 1)

    def set_options(self, *, language: str | None = None, task: str | None = None, timestamps: bool = False,
                    beams: int = 1) -> None:
        """Choose the options (ValueError for one the model does not offer)."""
        for combo, value, what in ((self.language_combo, language, "language"), (self.task_combo, task, "task")):
            i = combo.findData(value) if value is not None else 0
            if i < 0:
                raise ValueError(f"this model offers no {what} {value!r}")
            combo.setCurrentIndex(i)
        if timestamps and not self.timestamps_box.isEnabled():
            raise ValueError("this model writes no timestamps")
        self.timestamps_box.setChecked(bool(timestamps))
        self.beams_spin.setValue(int(beams))

    def _on_target_changed(self, text: str) -> None:
        self.run_button.setText("Align" if text.strip() else "Transcribe")
        self.beams_spin.setEnabled(not text.strip())  # a target is read, not searched for

    def add_clip(self, path: str) -> int:
        """Offer the audio file ``path`` (chosen at once); returns its index."""
        i = self.clip_combo.findData(str(path))
        if i < 0:
            self.clip_combo.addItem(f"file: {Path(path).name}", str(path))
            i = self.clip_combo.count() - 1
        blocked = self.clip_combo.blockSignals(True)
        self.clip_combo.setCurrentIndex(i)
        self.clip_combo.blockSignals(blocked)
        return i

    def _on_open(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open audio", "", FILTER)
        if path:
            self.add_clip(path)
            self.run()

    # ------------------------------------------------------------------ runs
    def run(self) -> int | None:
        """Run the clip chosen through the model (teacher-forced on the target, or transcribed)."""
        if self.ckpt is None:
            self.message.say(Level.ERROR, "Load a Whisper checkpoint first (the Audio tab runs speech models).")
            return None
        self.message.clear()
        if self._stop is not None:
            self._stop.set()  # the run this one replaces stops at its next step
        stop = self._stop = threading.Event()
        ckpt, path, name = self.ckpt, self.clip_combo.currentData(), self.clip_combo.currentText()
        target = self.target_edit.text()
        options = self.options()
        self._streamed = []
        emit = self._token.emit

        def job():
            return ws.run_outcome(ckpt, path, target, name=name, cancel=stop.is_set, options=options,
                                  on_token=lambda _i, piece: stop.is_set() or emit(piece))

        self.stop_button.setEnabled(not target.strip())
        self.status.setText(("Aligning " if target.strip() else "Transcribing ") + name + "…")
        return self.job.submit(job)

    def stop(self) -> None:
        """Stop the transcript at the next token; what was written is shown."""
        if self._stop is not None:
            self._stop.set()
        self.stop_button.setEnabled(False)

    def _on_token(self, piece: str) -> None:
        if not self.job.busy:
            return
        self._streamed.append(piece)
        self.status.setText("Transcribing… " + "".join(self._streamed)[-120:])

    def _on_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy)
        if not busy:
            self.stop_button.setEnabled(False)

    def _on_done(self, _jid: int, out) -> None:
        self.outcome = out
        self.selected = 0
        self._draw_spectrogram()
        self._redraw()
        r = out.result
        how = "transcript" if out.transcribed else "target"
        end = "" if out.finished else " (stopped)" if out.stopped else " (length limit)"
        cut = [n for n in r.notes if "hears its first" in n]
        self.status.setText(f"{out.clip_name}: {out.clip_line}; {len(out.pieces)} tokens of {how}{end}: "
                            f"{out.text!r}; {out.frames} of {len(r.frame_times)} frames hold audio"
                            + (f" ({cut[0]})" if cut else ""))
        self.status.setToolTip("\n".join((self.status.text(), *r.notes)))
        self.segments.setText(segments_text(out))
        self.segments.setVisible(bool(out.segments))
        self.outcome_ready.emit(out)

    def _on_failed(self, _jid: int, message: str) -> None:
        text = f"Could not run {getattr(self.ckpt, 'name', 'the model')} on the clip: {message}"
        self.message.say(Level.ERROR, text)
        self.status.setText("")
        self.failed.emit(text)

    # ------------------------------------------------------------------ drawing
    def layer_head(self) -> tuple[int, int]:
        """(layer, head) chosen; head ws.MEAN for the mean over heads."""
        return max(0, self.layer_combo.currentIndex()), max(0, self.head_combo.currentIndex()) - 1

    def select_token(self, index: int) -> None:
        """Draw the cross-attention of written token ``index``."""
        if self.outcome is None or not 0 <= index < len(self.outcome.pieces):
            return
        self.selected = int(index)
        self._redraw()

    def _draw_spectrogram(self) -> None:
        out = self.outcome
        r = out.result
        F = out.frames
        fs = r.frame_seconds
        feats = r.features[:, :2 * F]  # (n_mels, 2F): the clip's part of the window
        self.spec_image.setImage(feats.T, levels=(float(feats.min()), float(feats.max()) + 1e-6),
                                 lut=colormaps.lut(self.colormap))  # col-major: x = feature frames
        self.spec_image.setRect(QRectF(0.0, 0.0, F * fs, feats.shape[0]))
        self.spec_plot.setYRange(0, feats.shape[0], padding=0)
        self.spec_plot.setXRange(0, F * fs, padding=0)
        self.frame_axis.frame_seconds = fs
        theme = current_theme()
        a, b = pg.mkBrush(theme.button), pg.mkBrush(theme.muted_text)
        self.frame_boxes.setOpts(x0=np.arange(F) * fs, width=np.full(F, fs), y0=np.zeros(F), height=np.ones(F),
                                 brushes=[a if i % 2 else b for i in range(F)], pen=pg.mkPen(None))
        self.frame_plot.setYRange(0, 1, padding=0)

    def _redraw(self) -> None:
        out = self.outcome
        if out is None:
            return
        layer, head = self.layer_head()
        try:
            m = ws.alignment(out, layer, head)  # (N, F)
        except ValueError as exc:
            self.message.say(Level.ERROR, str(exc))
            return
        r, fs, N = out.result, out.result.frame_seconds, m.shape[0]
        self.chips.set_tokens(out.pieces, out.result.written[:N] if N else [])
        where = f"layer {layer} · {'mean over heads' if head == ws.MEAN else f'head {head}'}"
        if N == 0:
            self.attn_bars.setOpts(x0=[], width=[], height=[])
            self.heatmap.clear("no tokens written")
            self.peak_line.setVisible(False)
            return
        t = min(self.selected, N - 1)
        self.chips.set_selected(t)
        row = m[t]
        self.attn_bars.setOpts(x0=np.arange(row.size) * fs, width=np.full(row.size, fs * 0.9), height=row)
        self.attn_plot.setYRange(0, max(float(row.max()), 1e-6) * 1.05, padding=0)
        on_clip = "" if out.frames >= len(r.frame_times) else f", {row.sum():.0%} of it on the clip"
        self.attn_plot.setTitle(f"{out.pieces[t]!r} over the audio ({where}{on_clip})", size="9pt")
        peak = int(np.argmax(row))
        self.peak_line.setPos((peak + 0.5) * fs)
        self.peak_line.setVisible(True)
        cols = [f"{k * fs:.2f}s" for k in range(m.shape[1])]
        self.heatmap.set_matrix(m, row_labels=out.pieces, col_labels=cols, levels=(0.0, max(float(m.max()), 1e-6)),
                                title=f"written tokens × audio frames · {where}", value_label="cross-attention")
        self.heatmap.set_selected_row(t)

    def _clear(self) -> None:
        self.spec_image.clear()
        self.attn_bars.setOpts(x0=[], width=[], height=[])
        self.frame_boxes.setOpts(x0=[], width=[], height=[], y0=[], brushes=[])
        self.peak_line.setVisible(False)
        self.chips.set_tokens([], [])
        self.heatmap.clear("")

    def set_colormap(self, name: str) -> None:
        if name in colormaps.NAMES:
            self.colormap = name
            self.heatmap.set_colormap(name)
            if self.outcome is not None:
                self._draw_spectrogram()

    def _on_view_changed(self, view) -> None:
        self.set_colormap(view.colormap)

    def on_theme_changed(self, _theme) -> None:
        if self.outcome is not None:
            self._draw_spectrogram()


def segments_text(out) -> str:
    """The transcript's segments, one per line: "[0.02 s – 1.62 s] text"."""
    return "\n".join(f"[{g.start:.2f} s – {g.end:.2f} s] {g.text.strip() or '…'}" for g in out.segments)


def make_parts() -> dict:
    """The view's heatmap, made a turn before the view (both on one turn held it for most of a tenth of a second)."""
    return {"heatmap": AttentionHeatmap()}


def install(panel, parts: dict | None = None) -> AudioView:
    """Add the view as an "Audio" tab of a ModelViewPanel: enabled for Whisper checkpoints, shown and run on
    the chosen clip (the demo at first) when one loads; ``parts``: what :func:`make_parts` made ahead."""
    view = AudioView(panel, **(parts or {}))
    index = panel.tabs.addTab(view, "Audio")
    panel.tabs.setTabEnabled(index, False)

    kept: dict = {}  # the panel's layout before the tab widened its column (and hid the summaries)

    def widen(wide: bool) -> None:
        if wide and not kept:  # the tab's plots take the width; the grid's maps wait on their own tab
            kept.update(body=panel.body.shares(), summary=panel.summary.isVisibleTo(panel))
            panel.body.set_shares(WIDE_SHARES)
            panel.summary.setVisible(False)
        elif not wide and kept:
            panel.body.set_shares(kept.pop("body"))
            panel.summary.setVisible(kept.pop("summary"))

    def on_loaded(ckpt) -> None:
        whisper = getattr(ckpt, "kind", None) == "whisper"
        view.set_checkpoint(ckpt)
        panel.tabs.setTabEnabled(panel.tabs.indexOf(view), whisper)
        if whisper:
            panel.set_stack(view.stack_combo.currentData())
            panel.tabs.setCurrentWidget(view)
        widen(whisper and panel.tabs.currentWidget() is view)

    def on_tab(_index: int) -> None:
        if view.ckpt is not None:
            widen(panel.tabs.currentWidget() is view)

    def on_outcome(out) -> None:  # the run's three stacks in the grid and the detail map
        if out.maps is not None and view.ckpt is not None:
            panel._show_outcome(out.maps)

    panel.model_loaded.connect(on_loaded)  # the panel's run_input runs this tab while a Whisper model is loaded
    panel.tabs.currentChanged.connect(on_tab)
    view.outcome_ready.connect(on_outcome)
    view.stack_combo.currentIndexChanged.connect(
        lambda _i: view.ckpt is not None and panel.set_stack(view.stack_combo.currentData()))

    def on_rerun(target: str) -> None:  # Diagnostics' alignment view asks for another target
        if view.ckpt is not None:
            view.target_edit.setText(target)
            view.run()

    from attnviz.ui.diagnostics.model_alignment import feed_for

    feed_for(panel.ctx).rerun_requested.connect(on_rerun)
    view.set_colormap(panel.ctx.session.state.view.colormap)
    panel.ctx.session.events.view.connect(view._on_view_changed)
    return view
