"""CheckpointStudy, what the Pretrained panel loads, offers and shows, without any widget: the jobs it
hands out, the text it offers, the images, and the maps of the run shown."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA

from attnviz.checkpoints import head_summaries, run_image, run_text
from attnviz.checkpoints import decoder_run
from attnviz.checkpoints.decoder_run import run_decoder
from attnviz.checkpoints.study import (CheckpointStudy, LongOutcome, RunOutcome, cached_name, head_title,
                                       size_text)
from attnviz.checkpoints.views import DEFAULT_SENTENCE
from attnviz.model.demos import build_demo
from attnviz.sources.image import BUNDLED_IMAGES, bundled_image, load_image


def _loaded(folder) -> CheckpointStudy:
    study = CheckpointStudy()
    assert study.kind is None
    study.loaded(study.load_job(str(folder), None)())
    return study


def test_a_text_run_is_shown_with_its_summaries_and_causal_maps():
    study = _loaded(DATA / "tiny_gpt2")
    assert study.kind == "gpt2" and study.ckpt.name == "tiny_gpt2"
    with pytest.raises(ValueError, match="type a sentence"):
        study.text_job("  ", False)()
    out = study.text_job("the river bank", False)()
    want = run_text(study.ckpt, "the river bank")
    assert isinstance(out, RunOutcome) and out.result.tokens == want.tokens
    np.testing.assert_array_equal(out.summaries.entropy, head_summaries(want.attentions, special=want.special).entropy)
    assert study.show(out) and not study.show(out)  # a new model the first time only
    assert not study.long and not study.shows_image() and study.run_description() is None
    assert study.grid_maps() is out.result.attentions
    m, mask = study.head_map(1, 0)
    np.testing.assert_array_equal(m, out.result.attentions[1, 0])
    np.testing.assert_array_equal(mask, np.tril(np.ones(m.shape, dtype=bool)))  # later keys unseen
    np.testing.assert_array_equal(study.shown_matrix(1, 0), m)
    with pytest.raises(ValueError, match=r"no head \(2, 0\) in a 2 x 2 model"):
        study.check_head(2, 0)


def test_the_session_text_is_offered_unless_the_model_cannot_read_it_all():
    study = CheckpointStudy()
    assert study.offered_text(build_demo("river-bank")) == (DEFAULT_SENTENCE, None)  # toy tokens: no text
    long = build_demo("long-context")
    assert study.offered_text(long) == (long.sources[0].text, None)  # nothing loaded: no limit yet
    study.loaded(study.load_job(str(DATA / "tiny_gpt2"), None)())
    text, note = study.offered_text(long)
    assert text == DEFAULT_SENTENCE and f"reads at most {study.ckpt.config.max_positions:,}" in note
    vla = build_demo("vla-mask")
    assert study.offered_text(vla) == ("pick up the red cup and put it on the tray", None)


def test_images_offered_and_an_image_run(tmp_path):
    study = _loaded(DATA / "tiny_vit")
    vla = build_demo("vla-mask")  # one image source
    keys = [k for k, _label in study.refresh_images(vla)]
    assert keys == ["session:image"] + [f"bundled:{f}" for f in BUNDLED_IMAGES]
    river = load_image(bundled_image("river-scene.png"))
    assert study.add_image_array(river[::-1], "flipped") == ("array:flipped", "flipped")
    with pytest.raises(ValueError, match="uint8 pixels"):
        study.add_image_array(river.astype(float), "floats")
    path = tmp_path / "river.png"
    shutil.copy(bundled_image("river-scene.png"), path)
    assert study.add_image_file(str(path)) == (f"file:{path}", "file: river.png")
    keys = [k for k, _label in study.refresh_images(build_demo("river-bank"))]  # the session image is gone
    assert "session:image" not in keys and keys[-2:] == ["array:flipped", f"file:{path}"]
    assert study.image_job("nowhere") is None
    out = study.image_job("array:flipped")()
    assert out.image_name == "flipped" and out.rgb.shape == river.shape
    np.testing.assert_array_equal(out.result.attentions, run_image(study.ckpt, river[::-1]).attentions)
    study.show(out)
    assert study.shows_image()
    m, mask = study.head_map(0, "mean")
    assert mask is None and m.shape == out.result.attentions.shape[2:]


def test_a_decoder_run_names_kv_heads_and_a_long_one_keeps_no_maps(monkeypatch):
    study = _loaded(DATA / "tiny_qwen2")
    text = "the river bank flooded after the rain"
    with pytest.raises(ValueError, match="type a text"):
        study.text_job("", False)()
    out = study.text_job(text, False)()
    np.testing.assert_array_equal(out.result.attentions, run_decoder(study.ckpt, text).attentions)
    study.show(out)
    described = study.run_description()
    assert described.startswith(study.ckpt.describe() + " — ") and "every map held" in described
    assert head_title(out.result, 1, 3) == "layer 1 · head 3 · kv head 1 (shared by 2 heads)"
    monkeypatch.setattr(decoder_run, "WEIGHTS_BUDGET", 1024)  # every map of a longer text no longer "fits"
    long = study.text_job(" ".join([text] * 3), False)()
    assert isinstance(long, LongOutcome) and long.decoder.attentions is None
    study.show(long)
    assert study.long and study.shown_matrix(0, 0) is None and study.grid_maps() is long.thumbs
    assert "recomputed from q, k and log-sum-exp" in study.run_description()
    study.check_head(1, 3)


def test_model_names_and_lists(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    folder = tmp_path / "hub" / "models--acme--tiny-gpt" / "snapshots" / "abc"
    assert cached_name(str(folder)) == "acme/tiny-gpt" and cached_name(str(tmp_path)) is None
    study = CheckpointStudy()
    assert study.model_name(str(folder)) == "acme/tiny-gpt" and study.model_name(str(folder), "mine") == "mine"
    assert study.model_name(str(tmp_path)) is None
    assert study.cached_models() == []  # an empty cache
    assert study.ready_label(str(DATA / "tiny_gpt2"), "tiny").startswith("tiny · GPT-2 · ")
    assert [size_text(n) for n in (21_728, 494_032_768, 1_543_714_304)] == ["21,728", "494.0 M", "1.54 B"]
