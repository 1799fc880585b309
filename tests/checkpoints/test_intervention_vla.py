"""Interventions on the tiny SmolVLA policies (tiny_smolvla, tiny_smolvla_markers) against lerobot 0.4.4 under
PyTorch forward pre-hooks on the o_proj of the VLM text layers and of the action expert
(tools/make_vla_intervention_goldens.py): the expert's velocity of every ablation, scaling, patch and knockout,
the maps of some; the effect read-out; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, golden
from PIL import Image

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.intervention_vla import (VlaEdit, block_knockout, check_stack_head, parse_stack_heads,
                                                  sequence_length, vla_ablate, vla_input, vla_knockout, vla_patch,
                                                  vla_run, vla_scale, vla_study)
from attnviz.checkpoints.interventions import Edit

FOLDER = DATA / "tiny_smolvla"
VELOCITY_TOL = 1e-5  # float32 and float64 passes against lerobot's float32 one: measured up to 4.9e-6 and 3.4e-6
MAP_TOL = 1e-5  # measured up to 3.0e-6


@pytest.fixture(scope="module")
def policy():
    ck = load_checkpoint(FOLDER)
    g = golden(FOLDER / "golden_interventions.npz")
    pics = [np.asarray(Image.open(p).convert("RGB")) for p in sorted(FOLDER.glob("camera*.png"))]
    return ck, g, pics


def _inp(ck, g, pics, state=None):
    return vla_input(ck, pics, str(g["instruction"]), state=g["state"] if state is None else state,
                     noise_seed=int(g["noise_seed"]), time=float(g["time"]))


def _heads(a) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in row) for row in a]


def _close(eff_or_pass, g, case):
    v = eff_or_pass.after.velocity if hasattr(eff_or_pass, "after") else eff_or_pass.velocity
    np.testing.assert_allclose(v, g[f"velocity_{case}"], atol=VELOCITY_TOL, rtol=0)
    assert np.abs(g[f"velocity_{case}"] - g["velocity_plain"]).max() > 0.01  # the edit does move the actions


def test_plain_pass(policy):
    ck, g, pics = policy
    p = vla_run(ck, _inp(ck, g, pics))
    np.testing.assert_allclose(p.velocity, g["velocity_plain"], atol=VELOCITY_TOL, rtol=0)
    assert p.T == sum(sequence_length(ck, str(g["instruction"]))) == g["removed_knockout_actions_state"].shape[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("stack", ["vlm", "expert"])
def test_ablation(policy, stack, mode, dtype):
    ck, g, pics = policy
    eff = vla_ablate(ck, _inp(ck, g, pics), _heads(g[f"ablate_{stack}"]), stack=stack, mode=mode, dtype=dtype)
    _close(eff, g, f"{stack}_{mode}")
    np.testing.assert_allclose(eff.before.velocity, g["velocity_plain"], atol=VELOCITY_TOL, rtol=0)
    case = f"{stack}_{mode}"
    if f"prefix_attentions_{case}" in g:
        Tp = g[f"prefix_attentions_{case}"].shape[-1]
        np.testing.assert_allclose(eff.after.attentions[:, :, :Tp, :Tp], g[f"prefix_attentions_{case}"], atol=MAP_TOL)
        np.testing.assert_allclose(eff.after.action_attentions, g[f"expert_attentions_{case}"], atol=MAP_TOL)


@pytest.mark.parametrize("stack", ["vlm", "expert"])
def test_scaling(policy, stack):
    ck, g, pics = policy
    eff = vla_scale(ck, _inp(ck, g, pics), _heads(g[f"scale_{stack}"]), float(g[f"factor_{stack}"]), stack=stack)
    _close(eff, g, f"{stack}_scale")


def test_patch_from_another_state(policy):
    ck, g, pics = policy
    inp, clean = _inp(ck, g, pics), _inp(ck, g, pics, state=g["clean_state"])
    for stack, case in (("vlm", "patch_vlm_state"), ("expert", "patch_expert_state")):
        layer, head = (int(v) for v in g[f"patch_{stack}"])
        eff = vla_patch(ck, clean, inp, layer, head, stack=stack)
        _close(eff, g, case)
        assert eff.clean is not None and not np.allclose(eff.clean.velocity, eff.before.velocity)


def test_patch_from_another_picture(policy):
    ck, g, pics = policy
    clean = vla_input(ck, [g["clean_picture0"]] + pics[1:], str(g["instruction"]), state=g["state"],
                      noise_seed=int(g["noise_seed"]), time=float(g["time"]))
    layer, head = (int(v) for v in g["patch_vlm"])
    _close(vla_patch(ck, clean, _inp(ck, g, pics), layer, head, stack="vlm"), g, "patch_vlm_picture")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_knockouts(policy, dtype):
    ck, g, pics = policy
    inp = _inp(ck, g, pics)
    Tp = g["prefix_attentions_knockout_actions_state"].shape[-1]
    runs = {"knockout_actions_state": vla_knockout(ck, inp, g["removed_knockout_actions_state"], stack="expert",
                                                   dtype=dtype),
            "knockout_language_wrist": vla_knockout(ck, inp, g["removed_knockout_language_wrist"], stack="vlm",
                                                    layers=[int(v) for v in g["ko_vlm_layers"]], dtype=dtype),
            "knockout_expert_head": vla_knockout(ck, inp, g["removed_knockout_expert_head"], stack="expert",
                                                 layers=[int(g["ko_head"][0])], heads=[int(g["ko_head"][1])],
                                                 dtype=dtype)}
    for case, eff in runs.items():
        _close(eff, g, case)
        np.testing.assert_allclose(eff.after.attentions[:, :, :Tp, :Tp], g[f"prefix_attentions_{case}"], atol=MAP_TOL)
        np.testing.assert_allclose(eff.after.action_attentions, g[f"expert_attentions_{case}"], atol=MAP_TOL)
    # the removed edges carry no weight, and only where they were removed
    a = runs["knockout_actions_state"].after.action_attentions
    assert not a[:, :, :, Tp - 1].any() and runs["knockout_actions_state"].before.action_attentions[:, :, :, Tp - 1].all()
    h = runs["knockout_expert_head"].after.action_attentions
    layer, head = (int(v) for v in g["ko_head"])
    n_img = runs["knockout_expert_head"].before.result.segment("images").stop
    assert not h[layer, head, :, :n_img].any() and h[layer, head - 1, :, :n_img].any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_markers_policy(policy, dtype):
    """Image markers, a padded empty camera, a max_length-padded instruction and two expert layers beside VLM
    layers 0 and 2: lerobot's pads are left out of attnviz's sequence, so a mean is over the valid positions and
    a knockout's edges are attnviz's tokens (the golden maps them to lerobot's)."""
    _, g, _ = policy
    folder = DATA / "tiny_smolvla_markers"
    ck = load_checkpoint(folder)
    pics = [np.asarray(Image.open(p).convert("RGB")) for p in sorted(folder.glob("camera*.png"))]
    inp = vla_input(ck, pics, str(g["markers_instruction"]), state=g["markers_state"],
                    noise_seed=int(g["noise_seed"]), time=float(g["time"]))
    np.testing.assert_allclose(vla_run(ck, inp, dtype=dtype).velocity, g["markers_velocity_plain"],
                               atol=VELOCITY_TOL, rtol=0)
    for stack in ("vlm", "expert"):
        for mode in ("zero", "mean"):
            eff = vla_ablate(ck, inp, _heads(g[f"markers_ablate_{stack}"]), stack=stack, mode=mode, dtype=dtype)
            v = g[f"markers_velocity_{stack}_{mode}"]
            np.testing.assert_allclose(eff.after.velocity, v, atol=VELOCITY_TOL, rtol=0)
            assert np.abs(v - g["markers_velocity_plain"]).max() > 0.1
    eff = vla_knockout(ck, inp, g["markers_removed"], stack="expert", dtype=dtype)
    np.testing.assert_allclose(eff.after.velocity, g["markers_velocity_knockout_actions_state"], atol=VELOCITY_TOL,
                               rtol=0)
    np.testing.assert_array_equal(block_knockout(eff.before.result, "actions", "state"), g["markers_removed"])


def test_block_knockout_is_the_segment_block(policy):
    ck, g, pics = policy
    p = vla_run(ck, _inp(ck, g, pics))
    np.testing.assert_array_equal(block_knockout(p.result, "actions", "state"), g["removed_knockout_actions_state"])
    with pytest.raises(CheckpointError, match="segment 'proprio'"):
        block_knockout(p.result, "actions", "proprio")


def test_effects_read_out(policy):
    ck, g, pics = policy
    eff = vla_ablate(ck, _inp(ck, g, pics), _heads(g["ablate_expert"]), stack="expert")
    a = ck.spec.action_dim
    before, after = g["velocity_plain"][:, :a].astype(np.float64), g["velocity_expert_zero"][:, :a].astype(np.float64)
    assert eff.max_abs_change == pytest.approx(np.abs(after - before).max(), abs=2e-5)
    cos = before.ravel() @ after.ravel() / (np.linalg.norm(before) * np.linalg.norm(after))
    assert eff.cosine == pytest.approx(cos, abs=1e-5) and eff.cosine < 0.99
    # an expert edit leaves the VLM's prefix maps alone; its first edited layer (1) changes from there on
    assert not eff.map_change[0] and not eff.expert_map_change[:2].any() and eff.expert_map_change[2] > 0
    np.testing.assert_array_equal(eff.after.attentions[:, :, :-5, :-5], eff.before.attentions[:, :, :-5, :-5])


def test_parse_heads_per_stack(policy):
    ck, _, _ = policy
    assert parse_stack_heads(ck, "0.1, 3.2", "expert") == [(0, 1), (3, 2)]
    for text, stack, msg in (("4.0", "vlm", "vlm layer 4 is out of range: the VLM has 4 layers"),
                             ("0.4", "expert", "expert head 4 is out of range: the action expert has 4 heads"),
                             ("1-2", "vlm", "is not a head"), ("", "vlm", "is not a head"),
                             ("0.1", "decoder", "stack 'decoder'")):
        with pytest.raises(CheckpointError, match=msg):
            parse_stack_heads(ck, text, stack)


def test_bad_input_is_one_line(policy):
    ck, g, pics = policy
    inp = _inp(ck, g, pics)
    T = g["removed_knockout_actions_state"].shape[0]
    bad = [
        (lambda: vla_knockout(ck, inp, np.zeros((T - 1, T - 1), bool), stack="expert"), f"must be bool \\({T}, {T}\\)"),
        (lambda: vla_knockout(ck, inp, np.zeros((T, T)), stack="vlm"), "must be bool"),
        (lambda: vla_knockout(ck, inp, np.zeros((T, T), bool), stack="expert", layers=[7]), "expert layer 7"),
        (lambda: vla_ablate(ck, inp, [(0, 9)], stack="vlm"), "vlm head 9 is out of range"),
        (lambda: vla_ablate(ck, inp, [(0, 0)], mode="max"), "ablation mode 'max'"),
        (lambda: vla_scale(ck, inp, [(0, 0)], float("nan")), "must be a finite number"),
        (lambda: vla_run(ck, inp, VlaEdit(expert=Edit(patch_heads={(0, 0): np.zeros((31, 8), np.float32)}))),
         "must be \\(5, 8\\)"),
        (lambda: vla_run(ck, inp, VlaEdit(vlm=Edit(patch_residual={0: ([0], np.zeros((1, 32)))}))),
         "residual-stream patching"),
        (lambda: vla_patch(ck, vla_input(ck, pics, "pick up the red cube and put it in the box", state=g["state"]),
                           inp, 0, 0), "same token count"),
        (lambda: vla_input(ck, pics, "go", state=None), "needs the robot state"),
        (lambda: vla_run(ck, vla_input(ck, pics, "go", state=[1, 2])), "this policy reads 4"),
        (lambda: check_stack_head(ck, "expert", True, 0), "expert layer True"),
    ]
    for call, msg in bad:
        with pytest.raises(CheckpointError, match=msg) as info:
            call()
        assert "\n" not in str(info.value)


def test_other_checkpoints_are_refused():
    ck = load_checkpoint(DATA / "tiny_smolvlm")
    with pytest.raises(CheckpointError, match="not a SmolVLA policy"):
        vla_input(ck, [], "hi", state=[0.0])
    with pytest.raises(CheckpointError, match="not a SmolVLA policy"):
        vla_study(ck, None, VlaEdit())
