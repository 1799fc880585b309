"""The inputs panel: the list of token sources (text, image, custom block, hand-set tokens), the choice
of self- or cross-attention (in cross mode each source is queries, keys/values, both or unused), and
an editor for the selected source. Typing is committed after a short pause, as one undo step per
typing run, so that every keystroke does not re-tokenise and recompute. Every change is a command
from :mod:`attnviz.model.commands` through ``ctx.execute``.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIcon, QKeySequence, QPixmap, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QHBoxLayout, QHeaderView, QLabel,
                               QMenu, QPlainTextEdit, QPushButton, QSizePolicy, QSplitter, QSpinBox, QStackedWidget,
                               QTableWidget, QTableWidgetItem, QTextEdit, QToolButton, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from attnviz.model.commands import (AddSource, MoveSource, RecolourSource, RemoveSource, RenameSource, SetCross,
                                    SetCustomBlock, SetImage, SetPatch, SetText, SetTokenizer)
from attnviz.model.display.response_views import query_offset
from attnviz.model.segments import Segment
from attnviz.model.sequence import MAX_TOKENS, encode_text, image_patches
from attnviz.model.source_list import ROLES, cross_from_roles, default_cross, drop_target, source_roles
from attnviz.model.state import CUSTOM_GENERATORS, IMAGE_POLICIES, CrossConfig, CustomSource, ImageSource, \
    TextSource, TokenizerSpec, ToySource
from attnviz.sources.errors import SourceError
from attnviz.ui.file_actions import (IMAGE_FILTER, VALUES_FILTER, Prompts, default_target, image_source_from_file,
                                     next_colour, unique_name)
from attnviz.ui.panels import PanelSpec
from attnviz.ui.theme import current_theme
from attnviz.ui.widgets.image_overlay import PatchImageView
from attnviz.ui.widgets.token_chips import TokenChips

TEXT_COMMIT_MS = 400  # typing pause after which the text is committed (and re-tokenised)
ROLE_TIPS = {"queries": "its tokens are the query rows", "keys/values": "its tokens are the key/value columns",
             "both": "its tokens are queries and keys/values", "unused": "left out of the attention"}
ATTENTION_KINDS = ("self", "cross")
ROLE_COLUMN = 3


def _swatch(colour: str) -> QIcon:
    pm = QPixmap(12, 12)
    pm.fill(QColor(colour))
    return QIcon(pm)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _spin(lo: int, hi: int, tip: str) -> QSpinBox:
    s = QSpinBox()
    s.setMinimumWidth(56)
    s.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)  # not as wide as the largest value
    s.setRange(lo, hi)
    s.setKeyboardTracking(False)
    s.setToolTip(tip)
    return s


class _TextEdit(QPlainTextEdit):
    """The text editor: Undo/Redo go to the window's undo stack (after committing what was typed)."""

    focus_lost = Signal()

    def __init__(self, undo_stack, commit, parent=None):
        super().__init__(parent)
        self._stack, self._commit = undo_stack, commit
        self.setUndoRedoEnabled(False)
        self.setTabChangesFocus(True)  # Tab moves on to the next control (a token text needs no tab character)

    def event(self, ev):
        if ev.type() == QEvent.Type.ShortcutOverride and (ev.matches(QKeySequence.StandardKey.Undo)
                                                          or ev.matches(QKeySequence.StandardKey.Redo)):
            ev.accept()
            return True
        return super().event(ev)

    def keyPressEvent(self, ev):
        if ev.matches(QKeySequence.StandardKey.Undo):
            self._commit()
            self._stack.undo()
            return
        if ev.matches(QKeySequence.StandardKey.Redo):
            self._commit()
            self._stack.redo()
            return
        super().keyPressEvent(ev)

    def focusOutEvent(self, ev):
        super().focusOutEvent(ev)
        self.focus_lost.emit()


