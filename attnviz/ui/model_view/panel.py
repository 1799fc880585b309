"""ModelViewPanel: a real pretrained checkpoint's attention, every layer and head, as a grid of small
maps, the clicked map large and (ViT) the class token's attention or rollout over the image; a
vision-language(-action) model reads an image and a prompt together and gets a page of its own
(:class:`~attnviz.ui.model_view.vlm_view.VlmView`), from which its own mask opens in the Mask workspace. What is
loaded and shown is held by a :class:`~attnviz.checkpoints.study.CheckpointStudy`, run on a worker
thread (newest request wins). Nothing here is part of the session: the panel reads the session's
first text / image source as a default input and never edits it.

An encoder-decoder (MarianMT, BART, mBART, T5) reads the text field as its source and gets a row of its own
(:class:`~attnviz.ui.model_view.seq2seq_view.Seq2SeqControls`): a target to teacher-force, or none for the
model's own greedy translation (stoppable), and which stack — encoder, decoder or cross-attention — the grid
and the detail map show. Its runs go to the Diagnostics alignment view through the window's
:class:`~attnviz.ui.diagnostics.model_alignment.AlignmentFeed`; ``attention_ready`` then carries None (no
single-stack ModelAttention is shown) and ``seq2seq_ready`` the run.
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton,
                               QSizePolicy, QStackedWidget, QTabWidget, QVBoxLayout, QWidget)

from attnviz.checkpoints import seq2seq_study
from attnviz.checkpoints.study import CheckpointStudy, head_title, prompt_to_field
from attnviz.ui import colormaps
from attnviz.ui.diagnostics.model_alignment import feed_for
from attnviz.ui.latest_job import Cancelled, LatestJob
from attnviz.ui.model_view.chat_option import ChatTemplateBox
from attnviz.ui.model_view.corpus_view import install as install_corpus_view
from attnviz.ui.model_view.decoder_view import LongMapView
from attnviz.ui.model_view.jobs import EXPECTED, MEMORY_MESSAGE
from attnviz.ui.model_view.mask_handoff import open_model_mask
from attnviz.ui.model_view.model_list import add_listed_models, list_models
from attnviz.ui.model_view.more_views import PARTS, PRELOAD, VIEWS, install_one, make_audio_parts, preload
from attnviz.ui.model_view.seq2seq_view import Seq2SeqControls
from attnviz.ui.model_view.summary_view import HeadSummaryView
from attnviz.ui.model_view.vit_view import VitAttentionView
from attnviz.ui.model_view.vlm_inputs import NO_IMAGE, VlmInputs
from attnviz.ui.model_view.vlm_view import VlmView
from attnviz.ui.model_view.vlm_view import PART_STEPS as VLM_PART_STEPS
from attnviz.ui.model_view.vlm_view import make_parts as make_vlm_parts
from attnviz.ui.widgets.heatmap import AttentionHeatmap
from attnviz.ui.widgets.small_multiples import HeadGrid
from attnviz.ui.workspaces.area import ShareSplitter
from attnviz.ui.messages import Level
from attnviz.ui.widgets.message_line import MessageLine

OPEN_FOLDER = "\x00open-folder"  # combo data of the "Open folder…" entry
OPEN_IMAGE = "\x00open-image"  # combo data of the "Open image…" entry
TAB_HEADS, TAB_IMAGE = 0, 1
PAGE_TEXT, PAGE_IMAGE, PAGE_VLM = 0, 1, 2  # input rows: a sentence, an image, an image and a prompt


def only_current_sizes(stack) -> None:
    """Let only the page shown of a stacked or tabbed widget set its minimum size (Qt takes the largest
    page's otherwise, so a page not shown — the image tab's rows of controls — could widen the window)."""
    policies = {}

    def follow(_index=None) -> None:
        current = stack.currentWidget()
        for i in range(stack.count()):
            w = stack.widget(i)
            policies.setdefault(id(w), w.sizePolicy())
            if w is current:
                w.setSizePolicy(policies[id(w)])
            else:
                w.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        stack.updateGeometry()

    stack.currentChanged.connect(follow)
    follow()
    return follow  # to call again when a page is added


# The further tabs, one step each; their modules are imported with their step (most of the panel's
# import time), still by plain import statements, which the bundle's analysis follows.
def _install_view(attribute: str):
    def step(panel) -> None:
        install_one(panel, attribute)  # Intervene, Generate, Audio (and the vision-language page's Generate, Intervene)

    return step


def _preload(module: str):
    return lambda _panel: preload(module)


def _make_vlm_parts(names):
    def step(panel) -> None:  # the page's grids, made on steps before it
        panel.__dict__.setdefault("_vlm_parts", {}).update(make_vlm_parts(names))

    return step


def _install_vlm_page(panel) -> None:
    """The page of a vision-language(-action) run (a dozen plots: a tenth of a second), a step of its own."""
    page = VlmView(panel, parts=panel.__dict__.pop("_vlm_parts", None))
    panel.pages.addWidget(page)
    panel.vlm = page
    panel._follow_pages()
    page.head_clicked.connect(panel.select_head)
    page.mask_requested.connect(panel.open_model_mask)
    name = panel.ctx.session.state.view.colormap
    if name in colormaps.NAMES:
        page.set_colormap(name)


def _install_corpus(panel) -> None:
    panel.corpus = install_corpus_view(panel)  # "Corpus" tab: a STATS.parquet beside this input


def _make_parts(host: str, step: int):
    def run(panel) -> None:
        from attnviz.ui.model_view import intervene_view

        intervene_view.make_parts(panel, host, step)

    return run


TERM_MAP_STEPS = 4  # len(attnviz.ui.model_view.score_terms_view.MAP_STEPS), not imported with the panel


def _make_term_maps(step: int):
    def run(panel) -> None:
        from attnviz.ui.model_view.score_terms_view import MAP_STEPS

        panel.__dict__.setdefault("_term_maps", []).extend(MAP_STEPS[step]())

    return run


def _install_steps() -> list:
    """The further tabs' steps in the order of their tabs, a view's largest imports each a step before it;
    the vision-language page first (its Generate and Intervene tabs go in it), then the Corpus tab."""
    steps = [*(_make_vlm_parts(names) for names in VLM_PART_STEPS), _install_vlm_page, _install_corpus]
    for attribute, _ in VIEWS:
        steps += [*(_preload(module) for module in PRELOAD.get(attribute, ()))]
        if attribute in PARTS:  # its plots made ahead, a few per step
            host, n = PARTS[attribute]
            steps += [_make_parts(host, i) for i in range(n)]
        if attribute == "audio":
            steps.append(make_audio_parts)
        steps.append(_install_view(attribute))
    return [*steps, *(_make_term_maps(i) for i in range(TERM_MAP_STEPS)), _install_score_terms, _install_router]


def _install_score_terms(panel) -> None:
    from attnviz.ui.model_view.score_terms_view import install

    maps = panel.__dict__.pop("_term_maps", None)
    panel.score_terms = install(panel, maps)  # "Score terms": DeBERTa's three terms of the head shown


def _install_router(panel) -> None:
    from attnviz.ui.model_view.router_view import install

    panel.router = install(panel)  # "Experts": a mixture of experts' routing, layers x tokens


# The core's plots made ahead, each group on a turn of its own before the panel is built on a workspace's first
# visit (attnviz.ui.workspaces.background: ModelViewPanel.prepare_steps); the constructor takes them, or makes
# those not there. Together with the rest of the constructor they held a turn for about 0.15 s.
_AHEAD: dict = {}
AHEAD_STEPS = (lambda: {"vit": VitAttentionView()},
               lambda: {"grid": HeadGrid(), "detail": AttentionHeatmap(), "summary": HeadSummaryView()})


def _make_ahead(make):
    def step() -> None:
        if _AHEAD.get("open"):  # no panel built since the steps began (one built sooner made its own)
            _AHEAD.update(make())

    return step


def _take_ahead() -> dict:
    made = {k: v for k, v in _AHEAD.items() if k != "open"}
    _AHEAD.clear()
    return made


# the attributes of the further tabs' views, set when they are built (ModelViewPanel.finish_building)
DEFERRED_VIEWS = frozenset({"vlm", "corpus", "intervention", "generation", "vlm_generation", "vlm_intervention", "audio",
                            "score_terms", "router"})


class ModelViewPanel(QWidget):
    """Pretrained checkpoint: choose, run on text or an image, look at every layer and head."""

    model_loaded = Signal(object)  # Checkpoint, after a successful load
    attention_ready = Signal(object)  # ModelAttention, after a forward pass is shown
    failed = Signal(str)  # the message shown for a problem
    head_selected = Signal(int, int)  # (layer, head) shown in the detail heatmap
    seq2seq_ready = Signal(object)  # Seq2SeqOutcome, after an encoder-decoder run is shown
    models_listed = Signal(int)  # the hub cache's models (how many) have joined the model combo
    _wrote = Signal(object, int)  # (stop event of the translation, tokens written so far): worker -> GUI thread

    @staticmethod
    def prepare_steps() -> list:
        """Steps that make the core's plots ahead, each on a turn of its own, for the next panel built."""
        for made in _take_ahead().values():  # left by steps no panel took: not wanted any more
            made.deleteLater()
        _AHEAD["open"] = True
        return [_make_ahead(make) for make in AHEAD_STEPS]

    def __init__(self, ctx, parent=None, *, auto_load: bool = True):
        super().__init__(parent)
        made = _take_ahead()  # plots made ahead by prepare_steps, by name; the others are made here
        self.ctx = ctx
        self.auto_load = auto_load  # load the first ready model the first time the panel is shown
        self.study = CheckpointStudy()
        self.selected: tuple[int, int] = (0, 0)
        self._loading: tuple[str, str | None, bool] | None = None  # (folder, name, entry added) of the load in flight
        self._text_edited = False
        # stops its thread itself when destroyed
        self.jobs = LatestJob("attnviz-pretrained", self, expected=EXPECTED, memory_message=MEMORY_MESSAGE)
        self._job_kind = ""  # "load" or "run": what the newest job does (only the newest one answers)
        self._pending_input: tuple[str | None, dict] = (None, {})  # (prompt, options) for the model being loaded
        self._stop = threading.Event()  # set to stop the greedy translation being written

        # -- model row
        self.model_combo = QComboBox(self)
        self.model_combo.setToolTip("installed ready models, folders opened before, or a local Hugging Face folder")
        self.model_combo.setMinimumContentsLength(18)
        for name, folder in self.study.ready_models():
            self.model_combo.addItem(name, str(folder))
        self._n_ready = self.model_combo.count()  # only a ready model is loaded without being chosen
        self.model_combo.addItem("Open folder…", OPEN_FOLDER)
        # the hub cache's models are listed on a worker (importing huggingface_hub and scanning the cache took
        # about 0.4 s of the constructor) and join the combo when they arrive (models_listed)
        self.model_list = LatestJob("attnviz-model-list", self, expected=(OSError, ValueError))
        self.model_list.done.connect(self._on_models_listed)
        ready = [(self.model_combo.itemText(i), self.model_combo.itemData(i)) for i in range(self._n_ready)]
        self.model_list.submit(list_models, self.study, ready)
        self._last_model_index = 0
        self.busy = QProgressBar(self)
        self.busy.setRange(0, 0)  # indeterminate: a load or forward pass is running
        self.busy.setMaximumWidth(70)
        self.busy.setTextVisible(False)
        self.busy.setVisible(False)
        self.describe = QLabel("No model loaded.", self)
        self.describe.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # a long description (a vision-language model's parts) wraps, read whole; it never widens the window
        self.describe.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.describe.setWordWrap(True)
        top = QHBoxLayout()
        top.setContentsMargins(6, 4, 6, 0)
        top.addWidget(QLabel("model", self))
        top.addWidget(self.model_combo)
        top.addWidget(self.busy)
        top.addWidget(self.describe, 1)

        # -- input row: a sentence (text models) or an image (ViT)
        self.text_edit = QLineEdit(self.study.offered_text(ctx.session.state)[0], self)
        self.text_edit.setToolTip("the text the model reads (Enter runs it)")
        self.image_combo = QComboBox(self)
        self.image_combo.setToolTip("the image the model sees")
        self.run_button = QPushButton("Run", self)
        self.run_button.setToolTip("run the model on this input")
        self.inputs = QStackedWidget(self)
        self.text_label = QLabel("text", self)  # "source" for an encoder-decoder
        self.inputs.addWidget(self._row(self.text_label, self.text_edit))
        self.inputs.addWidget(self._row(QLabel("image", self), self.image_combo))
        self.vlm_inputs = VlmInputs(self)  # vision-language models: image(s), prompt, the family's options
        self.inputs.addWidget(self.vlm_inputs)
        mid = QHBoxLayout()
        mid.setContentsMargins(6, 0, 6, 0)
        mid.addWidget(self.inputs, 1)
        self.chat_box = ChatTemplateBox(self)  # decoders with a chat template
        mid.addWidget(self.chat_box)
        mid.addWidget(self.run_button)
        self.message = MessageLine(self)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.setStyleSheet("QLabel { color: #c62828; padding: 2px 6px; }")
        self.message.setVisible(False)
        self.seq2seq = Seq2SeqControls(self)  # encoder-decoders: target, token limit, stack, alignment
        self.hint = QLabel("", self)  # a quiet note on the input (not a problem)
        self.hint.setWordWrap(True)
        self.hint.setStyleSheet("QLabel { font-style: italic; padding: 0px 6px; }")
        self.hint.setVisible(False)

        # -- views
        self.grid = made.pop("grid", None) or HeadGrid(self)
        self.vit = made.pop("vit", None) or VitAttentionView(self)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.grid, "Layers × heads")
        self.tabs.addTab(self.vit, "Image")
        self.tabs.setTabEnabled(TAB_IMAGE, False)
        self.detail = made.pop("detail", None) or AttentionHeatmap(self)
        self.long_map = LongMapView(self.detail, self)  # decoder inputs whose maps are not held
        self.summary = made.pop("summary", None) or HeadSummaryView(self)
        # the layers x heads grid is wide and flat (6 x 12 maps): the summary grid of the same shape
        # goes under it, and the selected map, square, gets the whole height beside them
        self.side_splitter = ShareSplitter(Qt.Orientation.Vertical, self)  # the workspace remembers both
        self.side_splitter.addWidget(self.tabs)
        self.side_splitter.addWidget(self.summary)
        self.side_splitter.set_shares(self.default_shares("panel_side"))
        self.body = ShareSplitter(Qt.Orientation.Horizontal, self)
        self.body.addWidget(self.side_splitter)
        self.body.addWidget(self.detail)
        self.body.set_shares(self.default_shares("panel_body"))
        self.pages = QStackedWidget(self)
        self.pages.addWidget(self.body)  # the vision-language page (self.vlm) is added by its own step

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        layout.addLayout(top)
        layout.addLayout(mid)
        layout.addWidget(self.seq2seq)
        layout.addWidget(self.message)
        layout.addWidget(self.hint)
        layout.addWidget(self.pages, 1)

        self._fill_images()
        self._set_colormap(ctx.session.state.view.colormap)
        self.model_combo.activated.connect(self._on_model_chosen)
        self.image_combo.activated.connect(lambda i: self._on_image_chosen(i, self.image_combo))
        self.vlm_inputs.image_combo.activated.connect(lambda i: self._on_image_chosen(i, self.vlm_inputs.image_combo))
        self.vlm_inputs.second_combo.activated.connect(
            lambda i: self._on_image_chosen(i, self.vlm_inputs.second_combo))
        self.vlm_inputs.run_requested.connect(self.run_input)
        self.vit.window_mask_requested.connect(self.open_window_mask)
        self.text_edit.textEdited.connect(self._on_text_edited)
        self.text_edit.returnPressed.connect(self.run_input)
        self.run_button.clicked.connect(self.run_input)
        self.chat_box.toggled.connect(lambda _on: self.ckpt is not None and self.run_input())
        self.jobs.done.connect(self._on_job_finished)
        self.jobs.failed.connect(self._on_job_failed)
        self.jobs.busy_changed.connect(self.busy.setVisible)
        self.jobs.busy_changed.connect(lambda busy: busy or self.seq2seq.set_running(False))
        self.seq2seq.set_stack(self.study.stack)
        self.seq2seq.run_requested.connect(self.run_input)
        self.seq2seq.stop_requested.connect(self.stop_translation)
        self.seq2seq.stack_changed.connect(lambda stack: self.set_stack(stack))
        self.seq2seq.term_changed.connect(lambda term: self.set_stack(self.study.stack, term))
        self.seq2seq.alignment_requested.connect(self.show_alignment)
        self._wrote.connect(self._on_wrote)
        feed_for(ctx).rerun_requested.connect(self._on_rerun_requested)
        self.grid.head_clicked.connect(self.select_head)
        self.summary.head_clicked.connect(self.select_head)
        ctx.session.events.sources.connect(self._on_sources_changed)
        ctx.session.events.view.connect(self._on_view_changed)
        self._sync_input_page()
        self._follow_pages = only_current_sizes(self.pages)
        only_current_sizes(self.inputs)
        # The further tabs are built over the next turns of the event loop, one step a turn: together
        # they are two dozen plots (seconds on a loaded machine), which held the window frozen on the
        # workspace's first visit. They are disabled until a model loads, and anything that needs them
        # sooner (a load's result, a head chosen, their attribute asked for) builds the rest at once.
        # A job's result arriving meanwhile waits for the last step (see _wait_for_tabs) instead of building
        # the rest in one go; the steps are 1 ms timers, not posted calls, so input and paints come between them.
        self._installs = _install_steps()
        self._tabs_built = threading.Event()  # set once every further tab is built
        QTimer.singleShot(1, self, self._install_next)

    def _install_next(self) -> None:
        """Build the next of the further tabs; the one after it on the next turn of the event loop."""
        if self._installs:
            self._installs.pop(0)(self)
            if self._installs:
                QTimer.singleShot(1, self, self._install_next)
            else:
                self._installed()

    def finish_building(self) -> None:
        """Build every further tab not built yet, now (before a model's result reaches them)."""
        if self.__dict__.get("_installs"):
            while self._installs:
                self._installs.pop(0)(self)
            self._installed()

    def build_all_tabs(self) -> None:
        """Every tab there, now: a tab named from outside (``attnviz --workspace pretrained/intervene``) is
        found even before its turn came (attnviz.ui.workspaces.tabs)."""
        self.finish_building()

    @property
    def loading(self) -> bool:
        """True while a checkpoint is being loaded."""
        return self._loading is not None

    @property
    def stop_event(self):
        """The event that stops the run being written (the Stop button sets it)."""
        return self._stop

    def expects_model(self) -> bool:
        """True while no model is shown but one is loading or will load when the panel first shows."""
        return self.study.ckpt is None and (self._loading is not None or (self.auto_load and self._n_ready > 0))

    def building(self) -> bool:
        """True while further tabs are still to be built on coming turns of the event loop."""
        return bool(self.__dict__.get("_installs"))

    def _installed(self) -> None:
        for stack in (self.tabs, self.vlm.tabs):
            only_current_sizes(stack)
        self._tabs_built.set()

    def _wait_for_tabs(self, result) -> bool:
        """True when a job's result came while further tabs are still to be built: it goes back to the
        worker, which hands it over again once the last tab is built (so every tab follows it, no turn
        builds them all, and the job stays busy meanwhile; a newer job replaces it as any job)."""
        if not self.building():
            return False
        built = self._tabs_built
        self.jobs.submit(lambda: (built.wait(120), result)[1])
        return True

    def __getattr__(self, name: str):
        # only for attributes not found: a further tab's view asked for before its turn came
        if name in DEFERRED_VIEWS and self.__dict__.get("_installs"):
            self.finish_building()
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @staticmethod
    def default_shares(key: str) -> list[float] | None:
        """Default shares: the grids' column 58 % of the width, the selected map 42 %; in that column
        the layers x heads grid 62 % of the height, the head summaries 38 %."""
        return {"panel_body": [0.58, 0.42], "panel_side": [0.62, 0.38]}.get(key)

    def _row(self, *widgets) -> QWidget:
        w = QWidget(self)
        row = QHBoxLayout(w)
        row.setContentsMargins(0, 0, 0, 0)
        for i, child in enumerate(widgets):
            row.addWidget(child, 1 if i == len(widgets) - 1 else 0)
        return w

    @property
    def ckpt(self):
        """The loaded Checkpoint, or None."""
        return self.study.ckpt

    @property
    def outcome(self):
        """The run shown (its result and head summaries), or None."""
        return self.study.outcome

    # ------------------------------------------------------------------ public API
    def load_model(self, folder, name: str | None = None, *, prompt: str | None = None,
                   options: dict | None = None) -> int:
        """Load the checkpoint in ``folder`` on the worker, then run it on the current input — with ``prompt``
        (the text of a text model, the prompt of a vision-language model, line breaks as typed) and, for the
        latter, ``options`` (field texts by option name) instead of its family's example when given.

        Returns the job id; ``model_loaded`` then ``attention_ready`` follow, or ``failed``."""
        self._pending_input = (prompt, dict(options or {}))
        folder = str(folder)
        name = self.study.model_name(folder, name)
        added = self._show_choice(folder, name or Path(folder).name)
        self._loading = (folder, name, added)
        self.describe.setText(f"loading {name or Path(folder).name} …")
        self.message.clear()
        return self._submit("load", self.study.load_job(folder, name))

    def run_input(self) -> int | None:
        """Run the loaded model on the text or image chosen; returns the job id (None without a model)."""
        if self.study.ckpt is None:
            self.message.say(Level.ERROR, "Load a model first (choose one above or open a checkpoint folder).")
            return None
        self.message.clear()
        if self.study.kind == "whisper":  # a speech model reads the Audio tab's clip, not the text field
            return self.audio.run()
        if self.study.kind == "maps":  # maps from a file: shown once after their load, there is nothing to run
            job = self.study.maps_job()
            return None if job is None else self._submit("run", job)
        if self.study.kind == "vlm":
            inputs = self.vlm_inputs
            job = self.study.vlm_job(inputs.image_keys(), inputs.prompt_edit.text(), inputs.option_texts())
            if job is None:
                self.message.say(Level.ERROR, "Choose an image for the model to see.")
                return None
            return self._submit("run", job)
        if self.study.kind == "seq2seq":
            return self._run_seq2seq()
        if self.study.kind == "vit":
            job = self.study.image_job(self.image_combo.currentData())
            if job is None:
                self.message.say(Level.ERROR, "Choose an image for the model to see.")
                return None
            return self._submit("run", job)
        return self._submit("run", self.study.text_job(self.text_edit.text(), self.chat_box.wanted()))

    def _run_seq2seq(self) -> int:
        """Submit the encoder-decoder run of the source and target fields (greedy when the target is empty)."""
        stop = threading.Event()
        target = self.seq2seq.target_edit.text()
        steps = [0]

        def cancel() -> bool:  # asked before each step of a greedy translation: also its progress
            if stop.is_set():  # stopped, replaced, or the panel is closing: nothing more is said
                return True
            if steps[0]:
                self._wrote.emit(stop, steps[0])
            steps[0] += 1
            return False

        inner = self.study.seq2seq_job(self.text_edit.text(), target, self.seq2seq.max_new.value(), cancel)

        def job():
            try:
                return inner()
            except seq2seq_study.Cancelled:
                raise Cancelled() from None

        jid = self._submit("run", job)
        self._stop = stop  # after _submit: it stops the run this one replaces
        self.seq2seq.set_running(not target.strip())
        return jid

    def _on_wrote(self, stop, n: int) -> None:
        """A greedy translation's progress in the model line, while it is the one being written."""
        if stop is self._stop and not stop.is_set() and self.ckpt is not None:
            self.describe.setText(f"{self.ckpt.name}: writing the translation, {n} of at most "
                                  f"{self.seq2seq.max_new.value()} tokens… (Stop ends it)")

    def _describe_seq2seq(self) -> None:
        """The model line of an encoder-decoder: its description and how the run shown was obtained."""
        if self.ckpt is None:
            return
        shown = f" — {self.outcome.describe()}" if self.study.seq2seq else ""
        self.describe.setText(self.ckpt.describe() + shown)

    def stop_translation(self) -> None:
        """Stop the greedy translation being written (Stop); nothing of it is shown."""
        self._stop.set()
        self.jobs.cancel()
        self.seq2seq.set_running(False)
        self._describe_seq2seq()
        self.message.say(Level.INFO, "Stopped: the translation was not finished, so nothing new is shown.")
        feed_for(self.ctx).report_failure("Stopped in Pretrained: the translation was not finished.")

    def set_target(self, text: str, run: bool = False) -> None:
        """An encoder-decoder's target (empty: its own greedy translation); ``run`` runs it."""
        self.seq2seq.target_edit.setText(text)
        if run:
            self.run_input()

    def set_stack(self, stack: str, term: str | None = None) -> None:
        """Show the encoder-decoder's ``stack`` ("encoder", "decoder", "cross") in the grid and the detail map,
        and ``term`` ("weights", or "bias": T5's position term) in the detail map."""
        self.study.set_stack(stack, term)
        for control, value, setter in ((self.seq2seq.stack(), stack, self.seq2seq.set_stack),
                                       (self.seq2seq.term(), term, self.seq2seq.set_term)):
            if value is not None and control != value:
                blocked = self.seq2seq.blockSignals(True)
                setter(value)
                self.seq2seq.blockSignals(blocked)
        self.seq2seq._sync_term()
        if self.study.seq2seq:
            self._show_grid()

    def _on_rerun_requested(self, target: str) -> None:
        """The Diagnostics alignment asks for the model to run again on ``target`` ("": its own translation)."""
        if self.study.kind != "seq2seq":
            feed_for(self.ctx).report_failure("the model in Pretrained is no longer an encoder-decoder")
            return
        self.set_target(target, run=True)

    def show_alignment(self) -> bool:
        """Show the encoder-decoder run's cross-attention in the Diagnostics alignment view (in the window: its
        workspace brought forward); False before such a run."""
        if not self.study.seq2seq:
            self.message.say(Level.ERROR, "Run an encoder-decoder (MarianMT, BART, mBART, T5) first: its "
                                          "cross-attention is what the alignment shows.")
            return False
        feed = feed_for(self.ctx)
        if feed.outcome is not self.outcome:
            feed.publish(self.outcome)
        win = self.window()
        if hasattr(win, "show_workspace"):
            win.show_workspace("diagnostics/alignment")
        feed.request_show()
        return True

    def set_text(self, text: str, run: bool = False) -> None:
        """Set the sentence (as if typed); ``run`` runs the model on it."""
        self.text_edit.setText(text)
        self._text_edited = True
        self.hint.setVisible(False)
        if run:
            self.run_input()

    def set_image(self, rgb, name: str = "image", run: bool = False) -> None:
        """Use the (H, W, 3) uint8 image ``rgb`` as the model's input (added to the image list)."""
        key, label = self.study.add_image_array(rgb, name)
        self._add_image(key, label)
        for combo in (self.image_combo, self.vlm_inputs.image_combo):
            combo.setCurrentIndex(combo.findData(key))
        if run:
            self.run_input()

    def set_image_file(self, path: str, run: bool = False) -> None:
        """Use the image file ``path`` as the model's input (as "Open image…" does)."""
        key, label = self.study.add_image_file(str(path))
        self._add_image(key, label)
        for combo in (self.image_combo, self.vlm_inputs.image_combo):
            combo.setCurrentIndex(combo.findData(key))
        if run:
            self.run_input()

    def set_images(self, images, run: bool = False) -> None:
        """A vision-language model's images: ``images`` a list of (name, (H, W, 3) uint8); the second one in
        the second chooser, shown for the purpose (its model may refuse it, which the message line says)."""
        images = list(images)
        if not images:
            raise ValueError("give at least one image")
        keys = []
        for name, rgb in images[:2]:
            key, label = self.study.add_image_array(rgb, name)
            self._add_image(key, label)
            keys.append(key)
        combo = self.vlm_inputs.image_combo
        combo.setCurrentIndex(combo.findData(keys[0]))
        self.vlm_inputs.set_multi(len(keys) > 1 or getattr(self.ckpt, "n_images", 1) > 1)
        second = self.vlm_inputs.second_combo
        second.setCurrentIndex(second.findData(keys[1]) if len(keys) > 1 else 0)
        if run:
            self.run_input()

    def set_prompt(self, text: str, run: bool = False, **options) -> None:
        """A vision-language model's prompt (line breaks as typed) and option field texts; ``run`` runs it."""
        self.vlm_inputs.prompt_edit.setText(prompt_to_field(text))
        for name, value in options.items():
            self.vlm_inputs.set_option(name, str(value))
        if run:
            self.run_input()

    def open_model_mask(self) -> bool:
        """Open the shown vision-language run's own mask as a session of its segments in the Mask workspace."""
        if not self.study.vlm:
            self.message.say(Level.ERROR, "Run a vision-language model first: its own mask is what opens in the "
                                          "Mask workspace.")
            return False
        return open_model_mask(self, self.ctx, self.outcome.result)

    def open_window_mask(self, layer: int) -> bool:
        """Open a Swin layer's window mask over the shown run's patches as a session in the Mask workspace."""
        ckpt = self.study.ckpt
        if ckpt is None or ckpt.config.model_type != "swin" or self.outcome is None:
            self.message.say(Level.ERROR, "Run a Swin model first: its layers' window masks are what opens in the "
                                          "Mask workspace.")
            return False
        return open_model_mask(self, self.ctx, self.outcome.result, config=ckpt.config, layer=layer)

    def shutdown(self) -> None:
        """Stop the loading/forward-pass thread (the window calls this when it closes)."""
        self._stop.set()
        self._tabs_built.set()  # a result waiting on the worker for the tabs is let go
        self.jobs.shutdown()
        self.long_map.shutdown()
        for view in self.findChildren(QWidget):  # the tabs' own jobs: Intervene, Generate, Audio, Corpus, ...
            stop = getattr(view, "shutdown", None)
            if callable(stop):
                stop()

    def select_head(self, layer: int, head: int) -> None:
        """Show ``head`` of ``layer`` large in the detail heatmap and outline it in the grids."""
        self.finish_building()  # every tab follows what comes next
        study = self.study
        if study.outcome is None:
            return
        r = study.outcome.result
        study.check_head(layer, head)
        self.selected = (int(layer), int(head))
        if study.vlm:
            self.vlm.select_head(layer, head)
            self.head_selected.emit(int(layer), int(head))
            return
        self.detail.set_readout_provider(None)
        if study.seq2seq:
            self.long_map.clear()
            m, mask, rows, cols, title, value = study.seq2seq_view(layer, head)
            self.detail.set_matrix(m, mask=mask, row_labels=rows, col_labels=cols, title=title, value_label=value)
            self.detail.set_readout_provider(lambda i, j, at=(layer, head): study.seq2seq_note(*at, i, j))
        elif study.long:
            self.long_map.show(study.outcome, layer, head)
        else:
            self.long_map.clear()
            m, mask = study.head_map(layer, head)  # (T, T), (T, T) or None
            rows = getattr(r, "row_labels", r.labels)  # cross-attention maps from a file: the target tokens
            self.detail.set_matrix(m, mask=mask, row_labels=rows, col_labels=r.labels,
                                   title=head_title(r, layer, head), value_label="weight")
        self.grid.set_selected(layer, head)
        self.summary.set_selected(layer, head)
        self.head_selected.emit(int(layer), int(head))

    def shown_matrix(self):
        """(T, T) weights in the detail heatmap (tests, exports); None when they are not held (long inputs)."""
        return self.study.shown_matrix(*self.selected)

    def message_text(self) -> str:
        """The problem shown in the panel, "" when there is none."""
        return self.message.text()

    # ------------------------------------------------------------------ model and input choices
    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.auto_load and self.study.ckpt is None and self._loading is None and self._n_ready > 0:
            self.auto_load = False
            self.load_model(self.model_combo.itemData(0), name=self.model_combo.itemText(0))

    def _on_model_chosen(self, index: int) -> None:
        data = self.model_combo.itemData(index)
        if data == OPEN_FOLDER:
            folder = QFileDialog.getExistingDirectory(self, "Open a Hugging Face checkpoint folder")
            if not folder:
                self.model_combo.setCurrentIndex(self._last_model_index)
                return
            data = folder
        self.load_model(data)

    def _show_choice(self, folder: str, label: str) -> bool:
        """Select the model combo's entry of ``folder``, adding it before "Open folder…" if new (-> True)."""
        index = self.model_combo.findData(folder)
        added = index < 0
        if added:
            index = self.model_combo.count() - 1
            self.model_combo.insertItem(index, label, folder)
        self.model_combo.setCurrentIndex(index)
        self._last_model_index = index
        return added

    def _fill_images(self) -> None:
        """Image choices: the session's image sources, the bundled demo images, then "Open image…"."""
        entries = self.study.refresh_images(self.ctx.session.state)
        second = self.vlm_inputs.second_combo
        for combo in (self.image_combo, self.vlm_inputs.image_combo, second):
            keep = combo.currentData()
            combo.blockSignals(True)
            combo.clear()
            if combo is second:
                combo.addItem("none", NO_IMAGE)
            for key, label in entries:
                combo.addItem(label, key)
            combo.addItem("Open image…", OPEN_IMAGE)
            index = combo.findData(keep)
            combo.setCurrentIndex(index if keep != OPEN_IMAGE and index >= 0 else 0)
            combo.blockSignals(False)

    def _add_image(self, key: str, label: str) -> None:
        for combo in (self.image_combo, self.vlm_inputs.image_combo, self.vlm_inputs.second_combo):
            if combo.findData(key) < 0:
                combo.insertItem(combo.count() - 1, label, key)

    def _on_image_chosen(self, index: int, combo=None) -> None:
        combo = combo or self.image_combo
        if combo.itemData(index) == OPEN_IMAGE:
            path, _ = QFileDialog.getOpenFileName(self, "Open an image", "",
                                                  "Images (*.png *.jpg *.jpeg *.webp *.bmp *.gif *.tif *.tiff)")
            if not path:
                combo.setCurrentIndex(0)
                return
            key, label = self.study.add_image_file(path)
            self._add_image(key, label)
            combo.setCurrentIndex(combo.findData(key))
        if self.study.kind in ("vit", "vlm"):
            self.run_input()

    def _on_text_edited(self, _text: str) -> None:
        self._text_edited = True
        self.hint.setVisible(False)

    def _on_sources_changed(self, _sources) -> None:
        if not self._text_edited:
            self._offer_session_text()
        self._fill_images()

    def _offer_session_text(self) -> None:
        """Put the session's text in the input unless the loaded model could not read it all; then
        the panel's own sentence stands in (the person did not ask the model to read that text)."""
        text, note = self.study.offered_text(self.ctx.session.state)
        self.hint.setVisible(False)
        if note is not None:
            self.hint.setText(note)
            self.hint.setVisible(True)
        self.text_edit.setText(text)

    def _on_view_changed(self, view) -> None:
        self._set_colormap(view.colormap)

    def _set_colormap(self, name: str) -> None:
        if name in colormaps.NAMES:
            self.grid.set_colormap(name)
            self.detail.set_colormap(name)
            self.summary.heatmap.set_colormap(name)
            if "vlm" in self.__dict__:  # built on a later turn (it takes the colour map then)
                self.vlm.set_colormap(name)

    def _sync_input_page(self) -> None:
        kind = self.study.kind
        self.inputs.setCurrentIndex(PAGE_VLM if kind == "vlm" else (PAGE_IMAGE if kind == "vit" else PAGE_TEXT))
        for w in (self.inputs, self.run_button):  # maps from a file read no input
            w.setVisible(kind != "maps")

    # ------------------------------------------------------------------ results
    def _submit(self, kind: str, fn) -> int:
        self._stop.set()  # a translation being written is not wanted any more
        self._job_kind = kind
        return self.jobs.submit(fn)

    def _on_models_listed(self, _jid: int, listing) -> None:
        add_listed_models(self.model_combo, listing)
        self.models_listed.emit(len(listing[1]))

    def _on_job_finished(self, _jid: int, result) -> None:
        if self._wait_for_tabs(result):
            return
        self.finish_building()  # every tab follows what comes next
        if self._job_kind == "load":
            self._loading = None
            self.study.loaded(result)
            self.describe.setText(result.describe())
            self.describe.setToolTip(str(result.folder))
            vlm = self.study.kind == "vlm"
            self.chat_box.show_for(None if vlm else result)  # a vision-language prompt is written as the family says
            self.seq2seq.show_for(result)  # the weights first, as the row's choice then says
            self.study.set_stack(self.study.stack, "weights")
            self.text_label.setText("source" if self.study.kind == "seq2seq" else "text")
            if vlm:
                self.vlm_inputs.configure(result, self.study.offered_prompt())
            self._sync_input_page()
            if not self._text_edited:
                self._offer_session_text()
            prompt, options = self._pending_input
            self._pending_input = (None, {})
            problem = None
            try:
                if vlm and (prompt is not None or options):
                    self.set_prompt(self.vlm_inputs.prompt() if prompt is None else prompt, **options)
                elif prompt is not None and not vlm:
                    self.set_text(prompt)
            except ValueError as exc:  # an option this model does not take: it runs without it
                problem = str(exc)
            self.model_loaded.emit(result)
            self.run_input()
            if problem is not None:
                self.message.say(Level.WARNING, problem)
                self.ctx.report(Level.WARNING, problem)
        else:
            self._show_outcome(result)

    def _on_job_failed(self, _jid: int, message: str) -> None:
        self.finish_building()  # every tab follows what comes next
        if self._job_kind == "load":
            folder, name, added = self._loading or ("", None, False)
            self._loading = None
            text = f"Could not load {name or folder}: {message}"
            if added:  # a folder that does not load is not offered again
                self.model_combo.removeItem(self.model_combo.findData(folder))
            back = self.model_combo.findData(str(self.ckpt.folder)) if self.ckpt is not None else 0
            self.model_combo.setCurrentIndex(max(back, 0))
            self._last_model_index = max(back, 0)
            self.describe.setText(self.ckpt.describe() if self.ckpt is not None else "No model loaded.")
        else:
            text = f"Could not run {self.ckpt.name if self.ckpt else 'the model'}: {message}"
            if self.study.kind == "seq2seq":  # no "writing the translation…" left behind
                self._describe_seq2seq()
                feed_for(self.ctx).report_failure(text)
        self.message.say(Level.ERROR, text)
        self.ctx.report(Level.ERROR, text)
        self.failed.emit(text)

    def _show_outcome(self, outcome) -> None:
        self.finish_building()
        study = self.study
        new_model = study.show(outcome)
        r = outcome.result
        if study.seq2seq:
            self.pages.setCurrentWidget(self.body)
            self.vit.set_result(None, None, None)
            self.tabs.setTabEnabled(TAB_IMAGE, False)
            self._leave_disabled_tab()
            if self.ckpt is not None:
                self._describe_seq2seq()
                self.describe.setToolTip("\n".join((self.ckpt.describe(), outcome.describe(), *r.notes,
                                                    str(self.ckpt.folder))))
            self._show_grid()
            feed_for(self.ctx).publish(outcome)
            self.attention_ready.emit(None)
            self.seq2seq_ready.emit(outcome)
            return
        if study.vlm:
            self.pages.setCurrentWidget(self.vlm)
            L, nh = r.attentions.shape[:2]
            layer, head = self.selected
            self.selected = (layer if layer < L else 0, head if head < nh else 0)
            self.vlm.set_outcome(outcome, *self.selected)
            if self.ckpt is not None:  # the run's notes (feature layer, flow time ...) under the description
                self.describe.setText(self.ckpt.describe())
                self.describe.setToolTip("\n".join((self.ckpt.describe(), *getattr(r, "notes", ()),
                                                    str(self.ckpt.folder))))
            self.head_selected.emit(*self.selected)
            self.attention_ready.emit(r)
            return
        self.pages.setCurrentWidget(self.body)
        described = study.run_description()
        if described is not None:
            self.describe.setText(described)
        maps = study.grid_maps()  # long inputs: max thumbnails
        L, nh = maps.shape[:2]
        self.grid.set_matrices(maps, [f"L{i}" for i in range(L)], [f"h{j}" for j in range(nh)])
        self.summary.set_summaries(outcome.summaries)
        vit = study.shows_image()
        self.tabs.setTabEnabled(TAB_IMAGE, vit)
        if vit:
            ckpt = study.ckpt
            self.vit.set_result(r, outcome.rgb, ckpt.image, ckpt.config.patch_size, ckpt.config.grid)
            self.vit.set_windowed(ckpt.config.model_type == "swin")
            if new_model:
                self.tabs.setCurrentIndex(TAB_IMAGE)
        else:
            self.vit.set_result(None, None, None)
            self._leave_disabled_tab()
        layer, head = self.selected
        self.select_head(layer if layer < L else 0, head if head < nh else 0)
        self.attention_ready.emit(r)

    def _show_grid(self) -> None:
        """An encoder-decoder's stack shown: its maps in the grid, its summaries, the selected head large."""
        study = self.study
        maps = study.grid_maps()  # (L, nh, Tq, Tk)
        L, nh = maps.shape[:2]
        self.grid.set_matrices(maps, [f"L{i}" for i in range(L)], [f"h{j}" for j in range(nh)])
        self.summary.set_summaries(study.grid_summaries())
        layer, head = self.selected
        self.select_head(layer if layer < L else 0, head if head < nh else 0)

    def _leave_disabled_tab(self) -> None:
        """Back to "Layers × heads" only from a tab the model does not fill (the Image tab of a text model): a
        run leaves the person on the tab they chose (Generate, Intervene, Corpus ...)."""
        if not self.tabs.isTabEnabled(self.tabs.currentIndex()):
            self.tabs.setCurrentIndex(TAB_HEADS)
