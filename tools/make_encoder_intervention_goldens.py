"""Write the encoder and vision intervention goldens of tests/checkpoints/test_intervention_encoders.py.

Run once, in an environment with torch (CPU) and transformers; attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_encoder_intervention_goldens.py

For tiny_roberta, tiny_distilbert (token ids IDS) and tiny_vit, tiny_dinov2, tiny_clip_vision (pixels drawn
from a seeded normal distribution, given to the model as ``pixel_values`` unchanged) it writes
``golden_encoder_interventions.npz`` with the base model's ``last_hidden_state`` (T, C) of transformers'
eager model under PyTorch forward pre-hooks on the attention's output projection (a head's output is its
slice of that projection's input): ``plain``; ``zero`` and ``mean`` (heads ABLATE zeroed, or set to their mean
over the positions); ``scaled`` (head SCALE_HEAD times SCALE); and ``knockout``: in every layer query rows
from KO_FROM on may not see key KO_KEY, added to the scores as the dtype's minimum inside the model's own
eager attention function (so each row renormalises over the keys left). ``inputs`` holds the ids or pixels.
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


if __name__ == "__main__":
    main()
