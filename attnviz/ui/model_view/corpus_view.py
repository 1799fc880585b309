"""CorpusStatsView: a corpus's per-head statistics (a STATS.parquet of ``attnviz-cli corpus``) as a
layers x heads grid beside the same statistics of the panel's current input, on one colour scale so
that a colour means the same on both sides. A file for another model, or one that cannot be read, is
said in the view's message line, never raised. Before a file is open the corpus side says which
command writes one for the loaded checkpoint (its folder filled in), with a button that copies it;
**Run on a folder…** runs those statistics from the window on a folder of .txt files or a text file
(:mod:`attnviz.ui.model_view.corpus_run`: off the GUI thread, with progress and Cancel), saves the
STATS file where the person says and opens it.
:func:`install` adds it as a tab of the model view.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QMenu, QProgressBar,
                               QPushButton, QSizePolicy, QSplitter, QStackedWidget, QVBoxLayout, QWidget)

from attnviz.corpus import LABELS, STATISTICS, CorpusStats, StatsFileError, read_stats
from attnviz.corpus.compare import mismatch, result_statistics, shared_levels
from attnviz.ui import colormaps
from attnviz.ui.model_view.corpus_run import CorpusRun, suggested_output
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.messages import Level
from attnviz.ui.widgets.message_line import MessageLine


#: checkpoint kinds the corpus command does not run (it reads text through a text model's own pass)
NOT_TEXT = {"vlm": "a vision-language model", "vit": "an image model", "maps": "attention maps read from a file",
            "whisper": "a speech model"}
TEXTS_HINT = ("TEXTS: a text file with one document per line, a folder of .txt files, or a .parquet / .jsonl file "
              "with a 'text' column.")


def _quote(arg: str) -> str:
    return subprocess.list2cmdline([arg]) if os.name == "nt" else shlex.quote(arg)


def corpus_command(folder=None, name: str | None = None) -> str:
    """The command that writes a STATS.parquet for the checkpoint in ``folder`` (MODEL when none is loaded)."""
    model = "MODEL" if folder is None else _quote(os.path.abspath(folder))  # runs from any working folder
    out = f"{name}-stats.parquet" if name else "STATS.parquet"
    return f"attnviz-cli corpus {model} TEXTS --out {_quote(out)}"


def not_text(ckpt) -> str | None:
    """Why the corpus command cannot run ``ckpt`` (None: it can), as its own check says."""
    kind = getattr(ckpt, "kind", None)
    if kind in NOT_TEXT:
        return NOT_TEXT[kind]
    if getattr(ckpt, "config", None) is None or getattr(ckpt, "tokenizer", None) is None:
        return "not a text model"
    return None


class CommandHint(QWidget):
    """The corpus side before a file is open: what writes a STATS file, the command, Copy command."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.text = QLabel("", self)
        self.text.setWordWrap(True)
        self.text.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.command = QLineEdit(self)
        self.command.setReadOnly(True)
        self.command.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.copy_button = QPushButton(self)
        self.texts = QLabel(TEXTS_HINT, self)
        self.texts.setWordWrap(True)
        self.texts.setAlignment(Qt.AlignmentFlag.AlignCenter)
        for lab in (self.text, self.texts):
            lab.setStyleSheet("QLabel { color: palette(mid); }")
            lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QHBoxLayout()
        row.addWidget(self.command, 1)
        row.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 12, 24, 12)
        layout.addStretch(1)
        layout.addWidget(self.text)
        layout.addLayout(row)
        layout.addWidget(self.texts)
        layout.addStretch(1)
        self.copy_button.clicked.connect(self.copy)
        self.show_for(None)

    def show_for(self, ckpt) -> None:
        """Fill the command in for ``ckpt`` (None: no model loaded yet)."""
        why = None if ckpt is None else not_text(ckpt)
        if why is not None:
            self.text.setText(f"A STATS file is written by attnviz-cli corpus, which runs text checkpoints; "
                              f"{ckpt.name} is {why}. Load a text model above to get its command here.")
        elif ckpt is None:
            self.text.setText("A STATS file is written by attnviz-cli corpus, which runs a checkpoint over many "
                              "texts. Load a model above and its folder is filled in:")
        else:
            self.text.setText(f"A STATS file is written by attnviz-cli corpus. To run {ckpt.name} over your texts, "
                              "type this in a terminal, then Open statistics… the file it writes:")
        self.command.setText(corpus_command(None if ckpt is None else ckpt.folder,
                                            None if ckpt is None else ckpt.name))
        self.command.setCursorPosition(0)
        self.command.setToolTip(f"{self.command.text()}\n\nrun this in a terminal with TEXTS replaced by your texts, "
                                "then Open statistics… the file it writes")
        self.copy_button.setText("Co&py command")
        self.copy_button.setToolTip("copy the command to the clipboard")
        for w in (self.command, self.copy_button, self.texts):
            w.setVisible(why is None)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.command.text())
        self.copy_button.setText("Co&pied")
        self.copy_button.setToolTip("the command is on the clipboard")


