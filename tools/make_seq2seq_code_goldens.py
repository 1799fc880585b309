"""Write ``golden_seq2seq_code.npz`` beside tiny_bart, tiny_marian, tiny_mbart, tiny_t5, tiny_t5_gated, tiny_t5_mt5
(tests/data) and tiny_whisper (tests/data/checkpoints): attnviz's exported encoder-decoder hook scripts
(attnviz/checkpoints/intervention_seq2seq_code.py) run as written with transformers.

Run once, in an environment with torch (CPU) and transformers; attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_seq2seq_code_goldens.py [tiny_bart ...]

Each model gets the CASES (each a JSON description kept in the golden as ``{case}_case``, which the test turns back
into the session's ``Interventions`` or explicit ``Edit``s): the window's spec on each stack (zero ablation with a
per-head knockout of the encoder and a patch of an encoder head; mean ablation of cross-attention heads with a
knockout of every encoder layer; scaling of decoder heads and a decoder head patch) and explicit edits of all three
stacks at once (an encoder head set to given values, a decoder head scaled and a decoder self-attention knockout, a
one-head cross-attention knockout and a cross-attention patch). The inputs are those of the model's
``golden_interventions.npz`` (tools/make_intervention_goldens.py seq2seq): the main source is its corrupted one
where a patch is taken from its clean one. For each case the tool writes the script with the module's
``hook_script`` (loaded by path: it needs the standard library only), runs it from a scratch folder holding a link
to tests/ (and Whisper's features files), and keeps ``{case}_sha256``, ``{case}_before`` and ``{case}_after`` (every
decoder row's logits, (T, V)). T5, mT5 and Whisper also get every case in float64 (``{case}64_...``, the script's
``float64``).
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

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"tiny_bart": "tests/data/tiny_bart", "tiny_marian": "tests/data/tiny_marian", "tiny_mbart": "tests/data/tiny_mbart",
          "tiny_t5": "tests/data/tiny_t5", "tiny_t5_gated": "tests/data/tiny_t5_gated", "tiny_t5_mt5": "tests/data/tiny_t5_mt5",
          "tiny_whisper": "tests/data/checkpoints/tiny_whisper"}
WIDE = ("tiny_t5", "tiny_t5_gated", "tiny_t5_mt5", "tiny_whisper")  # also run in float64
ENC_KO, DEC_KO, CROSS_KO = (3, 1), (3, 1), (2, 4)  # (rows from, key): the edges removed
GIVEN_SEED = 31


def _code():
    spec = importlib.util.spec_from_file_location("intervention_seq2seq_code",
                                                  ROOT / "attnviz/checkpoints/intervention_seq2seq_code.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    return code


def shapes(cfg: dict) -> tuple[dict, dict, dict]:
    """({stack: layers}, {stack: heads}, {stack: head width}) of a BART-like, T5 or Whisper config.json."""
    if cfg["model_type"] in ("t5", "mt5"):
        dec = cfg.get("num_decoder_layers") or cfg["num_layers"]
        nh, hd = cfg["num_heads"], cfg["d_kv"]
        return ({"encoder": cfg["num_layers"], "decoder": dec, "cross": dec}, dict.fromkeys(("encoder", "decoder", "cross"), nh),
                dict.fromkeys(("encoder", "decoder", "cross"), hd))
    C = cfg["d_model"]
    enc, dec = cfg["encoder_attention_heads"], cfg["decoder_attention_heads"]
    return ({"encoder": cfg["encoder_layers"], "decoder": cfg["decoder_layers"], "cross": cfg["decoder_layers"]},
            {"encoder": enc, "decoder": dec, "cross": dec}, {"encoder": C // enc, "decoder": C // dec, "cross": C // dec})


def cases(layers: dict, heads: dict) -> dict:
    """name -> JSON-able case, the heads moved into range for the model."""
    def fit(stack, layer, head):
        return [min(layer, layers[stack] - 1), min(head, heads[stack] - 1)]

    return {
        "enc": {"stack": "encoder", "source": "corrupted", "clean": "src", "ko": list(ENC_KO),
                "spec": {"heads": [fit("encoder", 0, 1), fit("encoder", 1, 0)], "mode": "zero", "knockout_layers": [0],
                         "knockout_heads": [min(1, heads["encoder"] - 1)], "patch": "head",
                         "patch_layer": fit("encoder", 1, 2)[0], "patch_head": fit("encoder", 1, 2)[1]}},
        "cross": {"stack": "cross", "source": "src", "clean": None, "ko": list(ENC_KO),
                  "spec": {"heads": [fit("cross", 0, 0), fit("cross", 1, 1)], "mode": "mean",
                           "knockout_layers": list(range(layers["encoder"]))}},
        "dec": {"stack": "decoder", "source": "corrupted", "clean": "src", "ko": None,
                "spec": {"heads": [fit("decoder", 0, 1), fit("decoder", 1, 0)], "mode": "scale", "factor": 0.5,
                         "patch": "head", "patch_layer": fit("decoder", 1, 1)[0], "patch_head": fit("decoder", 1, 1)[1]}},
        "mix": {"stack": None, "source": "corrupted", "clean": "src",
                "edits": {"encoder": {"set": [fit("encoder", 0, 0)]},
                          "decoder": {"scale": [[*fit("decoder", 1, 0), -1.5]],
                                      "knockout": [[0, -1, *DEC_KO]]},  # [layer, head (-1: every head), from, key]
                          "cross": {"knockout": [[layers["cross"] - 1, min(1, heads["cross"] - 1), *CROSS_KO]],
                                    "patch": [fit("cross", 0, 1)]}}},
    }


def given_values(hd: int) -> list[float]:
    """The values the "mix" case sets its encoder head to (a corpus's means stand-in)."""
    return [float(v) for v in np.random.default_rng(GIVEN_SEED).normal(0.0, 0.5, hd).astype(np.float32)]


def _rows(shape, start, key) -> np.ndarray:
    m = np.zeros(shape, bool)
    m[..., start:, key] = True
    return m


def script_args(case: dict, layers: dict, heads: dict, hd: dict, S: int, T: int):
    """(edits, knockout) for hook_script: what attnviz's seq2seq_script makes of the case."""
    code = _code()
    if case.get("spec") is not None:
        sp, stack = case["spec"], case["stack"]
        hs = [tuple(h) for h in sp["heads"]]
        ablate = {h: sp["mode"] for h in hs} if sp["mode"] in ("zero", "mean") else {}
        scale = {h: sp["factor"] for h in hs} if sp["mode"] == "scale" else {}
        patch = [(sp["patch_layer"], sp["patch_head"])] if sp.get("patch") == "head" else []
        edits = {stack: code.stack_edits(ablate, scale, patch)}
        knock = {}
        if sp.get("knockout_layers"):
            ko = _rows((S, S), *case["ko"])
            if sp.get("knockout_heads"):
                per = np.zeros((heads["encoder"], S, S), bool)
                per[sp["knockout_heads"]] = ko
                ko = per
            knock["encoder"] = {int(layer): code.removed_edges(ko) for layer in sp["knockout_layers"]}
        return edits, knock
    edits, knock = {}, {}
    rows = {"encoder": (S, S), "decoder": (T, T), "cross": (T, S)}
    for stack, e in case["edits"].items():
        ablate = {tuple(h): given_values(hd[stack]) for h in e.get("set", [])}
        scale = {(a, b): f for a, b, f in e.get("scale", [])}
        edits[stack] = code.stack_edits(ablate, scale, [tuple(h) for h in e.get("patch", [])])
        for layer, head, start, key in e.get("knockout", []):
            m = _rows(rows[stack], start, key)
            if head >= 0:
                per = np.zeros((heads[stack], *rows[stack]), bool)
                per[head] = m
                m = per
            knock.setdefault(stack, {})[int(layer)] = code.removed_edges(m)
    return edits, knock


def _run(script: str, files: dict) -> dict:
    """What a script prints, run as written from a scratch folder with tests/ linked in and ``files`` saved."""
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(ROOT / "tests", Path(tmp) / "tests")
        for name, array in files.items():
            np.save(Path(tmp) / name, array)
        (Path(tmp) / "hooks.py").write_text(script)
        out = subprocess.run([sys.executable, "hooks.py"], cwd=tmp, capture_output=True, text=True, timeout=600,
                             env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(names=()) -> None:
    code = _code()
    for name in names or MODELS:
        rel = MODELS[name]
        folder = ROOT / rel
        cfg = json.loads((folder / "config.json").read_text())
        g = np.load(folder / "golden_interventions.npz")
        whisper = cfg["model_type"] == "whisper"
        layers, heads, hd = shapes(cfg)
        dec = [int(t) for t in g["dec_ids"]]
        S = int(g["src_features"].shape[1] // 2) if whisper else int(g["src_ids"].size)
        out = {"dec_ids": np.array(dec)}
        if whisper:
            out["src_features"], out["corrupted_features"] = g["src_features"], g["corrupted_features"]
        else:
            out["src_ids"], out["corrupted_ids"] = g["src_ids"], g["corrupted_ids"]
        for case_name, case in cases(layers, heads).items():
            edits, knock = script_args(case, layers, heads, hd, S, len(dec))
            kw, files = {}, {}
            if whisper:
                kw["features"] = code.FEATURES_FILE
                files[code.FEATURES_FILE] = g[f"{case['source']}_features"].astype(np.float32)
                if case["clean"]:
                    kw["clean_features"] = code.CLEAN_FEATURES_FILE
                    files[code.CLEAN_FEATURES_FILE] = g[f"{case['clean']}_features"].astype(np.float32)
            else:
                kw["src_ids"] = [int(t) for t in g[f"{case['source']}_ids"]]
                if case["clean"]:
                    kw["clean_ids"] = [int(t) for t in g[f"{case['clean']}_ids"]]
            out[f"{case_name}_case"] = np.array(json.dumps(case))
            for wide in (False, True) if name in WIDE else (False,):
                key = case_name + ("64" if wide else "")
                script = code.hook_script(rel, cfg["model_type"], heads, dec, edits=edits, knockout=knock,
                                          float64=wide, **kw)
                found = _run(script, files)
                before, after = np.array(found["before"]), np.array(found["after"])
                change = np.abs(after - before).max()
                assert change > 1e-4, f"{name} {key}: the edits changed nothing"
                out[f"{key}_sha256"] = np.array(hashlib.sha256(script.encode()).hexdigest())
                out[f"{key}_before"], out[f"{key}_after"] = before, after
                print(name, key, f"largest change {change:.3g}")
        out["given_values_seed"] = GIVEN_SEED
        np.savez_compressed(folder / "golden_seq2seq_code.npz", **out)
        print(name, sorted(out))


if __name__ == "__main__":
    main(tuple(sys.argv[1:]))
