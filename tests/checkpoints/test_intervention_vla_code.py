"""The exported SmolVLA hook scripts (intervention_vla_code): the scripts the golden maker ran with lerobot
(tools/make_vla_code_goldens.py: the window's session on the VLM and on the expert, with ablation, scaling,
knockouts of every head or one, and head patches from a clean instruction) are, byte for byte, the ones attnviz
writes today from the session, and the action chunk's velocity they printed before and after equals the window's
own pass (vla_window_study) to 1e-5; bad requests are one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.intervention_vla import VlaInput, vla_input
from attnviz.checkpoints.intervention_vla_code import IMAGE_FILES, vla_script
from attnviz.checkpoints.intervention_vla_study import vla_window_study
from attnviz.model.state import Interventions
from attnviz.sources.image import load_image

FOLDER = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "tiny_smolvla"
REL = str(FOLDER.relative_to(FOLDER.parents[3]))  # as the goldens' scripts name the policy
CASES = ("vlm_zero_patch", "expert_mean_knockout", "vlm_scale_knockout", "expert_scale_head_patch")


@pytest.fixture(scope="module")
def policy():
    ck = load_checkpoint(FOLDER)
    g = dict(np.load(FOLDER / "golden_vla_code.npz"))
    images = [np.asarray(load_image(FOLDER / f"camera{i}.png", alpha="drop")) for i in range(2)]
    inp = vla_input(ck, images, str(g["instruction"]), state=[float(v) for v in g["state"]],
                    noise_seed=int(g["noise_seed"]), time=float(g["time"]))
    return ck, g, inp


def session(g, name):
    """(stack, Interventions, allowed) of a golden's case."""
    case = json.loads(str(g[f"{name}_case"]))
    sp = dict(case["spec"])
    sp["heads"] = tuple(tuple(h) for h in sp["heads"])
    spec = Interventions(stack=case["stack"], **{k: tuple(v) if isinstance(v, list) else v for k, v in sp.items()})
    allowed = None if case["ko"] is None else ~g[f"{name}_removed"]
    return case["stack"], spec, allowed


@pytest.mark.parametrize("name", CASES)
def test_the_script_run_with_lerobot_gives_the_windows_velocity(policy, name):
    ck, g, inp = policy
    stack, spec, allowed = session(g, name)
    code = vla_script(ck, inp, spec, stack, allowed=allowed, folder=REL)
    assert not code["pytorch_problem"] and code["lens"] == "" and "TransformerLens" in code["lens_problem"]
    assert hashlib.sha256(code["pytorch"].encode()).hexdigest() == str(g[f"{name}_sha256"])
    assert code["image_files"] == [IMAGE_FILES.format(i=i) for i in range(2)]
    for saved, given in zip(code["images"], inp.images):
        np.testing.assert_array_equal(saved, given)
    eff = vla_window_study(ck, inp, spec, stack, allowed=allowed)
    np.testing.assert_allclose(eff.actions_before, g[f"{name}_before"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(eff.actions_after, g[f"{name}_after"], atol=1e-5, rtol=0)
    assert np.abs(g[f"{name}_after"] - g[f"{name}_before"]).max() > 1e-2  # the edits did move the chunk


def test_the_script_holds_only_the_edits_asked_for(policy):
    ck, g, inp = policy
    text = vla_script(ck, inp, Interventions(heads=((1, 2),), mode="zero"), "expert")["pytorch"]
    compile(text, "hooks.py", "exec")
    assert "edits = {'expert': {1: [(2, 'zero', None)]}}" in text
    assert "knock" not in text and "recorded" not in text and "clean" not in text
    assert repr(str(ck.folder)) in text and f"default_rng({int(g['noise_seed'])})" in text


def test_a_knockout_leaving_a_row_no_key_is_said_not_written(policy):
    ck, g, inp = policy
    removed = g["expert_mean_knockout_removed"].copy()
    T = removed.shape[0]
    removed[T - 1, :] = True  # the last action sees nothing at all
    code = vla_script(ck, inp, Interventions(knockout_layers=(1,)), "expert", allowed=~removed)
    assert code["pytorch"] == "" and "no key at all" in code["pytorch_problem"]


@pytest.mark.parametrize("call, message", [
    (lambda ck, inp, g: vla_script(ck, inp, Interventions(heads=((0, 9),)), "vlm"), "head 9 is out of range"),
    (lambda ck, inp, g: vla_script(ck, inp, Interventions(heads=((7, 0),)), "expert"), "layer 7 is out of range"),
    (lambda ck, inp, g: vla_script(ck, inp, Interventions(heads=((0, 0),)), "decoder"), "choose vlm or expert"),
    (lambda ck, inp, g: vla_script(ck, inp, Interventions(knockout_layers=(0,)), "vlm", allowed=np.ones((4, 4), bool)),
     "design a"),
    (lambda ck, inp, g: vla_script(ck, inp, Interventions(knockout_layers=(0,)), "vlm"), "needs the session's mask"),
    (lambda ck, inp, g: vla_script(ck, inp, Interventions(patch="head", clean=" "), "vlm"), "clean instruction"),
    (lambda ck, inp, g: vla_script(ck, inp, Interventions(patch="head", clean="pick up the big red cube now"), "vlm"),
     "same length"),
    (lambda ck, inp, g: vla_script(ck, VlaInput(images=inp.images[:1], text=inp.text, state=inp.state), Interventions(),
                                   "vlm"), "one picture per camera"),
    (lambda ck, inp, g: vla_script(ck, VlaInput(images=inp.images, text=inp.text, state=(1.0,)), Interventions(),
                                   "vlm"), "robot state has 1 number"),
    (lambda ck, inp, g: vla_script(ck, VlaInput(images=inp.images, text=inp.text, state=inp.state, time=2.0),
                                   Interventions(), "vlm"), "flow time"),
    (lambda ck, inp, g: vla_script(load_checkpoint(FOLDER.parent / "tiny_gpt2"), inp, Interventions(), "vlm"),
     "not a SmolVLA policy"),
])
def test_bad_requests_are_one_line(policy, call, message):
    ck, g, inp = policy
    with pytest.raises(CheckpointError, match=message) as err:
        call(ck, inp, g)
    assert "\n" not in str(err.value)
