"""The inputs panel: the list of token sources (text, image, custom block, hand-set tokens), the choice
of self- or cross-attention (in cross mode each source is queries, keys/values, both or unused), and
an editor for the selected source. Typing is committed after a short pause, as one undo step per
typing run, so that every keystroke does not re-tokenise and recompute. Every change is a command
from :mod:`attnviz.model.commands` through ``ctx.execute``.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QHeaderView, QLabel, QMenu, QSizePolicy, QSplitter,
                               QStackedWidget, QToolButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from attnviz.model.commands import (AddSource, MoveSource, RecolourSource, RemoveSource, RenameSource, ReplaceSource,
                                    SetCross)
from attnviz.model.source_list import ROLES, cross_from_roles, default_cross, source_roles
from attnviz.model.state import CrossConfig, CustomSource, ImageSource, TextSource, ToySource
from attnviz.model.source_files import IMAGE_FILTER, image_source_from_file, next_colour, unique_name
from attnviz.sources.errors import SourceError
from attnviz.ui.file_actions import Prompts
from attnviz.ui.source_editors.common import TEXT_COMMIT_MS, html_text, swatch  # noqa: F401 - TEXT_COMMIT_MS re-exported
from attnviz.ui.source_editors.custom_editor import CustomEditor
from attnviz.ui.source_editors.image_editor import ImageEditor
from attnviz.ui.source_editors.source_tree import SourceTree
from attnviz.ui.source_editors.text_editor import TextEditor
from attnviz.ui.source_editors.toy_editor import ToyEditor
from attnviz.ui.messages import Level

ROLE_TIPS = {"queries": "its tokens are the query rows", "keys/values": "its tokens are the key/value columns",
             "both": "its tokens are queries and keys/values", "unused": "left out of the attention"}
ATTENTION_KINDS = ("self", "cross")
ROLE_COLUMN = 3


class InputsPanel(QWidget):
    """Sources list plus the selected source's editor."""

    def __init__(self, ctx, parent=None, prompts: Prompts | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.prompts = prompts or Prompts()
        self.tree = SourceTree(self)
        self.tree.setHeaderLabels(["source", "kind", "tokens", "role"])
        self.tree.setRootIsDecorated(False)
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
            self.ctx.report(Level.INFO, "select a source first")
            return
        fn(name)

    # ------------------------------------------------------------------ edits
    def write_own_text(self) -> bool:
        """The first step of a new session, one action: the session's text selected whole in its editor
        (focused), so what is typed replaces it. That text is the selected text source, else the first;
        a session of hand-set tokens alone (one toy source, the river-bank demo) has them replaced by a
        text source of the same words, in one undoable step (Ctrl+Z brings the hand-set tokens back);
        only a session with neither gets a new, empty text source beside its others."""
        state = self.ctx.session.state
        texts = [s for s in state.sources if isinstance(s, TextSource)]
        current = self.current_name()
        text = next((s for s in texts if s.name == current), texts[0] if texts else None)
        if text is None and len(state.sources) == 1 and isinstance(state.sources[0], ToySource):
            toy = state.sources[0]
            words = " ".join(label.replace("␣", " ").strip() for label in toy.labels).strip()
            text = TextSource(unique_name(state, "text"), toy.color, words)
            if not self.ctx.execute(ReplaceSource(toy.name, text, label="Type your own sentence")):
                return False
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
            self.ctx.report(Level.ERROR, f"cannot add {Path(path).name}: {exc}")
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
                self.ctx.report(Level.INFO, str(exc))
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
            self.ctx.report(Level.ERROR, str(exc))
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
            item.setIcon(0, swatch(s.color))
            item.setToolTip(0, f"{s.name}\n{s.kind} source · double-click to rename, drag to move it in the sequence")
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
            if combo is None or self.tree.itemWidget(item, ROLE_COLUMN) is not combo.parentWidget():
                combo = QComboBox()
                combo.addItems(list(ROLES))
                for j, r in enumerate(ROLES):
                    combo.setItemData(j, ROLE_TIPS[r], Qt.ItemDataRole.ToolTipRole)
                combo.setToolTip(f"role of {name!r} in the cross-attention")
                combo.activated.connect(lambda j, n=name: self.set_role(n, ROLES[j]))
                holder = QWidget()  # the combo keeps its height in a row two names' lines tall
                hl = QVBoxLayout(holder)
                hl.setContentsMargins(0, 0, 0, 0)
                hl.addWidget(combo, 0, Qt.AlignmentFlag.AlignVCenter)
                self.tree.setItemWidget(item, ROLE_COLUMN, holder)
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
        self.editor_title.setText(f"<b>{html_text(src.name)}</b> · {kinds.get(src.kind, src.kind)}")
