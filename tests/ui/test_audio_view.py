"""The Pretrained panel's Audio tab on a tiny Whisper: enabled and shown when one loads, the demo clip
transcribed off the GUI thread as transformers' generate does, a target aligned teacher-forced with the
library's cross-attention drawn (one token's row under the spectrogram, the tokens x frames heatmap), the
layer / head / mean choice, Stop, and a bad clip one message; the window fits 1024 x 700."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip("PySide6")

from attnviz.checkpoints import load_checkpoint  # noqa: E402
from attnviz.checkpoints import whisper_study as ws  # noqa: E402
from attnviz.checkpoints.whisper import generate_whisper, run_whisper  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view import audio_view  # noqa: E402
from attnviz.ui.model_view.panel import ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
MODEL = DATA / "tiny_whisper"
CLIP = MODEL / "clip.wav"
WAIT_MS = 60000


@pytest.fixture
def panel(qtbot):
    ctx = AppContext(Session(build_demo("river-bank")))
    p = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(p)
    p.resize(1024, 700)
    p.show()
    qtbot.waitExposed(p)
    view = getattr(p, "audio", None) or audio_view.install(p)
    p.failures = []
    p.failed.connect(p.failures.append)
    with qtbot.waitSignal(view.outcome_ready, timeout=WAIT_MS):
        p.load_model(MODEL)
    yield p, view
    view.shutdown()
    p.shutdown()


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(MODEL)


def test_a_whisper_load_shows_the_tab_and_transcribes_the_demo_clip(panel, ckpt):
    p, view = panel
    index = p.tabs.indexOf(view)
    assert p.tabs.tabText(index) == "Audio" and p.tabs.isTabEnabled(index) and p.tabs.currentWidget() is view
    want = generate_whisper(ckpt, audio_view.demo_clip())
    out = view.outcome
    assert out.transcribed and out.clip_name.startswith("demo:") and not out.stopped
    assert "(length limit)" in view.status.text() and "hears its first 2 s" in view.status.text()
    np.testing.assert_array_equal(out.result.decoder_ids, want.attention.decoder_ids)
    assert view.chips.count() == len(want.generated)
    # the spectrogram covers the clip's frames along seconds; the attention bars are the selected token's row
    layer, head = view.layer_head()
    assert (layer, head) == (ckpt.spec.dec_layers - 1, ws.MEAN)
    row = want.attention.cross_attentions[layer, :, want.attention.prompt_length - 1, :out.frames].mean(axis=0)
    np.testing.assert_allclose(view.attn_bars.opts["height"], row, atol=1e-6)
    assert view.spec_image.image.shape == (2 * out.frames, 80)
    assert p.minimumSizeHint().width() <= 1024 and p.minimumSizeHint().height() <= 700


def test_the_panel_runs_the_clip_not_its_text(panel, qtbot):
    """After the load the panel's own run went to the Audio tab: no failure about the text; run_input again
    runs the clip; the summaries beside the grid are hidden while a speech model is loaded."""
    p, view = panel
    qtbot.wait(200)
    assert p.failures == [] and not p.jobs.busy
    assert not p.summary.isVisibleTo(p)
    with qtbot.waitSignal(view.outcome_ready, timeout=WAIT_MS):
        assert p.run_input() == view.job.latest_id


def test_a_target_is_aligned_and_the_head_choice_redraws(panel, qtbot, ckpt):
    p, view = panel
    view.target_edit.setText(" a rising chirp")
    assert view.run_button.text() == "Align"
    view.add_clip(str(CLIP))
    with qtbot.waitSignal(view.outcome_ready, timeout=WAIT_MS):
        view.run()
    want = run_whisper(ckpt, CLIP, " a rising chirp")
    out = view.outcome
    assert not out.transcribed and out.pieces[-1] == "<|endoftext|>"
    n = len(out.pieces)
    assert n == len(want.decoder_ids) - want.prompt_length + 1
    view.head_combo.setCurrentIndex(2)  # head 1
    view.layer_combo.setCurrentIndex(0)
    view.select_token(3)
    row = want.cross_attentions[0, 1, want.prompt_length - 1 + 3, :out.frames]
    np.testing.assert_allclose(view.attn_bars.opts["height"], row, atol=1e-6)
    np.testing.assert_allclose(view.heatmap.values, want.cross_attentions[0, 1, want.prompt_length - 1:, :75],
                               atol=1e-6)
    assert ws.peak_seconds(out, 3, 0, 1) == pytest.approx(float(np.argmax(row)) * 0.02)
    view.heatmap.row_clicked.emit(1)
    assert view.selected == 1 and view.chips.selected == 1


def test_stop_keeps_what_was_written(panel, qtbot, monkeypatch):
    """A transcript held at its first step until Stop: the run ends there, nothing written, the maps cleared."""
    p, view = panel
    real = ws.run_outcome

    def held(ckpt, path, target, *, name=None, cancel=None, on_token=None, **options):
        deadline = time.monotonic() + 30
        while not cancel() and time.monotonic() < deadline:
            time.sleep(0.01)
        return real(ckpt, path, target, name=name, cancel=cancel, on_token=on_token, **options)

    monkeypatch.setattr(ws, "run_outcome", held)
    view.target_edit.setText("")
    view.run()
    assert view.stop_button.isEnabled()
    with qtbot.waitSignal(view.outcome_ready, timeout=WAIT_MS):
        view.stop()
    out = view.outcome
    assert out.transcribed and out.stopped and out.pieces == [] and "(stopped)" in view.status.text()
    assert view.heatmap.is_empty() and not view.stop_button.isEnabled() and view.chips.count() == 0
    assert ws.alignment(out, 0).shape == (0, out.frames)


def test_a_bad_clip_is_one_message_and_other_models_disable_the_tab(panel, qtbot, tmp_path):
    p, view = panel
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF" + b"\0" * 20)
    view.add_clip(str(bad))
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        view.run()
    assert "not readable audio" in blocker.args[0] and view.message.isVisibleTo(view)
    sf.write(tmp_path / "nan.wav", np.full(800, np.nan, np.float32), 16_000, subtype="FLOAT")
    view.add_clip(str(tmp_path / "nan.wav"))
    with qtbot.waitSignal(view.failed, timeout=WAIT_MS) as blocker:
        view.run()
    assert "NaN" in blocker.args[0]
    with qtbot.waitSignal(p.attention_ready, timeout=WAIT_MS):
        p.load_model(DATA / "tiny_gpt2")
    assert not p.tabs.isTabEnabled(p.tabs.indexOf(view)) and view.ckpt is None
    assert p.summary.isVisibleTo(p)  # the summaries a speech model hid are back
