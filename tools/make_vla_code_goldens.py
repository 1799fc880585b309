"""Write ``golden_vla_code.npz`` beside tests/data/checkpoints/tiny_smolvla: attnviz's exported SmolVLA hook scripts
(attnviz/checkpoints/intervention_vla_code.py) run as written with lerobot.

Run once in the lerobot venv that tools/make_vla_goldens.py describes (lerobot 0.4.4, torch on CPU); attnviz itself
never imports torch:

    cd /work/main && /tmp/lerobot/bin/python tools/make_vla_code_goldens.py [tiny_smolvla tiny_smolvla_markers]

The inputs are those of the policy's ``golden_interventions.npz`` (tools/make_vla_intervention_goldens.py): its two
camera pictures, instruction, state, noise seed and flow time. Each case is the window's session on one stack (a
JSON description kept as ``{case}_case``, which the test turns back into the session's ``Interventions``):

* ``vlm_zero_patch``: VLM heads 0.1 and 2.3 zeroed, VLM head 1.2 patched from the clean instruction CLEAN;
* ``expert_mean_knockout``: expert heads 1.1 and 3.0 set to their mean over the action rows, no action token
  seeing the state in every expert layer;
* ``vlm_scale_knockout``: VLM heads 1.0 and 3.2 scaled by 2.5, the instruction not seeing the wrist camera in VLM
  layers 0 and 2;
* ``expert_scale_head_patch``: expert heads 0.2 and 2.1 scaled by -1.5, the actions not seeing the pictures in
  expert layer 2's head 1 only, expert head 2.3 patched from CLEAN.

The knockouts' removed edges (T, T) are golden_interventions.npz's ``removed_<ko>`` (the session's mask is their
complement). tiny_smolvla_markers (image markers, a padded empty camera, the instruction padded to max_length, two
expert layers beside VLM layers 0 and 2) gets its own ``golden_vla_code.npz`` with golden_interventions.npz's
``markers_`` inputs and two cases, where lerobot's padded positions differ from attnviz's tokens:

* ``markers_vlm_mean_patch``: VLM heads 1.2 and 2.0 set to their mean over the unpadded prefix, the state not
  seeing the first three tokens (the front camera's markers and first image token) in VLM layers 1 and 3, VLM
  head 2.1 patched from MARKERS_CLEAN;
* ``markers_expert_mean_knockout``: expert heads 0.3 and 1.1 set to their mean, no action token seeing the state
  (``markers_removed``) in both expert layers.

For each case the tool writes the script with the module's ``hook_script`` (loaded by path: it needs the standard
library only) as ``vla_script`` writes it from the session, runs it from a scratch folder holding a
link to tests/ and the pictures saved under the names the script opens, and keeps ``{case}_sha256``,
``{case}_before`` and ``{case}_after`` (the velocity's first action_dim columns, (Ta, action_dim)).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
DATA = "tests/data/checkpoints"
CAMERAS = ("observation.images.top", "observation.images.wrist")  # config order
CLEAN = "pick up the red ball"  # as many tokens as the instruction
MARKERS_CLEAN = "open the cupboard"  # as many tokens as "open the drawer" (lerobot pads both to max_length)
CASES = {
    "vlm_zero_patch": {"stack": "vlm", "ko": None,
                       "spec": {"heads": [[0, 1], [2, 3]], "mode": "zero", "patch": "head", "patch_layer": 1,
                                "patch_head": 2, "clean": CLEAN}},
    "expert_mean_knockout": {"stack": "expert", "ko": "knockout_actions_state",
                             "spec": {"heads": [[1, 1], [3, 0]], "mode": "mean", "knockout_layers": [0, 1, 2, 3]}},
    "vlm_scale_knockout": {"stack": "vlm", "ko": "knockout_language_wrist",
                           "spec": {"heads": [[1, 0], [3, 2]], "mode": "scale", "factor": 2.5, "knockout_layers": [0, 2]}},
    "expert_scale_head_patch": {"stack": "expert", "ko": "knockout_expert_head",
                                "spec": {"heads": [[0, 2], [2, 1]], "mode": "scale", "factor": -1.5,
                                         "knockout_layers": [2], "knockout_heads": [1], "patch": "head",
                                         "patch_layer": 2, "patch_head": 3, "clean": CLEAN}},
}
MARKER_CASES = {
    "markers_vlm_mean_patch": {"stack": "vlm", "ko": "state_sees_not_first3",
                               "spec": {"heads": [[1, 2], [2, 0]], "mode": "mean", "knockout_layers": [1, 3],
                                        "patch": "head", "patch_layer": 2, "patch_head": 1, "clean": MARKERS_CLEAN}},
    "markers_expert_mean_knockout": {"stack": "expert", "ko": "markers_removed",
                                     "spec": {"heads": [[0, 3], [1, 1]], "mode": "mean", "knockout_layers": [0, 1]}},
}


def _code():
    spec = importlib.util.spec_from_file_location("intervention_vla_code",
                                                  ROOT / "attnviz/checkpoints/intervention_vla_code.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    return code


def script_args(code, case: dict, removed, n_head: int) -> tuple[dict, dict, str | None]:
    """(edits, knockout, clean) for hook_script: what vla_script makes of the case's session."""
    sp, stack = case["spec"], case["stack"]
    heads = [tuple(h) for h in sp["heads"]]
    ablate = {h: sp["mode"] for h in heads} if sp["mode"] in ("zero", "mean") else {}
    scale = {h: float(sp["factor"]) for h in heads} if sp["mode"] == "scale" else {}
    patch = [(sp["patch_layer"], sp["patch_head"])] if sp.get("patch") == "head" else []
    knock = {}
    if sp.get("knockout_layers"):
        ko = removed
        if sp.get("knockout_heads"):
            ko = np.zeros((n_head, *removed.shape), dtype=bool)  # (nh, T, T)
            ko[sp["knockout_heads"]] = removed
        knock = {int(layer): code.removed_edges(ko) for layer in sp["knockout_layers"]}
    return ({stack: code.vla_edits(ablate, scale, patch)}, {stack: knock},
            sp["clean"] if sp.get("patch") == "head" else None)


