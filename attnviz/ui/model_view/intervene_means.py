"""MeansRow: where the Intervene tab's mean ablation takes its means from: each head's mean over this input's
positions, or each head's mean output over a corpus, read from a head sweep file (``output_mean`` of
``attnviz-cli model sweep``, :func:`attnviz.corpus.sweep.read_sweep`). A file that cannot be used (not a sweep
file, another model's heads) is one line for the tab's message; the row then stays on the input's positions.
The file chosen is part of the session (``Interventions.means_file``: its path, size and the digest of its
head means); :meth:`MeansRow.restore` reads it again when a session is reopened and says plainly when it is
missing, has changed, or is another model's.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.intervention_study import check_means
from attnviz.model.state import MeansFile

SOURCES = (("positions", "over this input's positions"), ("file", "from a corpus sweep file…"))


def read_head_means(c, path) -> np.ndarray:
    """(L, nh, hd) float64 means of each head's output from the sweep file at ``path``, checked against the model
    config ``c``; CheckpointError is one line naming what is wrong."""
    from attnviz.corpus.files import StatsFileError
    from attnviz.corpus.sweep import read_sweep

    text = str(path).strip()
    if not text:
        raise CheckpointError("name the sweep file whose head means to use (attnviz-cli model sweep ... --out F)")
    try:
        found = read_sweep(Path(text).expanduser())
    except StatsFileError as exc:
        raise CheckpointError(str(exc)) from None
    except ImportError as exc:  # pyarrow is an optional dependency (the corpus extra)
        raise CheckpointError(f"reading a sweep file needs pyarrow (pip install 'attnviz[corpus]'): {exc}") from None
    try:
        return check_means(c, found.head_means)
    except CheckpointError as exc:
        raise CheckpointError(f"{Path(text).name}: {exc}") from None


def means_digest(means) -> str:
    """SHA-256 of head means (L, nh, hd): the shape as three little-endian int64, then the float64 values."""
    m = np.ascontiguousarray(np.asarray(means, dtype="<f8"))
    h = hashlib.sha256(np.asarray(m.shape, dtype="<i8").tobytes())
    h.update(m.tobytes())
    return h.hexdigest()


def fingerprint(path, means) -> MeansFile:
    """What the session keeps of a sweep file whose head means were read: its path, size and means' digest."""
    text = str(path).strip()
    try:
        size = os.stat(Path(text).expanduser()).st_size
    except OSError:
        size = 0
    return MeansFile(path=text, size=size, digest=means_digest(means))


class MeansRow(QWidget):
    """The source of the means of a mean ablation (see the module doc); shown while the mode is mean."""

    changed = Signal()  # the means in use changed (a file read, or back to the input's positions)
    refused = Signal(str)  # one line: why the file cannot be used

    def __init__(self, parent=None):
        super().__init__(parent)
        self.means: np.ndarray | None = None  # (L, nh, hd) from the file, None: the input's positions
        self.path = ""  # the file the means were read from
        self.fingerprint: MeansFile | None = None  # what the session keeps of it
        self.combo = QComboBox(self)
        for key, text in SOURCES:
            self.combo.addItem(text, key)
        self.combo.setToolTip("mean ablation: each head set to its mean over this input's positions, or to its mean "
                              "output over a corpus (a head sweep file, its output_mean column)")
        self.edit = QLineEdit(self)
        self.edit.setPlaceholderText("head sweep file (.parquet) of this model; Enter reads it")
        self.browse = QPushButton("Browse…", self)
        self.label = QLabel("means", self)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.label)
        row.addWidget(self.combo)
        row.addWidget(self.edit, 10)
        row.addWidget(self.browse)
        row.addStretch(1)  # the combo keeps its width while the file field is hidden
        self.combo.activated.connect(lambda _i: self._on_source())
        self.edit.returnPressed.connect(lambda: self.choose(self.edit.text()))
        self.browse.clicked.connect(self._ask)
        self._config = None
        self._sync()

    def set_config(self, c) -> None:
        """The model the means must fit (the tab reads the session's file again for it: :meth:`restore`)."""
        self._config = c

    def choose(self, path) -> bool:
        """Read the head means of ``path`` for the model; False (and ``refused``) when they cannot be used."""
        if self._config is None:
            self._refuse("load a model first: the sweep file's heads are checked against it")
            return False
        try:
            means = read_head_means(self._config, path)
        except CheckpointError as exc:
            self._refuse(str(exc))
            return False
        self.means, self.path = means, str(path).strip()
        self.fingerprint = fingerprint(self.path, means)
        self.edit.setText(self.path)
        self.combo.setCurrentIndex(self.combo.findData("file"))
        self._sync()
        self.changed.emit()
        return True

    def restore(self, saved: MeansFile) -> str:
        """Read the file a session names again, without a signal: "" when its means are in use, else one line
        saying why not (missing, changed since the session was saved, not a sweep file, another model's); the
        row then uses the input's positions and shows the file's path for a new choice."""
        self.means, self.path, self.fingerprint = None, "", None
        self.edit.setText(saved.path)
        name = Path(saved.path).name
        problem = ""
        if self._config is None:
            problem = f"the head means file {name} is read once a model is loaded"
        elif not Path(saved.path).expanduser().is_file():
            problem = (f"the head means file {saved.path} that the session names is missing: the heads are set to "
                       "their mean over the positions until a file is chosen again")
        else:
            try:
                means = read_head_means(self._config, saved.path)
            except CheckpointError as exc:
                problem = f"the head means file the session names cannot be used: {exc}"
            else:
                now = fingerprint(saved.path, means)
                if now != saved:
                    what = "its head means differ" if now.digest != saved.digest else \
                        f"its size is {now.size:,} bytes, was {saved.size:,}"
                    problem = (f"the head means file {name} has changed since the session was saved ({what}): the "
                               "heads are set to their mean over the positions; choose it again to use its new means")
                else:
                    self.means, self.path, self.fingerprint = means, saved.path, saved
        self.combo.setCurrentIndex(self.combo.findData("file" if not problem else "positions"))
        self._sync()
        return problem

    def use_positions(self) -> None:
        had = self.means is not None
        self.fingerprint = None
        self.means, self.path = None, ""
        self.combo.setCurrentIndex(self.combo.findData("positions"))
        self._sync()
        if had:
            self.changed.emit()

    def describe(self) -> str:
        """How the means are taken, for the tab's summary line."""
        if self.means is None:
            return "set to their mean over the positions"
        return f"set to their corpus means ({Path(self.path).name})"

    def _refuse(self, text: str) -> None:
        if self.means is not None:
            self.use_positions()
        self.refused.emit(text)

    def _on_source(self) -> None:
        if self.combo.currentData() == "positions":
            self.use_positions()
        else:
            self._sync()
            if self.edit.text().strip():
                self.choose(self.edit.text())

    def _ask(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a head sweep file", "", "Parquet (*.parquet);;All files (*)")
        if path:
            self.edit.setText(path)
            self.choose(path)

    def _sync(self) -> None:
        file = self.combo.currentData() == "file"
        self.edit.setVisible(file)
        self.browse.setVisible(file)