class TextEditor(QWidget):
    """Text of one text source, with its tokens as chips."""

    def __init__(self, panel: "InputsPanel"):
        super().__init__(panel)
        self.panel = panel
        self.ctx = panel.ctx
        self.name: str | None = None
        self._spans: list[tuple[int, int]] = []
        self._hover: int | None = None
        self._loading = False
        self.edit = _TextEdit(self.ctx.undo_stack, self.commit, self)
        self.edit.setPlaceholderText("Type or paste text; its tokens appear below.")
        self.chips = TokenChips(self)
        self.info = QLabel("", self)
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # may be cut, not widen
        self.tokenizer_button = QToolButton(self)
        self.tokenizer_button.setText("Tokenizer ▾")
        self.tokenizer_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.tokenizer_button)
        menu.addAction("Load tokenizer.json…", self._load_tokenizer)
        menu.addAction("Bundled BPE vocabulary", lambda: self.ctx.execute(SetTokenizer(TokenizerSpec())))
        self.tokenizer_button.setMenu(menu)
        row = QHBoxLayout()
        row.addWidget(self.info, 1)
        row.addWidget(self.tokenizer_button)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.edit)
        chips_box = QWidget(self)
        cl = QVBoxLayout(chips_box)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addLayout(row)
        cl.addWidget(self.chips, 1)
        split.addWidget(chips_box)
        split.setSizes([160, 200])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(TEXT_COMMIT_MS)
        self.timer.timeout.connect(self.commit)
        self.edit.textChanged.connect(self._on_text_changed)
        self.edit.focus_lost.connect(self.commit)
        self.chips.token_hovered.connect(self._on_chip_hovered)
        self.chips.token_clicked.connect(self._on_chip_clicked)

    @property
    def pending(self) -> bool:
        return self.timer.isActive()

    def show_source(self, src: TextSource) -> None:
        switched = src.name != self.name
        if not switched and self.pending:
            return  # the person is typing: their text wins until it is committed
        self.name = src.name
        if self.edit.toPlainText() != src.text:
            self._loading = True
            cursor = self.edit.textCursor().position()
            self.edit.setPlainText(src.text)
            c = self.edit.textCursor()
            c.setPosition(min(cursor, len(src.text)))
            self.edit.setTextCursor(c)
            self._loading = False
        self._tokenise(src.text)

    def _tokenise(self, text: str) -> None:
        state = self.ctx.session.state
        src = state.source(self.name) if self.name in {s.name for s in state.sources} else None
        try:
            enc = encode_text(state.tokenizer, text) if text and not text.isspace() else None
        except (SourceError, ValueError) as exc:
            self.info.setText(f"cannot tokenise: {exc}")
            self.chips.set_tokens([], [])
            self._spans = []
            return
        if enc is None:
            self.chips.set_tokens([], [])
            self._spans = []
            self.info.setText(f"no tokens · tokenizer: {state.tokenizer.name}")
        else:
            colour = src.color if src is not None else "#808080"
            self.chips.set_tokens(enc.pieces, [int(i) for i in enc.ids], [Segment(self.name, 0, len(enc), colour)])
            self._spans = [tuple(s) for s in enc.spans]
            self.info.setText(f"{len(enc):,} tokens · {len(text):,} characters · tokenizer: {state.tokenizer.name}")
        self.show_selection()

    def commit(self) -> None:
        self.timer.stop()
        if self.name is None:
            return
        state = self.ctx.session.state
        try:
            src = state.source(self.name)
        except KeyError:
            return
        text = self.edit.toPlainText()
        if isinstance(src, TextSource) and text != src.text:
            self.ctx.execute(SetText(self.name, text))

    def _on_text_changed(self) -> None:
        if self._loading:
            return
        self.timer.start()

    def _on_chip_hovered(self, index: int) -> None:
        self._hover = None if index < 0 else index
        self.show_selection()

    def _on_chip_clicked(self, index: int) -> None:
        off = query_offset(self.ctx.response, self.name)
        if off is None:
            self.ctx.report(f"{self.name!r} is not among the query tokens of the last computation", "info")
            return
        self.ctx.set_view(query=off + index)

    def selected_local(self) -> int | None:
        """The selected query token's index within this source, if it is one of its tokens."""
        q = self.ctx.session.state.view.query
        off = query_offset(self.ctx.response, self.name)
        if q is None or off is None:
            return None
        local = q - off
        return local if 0 <= local < len(self._spans) else None

    def show_selection(self) -> None:
        """Light up the hovered chip's span and the selected query token's span in the text."""
        theme = current_theme()
        sels = []
        n = len(self.edit.toPlainText())
        local = self.selected_local()
        marks = ((local, theme.highlight, theme.highlight_text), (self._hover, theme.hover, "#000000"))
        for idx, bg, fg in marks:
            if idx is None or idx >= len(self._spans):
                continue
            a, b = self._spans[idx]
            if not 0 <= a < b <= n:
                continue
            sel = QTextEdit.ExtraSelection()
            cur = QTextCursor(self.edit.document())
            cur.setPosition(a)
            cur.setPosition(b, QTextCursor.MoveMode.KeepAnchor)
            sel.cursor = cur
            fmt = QTextCharFormat()
            fmt.setBackground(QColor(bg))
            fmt.setForeground(QColor(fg))
            sel.format = fmt
            sels.append(sel)
        self.edit.setExtraSelections(sels)
        if local is not None and local < self.chips.count():
            if self.chips.selected != local:
                self.chips.set_selected(local)
        elif self.chips.selected is not None:
            self.chips.set_selected(None)

    def highlighted_span(self) -> tuple[int, int] | None:
        """(start, stop) of the hovered chip's span (tests)."""
        return None if self._hover is None else self._spans[self._hover]

    def _load_tokenizer(self) -> None:
        path = self.panel.prompts.open_file(self, "Load tokenizer", "Tokenizers (tokenizer.json *.json)")
        if not path:
            return
        from attnviz.sources.text import BpeTokenizer

        try:
            text = Path(path).read_text(encoding="utf-8")
            BpeTokenizer.from_json_str(text, name=Path(path).name, origin=Path(path).name)
        except (OSError, UnicodeDecodeError, SourceError) as exc:
            self.ctx.report(f"cannot use {Path(path).name} as a tokenizer: {exc}", "error")
            return
        self.ctx.execute(SetTokenizer(TokenizerSpec(text, Path(path).name)))


