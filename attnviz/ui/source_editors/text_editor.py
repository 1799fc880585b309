"""The editor of a text source: its text (committed after a typing pause, one undo step per typing run) and
its tokens as chips."""

from __future__ import annotations

from pathlib import Path
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QKeySequence, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QMenu, QPlainTextEdit, QSizePolicy, QSplitter, QTextEdit,
                               QToolButton, QVBoxLayout, QWidget)

from attnviz.model.commands import SetText, SetTokenizer
from attnviz.model.display.response_views import query_offset
from attnviz.model.segments import Segment
from attnviz.model.sequence import encode_text
from attnviz.model.state import TextSource, TokenizerSpec
from attnviz.sources.errors import SourceError
from attnviz.ui.source_editors.common import TEXT_COMMIT_MS
from attnviz.ui.theme import current_theme
from attnviz.ui.widgets.token_chips import TokenChips
from attnviz.ui.messages import Level


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

    def __init__(self, panel):
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
        # never widens the sidebar: a long line ("2,900 tokens · 13,772 characters · tokenizer: …") wraps
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.info.setWordWrap(True)
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
            self.ctx.report(Level.INFO, f"{self.name!r} is not among the query tokens of the last computation")
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
            self.ctx.report(Level.ERROR, f"cannot use {Path(path).name} as a tokenizer: {exc}")
            return
        self.ctx.execute(SetTokenizer(TokenizerSpec(text, Path(path).name)))
