"""Write the Swin intervention goldens of tests/checkpoints/test_intervention_swin.py.

Run once, in an environment with torch (CPU) and transformers 5 (attnviz itself never imports them):

    /tmp/gold/bin/python tools/make_swin_intervention_goldens.py

For tiny_swin (SwinModel) and tiny_swin_cls (the same weights in a SwinForImageClassification) it writes
``golden_interventions.npz``: transformers' eager model under PyTorch forward pre-hooks on each edited block's
``encoder.layers.{s}.blocks.{b}.attention.o_proj`` (its input is (windows, window tokens, C), a head's output
its slice of C). Layers are global block indices over the stages (stage 0's first). For each of

- ``plain``;
- ``zero`` and ``mean``: heads ABLATE set to 0, or to their mean over every window's tokens (the stage's);
- ``scaled``: each head of SCALE times its factor;
- ``patched``: heads PATCH's outputs taken from a pass over the clean picture (``clean_pixels``);
- ``knockout``: in every layer the edges of :func:`knockout_mask` removed (query i may not see key j, in the
  stage's row-major token order), cut into the windows by the modeling module's own ``window_partition`` of the
  rolled token ids and added to the scores inside its ``eager_attention_forward`` as float32's minimum;
- ``knockout_heads``: in layer HEAD_KO_LAYER only heads HEAD_KO_HEADS' edges removed ((nh, T, T) mask);

it keeps ``<name>_pooled`` (C_last,) (``pooler_output``) and, for tiny_swin_cls, ``<name>_logits`` (labels,).
``pixels`` is tiny_swin's golden picture preprocessed, ``clean_pixels`` a second picture's; both also go to
tiny_swin/intervention_pixels.npy and intervention_clean_pixels.npy for the exported scripts.

Then it writes attnviz's exported hook scripts (attnviz/checkpoints/intervention_swin_code.py, loaded by path) for
SCRIPT (ablation, scaling and the knockout together) and PATCH_SCRIPT (patching), runs each as written from the
repository root with this interpreter, and keeps ``<key>sha256`` and what they printed (``<key>pooled_before``,
``<key>pooled_after``, ``<key>cosine``, ``<key>logits_before``, ``<key>logits_after``) under the keys
``script_`` and ``patch_script_``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoImageProcessor, AutoModel, AutoModelForImageClassification
from transformers.models.swin import modeling_swin

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "checkpoints"
ABLATE = [(1, 1), (2, 0), (5, 3)]  # (global layer, head): stage 0's, stage 1's, stage 2's (4 heads)
SCALE = {(0, 1): 0.5, (4, 2): 2.0}
PATCH = [(2, 1), (5, 2)]
HEAD_KO_LAYER, HEAD_KO_HEADS = 4, (1, 3)
SCRIPT = {"ablate": {(1, 1): "zero", (3, 0): "mean", (5, 3): "zero"}, "scale": {(4, 2): 2.0}}
PIXELS, CLEAN = "intervention_pixels.npy", "intervention_clean_pixels.npy"  # in tiny_swin


def knockout_mask(gh: int, gw: int) -> np.ndarray:
    """(T, T) bool of removed edges on a (gh, gw) grid: every query loses the key right of it (row-major) and every
    even query the key below it; no query loses itself, so no row is left empty."""
    T = gh * gw
    ko = np.zeros((T, T), dtype=bool)
    i = np.arange(T - 1)
    ko[i, i + 1] = True
    i = np.arange(0, T - gw, 2)
    ko[i, i + gw] = True
    return ko


def grids(model, pixels: np.ndarray) -> list[tuple[int, int]]:
    """Each global layer's stage token grid (patch merging halves a side, rounding up)."""
    p = model.config.patch_size
    g = (pixels.shape[1] // p, pixels.shape[2] // p)
    out = []
    for depth in model.config.depths:
        out += [g] * depth
        g = ((g[0] + 1) // 2, (g[1] + 1) // 2)
    return out


def blocks(base):
    return [b for stage in base.encoder.layers for b in stage.blocks]


def heads_hook(block, fn):
    nh = block.attention.num_attention_heads

    def pre(module, args):
        x = args[0].clone()
        w, t, c = x.shape
        h = x.view(w, t, nh, c // nh)
        fn(h)
        return (h.view(w, t, c),) + tuple(args[1:])

    return block.attention.o_proj.register_forward_pre_hook(pre)


class Knockout:
    """While active, the modeling module's eager attention adds each knocked layer's removed edges to its scores."""

    def __init__(self, base, layer_masks: dict, layer_grids: list):
        self.bl, self.masks, self.grids = blocks(base), layer_masks, layer_grids
        self.which = {id(self.bl[g].attention): g for g in layer_masks}

    def add(self, g: int, nh: int) -> torch.Tensor:
        block, (gh, gw) = self.bl[g], self.grids[g]
        ids = torch.arange(gh * gw).view(1, gh, gw, 1)
        if block.shift_size > 0:
            ids = torch.roll(ids, shifts=(-block.shift_size, -block.shift_size), dims=(1, 2))
        win = modeling_swin.window_partition(ids, block.window_size).reshape(-1, block.window_size ** 2)  # (nW, n)
        ko = torch.from_numpy(self.masks[g])
        ko = ko[None].expand(nh, -1, -1) if ko.dim() == 2 else ko
        cut = ko[:, win[:, :, None], win[:, None, :]].transpose(0, 1)  # (nW, nh, n, n)
        return torch.zeros(cut.shape).masked_fill(cut, torch.finfo(torch.float32).min)

    def __enter__(self):
        self.orig = modeling_swin.eager_attention_forward

        def knocked(module, query, key, value, attention_mask, *args, **kw):
            g = self.which.get(id(module))
            if g is not None:
                attention_mask = attention_mask + self.add(g, query.shape[1])
            return self.orig(module, query, key, value, attention_mask, *args, **kw)

        modeling_swin.eager_attention_forward = knocked
        return self

    def __exit__(self, *exc):
        modeling_swin.eager_attention_forward = self.orig


def run(model, pv: torch.Tensor, hooks=()):
    """(pooled (C,), logits (labels,) or None) float64 with ``hooks`` [(global layer, fn(heads view))] active."""
    base = getattr(model, "swin", model)
    bl = blocks(base)
    handles = [heads_hook(bl[g], fn) for g, fn in hooks]
    try:
        with torch.no_grad():
            pooled = base(pixel_values=pv).pooler_output
            logits = model.classifier(pooled)[0].double().numpy() if hasattr(model, "classifier") else None
    finally:
        for h in handles:
            h.remove()
    return pooled[0].double().numpy(), logits


def record(model, pv: torch.Tensor, layers) -> dict:
    """Layer -> (windows, n, nh, hd) the heads' outputs of a plain pass."""
    bl = blocks(getattr(model, "swin", model))
    got = {}

    def keep(g):
        def pre(module, args):
            nh = bl[g].attention.num_attention_heads
            got[g] = args[0].detach().clone().view(args[0].shape[0], args[0].shape[1], nh, -1)
        return pre

    handles = [bl[g].attention.o_proj.register_forward_pre_hook(keep(g)) for g in layers]
    with torch.no_grad():
        model(pixel_values=pv)
    for h in handles:
        h.remove()
    return got


def zero(h):
    return lambda t: t[:, :, h].zero_()


def mean(h):
    return lambda t: t[:, :, h].copy_(t[:, :, h].mean(dim=(0, 1), keepdim=True).expand_as(t[:, :, h]))


def scale(h, f):
    return lambda t: t[:, :, h].mul_(f)


def put(h, v):
    return lambda t: t[:, :, h].copy_(v)


def clean_image() -> np.ndarray:
    image = np.random.default_rng(14).integers(0, 256, size=(34, 50, 3), dtype=np.uint8)
    image[17:, :25] = 10  # a dark quarter elsewhere than the golden picture's bright one
    return image


def _code():
    spec = importlib.util.spec_from_file_location("intervention_swin_code",
                                                  ROOT / "attnviz/checkpoints/intervention_swin_code.py")
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    return code


def scripts(name: str, model, layer_grids, layer_heads, out: dict) -> None:
    code = _code()
    rel = "tests/data/checkpoints"
    cls = hasattr(model, "classifier")
    ko = {g: knockout_mask(*layer_grids[g]) for g in range(len(layer_grids))}
    texts = {
        "script_": code.swin_script(f"{rel}/{name}", f"{rel}/tiny_swin/{PIXELS}", layer_heads, knockout=ko,
                                    grids=dict(enumerate(layer_grids)), classifier=cls, **SCRIPT),
        "patch_script_": code.swin_script(f"{rel}/{name}", f"{rel}/tiny_swin/{PIXELS}", layer_heads, patch=PATCH,
                                          clean=f"{rel}/tiny_swin/{CLEAN}", classifier=cls),
    }
    for key, text in texts.items():
        res = subprocess.run([sys.executable, "-c", text], cwd=ROOT, capture_output=True, text=True, check=True,
                             env=dict(os.environ, TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
        found = json.loads(res.stdout.strip().splitlines()[-1])
        assert found["cosine"] < 1 - 1e-6, f"{name} {key}: the script changed nothing"
        out[f"{key}sha256"] = hashlib.sha256(text.encode()).hexdigest()
        for k, v in found.items():
            out[key + k] = np.array(v)
        print(name, key, found["cosine"])


def main() -> None:
    g0 = np.load(DATA / "tiny_swin" / "golden.npz")
    processor = AutoImageProcessor.from_pretrained(DATA / "tiny_swin")
    pixels = g0["pixel_values"].astype(np.float32)  # (3, 24, 48)
    clean = processor(images=clean_image(), return_tensors="pt")["pixel_values"][0].numpy().astype(np.float32)
    np.save(DATA / "tiny_swin" / PIXELS, pixels)
    np.save(DATA / "tiny_swin" / CLEAN, clean)
    pv, cv = torch.from_numpy(pixels[None]), torch.from_numpy(clean[None])
    for name, cls in (("tiny_swin", AutoModel), ("tiny_swin_cls", AutoModelForImageClassification)):
        model = cls.from_pretrained(DATA / name, dtype=torch.float32, attn_implementation="eager").eval()
        base = getattr(model, "swin", model)
        lg = grids(model, pixels)
        lh = [b.attention.num_attention_heads for b in blocks(base)]
        out: dict = {"pixels": pixels, "clean_pixels": clean, "ablate": np.array(ABLATE),
                     "scale_heads": np.array(list(SCALE)), "scale_factors": np.array(list(SCALE.values())),
                     "patch": np.array(PATCH), "head_ko_layer": HEAD_KO_LAYER, "head_ko_heads": np.array(HEAD_KO_HEADS),
                     "grids": np.array(lg), "heads": np.array(lh)}

        def keep(key, res):
            out[f"{key}_pooled"] = res[0]
            if res[1] is not None:
                out[f"{key}_logits"] = res[1]

        keep("plain", run(model, pv))
        keep("zero", run(model, pv, [(g, zero(h)) for g, h in ABLATE]))
        keep("mean", run(model, pv, [(g, mean(h)) for g, h in ABLATE]))
        keep("scaled", run(model, pv, [(g, scale(h, f)) for (g, h), f in SCALE.items()]))
        rec = record(model, cv, {g for g, _ in PATCH})
        keep("patched", run(model, pv, [(g, put(h, rec[g][:, :, h])) for g, h in PATCH]))
        keep("clean", run(model, cv))
        masks = {g: knockout_mask(*lg[g]) for g in range(len(lg))}
        with Knockout(base, masks, lg):
            keep("knockout", run(model, pv))
        nh = lh[HEAD_KO_LAYER]
        per_head = np.zeros((nh, *masks[HEAD_KO_LAYER].shape), dtype=bool)
        per_head[list(HEAD_KO_HEADS)] = masks[HEAD_KO_LAYER]
        with Knockout(base, {HEAD_KO_LAYER: per_head}, lg):
            keep("knockout_heads", run(model, pv))
        for key in ("zero", "mean", "scaled", "patched", "knockout", "knockout_heads"):
            moved = np.abs(out[f"{key}_pooled"] - out["plain_pooled"]).max()
            assert moved > 1e-4, f"{name} {key}: the intervention changed nothing ({moved})"
        scripts(name, model, lg, lh, out)
        np.savez_compressed(DATA / name / "golden_interventions.npz", **out)
        print(name, sorted(out))


if __name__ == "__main__":
    main()
