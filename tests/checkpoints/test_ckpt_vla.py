"""SmolVLA policies (lerobot's layout) against goldens made with lerobot 0.4.4 by tools/make_vla_goldens.py:
the prefix ids, the policy's 2-D masks, every map of the VLM prefix pass and of the action expert, the vision
tower's maps and the velocity; the block-mask structure; refusals of bad inputs."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA, golden
from PIL import Image

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.multimodal import MultimodalCheckpoint

MAIN = DATA / "tiny_smolvla"
MARKERS = DATA / "tiny_smolvla_markers"
MAP_TOL = 1e-5  # float32 maps against lerobot's eager attention
VELOCITY_TOL = 1e-4


def _pictures(folder) -> list[np.ndarray]:
    return [np.asarray(Image.open(p).convert("RGB")) for p in sorted(folder.glob("camera*.png"))]


@pytest.fixture(scope="module")
def main():
    return load_checkpoint(MAIN), golden(MAIN / "golden.npz"), _pictures(MAIN)


@pytest.fixture(scope="module")
def markers():
    return load_checkpoint(MARKERS), golden(MARKERS / "golden.npz"), _pictures(MARKERS)


def _run(ck, g, pics, **kw):
    opts = dict(state=list(g["state"]), noise_seed=int(g["noise_seed"]), time=float(g["time"]))
    opts.update(kw)
    return ck.run(pics, str(g.get("text", g["instruction"])), **opts)


@pytest.fixture(scope="module")
def main_run(main):
    return _run(*main)


@pytest.fixture(scope="module")
def markers_run(markers):
    return _run(*markers)


def test_loads_as_a_policy(main):
    ck, _, _ = main
    assert isinstance(ck, MultimodalCheckpoint) and ck.family == "smolvla"
    assert ck.n_images == 2 and set(ck.options) == {"state", "noise_seed", "time"}
    assert "expert 4 layers" in ck.describe() and "bf16" in ck.describe()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_main_golden(main, dtype):
    ck, g, pics = main
    r = _run(ck, g, pics, dtype=dtype)
    Tp = g["prefix_mask"].shape[0]
    lang = r.segment("language")
    np.testing.assert_array_equal(r.ids[lang.start:lang.stop], g["lang_ids"])
    np.testing.assert_allclose(r.pixels, g["pixels"], atol=1e-6)
    np.testing.assert_allclose(r.vision_attentions, g["vision_attentions"], atol=MAP_TOL)
    np.testing.assert_array_equal(r.mask[:Tp, :Tp], g["prefix_mask"])
    np.testing.assert_allclose(r.attentions[:, :, :Tp, :Tp], g["prefix_attentions"], atol=MAP_TOL)
    np.testing.assert_array_equal(r.extra["action_layer_masks"], g["expert_masks"])
    np.testing.assert_allclose(r.action_attentions, g["expert_attentions"], atol=MAP_TOL)
    np.testing.assert_allclose(r.extra["state_normalized"], g["state_normalized"], atol=1e-6)
    np.testing.assert_array_equal(r.extra["noise"], g["noise"])
    np.testing.assert_allclose(r.extra["velocity"], g["velocities"][1], atol=VELOCITY_TOL)
    assert r.attentions.dtype == dtype


def test_main_velocities_over_seeds_and_times(main):
    ck, g, pics = main
    for (seed, t), v in zip(g["velocity_cases"], g["velocities"]):
        r = _run(ck, g, pics, noise_seed=int(seed), time=float(t))
        np.testing.assert_allclose(r.extra["velocity"], v, atol=VELOCITY_TOL)


def test_markers_golden(markers, markers_run):
    """Image markers, a padded empty camera and a max_length-padded instruction: the tokens lerobot masks for
    every query are left out, every other map is lerobot's."""
    ck, g, pics = markers
    r = markers_run
    keep = np.flatnonzero(g["prefix_valid"])  # (Tp,)
    Tp, Tg = keep.size, g["prefix_valid"].size
    assert r.segment("actions").start == Tp
    kx = np.concatenate([keep, Tg + np.arange(r.action_attentions.shape[2])])
    lang = r.segment("language")
    np.testing.assert_array_equal(r.ids[lang.start:lang.stop], g["lang_ids"][g["lang_mask"]])
    np.testing.assert_array_equal(r.mask[:Tp, :Tp], g["prefix_mask"][np.ix_(keep, keep)])
    np.testing.assert_allclose(r.attentions[:, :, :Tp, :Tp], g["prefix_attentions"][:, :, keep][:, :, :, keep],
                               atol=MAP_TOL)
    np.testing.assert_array_equal(r.extra["action_layer_masks"], g["expert_masks"][..., kx])
    np.testing.assert_allclose(r.action_attentions, g["expert_attentions"][..., kx], atol=MAP_TOL)
    np.testing.assert_allclose(r.vision_attentions[0], g["vision_attentions"][0], atol=MAP_TOL)
    for (seed, t), v in zip(g["velocity_cases"], g["velocities"]):
        rr = _run(ck, g, pics, noise_seed=int(seed), time=float(t))
        np.testing.assert_allclose(rr.extra["velocity"], v, atol=VELOCITY_TOL)
    # the expert runs beside VLM layers 0 and 2 only; layers 1 and 3 have no action rows
    np.testing.assert_array_equal(r.extra["expert_vlm_layer"], [0, 2])
    assert not r.attentions[1, :, Tp:].any() and not r.attentions[3, :, Tp:].any()
    np.testing.assert_array_equal(r.attentions[2, :, Tp:], r.action_attentions[1])


