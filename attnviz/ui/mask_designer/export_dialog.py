"""MaskCodeDialog: the designer's masks-to-and-from-code window: the current mask shown read-only in the
chosen format, with Copy, Save and Import. All conversions are :mod:`attnviz.model.mask.export`; this
window only chooses files and shows results. A mask a format cannot express (painted cells as
``ar_mask``) and a file that cannot be read are messages in the window, never exceptions.
"""

from __future__ import annotations

import json
import os
import re
from typing import Callable

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QComboBox, QDialog, QFileDialog, QHBoxLayout, QLabel, QPlainTextEdit,
                               QPushButton, QVBoxLayout)

from attnviz.model.commands import EditMask, SetMask
from attnviz.model.display.mask_snapshot import Axes, Target
from attnviz.model.mask.analysis import ar_mask_from_mask
from attnviz.model.mask.commands import SetPerHead
from attnviz.model.mask.export import (design_to_json, export_mask, flex_mask_mod_source, import_mask,
                                       load_npy, seqlens_document)
from attnviz.ui.messages import Level
from attnviz.ui.widgets.message_line import ERROR_STYLE, MessageLine

#: (format key of attnviz.model.mask.export, menu text, file filter)
FORMATS = (
    ("flex", "FlexAttention mask_mod (Python)", "Python source (*.py)"),
    ("json", "Mask design JSON (rules, sub-blocks, painted cells)", "JSON (*.json)"),
    ("ar-mask", "openpi ar_mask + valid", "JSON (*.json);;NumPy archive (*.npz)"),
    ("seqlens", "xformers block-diagonal seqlens", "JSON (*.json)"),
    ("npy", "Dense bool array (.npy)", "NumPy array (*.npy)"),
)
_WHY = {
    "ar-mask": "This mask cannot be written as openpi ar_mask + valid",
    "seqlens": "This mask is not block-diagonal, so it has no xformers seqlens",
}
_FILE_NAMES = {"flex": "mask_mod.py", "json": "mask.json", "ar-mask": "ar_mask.json", "seqlens": "seqlens.json",
               "npy": "mask.npy"}  # what Save… offers after the session's name
PICTURE_MAX = 64  # masks up to this size are drawn as text in the .npy summary


def mask_picture(mask: np.ndarray) -> str:
    """Rows of ``█`` (allowed) and ``·`` (masked) for a small 2-D mask."""
    return "\n".join("".join("█" if a else "·" for a in row) for row in mask)


