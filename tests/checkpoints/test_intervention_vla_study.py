"""The Intervene tab's study of a SmolVLA policy (intervention_vla_study): the session's interventions on the VLM or
the expert stack equal intervention_vla's own calls (themselves checked against lerobot's forward hooks), a knockout
takes the session's (T, T) mask, a patch the clean instruction, and the sweep ranks heads by the action chunk's
change; bad requests are one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.intervention_vla import (block_knockout, sequence_length, vla_ablate, vla_input,
                                                  vla_knockout, vla_scale)
from attnviz.checkpoints.intervention_vla_study import vla_window_study, vla_window_sweep
from attnviz.model.state import Interventions
from attnviz.sources.image import load_image

FOLDER = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "tiny_smolvla"


@pytest.fixture(scope="module")
def policy():
    ck = load_checkpoint(FOLDER)
    with np.load(FOLDER / "golden_interventions.npz") as z:
        text, state = str(z["instruction"]), [float(v) for v in z["state"]]
    images = [np.asarray(load_image(FOLDER / f"camera{i}.png", alpha="drop")) for i in range(2)]
    return ck, vla_input(ck, images, text, state=state)


@pytest.mark.parametrize("stack", ["vlm", "expert"])
def test_heads_ablated_and_scaled_in_the_window_are_intervention_vlas(policy, stack):
    ck, inp = policy
    eff = vla_window_study(ck, inp, Interventions(heads=((1, 1),), mode="zero", stack=stack), stack)
    ref = vla_ablate(ck, inp, [(1, 1)], stack=stack)
    np.testing.assert_array_equal(eff.after.velocity, ref.after.velocity)
    assert eff.max_abs_change == pytest.approx(ref.max_abs_change) and eff.max_abs_change > 0
    assert eff.cosine == pytest.approx(ref.cosine)
    eff = vla_window_study(ck, inp, Interventions(heads=((0, 2),), mode="scale", factor=0.5, stack=stack), stack)
    np.testing.assert_array_equal(eff.after.velocity, vla_scale(ck, inp, [(0, 2)], 0.5, stack=stack).after.velocity)
    change = eff.attention_change()
    assert change.shape == eff.maps("before").shape[:2]
    b, a, d = eff.attention(0, 2)
    np.testing.assert_allclose(d, a - b)
    assert eff.mask.shape == b.shape and eff.dimension_change().shape == (ck.spec.action_dim,)


def test_a_knockout_takes_the_sessions_mask(policy):
    ck, inp = policy
    plain = vla_window_study(ck, inp, Interventions(stack="expert"), "expert")
    removed = block_knockout(plain.before.result, "actions", "state")
    T = plain.before.T
    allowed = ~removed
    spec = Interventions(knockout_layers=tuple(range(ck.spec.expert.n_layer)), stack="expert")
    eff = vla_window_study(ck, inp, spec, "expert", allowed=allowed)
    ref = vla_knockout(ck, inp, removed, stack="expert")
    np.testing.assert_array_equal(eff.after.velocity, ref.after.velocity)
    assert "actions → state" in eff.applied[0]
    with pytest.raises(CheckpointError, match=f"run has {T} tokens"):
        vla_window_study(ck, inp, spec, "expert", allowed=np.ones((3, 3), bool))


def test_a_patch_takes_the_clean_instruction_of_the_same_length(policy):
    ck, inp = policy
    clean = inp.text.replace("cube", "ball")
    assert clean != inp.text and sequence_length(ck, clean) == sequence_length(ck, inp.text)
    spec = Interventions(patch="head", patch_layer=1, patch_head=0, clean=clean, stack="vlm")
    eff = vla_window_study(ck, inp, spec, "vlm")
    assert eff.clean is not None and "patched from the clean instruction" in eff.applied[0]
    np.testing.assert_array_equal(eff.before.velocity, vla_ablate(ck, inp, [(0, 0)]).before.velocity)
    assert eff.max_abs_change > 0  # the clean instruction's head moved the chunk
    with pytest.raises(CheckpointError, match="same length"):
        vla_window_study(ck, inp, Interventions(patch="head", clean=inp.text + " and more words here"), "vlm")
    with pytest.raises(CheckpointError, match="clean instruction"):
        vla_window_study(ck, inp, Interventions(patch="head", clean=" "), "vlm")


def test_the_sweep_ranks_heads_by_the_action_chunk_and_stops(policy):
    ck, inp = policy
    seen = []
    sw = vla_window_sweep(ck, inp, "expert", progress=lambda i, n: seen.append((i, n)))
    assert sw.complete and seen[-1] == (sw.grid.size, sw.grid.size)
    one = vla_ablate(ck, inp, [(1, 2)], stack="expert")
    assert sw.grid[1, 2] == pytest.approx(one.max_abs_change, abs=1e-12)
    calls = iter(range(100))
    part = vla_window_sweep(ck, inp, "vlm", metric="action_cosine", cancelled=lambda: next(calls) >= 3)
    assert part.done == 3 and not part.complete
    with pytest.raises(CheckpointError, match="out of range"):
        vla_window_study(ck, inp, Interventions(heads=((99, 0),), stack="vlm"), "vlm")
    with pytest.raises(CheckpointError, match="metric"):
        vla_window_sweep(ck, inp, "vlm", metric="kl")
