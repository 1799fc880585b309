"""Write the encoder and vision intervention goldens of tests/checkpoints/test_intervention_encoders.py.

Run once, in an environment with torch (CPU) and transformers; attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_encoder_intervention_goldens.py [scripts]

For tiny_roberta, tiny_distilbert (token ids IDS) and tiny_vit, tiny_dinov2, tiny_clip_vision (pixels drawn
from a seeded normal distribution, given to the model as ``pixel_values`` unchanged) it writes
``golden_encoder_interventions.npz`` with the base model's ``last_hidden_state`` (T, C) of transformers'
eager model under PyTorch forward pre-hooks on the attention's output projection (a head's output is its
slice of that projection's input): ``plain``; ``zero`` and ``mean`` (heads ABLATE zeroed, or set to their mean
over the positions); ``scaled`` (head SCALE_HEAD times SCALE); and ``knockout``: in every layer query rows
from KO_FROM on may not see key KO_KEY, added to the scores as the dtype's minimum inside the model's own
eager attention function (so each row renormalises over the keys left). ``inputs`` holds the ids or pixels.

With ``scripts`` it runs instead attnviz's exported encoder hook scripts as written (:func:`scripts`); with
``lens``, run by an interpreter that has transformer_lens 4 (e.g. a throw-away venv: pip install transformer_lens),
its exported TransformerLens scripts for RoBERTa and XLM-R (:func:`lens`).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModel

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "checkpoints"
IDS = [0, 5, 9, 3, 7, 11, 4, 2]
ABLATE = [(0, 1), (1, 0)]
SCALE_HEAD, SCALE = (1, 1), 0.5
KO_FROM, KO_KEY = 2, 1

# folder -> its transformers modeling module
MODELS = {"tiny_roberta": "roberta", "tiny_distilbert": "distilbert", "tiny_vit": "vit", "tiny_dinov2": "dinov2",
          "tiny_clip_vision": "clip"}
OUT_PROJ = re.compile(r"(?:^|\.)layers?\.(\d+)\.(?:attention|self_attn)\.(?:o_proj|out_proj|output\.dense|out_lin)$")


def proj(model, i: int):
    """Layer i's attention output projection, whatever this transformers version names it."""
    found = [m for name, m in model.named_modules() if (g := OUT_PROJ.search(name)) and int(g.group(1)) == i]
    assert len(found) == 1, f"layer {i}: {len(found)} attention output projections"
    return found[0]