def _run(script: str, pictures: dict) -> dict:
    """What a script prints, run as written from a scratch folder with tests/ linked in and the pictures saved."""
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(ROOT / "tests", Path(tmp) / "tests")
        for name, rgb in pictures.items():
            Image.fromarray(rgb).save(Path(tmp) / name)
        (Path(tmp) / "hooks.py").write_text(script)
        out = subprocess.run([sys.executable, "hooks.py"], cwd=tmp, capture_output=True, text=True, timeout=600,
                             env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _inputs(name: str, g) -> tuple:
    """(cameras, instruction, state, clean, cases, {ko name: removed (T, T)}) of a policy from golden_interventions."""
    if name == "tiny_smolvla":
        removed = {k[len("removed_"):]: g[k] for k in g.files if k.startswith("removed_")}
        return CAMERAS, str(g["instruction"]), [float(v) for v in g["state"]], CLEAN, CASES, removed
    T = g["markers_removed"].shape[0]
    chunk = json.loads((ROOT / DATA / name / "config.json").read_text())["chunk_size"]
    first3 = np.zeros((T, T), dtype=bool)
    first3[T - chunk - 1, :3] = True  # the state (the prefix's last token) does not see tokens 0..2
    removed = {"markers_removed": g["markers_removed"], "state_sees_not_first3": first3}
    return (("observation.images.front",), str(g["markers_instruction"]), [float(v) for v in g["markers_state"]],
            MARKERS_CLEAN, MARKER_CASES, removed)


def main(names=()) -> None:
    code = _code()
    g = np.load(ROOT / DATA / "tiny_smolvla" / "golden_interventions.npz")
    for name in names or ("tiny_smolvla", "tiny_smolvla_markers"):
        rel = f"{DATA}/{name}"
        folder = ROOT / rel
        cameras, text, state, clean_text, cases, removed_by = _inputs(name, g)
        cfg = json.loads((folder / "config.json").read_text())
        vlm = (folder / cfg["vlm_model_name"]).resolve()
        n_head = json.loads((vlm / "config.json").read_text())["text_config"]["num_attention_heads"]
        seed, t = int(g["noise_seed"]), float(g["time"])
        rgb = [np.array(Image.open(folder / f"camera{i}.png").convert("RGB")) for i in range(len(cameras))]
        files = [code.IMAGE_FILES.format(i=i) for i in range(len(cameras))]
        out = {"instruction": np.array(text), "state": np.array(state, np.float32), "noise_seed": np.int64(seed),
               "time": np.float32(t), "clean": np.array(clean_text)}
        for case_name, case in cases.items():
            removed = None if case["ko"] is None else removed_by[case["ko"]]
            if removed is not None:
                out[f"{case_name}_removed"] = removed
            edits, knock, clean = script_args(code, case, removed, n_head)
            script = code.hook_script(rel, cameras, files, text, state, noise_seed=seed, time=t, edits=edits,
                                      knockout=knock, clean=clean)
            found = _run(script, dict(zip(files, rgb)))
            before, after = np.array(found["before"]), np.array(found["after"])
            change = np.abs(after - before).max()
            assert change > 1e-4, f"{case_name}: the edits changed nothing"
            out[f"{case_name}_case"] = np.array(json.dumps(case))
            out[f"{case_name}_sha256"] = np.array(hashlib.sha256(script.encode()).hexdigest())
            out[f"{case_name}_before"], out[f"{case_name}_after"] = before, after
            print(name, case_name, f"largest change {change:.3g}, cosine {found['cosine']:.6f}")
        path = folder / "golden_vla_code.npz"
        np.savez_compressed(path, **out)
        print(f"wrote {path} ({path.stat().st_size:,} B): {sorted(out)}")


if __name__ == "__main__":
    main(tuple(sys.argv[1:]))