class MaskCodeDialog(QDialog):
    """Export / import of the session's mask; ``context()`` gives (axes, target, nh) when asked."""

    def __init__(self, ctx, context: Callable[[], tuple[Axes | None, Target, int]], parent=None):
        super().__init__(parent)
        self.setWindowTitle("Mask as code")
        self.ctx = ctx
        self._context = context
        self.format = QComboBox(self)
        for i, (key, text, _) in enumerate(FORMATS):
            self.format.addItem(f"{text}  ({key})", key)  # the name attnviz-cli mask-export --format takes
            self.format.setItemData(i, f"attnviz-cli mask-export SESSION --format {key}", Qt.ItemDataRole.ToolTipRole)
        self.code = QPlainTextEdit(self)
        self.code.setReadOnly(True)
        self.code.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.code.setFont(font)
        self.message = MessageLine(self, error_style=ERROR_STYLE, hide_empty=False)
        self.copy_button = QPushButton("&Copy", self)
        self.save_button = QPushButton("&Save…", self)
        self.import_button = QPushButton("&Import…", self)
        self.import_button.setToolTip("read a mask from .npy, the design JSON or an ar_mask file (JSON / .npz)")
        self.close_button = QPushButton("Clos&e", self)
        top = QHBoxLayout()
        label = QLabel("&Format:", self)
        label.setBuddy(self.format)
        top.addWidget(label)
        top.addWidget(self.format, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.import_button)
        buttons.addStretch(1)
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.save_button)
        buttons.addWidget(self.close_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.code, 1)
        layout.addWidget(self.message)
        layout.addLayout(buttons)
        self.resize(760, 560)
        self._ok = False
        self.format.currentIndexChanged.connect(lambda *_: self.refresh())
        self.copy_button.clicked.connect(self.copy)
        self.save_button.clicked.connect(self._ask_save)
        self.import_button.clicked.connect(self._ask_import)
        self.close_button.clicked.connect(self.close)

    # -- the current mask in a format ------------------------------------------------------------
    def current_format(self) -> str:
        return self.format.currentData()

    def set_format(self, fmt: str) -> None:
        idx = self.format.findData(fmt)
        if idx < 0:
            raise ValueError(f"unknown mask format {fmt!r}")
        self.format.setCurrentIndex(idx)
        self.refresh()

    def _args(self):
        axes, _target, nh = self._context()
        if axes is None:
            raise ValueError("the sequence is not built yet: wait for the computation, then try again")
        k = list(axes.k_segments) if axes.cross else None
        return self.ctx.session.state.mask, list(axes.q_segments), k, axes.Tq, axes.Tk, nh

    def text_for(self, fmt: str) -> str:
        """The current mask in format ``fmt`` as text (ValueError when it cannot be expressed)."""
        design, qs, ks, Tq, Tk, nh = self._args()
        if fmt == "flex":
            return flex_mask_mod_source(design, qs, ks, Tq, Tk, nh)
        if fmt == "json":
            segs = qs if ks is None else ks
            return design_to_json(design, {"q_segments": [s.to_dict() for s in qs],
                                           "k_segments": [s.to_dict() for s in segs], "Tq": Tq, "Tk": Tk})
        from attnviz.model.compute import DENSE_MASK_CELLS

        if Tq * Tk > DENSE_MASK_CELLS:
            raise ValueError(f"the {fmt} export needs the dense mask, which is not made for {Tq:,} x {Tk:,} tokens: "
                             "export the FlexAttention mask_mod or the JSON design instead")
        mask = design.compile(qs, ks, Tq, Tk, nh)
        if fmt == "ar-mask":
            ar, valid = ar_mask_from_mask(mask)
            return json.dumps({"ar_mask": [int(a) for a in ar], "valid": [bool(v) for v in valid]}) + "\n"
        if fmt == "seqlens":
            return json.dumps(seqlens_document(mask), indent=1) + "\n"
        if fmt == "npy":
            text = (f"# bool array of shape {mask.shape}: {int(mask.sum())} of {mask.size} cells allowed "
                    f"(True = the query may attend to the key)\n")
            if mask.ndim == 2 and max(mask.shape) <= PICTURE_MAX:
                text += mask_picture(mask) + "\n"
            return text
        raise ValueError(f"unknown mask format {fmt!r}")

    def refresh(self) -> bool:
        """Show the current mask in the chosen format; False (with a message) when it cannot be."""
        fmt = self.current_format()
        try:
            text = self.text_for(fmt)
        except ValueError as exc:
            why = _WHY.get(fmt, "Cannot show the mask in this format")
            self.code.setPlainText(f"# {why}:\n# {exc}\n")
            self.message.say(Level.ERROR, f"{why}: {exc}")
            self._set_ok(False)
            return False
        except RuntimeError as exc:  # the generated source failed its own check: a bug, said plainly
            self.code.setPlainText("")
            self.message.say(Level.ERROR, f"could not generate the source: {exc}")
            self._set_ok(False)
            return False
        self.code.setPlainText(text)
        self.message.clear()
        self._set_ok(True)
        return True

    def _set_ok(self, ok: bool) -> None:
        """Copy and Save… only for a mask this format expresses (Save… once wrote nothing, silently)."""
        self._ok = bool(ok)
        for b in (self.copy_button, self.save_button):
            b.setEnabled(self._ok)
            b.setToolTip("" if self._ok else "this format cannot express the mask: see the message above")

    def copy(self) -> bool:
        if not self._ok:
            return False
        QGuiApplication.clipboard().setText(self.code.toPlainText())
        self.message.say(Level.INFO, "copied to the clipboard")
        return True

    # -- files -----------------------------------------------------------------------------------
    def save_to(self, path, fmt: str | None = None) -> bool:
        """Write the current mask to ``path``; False (with a message) on failure."""
        fmt = fmt or self.current_format()
        try:
            design, qs, ks, Tq, Tk, nh = self._args()
            export_mask(design, fmt, path, qs, ks, Tq, Tk, nh)
        except ValueError as exc:
            self.message.say(Level.ERROR, f"{_WHY.get(fmt, 'Cannot export the mask')}: {exc}")
            return False
        except OSError as exc:
            self.message.say(Level.ERROR, f"cannot write {os.fspath(path)}: {exc.strerror or exc}")
            return False
        except RuntimeError as exc:
            self.message.say(Level.ERROR, f"could not generate the mask: {exc}")
            return False
        self.message.say(Level.INFO, f"wrote {os.fspath(path)}")
        return True

    def import_from(self, path, fmt: str | None = None) -> bool:
        """Read a mask file into the session (shared mask, or the edited head's); False on failure."""
        name = os.fspath(path)
        axes, target, _nh = self._context()
        try:
            if (fmt or ("npy" if name.endswith(".npy") else "")) == "npy" and axes is not None:
                shape = load_npy(path).shape
                if shape[-2:] != (axes.Tq, axes.Tk):
                    raise ValueError(f"{os.path.basename(name)} holds a {shape[-2]} x {shape[-1]} mask but the "
                                     f"sequence is {axes.Tq} x {axes.Tk} (queries x keys)")
            design = import_mask(path, fmt)
            if target.head is not None and design.heads:
                raise ValueError("this file holds one mask per head: import it as the shared mask "
                                 "(choose 'all heads' first)")
        except FileNotFoundError:
            self.message.say(Level.ERROR, f"{name}: no such file")
            return False
        except (ValueError, OSError, UnicodeDecodeError) as exc:
            self.message.say(Level.ERROR, f"cannot import {os.path.basename(name)}: {exc}")
            return False
        if target.head is None:
            ok = self.ctx.execute(SetMask(design, f"Import mask {os.path.basename(name)}"))
        else:
            ok = self.ctx.execute(EditMask(SetPerHead(target.head, design)))
        if not ok:
            self.message.say(Level.ERROR, f"cannot import {os.path.basename(name)}: the session refused it")
            return False
        self.message.say(Level.INFO, f"imported {os.path.basename(name)}")
        self.refresh()
        self.message.say(Level.INFO, f"imported {os.path.basename(name)}")
        return True

    def session_stem(self) -> str:
        """The session's name as the window's file actions offer it ("" outside a window)."""
        parent = self.parentWidget()
        files = getattr(parent.window(), "files", None) if parent is not None else None
        return files.suggested_stem() if hasattr(files, "suggested_stem") else ""

    def suggested_name(self, fmt: str) -> str:
        """The file name Save… offers for ``fmt``: the session's name and what the file holds."""
        stem = self.session_stem()
        if fmt == "flex":  # a Python module: a name it can be imported by
            stem = re.sub(r"\W", "_", stem)
        return (f"{stem}_" if stem else "") + _FILE_NAMES.get(fmt, "mask")

    def _ask_save(self) -> None:
        fmt = self.current_format()
        filt = next(f for k, _, f in FORMATS if k == fmt)
        path, _ = QFileDialog.getSaveFileName(self, "Save mask", self.suggested_name(fmt), filt)
        if path:
            self.save_to(path, fmt)

    def _ask_import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import mask", "",
                                              "Masks (*.npy *.json *.npz);;All files (*)")
        if path:
            self.import_from(path)

    @property
    def message_text(self) -> str:
        return self.message.text()
