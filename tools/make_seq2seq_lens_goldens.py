"""Write ``golden_seq2seq_lens.npz`` beside tiny_t5, tiny_t5_gated and tiny_t5_mt5 (tests/data): attnviz's exported
TransformerLens script of an encoder-decoder (``lens_script`` of attnviz/checkpoints/intervention_seq2seq_code.py)
run as written.

Run once with an interpreter that has transformer_lens 4 (with torch and transformers, e.g. a throw-away venv:
``pip install transformer-lens``); attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_seq2seq_lens_goldens.py [tiny_t5 ...]

The cases, the inputs and the scratch folder the scripts run in are those of tools/make_seq2seq_code_goldens.py
(loaded by path); each model's golden keeps its inputs, ``{case}_case``, ``{case}_sha256``, ``{case}_before`` and
``{case}_after`` (every decoder row's logits, (T, V), float32 runs) and the ``transformer_lens`` version that ran
them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"tiny_t5": "tests/data/tiny_t5", "tiny_t5_gated": "tests/data/tiny_t5_gated",
          "tiny_t5_mt5": "tests/data/tiny_t5_mt5"}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(names=()) -> None:
    tool = _load("make_seq2seq_code_goldens", ROOT / "tools/make_seq2seq_code_goldens.py")
    code = tool._code()
    for name in names or MODELS:
        rel = MODELS[name]
        folder = ROOT / rel
        cfg = json.loads((folder / "config.json").read_text())
        g = np.load(folder / "golden_interventions.npz")
        layers, heads, hd = tool.shapes(cfg)
        dec = [int(t) for t in g["dec_ids"]]
        S = int(g["src_ids"].size)
        out = {"dec_ids": np.array(dec), "src_ids": g["src_ids"], "corrupted_ids": g["corrupted_ids"],
               "given_values_seed": tool.GIVEN_SEED, "transformer_lens": np.array(version("transformer_lens"))}
        for case_name, case in tool.cases(layers, heads).items():
            edits, knock = tool.script_args(case, layers, heads, hd, S, len(dec))
            clean = [int(t) for t in g[f"{case['clean']}_ids"]] if case["clean"] else None
            script = code.lens_script(rel, cfg["model_type"], heads, dec, [int(t) for t in g[f"{case['source']}_ids"]],
                                      edits=edits, knockout=knock, clean_ids=clean)
            found = tool._run(script, {})
            before, after = np.array(found["before"]), np.array(found["after"])
            change = np.abs(after - before).max()
            assert change > 1e-4, f"{name} {case_name}: the edits changed nothing"
            out[f"{case_name}_case"] = np.array(json.dumps(case))
            out[f"{case_name}_sha256"] = np.array(hashlib.sha256(script.encode()).hexdigest())
            out[f"{case_name}_before"], out[f"{case_name}_after"] = before, after
            print(name, case_name, f"largest change {change:.3g}")
        np.savez_compressed(folder / "golden_seq2seq_lens.npz", **out)
        print(name, sorted(out))


if __name__ == "__main__":
    main(tuple(sys.argv[1:]))