class ImageEditor(QWidget):
    """Patching of one image source, with the patch grid drawn over the prepared image."""

    def __init__(self, panel: "InputsPanel"):
        super().__init__(panel)
        self.panel = panel
        self.ctx = panel.ctx
        self.name: str | None = None
        self.view = PatchImageView(self)
        self.view.slider.setVisible(False)  # no attention overlay here: the image panel draws that
        for lab in self.view.findChildren(QLabel):
            if lab.text() == "overlay":
                lab.setVisible(False)
        self.load_button = QPushButton("Load image…", self)
        self.patch = _spin(1, 512, "patch side P in pixels")
        self.policy = QComboBox(self)
        self.policy.addItems(list(IMAGE_POLICIES))
        self.policy.setToolTip("resize: scale to the target · crop: scale to cover it, then centre-crop")
        self.auto_size = QCheckBox("own size", self)
        self.auto_size.setToolTip("keep the image's own size, rounded to the nearest multiple of the patch size")
        self.height_spin = _spin(1, 8192, "target height in pixels (a multiple of P)")
        self.width_spin = _spin(1, 8192, "target width in pixels (a multiple of P)")
        self.class_token = QCheckBox("class token", self)
        self.class_token.setToolTip("prepend a [CLS] token, as ViT does")
        self.info = QLabel("", self)
        self.info.setWordWrap(True)
        self.view.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        form = QFormLayout()
        form.addRow("patch size", self.patch)
        form.addRow("fit", self.policy)
        size = QHBoxLayout()
        size.addWidget(self.height_spin)
        size.addWidget(QLabel("×", self))
        size.addWidget(self.width_spin)
        size.addWidget(self.auto_size)
        form.addRow("H × W", size)  # short: the sidebar stays narrow
        top = QHBoxLayout()
        top.addWidget(self.load_button)
        top.addWidget(self.class_token)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addLayout(form)
        layout.addWidget(self.info)
        layout.addWidget(self.view, 1)
        self.load_button.clicked.connect(self._load)
        self.patch.valueChanged.connect(self._on_patch)
        self.policy.activated.connect(lambda i: self._run(SetPatch(self.name, policy=IMAGE_POLICIES[i])))
        self.auto_size.toggled.connect(self._on_auto)
        self.height_spin.valueChanged.connect(lambda _v: self._on_size())
        self.width_spin.valueChanged.connect(lambda _v: self._on_size())
        self.class_token.toggled.connect(lambda on: self._run(SetPatch(self.name, class_token=on)))
        self.view.patch_hovered.connect(self._on_patch_hovered)
        self.view.patch_clicked.connect(self._on_patch_clicked)

    def _widgets(self):
        return (self.patch, self.policy, self.auto_size, self.height_spin, self.width_spin, self.class_token)

    def show_source(self, src: ImageSource) -> None:
        self.name = src.name
        for w in self._widgets():
            w.blockSignals(True)
        P = src.patch
        self.patch.setValue(P)
        self.policy.setCurrentIndex(IMAGE_POLICIES.index(src.policy))
        self.auto_size.setChecked(src.target is None)
        for spin in (self.height_spin, self.width_spin):
            spin.setSingleStep(P)
            spin.setEnabled(src.target is not None)
        self.class_token.setChecked(src.class_token)
        try:
            prepared, patches = image_patches(src)
        except (SourceError, ValueError) as exc:
            self.info.setText(f"cannot patch this image: {exc}")
            for w in self._widgets():
                w.blockSignals(False)
            return
        H, W = prepared.shape[:2]
        self.height_spin.setValue(src.target[0] if src.target else H)
        self.width_spin.setValue(src.target[1] if src.target else W)
        for w in self._widgets():
            w.blockSignals(False)
        gh, gw = patches.grid
        n = gh * gw + int(src.class_token)
        self.info.setText(f"{W} × {H} px → {gh} × {gw} patches of {P} px = {n:,} tokens"
                          + (" (with [CLS])" if src.class_token else ""))
        self.view.set_image(prepared, patches.grid, P)
        self.show_selection()

    def _run(self, cmd) -> None:
        if self.name is not None and not self.ctx.execute(cmd):
            self.panel.refresh_editor()

    def _on_patch(self, P: int) -> None:
        src = self.ctx.session.state.source(self.name)
        target = src.target
        if target is not None:  # keep the size, rounded to the new patch
            target = (max(P, round(target[0] / P) * P), max(P, round(target[1] / P) * P))
        self._run(SetPatch(self.name, patch=P, target=target))

    def _on_auto(self, auto: bool) -> None:
        src = self.ctx.session.state.source(self.name)
        if auto:
            self._run(SetPatch(self.name, target=None))
            return
        from attnviz.sources.image import load_image

        try:
            rgb = load_image(src.data)
        except SourceError as exc:
            self.ctx.report(str(exc), "error")
            return
        self._run(SetPatch(self.name, target=default_target(rgb.shape[0], rgb.shape[1], src.patch)))

    def _on_size(self) -> None:
        src = self.ctx.session.state.source(self.name)
        if src.target is None:
            return
        target = (self.height_spin.value(), self.width_spin.value())
        if target != src.target:
            self._run(SetPatch(self.name, target=target))

    def _load(self) -> None:
        path = self.panel.prompts.open_file(self, "Load image", IMAGE_FILTER)
        if not path:
            return
        try:
            new = image_source_from_file(self.ctx.session.state, path)
        except (SourceError, ValueError) as exc:
            self.ctx.report(f"cannot load {Path(path).name}: {exc}", "error")
            return
        self._run(SetImage(self.name, new.data))

    def _token_of(self, patch: int) -> int | None:
        off = query_offset(self.ctx.response, self.name)
        src = self.ctx.session.state.source(self.name)
        return None if off is None else off + int(src.class_token) + patch

    def _on_patch_hovered(self, patch: int) -> None:
        if patch >= 0:
            t = self._token_of(patch)
            if t is not None:
                self.view.readout.setText(f"{self.view.readout.text()} · token {t}")

    def _on_patch_clicked(self, patch: int) -> None:
        t = self._token_of(patch)
        if t is not None:
            self.ctx.set_view(query=t)

    def show_selection(self) -> None:
        resp, q = self.ctx.response, self.ctx.session.state.view.query
        tok = resp.query_tokens[q] if resp is not None and resp.ok and isinstance(q, int) and q < resp.Tq else None
        if tok is not None and tok.source == self.name and tok.patch is not None:
            self.view.set_highlight(tok.patch)
        else:
            self.view.set_highlight(None)


