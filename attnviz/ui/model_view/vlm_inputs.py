"""VlmInputs: the Pretrained panel's input row for a vision-language(-action) model: the image (the bundled
images, the session's, or one opened from disk), a second image for a family that reads several, the
prompt (one line, ``\\n`` for a line break; pre-filled with the family's example, its hint as the
tooltip) and, on a line under them, a field per option the family's run takes (a suffix; a robot state,
noise seed and time).
Enter in any field runs the model. The texts are parsed by :func:`attnviz.checkpoints.study.parse_options`
on the worker, so a wrong one comes back as the panel's message line.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from attnviz.checkpoints.study import OPTION_LABELS, default_options, prompt_from_field

NO_IMAGE = "\x00no-image"  # data of the second chooser's "none" entry
OPTION_WIDTHS = {"suffix": 140, "state": 110, "noise_seed": 46, "time": 46}


class VlmInputs(QWidget):
    """Image chooser(s), prompt and the family's options."""

    run_requested = Signal()  # Enter in a field

    def __init__(self, parent=None):
        super().__init__(parent)
        self.image_combo = QComboBox(self)
        self.image_combo.setToolTip("the image the model sees")
        self.image_combo.setMinimumContentsLength(12)
        self.image_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.second_combo = QComboBox(self)
        self.second_combo.setToolTip("a second image, for a model that reads several in one prompt")
        self.second_combo.setMinimumContentsLength(9)
        self.second_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.second_label = QLabel("and", self)
        self.prompt_edit = QLineEdit(self)
        self.prompt_edit.setMinimumWidth(120)
        self.prompt_edit.setToolTip("the prompt (\\n writes a line break); Enter runs the model")
        first = QHBoxLayout()
        first.setContentsMargins(0, 0, 0, 0)
        first.addWidget(QLabel("image", self))
        first.addWidget(self.image_combo)
        first.addWidget(self.second_label)
        first.addWidget(self.second_combo)
        first.addWidget(QLabel("prompt", self))
        first.addWidget(self.prompt_edit, 1)
        self.options_row = QWidget(self)  # the family's options on a line of their own (hidden without any)
        self.row = QHBoxLayout(self.options_row)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.row.addStretch(1)
        self.options_row.setVisible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(first)
        layout.addWidget(self.options_row)
        self.fields: dict[str, QLineEdit] = {}
        self._labels: list[QLabel] = []
        self.prompt_edit.returnPressed.connect(self.run_requested.emit)
        self.set_multi(False)

    def configure(self, ckpt, prompt_field: str) -> None:
        """Set up for ``ckpt``: its prompt hint, a field per option a person sets, the second image if it reads
        several."""
        hint = getattr(ckpt, "prompt_hint", "")
        self.prompt_edit.setToolTip(f"the prompt: {hint} (\\n writes a line break); Enter runs the model"
                                    if hint else self.prompt_edit.toolTip())
        self.prompt_edit.setText(prompt_field)
        for w in list(self.fields.values()) + self._labels:
            self.row.removeWidget(w)
            w.deleteLater()
        self.fields, self._labels = {}, []
        for name, text in default_options(ckpt).items():  # the options a person sets (not e.g. vision_attentions)
            label, tip = OPTION_LABELS[name]
            lab = QLabel(label, self.options_row)
            edit = QLineEdit(text, self.options_row)
            edit.setToolTip(tip + " (empty: the model's default)")
            edit.setMaximumWidth(OPTION_WIDTHS.get(name, 110))
            edit.returnPressed.connect(self.run_requested.emit)
            self.row.insertWidget(self.row.count() - 1, lab)
            self.row.insertWidget(self.row.count() - 1, edit)
            self.fields[name] = edit
            self._labels.append(lab)
        self.options_row.setVisible(bool(self.fields))
        self.set_multi(getattr(ckpt, "n_images", 1) > 1)

    def set_multi(self, on: bool) -> None:
        """Show the second image chooser (models that read more than one image)."""
        self.second_combo.setVisible(on)
        self.second_label.setVisible(on)
        if not on:
            self.second_combo.setCurrentIndex(0)

    def prompt(self) -> str:
        """The prompt as the model reads it (each \\n of the field a line break)."""
        return prompt_from_field(self.prompt_edit.text())

    def option_texts(self) -> dict[str, str]:
        return {name: edit.text() for name, edit in self.fields.items()}

    def set_option(self, name: str, text: str) -> None:
        if name not in self.fields:
            raise ValueError(f"this model takes no {name!r} (it takes {', '.join(self.fields) or 'no options'})")
        self.fields[name].setText(text)

    def image_keys(self) -> list:
        """Keys of the images chosen (the second one only when shown and not "none")."""
        keys = [self.image_combo.currentData()]
        second = self.second_combo.currentData()
        if not self.second_combo.isHidden() and second not in (None, NO_IMAGE):
            keys.append(second)
        return keys