def test_markers_long_instruction_truncated(markers):
    ck, g, pics = markers
    r = _run(ck, {**g, "text": g["long_instruction"]}, pics)
    lang = r.segment("language")
    np.testing.assert_array_equal(r.ids[lang.start:lang.stop], g["long_lang_ids"])
    assert lang.stop - lang.start == 16  # tokenizer_max_length
    np.testing.assert_allclose(r.extra["velocity"], g["long_velocity"], atol=VELOCITY_TOL)


@pytest.mark.parametrize("which", ["main", "markers"])
def test_block_mask_structure(which, main_run, markers_run):
    """The seed-000 block mask with the state as its own block: images and language see each other both ways,
    the state sees them and itself and nothing in the prefix sees it, no prefix token sees an action, the
    actions see the whole prefix and each other causally (the seed's FAST-action rule)."""
    from attnviz.model.mask.presets import preset_mask
    from attnviz.model.segments import Segment

    r = main_run if which == "main" else markers_run
    names = [s.name for s in r.segments]
    assert names == ["images", "language", "state", "actions"]
    img, lang, st, act = (r.segment(n) for n in names)
    m = r.mask
    pre = slice(0, st.stop)
    il = slice(img.start, lang.stop)
    assert m[il, il].all()
    assert not m[il, st.start].any() and m[st.start, pre].all()
    assert not m[pre, act.start:].any()
    assert m[act.start:, pre].all()
    Ta = act.stop - act.start
    np.testing.assert_array_equal(m[act.start:, act.start:], np.tril(np.ones((Ta, Ta), bool)))
    np.testing.assert_array_equal(r.action_mask, m[act.start:])
    # ... which is the seed's preset ("vla": images I, language P, actions A) outside the state's row and column
    segs = [Segment(s.name, s.start, s.stop) for s in r.segments]
    seed = preset_mask("vla", segs, segs, r.T, r.T, roles={"images": "I", "language": "P", "state": "P", "actions": "A"})
    other = np.ones(r.T, bool)
    other[st.start] = False
    np.testing.assert_array_equal(m[np.ix_(other, other)], seed[np.ix_(other, other)])
    # cross-attention layers of the expert see the prefix only
    for lm, cross in zip(r.extra["action_layer_masks"], r.extra["expert_cross"]):
        assert lm[:, :act.start].all()
        assert (not lm[:, act.start:].any()) if cross else np.array_equal(lm[:, act.start:], m[act.start:, act.start:])


