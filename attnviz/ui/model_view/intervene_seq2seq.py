"""The Intervene tab on an encoder-decoder (MarianMT, BART, mBART, T5, Whisper): the row choosing the attention whose heads are
edited (the session's ``Interventions.stack``: the encoder's self-attention, the decoder's, or the
cross-attention), and the parts of :class:`~attnviz.ui.model_view.intervene_view.InterveneView` that differ
from a decoder LLM's -- the input (the panel's run: its source ids and the decoder's teacher-forced ids), the
study and the sweep jobs (:mod:`attnviz.checkpoints.intervention_seq2seq_study`), the pieces of the target
vocabulary, the maps' labels. The knockout is the encoder's self-attention's, with the session's mask when it
is as wide as the source; the patch takes a head's output from a clean source of the same token count. Whisper's
source is the Audio tab's clip (the log-mel features of its run; the maps' audio frames labelled as the panel labels
them), and its clean source another audio file, named in the clean prompt field.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from attnviz.checkpoints.intervention_seq2seq import stack_shape
from attnviz.checkpoints.intervention_seq2seq_study import seq2seq_study, seq2seq_sweep, token_id
from attnviz.checkpoints.seq2seq_study import STACK_LABELS, stack_labels

STACK_ORDER = ("encoder", "decoder", "cross")
SEQ2SEQ_TIP = ("the attention whose heads are edited, patched and swept, and whose maps are shown before and after "
               "(a knockout is always the encoder's self-attention's)")


def is_seq2seq(ckpt) -> bool:
    return getattr(ckpt, "kind", None) in ("seq2seq", "whisper")


def is_whisper(ckpt) -> bool:
    return getattr(ckpt, "kind", None) == "whisper"


def supported(ckpt) -> bool:
    """An encoder-decoder whose interventions are written (MarianMT, BART, mBART, T5, mT5, Whisper)."""
    return is_seq2seq(ckpt)


class StackRow(QWidget):
    """"heads of [encoder self-attention | decoder self-attention | cross-attention]"."""

    chosen = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.combo = QComboBox(self)
        self.set_stacks([(key, STACK_LABELS[key]) for key in STACK_ORDER], SEQ2SEQ_TIP)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("attention", self))
        row.addWidget(self.combo)
        row.addStretch(1)
        self.combo.activated.connect(lambda _i: self.chosen.emit(self.stack()))
        self.setVisible(False)

    def stack(self) -> str:
        return self.combo.currentData()

    def set_stacks(self, items, tooltip: str) -> None:
        """Offer the attentions ``items`` [(key, label), ...] (an encoder-decoder's three, a policy's two)."""
        if [self.combo.itemData(i) for i in range(self.combo.count())] == [k for k, _t in items]:
            return
        blocked = self.combo.blockSignals(True)
        self.combo.clear()
        for key, label in items:
            self.combo.addItem(label, key)
        self.combo.blockSignals(blocked)
        self.combo.setToolTip(tooltip)

    def set_stack(self, stack: str) -> None:
        i = self.combo.findData(stack)
        if i >= 0 and i != self.combo.currentIndex():
            self.combo.setCurrentIndex(i)


def shape(ckpt, stack: str) -> tuple[int, int]:
    """(layers, heads) of ``stack``."""
    s = stack_shape(ckpt, stack)
    return s.n_layer, s.n_head


def run_result(panel):
    """The Seq2SeqAttention of the panel's encoder-decoder run (Whisper's as the panel shows it), None without one
    (or, for Whisper, without the Audio tab's run the features come from)."""
    out = panel.outcome
    r = getattr(out, "result", None)
    if is_whisper(panel.ckpt) and getattr(getattr(panel, "audio", None), "outcome", None) is None:
        return None
    return r if r is not None and hasattr(r, "cross_attentions") else None


def ids(panel) -> tuple[np.ndarray, np.ndarray]:
    """(source, decoder ids) of the panel's run: the source ids, or Whisper's (n_mels, frames) features."""
    r = run_result(panel)
    if is_whisper(panel.ckpt):  # the Audio tab's run holds the features the encoder read
        w = panel.audio.outcome.result
        return np.asarray(w.features, dtype=np.float32), np.asarray(w.decoder_ids, dtype=np.int64)
    return np.asarray(r.encoder_ids, dtype=np.int64), np.asarray(r.decoder_ids, dtype=np.int64)


def fingerprint(panel) -> np.ndarray | None:
    """The run's source and decoder ids in one array (a sweep shown is dropped when they change); Whisper's
    features enter as a digest."""
    if run_result(panel) is None:
        return None
    src, dec = ids(panel)
    if src.ndim == 2:
        import hashlib

        src = np.frombuffer(hashlib.sha256(np.ascontiguousarray(src).tobytes()).digest(), dtype=np.uint8)
    return np.concatenate([src.astype(np.int64), [-1], dec])


def why_not_ready(ckpt, panel) -> str:
    if is_whisper(ckpt):
        return "Run the model on a clip first (the Audio tab: open a sound file, then Run)."
    return "Run the model on a source text first (the target empty: its own translation)."


def clean_source(ckpt, text: str):
    """The clean source a patch reads: the text's source ids, or (Whisper) the features of the audio file it names."""
    if is_whisper(ckpt):
        from attnviz.checkpoints.whisper import input_features, read_audio

        return input_features(ckpt, read_audio(text.strip(), ckpt))
    from attnviz.checkpoints.seq2seq_run import encode_source

    return encode_source(ckpt, text, np.float32)[0].ids


def study_job(ckpt, panel, spec, stack: str, allowed):
    """The job computing the Seq2SeqEffects of ``spec`` on the panel's run (the clean source tokenised there)."""
    src, dec = ids(panel)

    def job():
        clean_ids = None
        if spec.patch == "head" and spec.clean.strip():
            clean_ids = clean_source(ckpt, spec.clean)
        return seq2seq_study(ckpt, src, dec, spec, stack, allowed=allowed, clean_ids=clean_ids)

    return job


def sweep_job(ckpt, panel, spec, stack: str, metric: str, tokens, stop, progress):
    src, dec = ids(panel)
    return lambda: seq2seq_sweep(ckpt, src, dec, stack, mode=spec.mode, factor=spec.factor, metric=metric,
                                 tokens=tokens, cancelled=stop.is_set, progress=progress)


def piece(ckpt, t: int) -> str:
    return ckpt.piece(int(t)) if is_whisper(ckpt) else ckpt.tokenizer.piece(int(t), "target")


def tokens(ckpt, a: str, b: str) -> tuple[int, int]:
    return token_id(ckpt, a), token_id(ckpt, b)


def labels(panel, stack: str, rows: int, cols: int) -> tuple[list[str] | None, list[str] | None]:
    r = run_result(panel)
    if r is None:
        return None, None
    q, k = stack_labels(r, stack)  # Whisper's run as the panel holds it: its frames are the source ("f12 0.24s")
    return (q if len(q) == rows else None), (k if len(k) == cols else None)


def first_edited_layer(spec, stack: str, n_layer: int) -> int:
    """The earliest layer of ``stack`` whose maps may change: a knockout of the encoder changes every decoder
    layer (the memory they read), and every encoder layer from its first."""
    layers = [layer for layer, _h in spec.heads]
    if spec.patch == "head":
        layers.append(spec.patch_layer)
    if spec.knockout_layers:
        layers.append(min(spec.knockout_layers) if stack == "encoder" else 0)
    return min(min(layers), n_layer - 1) if layers else 0

