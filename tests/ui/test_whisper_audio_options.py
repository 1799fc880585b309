"""The Audio tab's decoding options on the tiny Whisper models (language, task, timestamps, beams: offered where
the model allows them, run off the GUI thread with the library's ids and segments), and the panel's grid and
detail map filled with the run's encoder self-attention, decoder self-attention and cross-attention."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import load_checkpoint  # noqa: E402
from attnviz.checkpoints.whisper import generate_whisper  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view import audio_view  # noqa: E402
from attnviz.ui.model_view.panel import TAB_HEADS, ModelViewPanel  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"
MODEL, EN = DATA / "tiny_whisper", DATA / "tiny_whisper_en"
WAIT_MS = 60000


def _panel(qtbot, folder):
    ctx = AppContext(Session(build_demo("river-bank")))
    p = ModelViewPanel(ctx, auto_load=False)
    qtbot.addWidget(p)
    p.resize(1024, 700)
    p.show()
    qtbot.waitExposed(p)
    view = getattr(p, "audio", None) or audio_view.install(p)
    with qtbot.waitSignal(view.outcome_ready, timeout=WAIT_MS):
        p.load_model(folder)
    return p, view


@pytest.fixture
def panel(qtbot):
    p, view = _panel(qtbot, MODEL)
    yield p, view
    view.shutdown()
    p.shutdown()


def test_options_follow_what_the_model_allows(qtbot, panel):
    p, view = panel
    assert [view.language_combo.itemData(i) for i in range(view.language_combo.count())] == [None, "de", "en", "fr"]
    assert view.language_combo.itemText(0) == "detect" and view.language_combo.isEnabled()
    assert view.timestamps_box.isEnabled() and view.beams_spin.isEnabled()
    view.target_edit.setText(" the cat")
    assert not view.beams_spin.isEnabled() and view.options().beams == 1
    view.target_edit.setText("")
    with pytest.raises(ValueError, match="no language 'xx'"):
        view.set_options(language="xx")
    en, en_view = _panel(qtbot, EN)
    try:
        assert not en_view.language_combo.isEnabled() and not en_view.task_combo.isEnabled()
        assert not en_view.timestamps_box.isEnabled()
        assert en_view.options().timestamps is False
    finally:
        en_view.shutdown()
        en.shutdown()


def test_a_run_with_timestamps_language_and_beams_equals_the_library(qtbot, panel, tmp_path):
    p, view = panel
    ck = load_checkpoint(MODEL)
    clip = view.clip_combo.currentData()
    view.set_options(language="de", timestamps=True)
    with qtbot.waitSignal(view.outcome_ready, timeout=WAIT_MS) as blocker:
        view.run()
    out = blocker.args[0]
    want = generate_whisper(ck, clip, language="de", timestamps=True)
    np.testing.assert_array_equal(out.result.decoder_ids, want.attention.decoder_ids)
    assert [(s.start, s.end, s.ids) for s in out.segments] == [(s.start, s.end, s.ids) for s in want.segments]
    assert view.segments.isVisibleTo(view) and f"[{want.segments[0].start:.2f} s" in view.segments.text()
    view.set_options(language="de", timestamps=True, beams=2)  # every option at once
    with qtbot.waitSignal(view.outcome_ready, timeout=WAIT_MS) as blocker:
        view.run()
    out = blocker.args[0]
    want = generate_whisper(ck, clip, language="de", timestamps=True, beams=2)
    np.testing.assert_array_equal(out.result.decoder_ids, want.attention.decoder_ids)
    assert out.options.beams == 2 and any("beam search" in n for n in out.result.notes)
    assert p.minimumSizeHint().width() <= 1024 and p.minimumSizeHint().height() <= 700
    view.grab().save(str(tmp_path / "audio_options.png"))


def test_the_detail_map_shows_the_three_whisper_stacks(qtbot, panel):
    p, view = panel
    out = view.outcome
    r = out.result
    assert p.study.seq2seq and p.study.outcome is out.maps
    p.tabs.setCurrentIndex(TAB_HEADS)  # the grid's tab: the detail map gets its width back
    assert p.summary.isVisibleTo(p) and p.body.shares()[1] > 0.2
    for stack, maps in (("cross", r.cross_attentions), ("encoder", r.encoder_attentions),
                        ("decoder", r.decoder_attentions)):
        view.stack_combo.setCurrentIndex(view.stack_combo.findData(stack))
        p.select_head(1, 1)
        np.testing.assert_allclose(p.shown_matrix(), maps[1, 1], atol=1e-7)
        np.testing.assert_allclose(p.detail.values, maps[1, 1], atol=1e-6)
        cols = p.detail.col_labels
        assert cols[0] == "f0 0.00s" if stack != "decoder" else cols == list(r.decoder_tokens)
    p.tabs.setCurrentWidget(view)  # back on the Audio tab: it takes the width again
    assert not p.summary.isVisibleTo(p) and p.body.shares()[0] > 0.9


def test_diagnostics_alignment_gets_the_audio_and_aligns_a_target(qtbot, panel):
    from attnviz.ui.diagnostics.model_alignment import feed_for

    p, view = panel
    feed = feed_for(p.ctx)
    assert feed.outcome is view.outcome.maps  # the word-to-audio alignment, published as a translation's
    with qtbot.waitSignal(view.outcome_ready, timeout=WAIT_MS) as blocker:
        feed.request_rerun(" the cat")
    out = blocker.args[0]
    assert not out.transcribed and out.text == " the cat" and feed.outcome is out.maps
    assert out.maps.written[-1] == "<|endoftext|>"
