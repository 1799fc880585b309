"""Write ``golden_lens.npz`` beside each tiny decoder checkpoint: attnviz's exported TransformerLens script run as
written.

Run once with an interpreter that has transformer_lens 4 (with torch and transformers; e.g. a throw-away venv:
``pip install transformer_lens``); attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_decoder_lens_goldens.py [NAME ...]

For each model (folder names under tests/data/checkpoints; none: every one of MODELS) it writes the script of
:func:`attnviz.checkpoints.intervention_code.lens_script` on the token ids of tools/make_intervention_goldens.py
(CLEAN) with heads ABLATE (moved into range) zeroed, and one with them set to their mean over the positions and
SCALE_HEAD scaled by SCALE; for KNOCKOUT_MODELS also one with them zeroed and the knockout (query rows from
KO_FROM on may not see key KO_KEY in every layer, as a 4-D attention mask); runs each from the repository root
and keeps their digests (``zero_sha256``, ``mean_sha256``, ``knockout_sha256``) and the last position's
logits they printed (``zero_logits``, ...), and the version of transformer_lens that ran them. A model whose script fails is named with TransformerLens's last
line and left without a golden.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "checkpoints"
CLEAN = [1, 5, 9, 3, 7, 11, 4, 8]  # make_intervention_goldens.py's
ABLATE = [(0, 1), (1, 3)]
SCALE_HEAD, SCALE = (1, 0), 0.5
KO_FROM, KO_KEY = 3, 1  # the knockout: query rows from KO_FROM on may not see key KO_KEY, in every layer
KNOCKOUT_MODELS = ("tiny_llama_lm", "tiny_qwen2", "tiny_gpt2")  # families whose 4-D mask is the knockout's form
MODELS = ("tiny_llama_lm", "tiny_qwen2", "tiny_qwen3", "tiny_mistral", "tiny_gemma", "tiny_gemma2", "tiny_gemma3",
          "tiny_mixtral", "tiny_qwen2_moe", "tiny_qwen3_moe", "tiny_gpt2", "tiny_gpt_neox", "tiny_phi3", "tiny_olmo",
          "tiny_olmo2", "tiny_stablelm", "tiny_falcon_mq", "tiny_falcon_seq", "tiny_opt", "tiny_bloom",
          # refused by TransformerLens 4.3.0's bridge (no golden): Phi's q/k LayerNorm, Falcon's grouped key-values
          "tiny_phi", "tiny_falcon")


def _code():
    """attnviz/checkpoints/intervention_code.py, loaded by path (it needs only the standard library)."""
    spec = importlib.util.spec_from_file_location("intervention_code", ROOT / "attnviz/checkpoints/intervention_code.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    return code


def edits(n_head: int):
    """(zero, mean, scale) of the scripts: ABLATE with its heads moved into range."""
    heads = [(layer, min(head, n_head - 1)) for layer, head in ABLATE]
    scale = {SCALE_HEAD: SCALE} if SCALE_HEAD not in heads else {}
    return {h: "zero" for h in heads}, {h: "mean" for h in heads}, scale


def knockout(n_layer: int) -> dict:
    """{layer: (T, T) bool, True = the edge removed} for every layer."""
    ko = np.zeros((len(CLEAN), len(CLEAN)), bool)
    ko[KO_FROM:, KO_KEY] = True
    return {layer: ko for layer in range(n_layer)}


def run(script: str) -> np.ndarray:
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
    if out.returncode != 0:
        raise RuntimeError((out.stderr.strip().splitlines() or ["no output"])[-1])
    return np.array(json.loads(out.stdout.strip().splitlines()[-1]))


def main(names=()) -> None:
    code = _code()
    for name in names or MODELS:
        cfg = json.loads((DATA / name / "config.json").read_text())
        n_head = cfg.get("num_attention_heads") or cfg.get("n_head")
        zero, mean, scale = edits(int(n_head))
        rel = f"tests/data/checkpoints/{name}"
        found = {"ids": np.array(CLEAN), "transformer_lens": version("transformer_lens")}
        try:
            runs = [("zero", zero, {}, None), ("mean", mean, scale, None)]
            if name in KNOCKOUT_MODELS:
                runs.append(("knockout", zero, {}, knockout(int(cfg.get("num_hidden_layers") or cfg["n_layer"]))))
            for key, ablate, sc, ko in runs:
                text = code.lens_script(rel, CLEAN, ablate=ablate, scale=sc, knockout=ko,
                                        n_layer=None if ko is None else len(ko))
                found[f"{key}_sha256"] = hashlib.sha256(text.encode()).hexdigest()
                found[f"{key}_logits"] = run(text)
        except RuntimeError as exc:
            print(f"{name}: FAILED: {exc}")
            continue
        np.savez_compressed(DATA / name / "golden_lens.npz", **found)
        print(name, "ok")


if __name__ == "__main__":
    main(sys.argv[1:])