def test_maps_are_rows_of_weights(main_run):
    r = main_run
    act = r.segment("actions")
    np.testing.assert_allclose(r.attentions[:, :, :act.start, :].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(r.action_attentions.sum(-1), 1.0, atol=1e-5)
    assert not r.action_attentions[~np.broadcast_to(r.extra["action_layer_masks"][:, None],
                                                     r.action_attentions.shape)].any()
    assert [g.name for g in r.patches] == ["top", "wrist"] and all(g.grid == (3, 3) for g in r.patches)
    top = r.patches[0]  # a 30 x 20 picture resized to 24 x 16 and padded on the left
    assert top.box == pytest.approx((0.0, -10.0, 30.0, 20.0))


@pytest.mark.parametrize("kw, words", [
    ({"state": [0.1, 0.2]}, "has 2 numbers; this policy reads 4"),
    ({"state": None}, "needs the robot state"),
    ({"state": [0.0, float("nan"), 0.0, 0.0]}, "finite"),
    ({"time": 1.5}, "must be in [0, 1]"),
    ({"time": -0.1}, "must be in [0, 1]"),
    ({"time": float("nan")}, "number in [0, 1]"),
    ({"noise_seed": -1}, "noise seed"),
])
def test_bad_inputs(main, kw, words):
    ck, g, pics = main
    with pytest.raises(CheckpointError) as exc:
        _run(ck, g, pics, **kw)
    msg = str(exc.value)
    assert words in msg and "\n" not in msg


def test_missing_camera_refused(main):
    ck, g, pics = main
    with pytest.raises(CheckpointError, match=r"one picture per camera \(observation.images.top, "
                                              r"observation.images.wrist, in that order\); 1 was given"):
        _run(ck, g, pics[:1])
    with pytest.raises(CheckpointError, match="takes 2 images"):
        _run(ck, g, pics + pics[:1])


def test_empty_instruction_refused(main):
    ck, g, pics = main
    with pytest.raises(CheckpointError, match="instruction is empty"):
        _run(ck, {**g, "text": "  "}, pics)


def _copy(tmp_path, edit):
    dst = tmp_path / "policy"
    shutil.copytree(MAIN, dst)
    cfg = json.loads((dst / "config.json").read_text())
    edit(cfg)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize("edit, words", [
    (lambda c: c.update(vlm_model_name="no/such-vlm"), "neither a folder beside it nor in the local Hugging Face cache"),
    (lambda c: c.update(vlm_model_name="missing_folder"), "is not a folder with a config.json"),
    (lambda c: c.update(num_expert_layers=2), "lerobot"),
    (lambda c: c.update(resize_imgs_with_padding=[24, 20]), "must be square"),
    (lambda c: c.update(max_state_dim=2), "max_state_dim"),
    (lambda c: c["input_features"].pop("observation.state"), "observation.state"),
    (lambda c: c.update(adapt_to_pi_aloha=True), "adapt_to_pi_aloha"),
])
def test_bad_folders(tmp_path, edit, words):
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(_copy(tmp_path, edit))
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_without_preprocessor_the_state_is_used_as_given(tmp_path, main):
    ck, g, pics = main
    dst = _copy(tmp_path, lambda c: None)
    (dst / "policy_preprocessor.json").unlink()
    r = _run(load_checkpoint(dst), g, pics)
    np.testing.assert_array_equal(r.extra["state_normalized"], g["state"])
    assert any("used as given" in n for n in r.notes)


def test_weights_must_match(tmp_path):
    dst = _copy(tmp_path, lambda c: c.update(max_action_dim=7))
    with pytest.raises(CheckpointError, match="config and weights do not match"):
        load_checkpoint(dst)
