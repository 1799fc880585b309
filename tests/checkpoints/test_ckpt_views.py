"""What the pretrained-model views draw (attnviz.checkpoints.views), checked on the committed tiny
checkpoints without any widget."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA

from attnviz.checkpoints import (attention_rollout, cls_attention_maps, head_summaries, load_checkpoint, run_image,
                                 run_text)
from attnviz.checkpoints.views import (DEFAULT_SENTENCE, OverlaySpec, available_metrics, display_image, display_patch,
                                       grid_label, head_matrix, model_pixels, session_image, session_text,
                                       summary_line, summary_matrix, vit_overlay)
from attnviz.model.demos import build_demo
from attnviz.sources.image import bundled_image, load_image


@pytest.fixture(scope="module")
def gpt2_run():
    return run_text(load_checkpoint(DATA / "tiny_gpt2"), "the river bank")


@pytest.fixture(scope="module")
def river():
    return load_image(bundled_image("river-scene.png"))  # (224, 224, 3)


@pytest.fixture(scope="module", params=["tiny_vit", "tiny_deit"])
def vit(request, river):
    ckpt = load_checkpoint(DATA / request.param)
    return ckpt, run_image(ckpt, river)


def test_head_matrix_is_one_head_or_the_mean(gpt2_run):
    a = gpt2_run.attentions  # (L, nh, T, T)
    assert a.shape[:2] == (2, 2)
    np.testing.assert_array_equal(head_matrix(gpt2_run, 1, 0), a[1, 0])
    np.testing.assert_allclose(head_matrix(gpt2_run, 0, "mean"), a[0].mean(axis=0))
    with pytest.raises(ValueError, match="layer 2"):
        head_matrix(gpt2_run, 2, 0)
    with pytest.raises(ValueError, match="head 5"):
        head_matrix(gpt2_run, 0, 5)


def test_summary_matrix_picks_the_statistic(gpt2_run):
    s = head_summaries(gpt2_run.attentions, special=gpt2_run.special)
    np.testing.assert_array_equal(summary_matrix(s, "entropy"), s.entropy)
    np.testing.assert_array_equal(summary_matrix(s, "previous"), s.to_previous)
    np.testing.assert_array_equal(summary_matrix(s, "self"), s.to_self)
    np.testing.assert_array_equal(summary_matrix(s, "special"), s.to_special)
    with pytest.raises(ValueError, match="unknown head summary"):
        summary_matrix(s, "kurtosis")


def test_vit_overlay_class_token_and_rollout(vit):
    ckpt, r = vit
    assert r.grid == (3, 5) and r.n_extra_tokens == ckpt.config.n_extra  # non-square grid, 1 or 2 extra tokens
    maps = cls_attention_maps(r.attentions, -1, r.grid, r.n_extra_tokens)  # (nh, 3, 5)
    m, levels = vit_overlay(r, OverlaySpec(mode="cls", layer=-1, head=1))
    np.testing.assert_array_equal(m, maps[1])
    assert levels == (float(maps[1].min()), float(maps[1].max()))
    m, _ = vit_overlay(r, OverlaySpec(mode="cls", layer=0, head="mean"))
    np.testing.assert_allclose(m, cls_attention_maps(r.attentions, 0, r.grid, r.n_extra_tokens).mean(axis=0))
    for fusion, discard in (("mean", 0.0), ("max", 0.5), ("min", 0.9)):
        m, levels = vit_overlay(r, OverlaySpec(mode="rollout", fusion=fusion, discard_ratio=discard))
        want = attention_rollout(r.attentions, head_fusion=fusion, discard_ratio=discard, grid=r.grid,
                                 n_extra=r.n_extra_tokens).cls_map
        np.testing.assert_array_equal(m, want)
        assert levels == (0.0, 1.0) and m.max() == 1.0
    with pytest.raises(ValueError, match="unknown overlay"):
        vit_overlay(r, OverlaySpec(mode="dino"))


def test_vit_overlay_needs_an_image_model(gpt2_run):
    with pytest.raises(ValueError, match="not an image model"):
        vit_overlay(gpt2_run, OverlaySpec())


def test_model_pixels_undo_the_preprocessing(river):
    ckpt = load_checkpoint(DATA / "tiny_vit")
    H, W = ckpt.image.size
    small = river[:H, :W]  # already the model's size: preprocessing only rescales and normalises
    r = run_image(ckpt, small)
    back = model_pixels(r.pixels, ckpt.image)  # (H, W, 3)
    assert back.shape == (H, W, 3) and back.dtype == np.uint8
    assert np.abs(back.astype(int) - small.astype(int)).max() <= 1
    shown = display_image(small, r.pixels, ckpt.image, r.grid, 20, model_view=True)
    assert shown.shape == (3 * 20, 5 * 20, 3)
    np.testing.assert_array_equal(shown[::20, ::20][:, :, 0], back[::8, ::8][:, :, 0])  # nearest: patch corners
    smooth = display_image(river, r.pixels, ckpt.image, r.grid, 20, model_view=False)
    assert smooth.shape == (60, 100, 3)


def test_default_inputs_come_from_the_session():
    vla = build_demo("vla-mask")  # image, prompt text, custom blocks
    assert session_text(vla) == "pick up the red cup and put it on the tray"
    name, rgb = session_image(vla)
    assert name == "image" and rgb.dtype == np.uint8 and rgb.ndim == 3 and rgb.shape[2] == 3
    toy = build_demo("river-bank")  # toy tokens only: no text, no image
    assert session_text(toy) == DEFAULT_SENTENCE
    assert session_image(toy) is None


def test_available_metrics_and_the_status_line(gpt2_run):
    s = head_summaries(gpt2_run.attentions, special=gpt2_run.special)
    assert available_metrics(s) == ["entropy", "special", "self", "previous"]  # no decoder-only statistics
    with pytest.raises(ValueError, match="decoder LLMs only"):
        summary_matrix(s, "first")
    line = summary_line(s, 1, 0)
    assert line.startswith("layer 1 · head 0:  entropy ")
    assert f"entropy {s.entropy[1, 0]:.3f}" in line and f"to previous {s.to_previous[1, 0]:.3f}" in line
    assert "to first" not in line


def test_display_patch_and_grid_label(vit):
    assert display_patch((14, 14)) == 32 and display_patch((3, 5)) == 90  # the longer side about 448 px
    assert display_patch((100, 100)) == 8  # never smaller than 8 px
    ckpt, r = vit
    extra = "[CLS]" if r.n_extra_tokens == 1 else "[CLS], [DIST]"
    label = grid_label(r, ckpt.image, ckpt.config.patch_size, ckpt.config.grid)
    assert label == (f"model input 24x40 px (height x width) → grid 3x5 of 8 px patches = 15 tokens"
                     f" + {r.n_extra_tokens} extra ({extra})")
    assert grid_label(r, ckpt.image, ckpt.config.patch_size, (2, 2)).endswith(
        "; position embeddings interpolated from 2x2")