def _drawable(grid: np.ndarray) -> np.ndarray:
    """NaN (a statistic with no row, e.g. to_prev of a one-token input) drawn as a masked cell."""
    return np.where(np.isfinite(grid), grid, -np.inf)  # (L, nh)


class CorpusStatsView(QWidget):
    """Layers x heads grids of one statistic: the corpus (left) and the current input (right)."""

    head_clicked = Signal(int, int)  # (layer, head)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.stats: CorpusStats | None = None
        self.input_values: dict[str, np.ndarray] | None = None  # the input's statistics, once computed
        self._input: tuple[object, object] = (None, None)  # (forward pass, its head summaries) shown in the panel
        self._input_problem = ""  # why the input's statistics could not be computed
        self.input_model = ""
        self.input_tokens = 0
        self.selected: tuple[int, int] | None = None

        self.open_button = QPushButton("Open statistics…", self)
        self.open_button.setToolTip("a STATS.parquet written by: attnviz-cli corpus MODEL TEXTS --out STATS.parquet")
        self.run_button = QPushButton("&Run on a folder…", self)
        self.run_button.setToolTip("run the loaded model over a folder of .txt files (or a text file, one document "
                                   "per line) here, as attnviz-cli corpus does, and open the statistics it writes")
        menu = QMenu(self.run_button)
        self.folder_action = menu.addAction("a &folder of .txt files…", self._on_run_folder)
        self.file_action = menu.addAction("a &text file, one document per line…", self._on_run_file)
        self.run_button.setMenu(menu)
        self.run_bar = QProgressBar(self)
        self.run_bar.setTextVisible(True)
        self.run_bar.setFormat("%v / %m")
        self.run_bar.setMinimumWidth(110)
        self.run_bar.setMaximumWidth(200)
        self.cancel_button = QPushButton("&Cancel", self)
        self.cancel_button.setToolTip("stop the corpus run after the document it is on; nothing is written")
        self.runner = CorpusRun(self)
        self.runner.progress.connect(self._on_run_progress)
        self.runner.finished.connect(self._on_run_finished)
        self.runner.failed.connect(self._on_run_failed)
        self.runner.stopped.connect(self._on_run_stopped)
        self.cancel_button.clicked.connect(self.runner.cancel)
        self._ckpt = None  # the panel's checkpoint: what Run on a folder… runs
        self._run_texts: Path | None = None
        self.ask_texts = self._ask_texts  # (kind "folder" | "file") -> path or None; tests answer instead
        self.ask_output = self._ask_output  # (suggested Path) -> path or None
        self.source = QLabel("No corpus statistics open.", self)
        self.source.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # the file's line sits under the buttons and wraps there: read whole in a narrow panel, never
        # widening it (beside the buttons it was cut to a word)
        self.source.setWordWrap(True)
        self.source.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.source.setContentsMargins(6, 0, 6, 0)
        self.statistic_combo = QComboBox(self)
        self.statistic_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.statistic_combo.setMinimumContentsLength(14)
        for name in STATISTICS:
            self.statistic_combo.addItem(LABELS[name][0], name)
        self.statistic_combo.setToolTip("which statistic colours both grids (mean over every query row)")
        bar = QHBoxLayout()
        bar.setContentsMargins(6, 4, 6, 0)
        bar.addWidget(self.open_button)
        bar.addWidget(self.run_button)
        bar.addWidget(self.run_bar)
        bar.addWidget(self.cancel_button)
        bar.addStretch(1)
        bar.addWidget(self.statistic_combo)
        self.message = MessageLine(self, style="QLabel { color: #c62828; padding: 2px 6px; }")
        self.message.setVisible(False)
        self.corpus_map = AttentionHeatmap(self)
        self.input_map = AttentionHeatmap(self)
        self.split = QSplitter(Qt.Orientation.Horizontal, self)
        self._sides = {}  # heatmap -> (stack, placeholder label)
        for m in (self.corpus_map, self.input_map):
            m.setMinimumSize(220, 160)
            stack = QStackedWidget(self)
            hint = QLabel("", stack)
            hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
            hint.setWordWrap(True)
            hint.setStyleSheet("QLabel { color: palette(mid); padding: 12px; }")
            stack.addWidget(hint)
            stack.addWidget(m)
            self.split.addWidget(stack)
            self._sides[m] = (stack, hint)
        self.split.setChildrenCollapsible(False)
        for i in range(2):
            self.split.setStretchFactor(i, 1)
        self.split.setSizes([1000, 1000])  # corpus and input side by side, half each
        self.command_hint = CommandHint(self)  # before a file is open: the command that writes one
        self.body = QStackedWidget(self)
        self.body.addWidget(self.command_hint)
        self.body.addWidget(self.split)
        self.line = QLabel(" ", self)
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.line.setContentsMargins(6, 0, 6, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        layout.addLayout(bar)
        layout.addWidget(self.source)
        layout.addWidget(self.message)
        layout.addWidget(self.body, 1)
        layout.addWidget(self.line)

        self.open_button.clicked.connect(self._on_open_clicked)
        self._show_running(False)
        self.statistic_combo.currentIndexChanged.connect(lambda _i: self._draw())
        self.corpus_map.cell_clicked.connect(self.head_clicked.emit)
        self.input_map.cell_clicked.connect(self.head_clicked.emit)

    # ------------------------------------------------------------------ public API
    def open_stats(self, path) -> bool:
        """Read and show a STATS.parquet; False (and the reason in the message line) when it cannot be read."""
        try:
            stats = read_stats(path)
        except StatsFileError as exc:
            self.message.say(Level.ERROR, f"Could not open the corpus statistics: {exc}")
            return False
        self.stats = stats
        m = stats.metadata
        failed = int(m.get("failed", "0") or 0)
        self._set_source(f"{stats.model or 'model ?'} · {stats.documents:,} documents, {stats.rows:,} rows"
                            + (f" ({failed:,} failed)" if failed else "") + f" · {Path(path).name}")
        self.source.setToolTip(f"{stats.path}\ncorpus: {m.get('corpus', '?')}")
        self._draw()
        return True

    def _set_source(self, text: str) -> None:
        """The file's line beside the buttons, whole in its tooltip when the bar is too narrow for it."""
        self.source.setText(text)
        self.source.setToolTip(text)

    def shutdown(self) -> None:
        """Stop a corpus run still going (the window is closing); nothing is written."""
        self.runner.shutdown()

    def set_checkpoint(self, ckpt) -> None:
        """The panel's loaded checkpoint: the command that writes its statistics is offered before a file is
        open, and Run on a folder… runs it."""
        self._ckpt = ckpt
        self.command_hint.show_for(ckpt)

    # ------------------------------------------------------------------ a run from the window
    def run_on(self, texts, out=None) -> bool:
        """Run the loaded checkpoint over ``texts`` (a folder of .txt files or a text file) and write the
        statistics to ``out`` (None: ask, the dialog suggesting a name); False (the message says why) when
        it cannot start."""
        ck = self._ckpt
        if ck is None:
            self.message.say(Level.ERROR,
                             "Load a text model above first: the corpus run goes through its forward pass.")
            return False
        why = not_text(ck)
        if why is not None:
            self.message.say(Level.ERROR, f"The corpus statistics run text checkpoints; {ck.name} is {why}.")
            return False
        if self.runner.running:
            self.message.say(Level.ERROR, "A corpus run is going: Cancel it first, or wait for its statistics.")
            return False
        if out is None:
            out = self.ask_output(suggested_output(texts, ck.name))
            if not out:
                return False
        name = ck.name if ck.name != Path(ck.folder).name else None
        self.message.clear()
        self._run_texts = Path(texts)
        self.run_bar.setRange(0, 0)  # counting the documents
        self._set_source(f"running {ck.name} over {Path(texts).name}…")
        self._show_running(True)
        self.runner.start(ck.folder, name, texts, out)
        return True

    def _show_running(self, running: bool) -> None:
        self.run_bar.setVisible(running)
        self.cancel_button.setVisible(running)
        self.run_button.setEnabled(not running)
        self.open_button.setEnabled(not running)

    def _on_run_folder(self) -> None:
        self._ask_and_run("folder")

    def _on_run_file(self) -> None:
        self._ask_and_run("file")

    def _ask_and_run(self, kind: str) -> None:
        texts = self.ask_texts(kind)
        if texts:
            self.run_on(texts)

    def _ask_texts(self, kind: str):
        if kind == "folder":
            return QFileDialog.getExistingDirectory(self, "Run the corpus statistics on a folder of .txt files") or None
        path, _ = QFileDialog.getOpenFileName(self, "Run the corpus statistics on a text file (one document per line)",
                                              "", "Texts (*.txt *.jsonl *.parquet);;All files (*)")
        return path or None

    def _ask_output(self, suggested: Path):
        path, _ = QFileDialog.getSaveFileName(self, "Save the corpus statistics as", str(suggested),
                                              "Parquet (*.parquet)")
        return path or None

    def _on_run_progress(self, p) -> None:
        self.run_bar.setRange(0, max(1, p.total))
        self.run_bar.setValue(p.done)
        failed = f", {p.failed:,} failed" if p.failed else ""
        self.run_bar.setToolTip(f"{p.done:,} of {p.total:,} documents{failed}")

    def _on_run_finished(self, result, out) -> None:
        self._show_running(False)
        if not self.open_stats(out):
            return
        notes = []
        if result.failed:
            _i, doc, message = result.failed[0]
            notes.append(f"{len(result.failed):,} of {result.total:,} documents failed (first {doc}: {message}); "
                         "the statistics are of the others")
        if result.changed:
            notes.append(f"{self._run_texts} changed during the run ({result.counted:,} documents when counted, "
                         f"{result.total:,} when read)")
        if notes:
            self.message.say(Level.WARNING, " · ".join(notes))

    def _on_run_failed(self, message: str) -> None:
        self._show_running(False)
        self._restore_source()
        self.message.say(Level.ERROR, f"The corpus run did not finish: {message}")

    def _on_run_stopped(self) -> None:
        self._show_running(False)
        self._restore_source()
        self.message.say(Level.INFO, "Corpus run cancelled: nothing was written.")

    def _restore_source(self) -> None:
        if self.stats is None:
            self._set_source("No corpus statistics open.")
        else:
            self._set_source(f"{self.stats.model or 'model ?'} · {self.stats.documents:,} documents · "
                                f"{Path(self.stats.path).name}")

    def set_input(self, result, summaries=None) -> None:
        """The panel's current forward pass (a ModelAttention or a long decoder run) and its head summaries,
        or None.  Its statistics are computed when a corpus is open to compare with (and once per input)."""
        self._input = (result, summaries)
        self.input_values = None
        self._input_problem = ""
        # maps read from a file do not say which model made them: their (layers, heads) alone decide
        self.input_model = "" if result is None or getattr(result, "kind", None) == "maps" else result.model
        self.input_tokens = 0 if result is None else len(result.tokens)
        self._draw()

    def statistic(self) -> str:
        return self.statistic_combo.currentData()

    def set_statistic(self, name: str) -> None:
        index = self.statistic_combo.findData(name)
        if index < 0:
            raise ValueError(f"unknown statistic {name!r}; choose one of {', '.join(STATISTICS)}")
        self.statistic_combo.setCurrentIndex(index)

    def set_selected(self, layer: int, head: int) -> None:
        self.selected = (int(layer), int(head))
        self._draw()  # outlines the layer's row in the grids that hold one (a few dozen cells: cheap)

    def set_colormap(self, name: str) -> None:
        if name in colormaps.NAMES:
            self.corpus_map.set_colormap(name)
            self.input_map.set_colormap(name)

    def corpus_matrix(self) -> np.ndarray | None:
        """(L, nh) corpus values of the chosen statistic, or None."""
        return None if self.stats is None else self.stats.values[self.statistic()]

    def input_matrix(self) -> np.ndarray | None:
        """(L, nh) values of the current input drawn beside the corpus, or None (no input, other model)."""
        if self.input_values is None or self._mismatch() is not None:
            return None
        return self.input_values[self.statistic()]

    def message_text(self) -> str:
        return self.message.text()

    # ------------------------------------------------------------------ drawing
    def _compute_input(self) -> None:
        result, summaries = self._input
        if self.stats is None or result is None or self.input_values is not None:
            return
        try:
            self.input_values = result_statistics(result, summaries)
        except ValueError as exc:  # attentions that are not (L, nh, T, T) maps
            self._input_problem = f"The input's statistics cannot be computed: {exc}"

    def _mismatch(self) -> str | None:
        if self.stats is None or self.input_values is None:
            return None
        shape = next(iter(self.input_values.values())).shape
        return mismatch(self.stats, self.input_model, shape)

    def _draw(self) -> None:
        self._compute_input()
        name = self.statistic()
        short = LABELS[name][1]
        corpus, inp = self.corpus_matrix(), self.input_matrix()
        levels = shared_levels(corpus, inp)
        problem = self._mismatch()
        if problem:
            self.message.say(Level.WARNING, f"{problem}: the input is not drawn beside the corpus (load "
                                             f"{self.stats.model} in the panel, or open statistics of this model).")
        elif self._input_problem:
            self.message.say(Level.WARNING, self._input_problem)
        else:
            self.message.clear()
        if self._input[0] is None:
            input_hint = "Run the model on an input to see its statistics here."
        elif self.input_values is None:
            input_hint = ""
        else:
            input_hint = "This input's model is not the model of the statistics." if problem else ""
        self.body.setCurrentWidget(self.command_hint if self.stats is None else self.split)
        for view, grid, title, hint in (
                (self.corpus_map, corpus, f"corpus · {short}", "Open statistics… to see a corpus here."),
                (self.input_map, inp, f"this input, {self.input_tokens} tokens · {short}", input_hint)):
            stack, placeholder = self._sides[view]
            if grid is None:
                view.clear()
                placeholder.setText(hint)
                stack.setCurrentWidget(placeholder)
                continue
            stack.setCurrentWidget(view)
            L, nh = grid.shape
            view.set_matrix(_drawable(grid), row_labels=[f"L{i}" for i in range(L)],
                            col_labels=[f"h{j}" for j in range(nh)], levels=levels, title=title, value_label=short)
            if self.selected is not None and self.selected[0] < L:
                view.set_selected_row(self.selected[0])
        self._update_line()

    def _update_line(self) -> None:
        corpus, inp = self.corpus_matrix(), self.input_matrix()
        if self.selected is None or corpus is None:
            self.line.setText(" ")
            return
        layer, head = self.selected
        if not (layer < corpus.shape[0] and head < corpus.shape[1]):
            self.line.setText(" ")
            return
        short = LABELS[self.statistic()][1]
        text = f"layer {layer} · head {head}: {short} {corpus[layer, head]:.4f} over the corpus"
        if inp is not None:
            text += f", {inp[layer, head]:.4f} in this input"
        self.line.setText(text)

    def _on_view_changed(self, view) -> None:
        self.set_colormap(view.colormap)

    def _on_open_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open corpus statistics", "", "Parquet (*.parquet);;All files (*)")
        if path:
            self.open_stats(path)


def install(panel) -> CorpusStatsView:
    """Add the corpus view as a "Corpus" tab of a ModelViewPanel, following its input, head and colours."""
    view = CorpusStatsView(panel)
    panel.tabs.addTab(view, "Corpus")
    panel.attention_ready.connect(lambda result: view.set_input(result, getattr(panel.outcome, "summaries", None)))
    panel.head_selected.connect(view.set_selected)
    panel.model_loaded.connect(view.set_checkpoint)
    view.head_clicked.connect(panel.select_head)
    view.set_colormap(panel.ctx.session.state.view.colormap)
    panel.ctx.session.events.view.connect(view._on_view_changed)
    return view