class CustomEditor(QWidget):
    """Count, generator, seed and scale of a custom token block."""

    def __init__(self, panel: "InputsPanel"):
        super().__init__(panel)
        self.panel = panel
        self.ctx = panel.ctx
        self.name: str | None = None
        self.count = _spin(1, MAX_TOKENS, "number of tokens in the block")
        self.generator = QComboBox(self)
        self.generator.addItems(list(CUSTOM_GENERATORS))
        self.generator.setToolTip("zeros · seeded Gaussian noise · values loaded from a .npy/.csv file")
        self.seed = _spin(0, 2**31 - 1, "noise seed")
        self.scale = QDoubleSpinBox(self)
        self.scale.setRange(0.0, 1000.0)
        self.scale.setDecimals(3)
        self.scale.setSingleStep(0.1)
        self.scale.setKeyboardTracking(False)
        self.scale.setToolTip("noise standard deviation")
        self.load_button = QPushButton("Load values…", self)
        self.info = QLabel("", self)
        self.info.setWordWrap(True)
        form = QFormLayout()
        form.addRow("tokens", self.count)
        form.addRow("generator", self.generator)
        form.addRow("seed", self.seed)
        form.addRow("scale", self.scale)
        form.addRow("", self.load_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addWidget(self.info)
        layout.addStretch(1)
        self.count.valueChanged.connect(lambda v: self._run(SetCustomBlock(self.name, count=v)))
        self.generator.activated.connect(self._on_generator)
        self.seed.valueChanged.connect(lambda v: self._run(SetCustomBlock(self.name, seed=v)))
        self.scale.valueChanged.connect(lambda v: self._run(SetCustomBlock(self.name, scale=v)))
        self.load_button.clicked.connect(self._load)

    def show_source(self, src: CustomSource) -> None:
        self.name = src.name
        ws = (self.count, self.generator, self.seed, self.scale)
        for w in ws:
            w.blockSignals(True)
        self.count.setValue(src.count)
        self.generator.setCurrentIndex(CUSTOM_GENERATORS.index(src.generator))
        self.seed.setValue(src.seed)
        self.scale.setValue(src.scale)
        file = src.generator == "file"
        self.count.setEnabled(not file)
        self.seed.setEnabled(src.generator == "noise")
        self.scale.setEnabled(src.generator == "noise")
        for w in ws:
            w.blockSignals(False)
        shape = "" if src.values is None else f" · values {src.values.shape[0]} × {src.values.shape[1]}"
        self.info.setText(f"{src.count} tokens labelled {src.name}0 … {src.name}{src.count - 1}{shape}")

    def _run(self, cmd) -> None:
        if self.name is not None and not self.ctx.execute(cmd):
            self.panel.refresh_editor()

    def _on_generator(self, index: int) -> None:
        gen = CUSTOM_GENERATORS[index]
        if gen == "file":
            self._load()
            self.panel.refresh_editor()
            return
        self._run(SetCustomBlock(self.name, generator=gen, values=None))

    def _load(self) -> None:
        path = self.panel.prompts.open_file(self, "Load token values", VALUES_FILTER)
        if not path:
            return
        from attnviz.sources.custom import load_block_values

        try:
            values = load_block_values(path, self.ctx.session.state.model.d_model)  # (count, d_model)
        except (SourceError, ValueError) as exc:
            self.ctx.report(f"cannot load {Path(path).name}: {exc}", "error")
            return
        self._run(SetCustomBlock(self.name, count=int(values.shape[0]), generator="file", values=values))


class ToyEditor(QWidget):
    """Read-only view of hand-set tokens: label and embedding row."""

    def __init__(self, panel: "InputsPanel"):
        super().__init__(panel)
        self.table = QTableWidget(self)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setTabKeyNavigation(False)  # Tab leaves the table (it cycled its cells for ever)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        note = QLabel("Hand-set tokens of a worked example: each row is the token's embedding.", self)
        note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(note)
        layout.addWidget(self.table, 1)

    def show_source(self, src: ToySource) -> None:
        emb = src.embeddings.array
        self.table.setRowCount(len(src.labels))
        self.table.setColumnCount(emb.shape[1])
        self.table.setHorizontalHeaderLabels([f"x{j}" for j in range(emb.shape[1])])
        self.table.setVerticalHeaderLabels(list(src.labels))
        for i in range(emb.shape[0]):
            for j in range(emb.shape[1]):
                item = QTableWidgetItem(f"{emb[i, j]:.4g}")
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, j, item)


