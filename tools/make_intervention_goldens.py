"""Write the intervention goldens of tests/checkpoints/test_ckpt_interventions.py.

Run once, in an environment with torch (CPU) and transformers; attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_intervention_goldens.py

For tiny_llama_lm, tiny_qwen2 and tiny_gemma2 (tests/data/checkpoints) it writes ``golden_interventions.npz``
with the last position's logits of transformers' eager model under PyTorch forward pre-hooks on
``o_proj`` (a head's output is its slice of o_proj's input): ``plain``; ``zero`` and ``mean`` (heads
ABLATE zeroed, or set to their mean over the positions); ``scaled`` (head SCALE_HEAD times SCALE);
``patched`` (head PATCH's output on ``corrupted_ids`` taken from the pass on ``clean_ids``); ``corrupted``;
and, where the 4-D mask is the model's only mask (no sliding window), ``knockout``: query rows from
KO_FROM on may not see key KO_KEY in any layer, passed as a 4-D additive attention mask.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "checkpoints"
CLEAN = [1, 5, 9, 3, 7, 11, 4, 8]
CORRUPTED = [1, 5, 9, 3, 12, 11, 4, 8]
ABLATE = [(0, 1), (1, 3)]
SCALE_HEAD, SCALE = (1, 0), 0.5
PATCH = (1, 2)
KO_FROM, KO_KEY = 3, 1
ROOT = Path(__file__).resolve().parents[1]
SNIPPET_MODEL = "tests/data/checkpoints/tiny_llama_lm"  # as the exported script names it (run from ROOT)


def exported_scripts() -> dict:
    """Run attnviz's exported PyTorch hook script (attnviz/checkpoints/intervention_code.py, loaded by path:
    it needs only the standard library) as written, and keep its text's digest and its logits."""
    import hashlib
    import importlib.util
    import os
    import subprocess
    import sys

    spec = importlib.util.spec_from_file_location("intervention_code", ROOT / "attnviz/checkpoints/intervention_code.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    T = len(CLEAN)
    ko = np.zeros((T, T), bool)
    ko[KO_FROM:, KO_KEY] = True
    script = code.pytorch_script(SNIPPET_MODEL, CLEAN, ablate={h: "zero" for h in ABLATE},
                                 scale={SCALE_HEAD: SCALE}, knockout={0: ko, 1: ko}, n_layer=2)
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                         env=dict(os.environ, TRANSFORMERS_VERBOSITY="error"))
    logits = np.array(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"script_sha256": hashlib.sha256(script.encode()).hexdigest(), "script_logits": logits}


def head_hook(model, layer: int, fn):
    hd = model.config.head_dim if getattr(model.config, "head_dim", None) else \
        model.config.hidden_size // model.config.num_attention_heads
    attn = model.model.layers[layer].self_attn

    def pre(module, args):
        x = args[0].clone()
        b, t, _ = x.shape
        heads = x.view(b, t, -1, hd)
        fn(heads)
        return (heads.view(b, t, -1),) + tuple(args[1:])

    return attn.o_proj.register_forward_pre_hook(pre)


def last_logits(model, ids, hooks=(), mask=None) -> np.ndarray:
    handles = [head_hook(model, layer, fn) for layer, fn in hooks]
    try:
        with torch.no_grad():
            kw = {} if mask is None else {"attention_mask": mask}
            out = model(torch.tensor([ids]), **kw).logits[0, -1]
    finally:
        for h in handles:
            h.remove()
    return out.double().numpy()


def main() -> None:
    for name in ("tiny_llama_lm", "tiny_qwen2", "tiny_gemma2"):
        folder = DATA / name
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
        out = {"clean_ids": np.array(CLEAN), "corrupted_ids": np.array(CORRUPTED), "ablate": np.array(ABLATE),
               "scale_head": np.array(SCALE_HEAD), "scale": SCALE, "patch": np.array(PATCH),
               "ko_from": KO_FROM, "ko_key": KO_KEY}
        out["plain"] = last_logits(model, CLEAN)
        out["corrupted"] = last_logits(model, CORRUPTED)

        def zero(h):
            return lambda x: x[:, :, h].zero_()

        def mean(h):
            return lambda x: x[:, :, h].copy_(x[:, :, h].mean(dim=1, keepdim=True).expand_as(x[:, :, h]))

        out["zero"] = last_logits(model, CLEAN, [(layer, zero(h)) for layer, h in ABLATE])
        out["mean"] = last_logits(model, CLEAN, [(layer, mean(h)) for layer, h in ABLATE])
        out["scaled"] = last_logits(model, CLEAN, [(SCALE_HEAD[0], lambda x: x[:, :, SCALE_HEAD[1]].mul_(SCALE))])
        saved = {}

        def keep(x):
            saved["v"] = x[:, :, PATCH[1]].clone()

        last_logits(model, CLEAN, [(PATCH[0], keep)])
        out["patched"] = last_logits(model, CORRUPTED, [(PATCH[0], lambda x: x[:, :, PATCH[1]].copy_(saved["v"]))])
        if not getattr(model.config, "sliding_window", None) or name == "tiny_llama_lm":
            T = len(CLEAN)
            allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
            allowed[KO_FROM:, KO_KEY] = False
            mask = torch.zeros(1, 1, T, T)
            mask[0, 0][~allowed] = torch.finfo(torch.float32).min
            out["knockout"] = last_logits(model, CLEAN, mask=mask)
        if name == "tiny_llama_lm":
            out.update(exported_scripts())
        np.savez_compressed(folder / "golden_interventions.npz", **out)
        print(name, sorted(out))


if __name__ == "__main__":
    main()
