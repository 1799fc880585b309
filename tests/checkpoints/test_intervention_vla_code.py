"""The exported SmolVLA hook scripts (intervention_vla_code): the scripts the golden maker ran with lerobot
(tools/make_vla_code_goldens.py: the window's session on the VLM and on the expert, with ablation, scaling,
knockouts of every head or one, and head patches from a clean instruction) are, byte for byte, the ones attnviz
writes today from the session, and the action chunk's velocity they printed before and after equals the window's
own pass (vla_window_study) to 1e-5; bad requests are one line."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
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
MARKERS = FOLDER.parent / "tiny_smolvla_markers"  # image markers, a padded empty camera, the instruction padded
CASES = {"tiny_smolvla": ("vlm_zero_patch", "expert_mean_knockout", "vlm_scale_knockout", "expert_scale_head_patch"),
         "tiny_smolvla_markers": ("markers_vlm_mean_patch", "markers_expert_mean_knockout")}
LEROBOT = Path("/tmp/lerobot/bin/python")


def _policy(folder: Path):
    """(checkpoint, golden, VlaInput) of a policy folder's golden_vla_code.npz."""
    ck = load_checkpoint(folder)
    g = dict(np.load(folder / "golden_vla_code.npz"))
    images = [np.asarray(load_image(folder / f"camera{i}.png", alpha="drop")) for i in range(len(ck.spec.cameras))]
    inp = vla_input(ck, images, str(g["instruction"]), state=[float(v) for v in g["state"]],
                    noise_seed=int(g["noise_seed"]), time=float(g["time"]))
    return ck, g, inp


@pytest.fixture(scope="module")
def policy():
    return _policy(FOLDER)


@pytest.fixture(scope="module")
def policies(policy):
    return {"tiny_smolvla": policy, "tiny_smolvla_markers": _policy(MARKERS)}


def session(g, name):
    """(stack, Interventions, allowed) of a golden's case."""
    case = json.loads(str(g[f"{name}_case"]))
    sp = dict(case["spec"])
    sp["heads"] = tuple(tuple(h) for h in sp["heads"])
    spec = Interventions(stack=case["stack"], **{k: tuple(v) if isinstance(v, list) else v for k, v in sp.items()})
    allowed = None if case["ko"] is None else ~g[f"{name}_removed"]
    return case["stack"], spec, allowed


@pytest.mark.parametrize("model, name", [(m, c) for m, cases in CASES.items() for c in cases])
def test_the_script_run_with_lerobot_gives_the_windows_velocity(policies, model, name):
    ck, g, inp = policies[model]
    stack, spec, allowed = session(g, name)
    rel = f"tests/data/checkpoints/{model}"  # as the goldens' scripts name the policy
    code = vla_script(ck, inp, spec, stack, allowed=allowed, folder=rel)
    assert not code["pytorch_problem"] and code["lens"] == "" and "TransformerLens" in code["lens_problem"]
    assert hashlib.sha256(code["pytorch"].encode()).hexdigest() == str(g[f"{name}_sha256"])
    assert code["image_files"] == [IMAGE_FILES.format(i=i) for i in range(len(inp.images))]
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
    assert repr(str(Path(ck.folder).resolve())) in text and f"default_rng({int(g['noise_seed'])})" in text


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


@pytest.mark.skipif(not LEROBOT.is_file(), reason="no lerobot environment at /tmp/lerobot")
def test_the_export_runs_as_the_window_saves_it(policy, tmp_path):
    """The script and its pictures as the code dialog saves them (PNG files under the names the dict gives), run
    with lerobot from a folder of their own, the policy named by its absolute path (the default)."""
    from PIL import Image

    ck, g, inp = policy
    spec = Interventions(heads=((0, 1), (3, 3)), mode="scale", factor=-1.0, stack="expert")
    code = vla_script(ck, inp, spec, "expert")
    (tmp_path / "hooks.py").write_text(code["pytorch"])
    for rgb, name in zip(code["images"], code["image_files"]):
        Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(tmp_path / name)
    out = subprocess.run([str(LEROBOT), "hooks.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    eff = vla_window_study(ck, inp, spec, "expert")
    np.testing.assert_allclose(eff.actions_after, found["after"], atol=1e-5, rtol=0)
    assert found["largest_change"] == pytest.approx(eff.max_abs_change, abs=1e-5) and found["largest_change"] > 1e-2
