"""Swin against transformers 5.24's eager SwinModel (tiny random checkpoint by tools/make_swin_goldens.py).

transformers' SwinAttention returns (windows, heads, w*w, w*w) per layer: compared window by window to 1e-5; the
weights laid into each stage's (T, T) map are checked against the window mask they must fill.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from attnviz.checkpoints import CheckpointError
from attnviz.checkpoints.config import parse_image_config
from attnviz.checkpoints.preprocess import preprocess_image
from attnviz.checkpoints.swin import forward_swin, layer_windows, parse_swin, window_mask
from attnviz.checkpoints.vision import forward_vision
from attnviz.checkpoints.weights import load_weights

from ckpt_helpers import DATA, golden

SWIN = DATA / "tiny_swin"


def _cfg(**changes):
    cfg = json.loads((SWIN / "config.json").read_text()) | changes
    return parse_swin(cfg)


@pytest.fixture(scope="module")
def swin():
    c = _cfg()
    return c, load_weights(SWIN / "model.safetensors", c), golden(SWIN / "golden.npz")


def test_preprocessing_equals_the_image_processor(swin):
    c, _, g = swin
    ic = parse_image_config(json.loads((SWIN / "preprocessor_config.json").read_text()), c)
    np.testing.assert_allclose(preprocess_image(g["image"], ic), g["pixel_values"], atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_every_layer_matches_transformers_window_by_window(swin, dtype):
    c, w, g = swin
    stages, hidden = forward_swin(c, w, g["pixel_values"], dtype=dtype)
    assert [s.grid for s in stages] == [(12, 24), (6, 12), (3, 6)]
    for s, st in enumerate(stages):
        assert len(st.weights) == 2
        for i, a in enumerate(st.weights):
            want = g[f"attn_{s}_{i}"]  # (windows, heads, 9, 9)
            assert a.shape == want.shape and a.dtype == dtype
            assert np.abs(a - want).max() <= 1e-5, (s, i, float(np.abs(a - want).max()))
        np.testing.assert_allclose(st.hidden, g[f"hidden_{s}"], atol=5e-5, rtol=1e-5)
    np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=2e-5, rtol=1e-5)


def test_windows_follow_the_shift_and_the_clamp():
    plain, shifted, small = layer_windows((12, 24), 3, False), layer_windows((12, 24), 3, True), layer_windows((3, 6), 3, True)
    assert (plain.shift, shifted.shift, small.shift, small.size) == (0, 1, 0, 3)
    r, col = np.divmod(np.arange(12 * 24), 24)
    same = lambda a, b: a[:, None] == a[None, :]  # noqa: E731
    np.testing.assert_array_equal(window_mask(plain), same(r // 3, 0) & same(col // 3, 0))
    # shifted by one: window of (r - 1) mod 12, (c - 1) mod 24; pairs that wrap around an edge are masked
    wr, wc = ((r - 1) % 12) // 3, ((col - 1) % 24) // 3
    edge_r, edge_c = (r == 0), (col == 0)  # the rows / columns rolled in from the other side
    want = same(wr, 0) & same(wc, 0) & same(edge_r, 0) & same(edge_c, 0)
    np.testing.assert_array_equal(window_mask(shifted), want)


@pytest.mark.parametrize("kernel", ["reference", "naive", "flash"])
def test_stage0_maps_are_the_windows_laid_into_the_patch_grid(swin, kernel):
    c, w, g = swin
    terms: dict = {}
    atts, hidden, grid = forward_vision(c, w, g["pixel_values"], kernel=kernel, terms=terms)
    assert grid == (12, 24) and atts.shape == (2, 2, 288, 288)
    stages, _ = forward_swin(c, w, g["pixel_values"], kernel=kernel)
    masks = stages[0].masks()  # (2, 288, 288)
    np.testing.assert_allclose(atts.sum(-1), 1.0, atol=1e-5)
    assert (atts[0][:, ~masks[0]] == 0).all()  # outside a query's window: exactly 0
    assert (atts[1][:, ~masks[1]] < 1e-30).all()  # the shifted layer's other regions: exp(-100) at most
    assert masks[0].sum() == 288 * 9 and masks[1].sum() < 288 * 9  # whole windows; the shift cuts some apart
    for i in range(2):
        win = stages[0].windows[i]
        laid_back = atts[i][:, win.tokens[:, :, None], win.tokens[:, None, :]].transpose(1, 0, 2, 3)
        assert np.abs(laid_back - g[f"attn_0_{i}"]).max() <= 1e-5
    assert set(terms) == {"content", "position bias", "shift mask", "window mask"}
    s = sum(terms.values()).astype(np.float64)  # what the softmax takes
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(p / p.sum(-1, keepdims=True), atts, atol=1e-6)
    np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("changes, hw, expected", [
    ({}, (24, 40), "position table is for a 12x24 patch grid"),
    ({"use_absolute_embeddings": False}, (24, 40), r"12x20 token grid is not a whole number of 3x3 windows"),
    ({"use_absolute_embeddings": False, "window_size": 4}, (24, 48), r"6x12 token grid|3x6 token grid"),
    ({"use_absolute_embeddings": False}, (8, 48), r"4x24 token grid is not a whole number|2x12 token grid is smaller"),
])
def test_inputs_transformers_would_pad_are_refused_in_one_line(swin, changes, hw, expected):
    c, w, g = swin
    c = _cfg(**changes)
    with pytest.raises(CheckpointError, match=expected) as err:
        forward_swin(c, w, np.zeros((3, *hw), dtype=np.float32))
    assert "\n" not in str(err.value) and len(str(err.value)) < 200


@pytest.mark.parametrize("changes, expected", [
    ({"depths": [2, 2]}, "'depths' has 2 stages but 'num_heads' 3"),
    ({"num_heads": [3, 2, 4]}, "stage 0's width 8 is not divisible by its 3 heads"),
    ({"depths": "2,2,2"}, "'depths' must be a list"),
    ({"mlp_ratio": 0}, "'mlp_ratio' must be > 0"),
])
def test_config_problems_are_one_clear_message(changes, expected):
    with pytest.raises(CheckpointError, match=expected):
        _cfg(**changes)


def test_weights_that_do_not_fit_the_config_are_named(tmp_path):
    d = tmp_path / "swin"
    shutil.copytree(SWIN, d)
    with pytest.raises(CheckpointError, match=r"relative_position_bias_table.*\(25, 2\).*\(49, 2\)"):
        load_weights(d / "model.safetensors", _cfg(window_size=4))


def test_an_edit_is_refused():
    c = _cfg()
    with pytest.raises(CheckpointError, match="interventions are not available for Swin"):
        forward_vision(c, {}, np.zeros((3, 24, 48), dtype=np.float32), edit=object())


def test_a_swin_folder_loads_and_runs(swin):
    from attnviz.checkpoints import load_checkpoint, run_image

    _, _, g = swin
    ckpt = load_checkpoint(SWIN)
    assert ckpt.kind == "vit" and ckpt.config.model_type == "swin"
    res = run_image(ckpt, g["image"])
    assert res.grid == (12, 24) and res.shape == (2, 2, 288, 288) and res.n_extra_tokens == 0 and not res.special.any()
    np.testing.assert_allclose(res.pixels, g["pixel_values"], atol=1e-6, rtol=0)
    win = layer_windows((12, 24), 3, True)
    laid_back = res.attentions[1][:, win.tokens[:, :, None], win.tokens[:, None, :]].transpose(1, 0, 2, 3)
    assert np.abs(laid_back - g["attn_0_1"]).max() <= 1e-5


def test_every_stage_is_a_run_of_its_own(swin):
    from attnviz.checkpoints.loader import Checkpoint
    from attnviz.checkpoints.swin_stages import stage_attention

    c, w, g = swin
    ic = parse_image_config(json.loads((SWIN / "preprocessor_config.json").read_text()), c)
    ckpt = Checkpoint(folder=SWIN, name="tiny_swin", config=c, weights=w, tokenizer=None, image=ic)
    for s, (grid, nh) in enumerate([((12, 24), 2), ((6, 12), 2), ((3, 6), 4)]):
        res = stage_attention(ckpt, g["image"], s)
        T = grid[0] * grid[1]
        assert res.grid == grid and res.shape == (2, nh, T, T) and res.labels[-1] == f"{grid[0] - 1},{grid[1] - 1}"
        win = layer_windows(grid, 3, True)
        laid_back = res.attentions[1][:, win.tokens[:, :, None], win.tokens[:, None, :]].transpose(1, 0, 2, 3)
        assert np.abs(laid_back - g[f"attn_{s}_1"]).max() <= 1e-5
        np.testing.assert_allclose(res.hidden, g[f"hidden_{s}"], atol=5e-5, rtol=1e-5)
    with pytest.raises(CheckpointError, match="stage 3 does not exist; this model has stages 0 to 2"):
        stage_attention(ckpt, g["image"], 3)


def test_an_image_classifier_reads_the_same_weights(swin):
    c, _, g = swin
    w = load_weights(DATA / "tiny_swin_cls" / "model.safetensors", c)  # names under swin., a classifier head
    stages, hidden = forward_swin(c, w, g["pixel_values"])
    assert np.abs(stages[0].weights[1] - g["attn_0_1"]).max() <= 1e-5
    np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=2e-5, rtol=1e-5)
