"""The VLA roles of a session's segments, for the vision-language-action preset.
:func:`choose_vla_roles` gives every segment the role the person chose before, else one from its
source's kind or a custom block's name, and asks in a :class:`RoleDialog` only for segments still
without one. The answer becomes the preset's ``roles`` parameter, remembered in the design (and so
in the saved session).
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtGui import QColor, QPixmap
from PySide6.QtWidgets import QComboBox, QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from attnviz.model.mask.design import VLA_ROLES
from attnviz.model.mask.presets import infer_vla_roles
from attnviz.ui.access_keys import set_standard_keys

ROLE_TEXT = {"I": "image (I)", "P": "prompt / state (P)", "A": "FAST action tokens (A)",
             "E": "action expert (E)"}
CHOOSE = "choose a role…"


class RoleRow:
    """One segment offered in the dialog."""

    __slots__ = ("name", "colour", "kind", "role")

    def __init__(self, name: str, colour: str, kind: str, role: str | None):
        self.name, self.colour, self.kind, self.role = name, colour, kind, role


class RoleDialog(QDialog):
    """Maps each segment to a VLA role; OK is enabled once every segment has one."""

    def __init__(self, rows: list[RoleRow], parent=None):
        super().__init__(parent)
        self.setWindowTitle("VLA roles of the segments")
        self.combos: dict[str, QComboBox] = {}
        intro = QLabel("The vision-language-action mask needs to know what each segment is. Image and prompt "
                       "tokens see each other; FAST action tokens see them and earlier actions; the action "
                       "expert sees them and itself.", self)
        intro.setWordWrap(True)
        form = QFormLayout()
        for n, row in enumerate(rows):
            combo = QComboBox(self)
            if row.role is None:
                combo.addItem(CHOOSE, None)
            for code in VLA_ROLES:
                combo.addItem(ROLE_TEXT[code], code)
            combo.setCurrentIndex(combo.findData(row.role) if row.role is not None else 0)
            combo.currentIndexChanged.connect(self._update_ok)
            self.combos[row.name] = combo
            form.addRow(self._segment_label(row, combo, n), combo)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel,
                                        self)
        set_standard_keys(self.buttons)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.buttons)
        self.setMinimumWidth(440)
        self._update_ok()

    def _segment_label(self, row: RoleRow, combo: QComboBox, n: int) -> QWidget:
        """The segment's colour and name; the first nine rows get Alt+1..9 as access keys to their role."""
        w = QWidget(self)
        h = QHBoxLayout(w)
        h.setContentsMargins(0, 0, 0, 0)
        swatch = QPixmap(12, 12)
        swatch.fill(QColor(row.colour))
        icon = QLabel(w)
        icon.setPixmap(swatch)
        h.addWidget(icon)
        name = row.name.replace("&", "&&") + (f"  ({row.kind})" if row.kind else "")
        label = QLabel((f"&{n + 1}  " if n < 9 else "") + name, w)
        label.setBuddy(combo)
        h.addWidget(label, 1)
        return w

    def _update_ok(self) -> None:
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(self.roles() is not None)

    def set_role(self, name: str, role: str) -> None:
        combo = self.combos[name]
        combo.setCurrentIndex(combo.findData(role))

    def roles(self) -> dict[str, str] | None:
        """Segment name -> role, or None while a segment has none."""
        out = {}
        for name, combo in self.combos.items():
            if combo.currentData() is None:
                return None
            out[name] = combo.currentData()
        return out


def ask_in_dialog(parent, rows: list[RoleRow]) -> dict[str, str] | None:
    """Show a modal RoleDialog; the roles chosen, or None when cancelled."""
    dlg = RoleDialog(rows, parent)
    return dlg.roles() if dlg.exec() == QDialog.DialogCode.Accepted else None


def remembered_roles(design) -> dict[str, str]:
    """Roles the design remembers, and those of VLA preset terms combined onto it."""
    roles = {}
    for term in design.presets:
        if term.name == "vla":
            roles.update(term.params.get("roles") or {})
    roles.update(design.role_map())
    return roles


def choose_vla_roles(parent, state, q_segments, k_segments, design,
                     ask: Callable[[object, list[RoleRow]], dict | None] = ask_in_dialog,
                     always_ask: bool = False) -> dict[str, str] | None:
    """Every segment's VLA role, asking the person (``ask``) only for the ones nothing else places
    (for every segment, the inferred roles preselected, with ``always_ask``); None when they cancel."""
    segments = list(q_segments) + list(k_segments or ())
    roles, unsure = infer_vla_roles(segments, state.sources, remembered_roles(design))
    if not unsure and not always_ask:
        return roles
    kinds = {s.name: s.kind for s in state.sources}
    rows, seen = [], set()
    for seg in segments:
        if seg.name not in seen:
            seen.add(seg.name)
            rows.append(RoleRow(seg.name, seg.color, kinds.get(seg.name, ""), roles.get(seg.name)))
    answer = ask(parent, rows)
    if answer is None:
        return None
    return {**roles, **answer}