class SourceTree(QTreeWidget):
    """The sources list; dragging a row onto another place asks for one move (``source_dropped``) and
    leaves the rows to be rebuilt from the session."""

    source_dropped = Signal(str, int)  # (source name, its index after the move)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setDragEnabled(True)
        self.setAcceptDrops(True)
        self.setDropIndicatorShown(True)
        self.setDragDropMode(QTreeWidget.DragDropMode.InternalMove)
        self.setDefaultDropAction(Qt.DropAction.MoveAction)

    def target_of(self, pos: QPoint) -> tuple[int | None, bool]:
        """(row under ``pos`` or None below the rows, True when in the row's lower half)."""
        item = self.itemAt(pos)
        if item is None:
            return None, True
        rect = self.visualItemRect(item)
        return self.indexOfTopLevelItem(item), pos.y() >= rect.center().y()

    def dropEvent(self, ev) -> None:  # noqa: N802 - Qt's name
        # InternalMove: Qt lets only drags that started in this list get this far (drag enter checks it)
        item = self.currentItem()
        if item is None:
            ev.ignore()
            return
        over, below = self.target_of(ev.position().toPoint())
        index = drop_target(self.indexOfTopLevelItem(item), over, below, self.topLevelItemCount())
        # not a MoveAction: the view must not remove the dragged row itself (the session's order is the
        # truth and the rows are rebuilt from it); a drop may only change to IgnoreAction or an offered one
        ev.setDropAction(Qt.DropAction.IgnoreAction)
        ev.accept()
        self.stopAutoScroll()
        self.setState(QTreeWidget.State.NoState)
        self.viewport().update()
        if index is not None:
            name = item.data(0, Qt.ItemDataRole.UserRole)
            QTimer.singleShot(0, lambda: self.source_dropped.emit(name, index))  # after the drag machinery


