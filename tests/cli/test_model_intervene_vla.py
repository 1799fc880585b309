"""``model ablate`` / ``model patch`` on the tiny SmolVLA policy through cmd_vla (the dispatch hands it the loaded
policy): the arrays written equal the lerobot golden's velocities, and bad input is one CliError line."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from attnviz.checkpoints import load_checkpoint
from attnviz.cli import CliError
from attnviz.cli.model_intervene_vla import add_vla_arguments, cmd_vla

FOLDER = Path(__file__).resolve().parents[1] / "data" / "checkpoints" / "tiny_smolvla"
TOL = 1e-5


@pytest.fixture(scope="module")
def policy():
    with np.load(FOLDER / "golden_interventions.npz") as z:
        g = {k: z[k] for k in z.files}
    return load_checkpoint(FOLDER), g


def _args(g, tmp_path, **kw) -> argparse.Namespace:
    base = dict(model_dir=str(FOLDER), text=str(g["instruction"]), image=[FOLDER / "camera0.png", FOLDER / "camera1.png"],
                heads="1.1,3.0", mode="zero", means=None, stack="expert", target=None, npz=tmp_path / "out.npz",
                state=",".join(str(v) for v in g["state"]), noise_seed=int(g["noise_seed"]), time=float(g["time"]))
    base.update(kw)
    return argparse.Namespace(**base)


def test_ablate_writes_the_velocities(policy, tmp_path, capsys):
    ck, g = policy
    assert cmd_vla(_args(g, tmp_path), ck) == 0
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_allclose(z["velocity_before"], g["velocity_plain"], atol=TOL, rtol=0)
        np.testing.assert_allclose(z["velocity_after"], g["velocity_expert_zero"], atol=TOL, rtol=0)
        assert z["attentions_after"].shape == (4, 4, 36, 36) and z["action_attentions_after"].shape == (4, 4, 5, 36)
        assert z["max_abs_change"] > 0.1 and z["cosine"] < 0.99 and str(z["stack"]) == "expert"
    out = capsys.readouterr().out
    assert "zero-ablated expert heads 1.1, 3.0 over 36 tokens" in out and "max |change|" in out


def test_ablate_vlm_mean_is_the_default_stack(policy, tmp_path):
    ck, g = policy
    assert cmd_vla(_args(g, tmp_path, heads="0.1,2.3", mode="mean", stack=None), ck) == 0
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_allclose(z["velocity_after"], g["velocity_vlm_mean"], atol=TOL, rtol=0)


def test_patch_from_a_clean_state(policy, tmp_path):
    ck, g = policy
    args = _args(g, tmp_path, stack="vlm", layer=1, head=2, clean=str(g["instruction"]),
                 corrupted=str(g["instruction"]), clean_state=",".join(str(v) for v in g["clean_state"]))
    del args.text, args.heads, args.mode
    assert cmd_vla(args, ck) == 0
    with np.load(tmp_path / "out.npz") as z:
        np.testing.assert_allclose(z["velocity_patched"], g["velocity_patch_vlm_state"], atol=TOL, rtol=0)
        np.testing.assert_allclose(z["velocity_corrupted"], g["velocity_plain"], atol=TOL, rtol=0)
        assert not np.allclose(z["velocity_clean"], z["velocity_corrupted"])


@pytest.mark.parametrize("kw, msg", [
    (dict(heads="0.9"), "expert head 9 is out of range"),
    (dict(stack="encoder"), "stacks vlm .* and expert"),
    (dict(state="1,2"), "this policy reads 4"),
    (dict(state=None), "needs the robot state"),
    (dict(text=None), "give the task instruction with --text"),
    (dict(image=[FOLDER / "camera0.png"]), "one picture per camera"),
    (dict(means=Path("x.parquet")), "--means"),
    (dict(time=2.0), "flow time"),
])
def test_bad_input_is_one_line(policy, tmp_path, kw, msg):
    ck, g = policy
    with pytest.raises(CliError, match=msg) as info:
        cmd_vla(_args(g, tmp_path, **kw), ck)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out.npz").exists()


def test_add_vla_arguments_parses_a_policy_run():
    p = argparse.ArgumentParser()
    add_vla_arguments(p, patching=True)
    a = p.parse_args(["--state", "1,2", "--noise-seed", "3", "--time", "0.5", "--clean-state", "0,0"])
    assert (a.state, a.noise_seed, a.time, a.clean_state) == ("1,2", 3, 0.5, "0,0")
