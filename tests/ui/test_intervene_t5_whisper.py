"""The Intervene tab on T5 and on Whisper: enabled, a head of the chosen stack ablated by a click gives the logits of
intervention_seq2seq_study on the panel's own run (T5: its source ids; Whisper: the Audio tab's clip's features);
Whisper's maps are labelled by audio time, its patch reads a second audio file, and a missing one is one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip("PySide6")

from attnviz.checkpoints import load_checkpoint  # noqa: E402
from attnviz.checkpoints.intervention_seq2seq_study import seq2seq_study  # noqa: E402
from attnviz.checkpoints.whisper import input_features, read_audio  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.model.state import Interventions  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view import audio_view  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
T5 = DATA / "tiny_t5"
WHISPER = DATA / "checkpoints" / "tiny_whisper"
WAIT_MS = 60000


def _panel(qtbot, demo):
    ctx = AppContext(Session(build_demo(demo)))
    p = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(p)
    p.resize(1024, 700)
    p.show()
    qtbot.waitExposed(p)
    return p


def changed(qtbot, view, action):
    with qtbot.assertNotEmitted(view.failed, wait=0), qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS) as blocker:
        action()
    return blocker.args[0]


def test_t5_heads_are_ablated_in_the_window(qtbot):
    p = _panel(qtbot, "translation")
    view = p.intervention
    try:
        with qtbot.waitSignal(p.seq2seq_ready, timeout=WAIT_MS):
            p.load_model(T5, prompt="where is the station?")
        assert p.tabs.isTabEnabled(p.tabs.indexOf(view))
        with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
            p.tabs.setCurrentWidget(view)
            view.refresh()
        assert view.ready() and view.seq2seq()
        changed(qtbot, view, lambda: view.stack_row.chosen.emit("cross"))
        eff = changed(qtbot, view, lambda: view.toggle_head(1, 3))
        r = p.outcome.result
        ref = seq2seq_study(load_checkpoint(T5), r.encoder_ids, r.decoder_ids, Interventions(heads=((1, 3),)), "cross")
        np.testing.assert_array_equal(eff.after.logits, ref.after.logits)
        assert eff.kl == ref.kl > 0 and "cross-attention" in view.maps_title.text()
    finally:
        view.shutdown()
        p.shutdown()


def test_whisper_heads_are_ablated_and_patched_from_another_clip(qtbot, tmp_path):
    p = _panel(qtbot, "river-bank")
    audio = getattr(p, "audio", None) or audio_view.install(p)
    view = p.intervention
    try:
        with qtbot.waitSignal(audio.outcome_ready, timeout=WAIT_MS):
            p.load_model(WHISPER)
        assert p.tabs.isTabEnabled(p.tabs.indexOf(view))
        with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
            p.tabs.setCurrentWidget(view)
            view.refresh()
        assert view.ready() and view.seq2seq()
        ck = load_checkpoint(WHISPER)
        changed(qtbot, view, lambda: view.stack_row.chosen.emit("encoder"))
        r = audio.outcome.result  # the Audio tab's run: the features the encoder read
        eff = changed(qtbot, view, lambda: view.toggle_head(1, 2))  # the encoder's heads, over the audio frames
        ref = seq2seq_study(ck, r.features, r.decoder_ids, Interventions(heads=((1, 2),)), "encoder")
        np.testing.assert_allclose(eff.after.logits, ref.after.logits, atol=1e-9)
        assert eff.kl > 0
        rows = view.maps[0]
        assert eff.before.encoder.shape[-1] == ck.spec.n_frames // 2
        # a patch from another clip: its path in the clean prompt field
        samples, rate = sf.read(WHISPER / "clip.wav", dtype="float32")
        other = tmp_path / "reversed.wav"
        sf.write(other, samples[::-1].copy(), rate)
        spec = Interventions(stack="cross", patch="head", patch_layer=1, patch_head=0, clean=str(other))
        eff = changed(qtbot, view, lambda: view.set_interventions(spec))
        clean = input_features(ck, read_audio(other, ck))
        ref = seq2seq_study(ck, r.features, r.decoder_ids, spec, "cross", clean_ids=clean)
        np.testing.assert_allclose(eff.after.logits, ref.after.logits, atol=1e-9)
        assert "patched from the clean source" in view.results.text()
        with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
            view.set_interventions(Interventions(stack="cross", patch="head", clean=str(tmp_path / "none.wav")))
        text = blocker.args[0]
        assert "none.wav" in text and "\n" not in text and "Traceback" not in text
        assert rows is not None
    finally:
        view.shutdown()
        audio.shutdown()
        p.shutdown()


def test_the_code_dialog_writes_whispers_script_and_its_features(qtbot, tmp_path):
    from attnviz.checkpoints.intervention_seq2seq_code import seq2seq_script

    p = _panel(qtbot, "river-bank")
    audio = getattr(p, "audio", None) or audio_view.install(p)
    view = p.intervention
    try:
        with qtbot.waitSignal(audio.outcome_ready, timeout=WAIT_MS):
            p.load_model(WHISPER)
        with qtbot.waitSignal(view.effects_ready, timeout=WAIT_MS):
            p.tabs.setCurrentWidget(view)
            view.refresh()
        changed(qtbot, view, lambda: view.toggle_head(1, 1))  # the decoder's self-attention (the default stack)
        assert view.code_button.isEnabled()
        dialog = view.show_code()
        assert dialog is not None
        r = audio.outcome.result
        want = seq2seq_script(load_checkpoint(WHISPER), r.features, r.decoder_ids, "decoder", view.spec)
        assert dialog.text("pytorch") == want["pytorch"]
        out = tmp_path / "hooks.py"
        assert dialog.save(out)
        np.testing.assert_array_equal(np.load(tmp_path / want["features_file"]), r.features.astype(np.float32))
        assert "arrays it reads" in dialog.message.text()
        dialog.close()
    finally:
        view.shutdown()
        audio.shutdown()
        p.shutdown()
