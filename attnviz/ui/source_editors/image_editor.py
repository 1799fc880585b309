"""The editor of an image source: the picture, its patch grid and the patch settings."""

from __future__ import annotations

from pathlib import Path
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFormLayout, QHBoxLayout, QLabel, QPushButton, QSizePolicy,
                               QVBoxLayout, QWidget)

from attnviz.model.commands import SetImage, SetPatch
from attnviz.model.display.response_views import query_offset
from attnviz.model.sequence import image_patches
from attnviz.model.state import IMAGE_POLICIES, ImageSource
from attnviz.model.source_files import IMAGE_FILTER, default_target, image_source_from_file
from attnviz.sources.errors import SourceError
from attnviz.ui.source_editors.common import spin_box
from attnviz.ui.widgets.image_overlay import PatchImageView
from attnviz.ui.messages import Level


class ImageEditor(QWidget):
    """Patching of one image source, with the patch grid drawn over the prepared image."""

    def __init__(self, panel):
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
        self.patch = spin_box(1, 512, "patch side P in pixels")
        self.policy = QComboBox(self)
        self.policy.addItems(list(IMAGE_POLICIES))
        self.policy.setToolTip("resize: scale to the target · crop: scale to cover it, then centre-crop")
        self.auto_size = QCheckBox("own size", self)
        self.auto_size.setToolTip("keep the image's own size, rounded to the nearest multiple of the patch size")
        self.height_spin = spin_box(1, 8192, "target height in pixels (a multiple of P)")
        self.width_spin = spin_box(1, 8192, "target width in pixels (a multiple of P)")
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
            self.ctx.report(Level.ERROR, str(exc))
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
            self.ctx.report(Level.ERROR, f"cannot load {Path(path).name}: {exc}")
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