def head_hook(proj, nh: int, fn):
    def pre(module, args):
        x = args[0].clone()
        b, t, c = x.shape
        heads = x.view(b, t, nh, c // nh)
        fn(heads)
        return (heads.view(b, t, c),) + tuple(args[1:])

    return proj.register_forward_pre_hook(pre)


class Knockout:
    """While active, the modeling module's eager attention adds the knockout to every layer's scores."""

    def __init__(self, module_name: str, T: int):
        self.mod = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
        self.add = torch.zeros(1, 1, T, T)
        self.add[0, 0, KO_FROM:, KO_KEY] = torch.finfo(torch.float32).min

    def __enter__(self):
        self.orig = self.mod.eager_attention_forward
        add = self.add

        def knocked(module, query, key, value, attention_mask, *args, **kw):
            mask = add if attention_mask is None else attention_mask + add
            return self.orig(module, query, key, value, mask, *args, **kw)

        self.mod.eager_attention_forward = knocked
        return self

    def __exit__(self, *exc):
        self.mod.eager_attention_forward = self.orig


def hidden(model, inputs: dict, hooks=()) -> np.ndarray:
    handles = [head_hook(proj, model.config.num_attention_heads if hasattr(model.config, "num_attention_heads")
                         else model.config.n_heads, fn) for proj, fn in hooks]
    try:
        with torch.no_grad():
            out = model(**inputs).last_hidden_state[0]
    finally:
        for h in handles:
            h.remove()
    return out.double().numpy()


def main() -> None:
    rng = np.random.default_rng(30)
    for name, module_name in MODELS.items():
        folder = DATA / name
        kw = {"add_pooling_layer": False} if module_name in ("roberta", "vit") else {}
        model = AutoModel.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager", **kw).eval()
        cfg = model.config
        if module_name in ("roberta", "distilbert"):
            x = np.array(IDS, dtype=np.int64)
            inputs = {"input_ids": torch.tensor([IDS])}
        else:
            size = cfg.image_size if isinstance(cfg.image_size, (list, tuple)) else (cfg.image_size, cfg.image_size)
            x = rng.standard_normal((cfg.num_channels, *size)).astype(np.float32)
            inputs = {"pixel_values": torch.from_numpy(x[None])}
        out = {"inputs": x, "ablate": np.array(ABLATE), "scale_head": np.array(SCALE_HEAD), "scale": SCALE,
               "ko_from": KO_FROM, "ko_key": KO_KEY}
        out["plain"] = hidden(model, inputs)

        def zero(h):
            return lambda t: t[:, :, h].zero_()

        def mean(h):
            return lambda t: t[:, :, h].copy_(t[:, :, h].mean(dim=1, keepdim=True).expand_as(t[:, :, h]))

        out["zero"] = hidden(model, inputs, [(proj(model, layer), zero(h)) for layer, h in ABLATE])
        out["mean"] = hidden(model, inputs, [(proj(model, layer), mean(h)) for layer, h in ABLATE])
        out["scaled"] = hidden(model, inputs, [(proj(model, SCALE_HEAD[0]),
                                                lambda t: t[:, :, SCALE_HEAD[1]].mul_(SCALE))])
        with Knockout(module_name, out["plain"].shape[0]):
            out["knockout"] = hidden(model, inputs)
        assert np.abs(out["knockout"] - out["plain"]).max() > 1e-4, f"{name}: the knockout changed nothing"
        np.savez_compressed(folder / "golden_encoder_interventions.npz", **out)
        print(name, out["plain"].shape, sorted(out))




# ---- the exported hook scripts, run as written ----------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
# folder -> whether the pooled output is the first token's (a class token) rather than the mean over the tokens
SCRIPT_MODELS = {"tiny_roberta": True, "tiny_xlmr": True, "tiny_electra": True, "tiny_distilbert": True,
                 "tiny_vit": True, "tiny_deit": True, "tiny_dinov2": True, "tiny_clip_vision": True,
                 "tiny_siglip_vision": False}
PIXELS = "intervention_pixels.npy"  # beside a vision model's checkpoint: the pixels its script reads


def _code():
    """attnviz/checkpoints/intervention_code.py, loaded by path (it needs only the standard library)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("intervention_code", ROOT / "attnviz/checkpoints/intervention_code.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    return code


def script_edits(n_layer: int, n_head: int, T: int):
    """(ablate, scale, knockout) of the scripts: ABLATE zeroed and SCALE_HEAD scaled (moved into range for a model of
    fewer layers or heads), the knockout in every layer."""
    def fit(lh):
        return min(lh[0], n_layer - 1), min(lh[1], n_head - 1)

    ablate = {fit(h): "zero" for h in ABLATE}
    scale = {fit(SCALE_HEAD): SCALE} if fit(SCALE_HEAD) not in ablate else {}
    ko = np.zeros((T, T), bool)
    ko[KO_FROM:, KO_KEY] = True
    return ablate, scale, {layer: ko for layer in range(n_layer)}


def scripts() -> None:
    """For each of SCRIPT_MODELS: write attnviz's exported encoder hook script (ablation, scaling and the knockout
    together), run it as written from the repository root, and keep in ``golden_encoder_scripts.npz`` its digest,
    the pooled output before and after it printed and their cosine (a vision model's pixels go to PIXELS)."""
    import hashlib
    import json
    import os
    import subprocess
    import sys

    code = _code()
    rng = np.random.default_rng(31)
    for name, first in SCRIPT_MODELS.items():
        folder = DATA / name
        model = AutoModel.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
        cfg = model.config
        n_head = getattr(cfg, "num_attention_heads", None) or cfg.n_heads
        n_layer = getattr(cfg, "num_hidden_layers", None) or cfg.n_layers
        rel = f"tests/data/checkpoints/{name}"
        if hasattr(cfg, "image_size"):
            size = cfg.image_size if isinstance(cfg.image_size, (list, tuple)) else (cfg.image_size, cfg.image_size)
            pixels = rng.standard_normal((cfg.num_channels, *size)).astype(np.float32)
            np.save(folder / PIXELS, pixels)
            inputs = {"pixels": f"{rel}/{PIXELS}"}
            given = {"pixel_values": torch.from_numpy(pixels[None])}
        else:
            inputs = {"ids": IDS}
            given = {"input_ids": torch.tensor([IDS])}
        with torch.no_grad():
            T = int(model.eval()(**given).last_hidden_state.shape[1])
        ablate, scale, ko = script_edits(n_layer, n_head, T)
        text = code.encoder_script(rel, pooled_first=first, ablate=ablate, scale=scale, knockout=ko, n_layer=n_layer,
                                   **inputs)
        run = subprocess.run([sys.executable, "-c", text], cwd=ROOT, capture_output=True, text=True, check=True,
                             env=dict(os.environ, TRANSFORMERS_VERBOSITY="error"))
        found = json.loads(run.stdout.strip().splitlines()[-1])
        assert found["cosine"] < 1 - 1e-6, f"{name}: the script changed nothing"
        np.savez_compressed(folder / "golden_encoder_scripts.npz", script_sha256=hashlib.sha256(text.encode()).hexdigest(),
                            pooled_before=np.array(found["pooled_before"]), pooled_after=np.array(found["pooled_after"]),
                            cosine=found["cosine"], T=T)
        print(name, T, found["cosine"])


# ---- the exported TransformerLens scripts, run as written ------------------------------------------------

# folder -> the transformers class whose TransformerLens adapter lays out its modules (the export's
# LENS_ENCODER_ADAPTERS)
LENS_MODELS = {"tiny_roberta": "RobertaForMaskedLM", "tiny_xlmr": "RobertaForMaskedLM"}
LENS_ABLATE = {(0, 1): "zero", (1, 0): "mean"}
LENS_SCALE = {(1, 1): 0.5}


def lens_means(L: int, nh: int, hd: int) -> np.ndarray:
    """(L, nh, hd) fixed values standing in for a corpus's means of each head's output."""
    return np.random.default_rng(32).normal(0.0, 0.5, (L, nh, hd))


def lens() -> None:
    """For each of LENS_MODELS: write attnviz's exported TransformerLens script (head 0.1 zeroed, 1.0 set to its mean
    over the positions, 1.1 scaled by 0.5; one setting heads 0.1 and 1.0 to given means; and one zeroing head 0.1
with the knockout of KO_FROM and KO_KEY in every layer, ``knockout_``), run each as written
    from the repository root with this interpreter (which must have transformer_lens 4), and keep in
    ``golden_encoder_lens.npz`` their digests, the class token's output before and after they printed and the
    cosines; ``means`` holds the given means."""
    import hashlib
    import json
    import os
    import subprocess
    import sys

    from importlib.metadata import version

    code = _code()
    for name, adapter in LENS_MODELS.items():
        rel = f"tests/data/checkpoints/{name}"
        cfg = AutoModel.from_pretrained(DATA / name).config
        means = lens_means(cfg.num_hidden_layers, cfg.num_attention_heads,
                           cfg.hidden_size // cfg.num_attention_heads)
        found = {"ids": np.array(IDS), "means": means, "transformer_lens": version("transformer_lens")}
        given = {(0, 1): means[0, 1], (1, 0): means[1, 0]}
        ko = np.zeros((len(IDS), len(IDS)), bool)
        ko[KO_FROM:, KO_KEY] = True
        kos = {layer: ko for layer in range(cfg.num_hidden_layers)}
        for key, ablate, scale, knock in (("", LENS_ABLATE, LENS_SCALE, None), ("means_", given, {}, None),
                                          ("knockout_", {(0, 1): "zero"}, {}, kos)):
            text = code.lens_encoder_script(rel, IDS, adapter, ablate=ablate, scale=scale, knockout=knock,
                                            n_layer=cfg.num_hidden_layers)
            run = subprocess.run([sys.executable, "-c", text], cwd=ROOT, capture_output=True, text=True, check=True,
                                 env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
            out = json.loads(run.stdout.strip().splitlines()[-1])
            assert out["cosine"] < 1 - 1e-6, f"{name}: the script changed nothing"
            found.update({f"{key}sha256": hashlib.sha256(text.encode()).hexdigest(),
                          f"{key}pooled_before": np.array(out["pooled_before"]),
                          f"{key}pooled_after": np.array(out["pooled_after"]), f"{key}cosine": out["cosine"]})
        np.savez_compressed(DATA / name / "golden_encoder_lens.npz", **found)
        print(name, found["cosine"], found["means_cosine"])


if __name__ == "__main__":
    import sys

    {"scripts": scripts, "lens": lens}.get(sys.argv[1] if sys.argv[1:] else "", main)()