class InputsPanel(QWidget):
    """Sources list plus the selected source's editor."""

    def __init__(self, ctx, parent=None, prompts: Prompts | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.prompts = prompts or Prompts()
        self.tree = SourceTree(self)
        self.tree.setHeaderLabels(["source", "kind", "tokens", "role"])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setEditTriggers(QTreeWidget.EditTrigger.NoEditTriggers)
        self.tree.header().setStretchLastSection(False)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.tree.header().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setSectionResizeMode(ROLE_COLUMN, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.setToolTip("double-click a name to rename the source; drag a row to move it in the sequence")
        self.role_combos: dict[str, QComboBox] = {}
        self._last_cross: CrossConfig | None = None  # restored when switching back to cross-attention

        self.attention = QComboBox(self)
        self.attention.addItems(["self-attention", "cross-attention"])
        self.attention.setToolTip("self: every token attends to every token of the sequence · cross: the "
                                  "sources with role 'queries' attend to the sources with role 'keys/values'")
        self.swap_button = QToolButton(self)
        self.swap_button.setText("Swap sides")
        self.swap_button.setToolTip("the sources giving queries give keys/values and the other way round")
        self.cross_info = QLabel("", self)
        self.cross_info.setWordWrap(True)
        self.cross_info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

        self.add_button = QToolButton(self)
        self.add_button.setText("Add ▾")
        self.add_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        add_menu = QMenu(self.add_button)
        add_menu.addAction("Text", self.add_text)
        add_menu.addAction("Image…", self.add_image_dialog)
        add_menu.addAction("Custom block", self.add_block)
        self.add_button.setMenu(add_menu)
        self.remove_button = QToolButton(self)
        self.remove_button.setText("Remove")
        self.up_button = QToolButton(self)
        self.up_button.setText("▲")
        self.up_button.setToolTip("move the source earlier in the sequence")
        self.down_button = QToolButton(self)
        self.down_button.setText("▼")
        self.down_button.setToolTip("move the source later in the sequence")
        self.colour_button = QToolButton(self)
        self.colour_button.setText("Colour…")
        buttons = QHBoxLayout()
        buttons.setSpacing(4)
        for b in (self.add_button, self.remove_button, self.up_button, self.down_button, self.colour_button):
            buttons.addWidget(b)
        buttons.addStretch(1)

        self.text_editor = TextEditor(self)
        self.image_editor = ImageEditor(self)
        self.custom_editor = CustomEditor(self)
        self.toy_editor = ToyEditor(self)
        self.empty = QLabel("Add a source: text, an image or a block of custom tokens.", self)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.editors = QStackedWidget(self)
        for w in (self.empty, self.text_editor, self.image_editor, self.custom_editor, self.toy_editor):
            self.editors.addWidget(w)
        self.editor_title = QLabel("", self)  # which source the editor below belongs to
        self.editor_title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        editor_box = QWidget(self)
        el = QVBoxLayout(editor_box)
        el.setContentsMargins(0, 4, 0, 0)
        el.setSpacing(4)
        el.addWidget(self.editor_title)
        el.addWidget(self.editors, 1)

        att = QHBoxLayout()
        att.addWidget(QLabel("attention", self))
        att.addWidget(self.attention)
        att.addWidget(self.swap_button)
        att.addStretch(1)
        top = QWidget(self)
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.addLayout(buttons)
        tl.addWidget(self.tree, 1)
        tl.addLayout(att)
        tl.addWidget(self.cross_info)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(top)
        split.addWidget(editor_box)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 3)
        row_h = max(self.tree.fontMetrics().height() + 8, self.attention.sizeHint().height())
        self.tree.setMinimumHeight(self.tree.header().sizeHint().height() + 4 * row_h + 4)  # four sources show
        split.setSizes([230, 400])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(split)

        self.remove_button.clicked.connect(lambda: self._with_current(lambda n: self.ctx.execute(RemoveSource(n))))
        self.up_button.clicked.connect(lambda: self.move_current(-1))
        self.down_button.clicked.connect(lambda: self.move_current(+1))
        self.colour_button.clicked.connect(self._recolour_dialog)
        self.tree.currentItemChanged.connect(lambda *_: self.refresh_editor())
        self.tree.itemDoubleClicked.connect(self._on_double_click)
        self.tree.itemChanged.connect(self._on_item_changed)
        self.tree.source_dropped.connect(self.move_source)
        self.attention.activated.connect(lambda i: self.set_attention(ATTENTION_KINDS[i]))
        self.swap_button.clicked.connect(self.swap_sides)
        ctx.session.events.sources.connect(self._on_sources_changed)
        ctx.session.events.cross.connect(self._on_cross_changed)
        ctx.session.events.tokenizer.connect(lambda *_: self.refresh_editor())
        ctx.session.events.view.connect(self._on_view_changed)
        ctx.response_changed.connect(self._on_response)
        self._on_sources_changed(ctx.session.state.sources)

    # ------------------------------------------------------------------ selection
    def current_name(self) -> str | None:
        item = self.tree.currentItem()
        return None if item is None else item.data(0, Qt.ItemDataRole.UserRole)

    def select_source(self, name: str) -> None:
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            if item.data(0, Qt.ItemDataRole.UserRole) == name:
                self.tree.setCurrentItem(item)
                return

    def _with_current(self, fn) -> None:
        name = self.current_name()
        if name is None:
            self.ctx.report("select a source first", "info")
            return
        fn(name)

    # ------------------------------------------------------------------ edits
    def write_own_text(self) -> bool:
        """The first step of a new session: the session's first text source selected with all its text,
        so what is typed replaces it; a new, empty text source when there is none."""
        text = next((s for s in self.ctx.session.state.sources if isinstance(s, TextSource)), None)
        if text is None:
            return self.add_text()
        self.select_source(text.name)
        edit = self.text_editor.edit
        edit.selectAll()
        edit.setFocus(Qt.FocusReason.OtherFocusReason)
        return True

    def add_text(self, text: str = "") -> bool:
        state = self.ctx.session.state
        src = TextSource(unique_name(state, "text"), next_colour(state), text)
        ok = self.ctx.execute(AddSource(src, label="Add text"))
        if ok:
            self.select_source(src.name)
            self.text_editor.edit.setFocus()
        return ok

    def add_block(self) -> bool:
        state = self.ctx.session.state
        src = CustomSource(unique_name(state, "block"), next_colour(state), count=4, generator="noise")
        ok = self.ctx.execute(AddSource(src, label="Add custom block"))
        if ok:
            self.select_source(src.name)
        return ok

    def add_image_dialog(self) -> bool:
        path = self.prompts.open_file(self, "Add image", IMAGE_FILTER)
        return self.add_image(path) if path else False

    def add_image(self, path) -> bool:
        try:
            src = image_source_from_file(self.ctx.session.state, path)
        except (SourceError, ValueError) as exc:
            self.ctx.report(f"cannot add {Path(path).name}: {exc}", "error")
            return False
        ok = self.ctx.execute(AddSource(src, label="Add image"))
        if ok:
            self.select_source(src.name)
        return ok

    def rename(self, name: str, new_name: str) -> bool:
        new_name = new_name.strip()
        if not new_name or new_name == name:
            self._on_sources_changed(self.ctx.session.state.sources)
            return False
        ok = self.ctx.execute(RenameSource(name, new_name))
        if not ok:
            self._on_sources_changed(self.ctx.session.state.sources)
        else:
            self.select_source(new_name)
        return ok

    def recolour(self, name: str, colour: str) -> bool:
        return self.ctx.execute(RecolourSource(name, colour))

    def move_source(self, name: str, index: int) -> bool:
        """Move source ``name`` to ``index`` (a drop in the list): one MoveSource command."""
        state = self.ctx.session.state
        if name not in {s.name for s in state.sources} or state.index_of(name) == index:
            return False
        ok = self.ctx.execute(MoveSource(name, index))
        if ok:
            self.select_source(name)
        return ok

    def set_attention(self, kind: str) -> bool:
        """Switch to "self"- or "cross"-attention (cross: the last roles used, or the first source's
        tokens as queries over the others)."""
        state = self.ctx.session.state
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"attention is 'self' or 'cross', got {kind!r}")
        if (kind == "cross") == (state.cross is not None):
            return False
        if kind == "self":
            self._last_cross = state.cross
            ok = self.ctx.execute(SetCross(None, label="Use self-attention"))
        else:
            names = {s.name for s in state.sources}
            last = self._last_cross
            try:
                cross = last if last is not None and set(last.queries + last.keys) <= names else default_cross(state)
            except ValueError as exc:
                self.ctx.report(str(exc), "info")
                ok = False
            else:
                ok = self.ctx.execute(SetCross(cross, label="Use cross-attention"))
        if not ok:
            self._on_cross_changed(self.ctx.session.state.cross)
        return ok

    def swap_sides(self) -> bool:
        """Cross-attention the other way round: queries become keys/values and keys/values queries."""
        cross = self.ctx.session.state.cross
        if cross is None:
            return False
        return self.ctx.execute(SetCross(CrossConfig(cross.keys, cross.queries), label="Swap cross-attention sides"))

    def set_role(self, name: str, role: str) -> bool:
        """Give source ``name`` a cross-attention role (one of ROLES); refused (and reported) when no
        source would be left on one side."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
        state = self.ctx.session.state
        roles = source_roles(state)
        if roles.get(name) == role or state.cross is None:
            return False
        roles[name] = role
        try:
            cross = cross_from_roles(state, roles)
        except ValueError as exc:
            self.ctx.report(str(exc), "error")
            self._on_cross_changed(state.cross)
            return False
        ok = self.ctx.execute(SetCross(cross, label="Change cross-attention roles"))
        if not ok:
            self._on_cross_changed(self.ctx.session.state.cross)
        return ok

    def move_current(self, step: int) -> bool:
        name = self.current_name()
        if name is None:
            return False
        i = self.ctx.session.state.index_of(name)
        j = i + step
        if not 0 <= j < len(self.ctx.session.state.sources):
            return False
        ok = self.ctx.execute(MoveSource(name, j))
        if ok:
            self.select_source(name)
        return ok

    def _recolour_dialog(self) -> None:
        name = self.current_name()
        if name is None:
            return
        colour = self.prompts.colour(self, self.ctx.session.state.source(name).color)
        if colour:
            self.recolour(name, colour)

    def _on_double_click(self, item, column: int) -> None:
        if column == 0:
            self.tree.editItem(item, 0)

    def _on_item_changed(self, item, column: int) -> None:
        if column == 0:
            old = item.data(0, Qt.ItemDataRole.UserRole)
            if item.text(0) != old:
                self.rename(old, item.text(0))

    # ------------------------------------------------------------------ session -> widgets
    def _token_counts(self) -> dict[str, int]:
        resp = self.ctx.response
        if resp is None or not resp.ok:
            return {}
        counts = {s.name: len(s) for s in resp.query_segments}
        counts.update({s.name: len(s) for s in resp.key_segments})
        return counts

    def _on_sources_changed(self, sources) -> None:
        current = self.current_name()
        row = self.tree.indexOfTopLevelItem(self.tree.currentItem()) if self.tree.currentItem() else 0
        counts = self._token_counts()
        self.tree.blockSignals(True)
        self.role_combos = {}
        self.tree.clear()
        for s in sources:
            item = QTreeWidgetItem([s.name, s.kind, str(counts.get(s.name, "…"))])
            item.setData(0, Qt.ItemDataRole.UserRole, s.name)
            item.setIcon(0, _swatch(s.color))
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
            item.setTextAlignment(2, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.tree.addTopLevelItem(item)
        names = [s.name for s in sources]
        if current in names:
            row = names.index(current)
        if names:
            self.tree.setCurrentItem(self.tree.topLevelItem(min(max(row, 0), len(names) - 1)))
        self.tree.blockSignals(False)
        for b in (self.remove_button, self.up_button, self.down_button, self.colour_button):
            b.setEnabled(bool(names))
        self._on_cross_changed(self.ctx.session.state.cross)
        self.refresh_editor()

    def _on_cross_changed(self, cross) -> None:
        """Show the attention kind, the role column (cross only) and which sources make each side."""
        state = self.ctx.session.state
        self.attention.blockSignals(True)
        self.attention.setCurrentIndex(1 if cross is not None else 0)
        self.attention.blockSignals(False)
        self.tree.setColumnHidden(ROLE_COLUMN, cross is None)
        self.swap_button.setVisible(cross is not None)
        roles = source_roles(state)
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            name = item.data(0, Qt.ItemDataRole.UserRole)
            combo = self.role_combos.get(name)
            if cross is None:
                continue
            if combo is None or self.tree.itemWidget(item, ROLE_COLUMN) is not combo:
                combo = QComboBox()
                combo.addItems(list(ROLES))
                for j, r in enumerate(ROLES):
                    combo.setItemData(j, ROLE_TIPS[r], Qt.ItemDataRole.ToolTipRole)
                combo.setToolTip(f"role of {name!r} in the cross-attention")
                combo.activated.connect(lambda j, n=name: self.set_role(n, ROLES[j]))
                self.tree.setItemWidget(item, ROLE_COLUMN, combo)
                self.role_combos[name] = combo
            combo.blockSignals(True)
            combo.setCurrentIndex(ROLES.index(roles.get(name, "unused")))
            combo.blockSignals(False)
        live = {self.tree.topLevelItem(i).data(0, Qt.ItemDataRole.UserRole)
                for i in range(self.tree.topLevelItemCount())}
        self.role_combos = {n: c for n, c in self.role_combos.items() if n in live and cross is not None}
        if cross is None:
            self.cross_info.setText("")
            self.cross_info.setVisible(False)
        else:
            self.cross_info.setText(f"queries (rows): {', '.join(cross.queries)}\n"
                                    f"keys/values (columns): {', '.join(cross.keys)}")
            self.cross_info.setVisible(True)

    def _on_response(self, resp) -> None:
        counts = self._token_counts()
        self.tree.blockSignals(True)
        for i in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(i)
            item.setText(2, f"{counts[item.data(0, Qt.ItemDataRole.UserRole)]:,}"
                         if item.data(0, Qt.ItemDataRole.UserRole) in counts else "…")
        self.tree.blockSignals(False)
        self._on_view_changed(self.ctx.session.state.view)

    def _on_view_changed(self, _view) -> None:
        w = self.editors.currentWidget()
        if w is self.text_editor:
            self.text_editor.show_selection()
        elif w is self.image_editor:
            self.image_editor.show_selection()

    def refresh_editor(self) -> None:
        """Show the editor of the selected source with the session's values."""
        name = self.current_name()
        state = self.ctx.session.state
        if name is None or name not in {s.name for s in state.sources}:
            if self.text_editor.pending:
                self.text_editor.commit()
            self.editors.setCurrentWidget(self.empty)
            self.editor_title.setText("")
            return
        src = state.source(name)
        if self.text_editor.name not in (None, name) and self.text_editor.pending:
            self.text_editor.commit()  # switching away from a text being typed
            src = self.ctx.session.state.source(name)
        editor = {TextSource: self.text_editor, ImageSource: self.image_editor, CustomSource: self.custom_editor,
                  ToySource: self.toy_editor}[type(src)]
        editor.show_source(src)
        self.editors.setCurrentWidget(editor)
        kinds = {"text": "text", "image": "image", "custom": "custom token block", "toy": "hand-set tokens"}
        self.editor_title.setText(f"<b>{_html(src.name)}</b> · {kinds.get(src.kind, src.kind)}")


PANEL = PanelSpec(id="inputs", title="Inputs", factory=InputsPanel, area="left", order=10)
