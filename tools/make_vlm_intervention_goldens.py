"""Write the vision-language intervention goldens of tests/checkpoints/test_intervention_vlm.py.

Run once, in an environment with torch (CPU) and transformers 5; attnviz itself never imports them:

    /tmp/gold/bin/python tools/make_vlm_intervention_goldens.py [--only NAME ...]

For tiny_paligemma, tiny_paligemma2, tiny_llava and tiny_smolvlm it reads the processor's ``input_ids`` and pixels kept in the
folder's ``golden.npz`` (made by make_vlm_goldens.py), runs transformers' eager model
(``AutoModelForImageTextToText``) under PyTorch forward pre-hooks on each language-model layer's
``o_proj`` (a head's output is its slice of that input) in float64 (transformers' float32 pass is itself up to
8e-6 from it on these models, attnviz's float32 one 5.5e-6) and writes ``golden_interventions.npz`` with the last
position's logits of: ``plain``; ``zero`` and ``mean`` (heads ABLATE zeroed, or set to their mean over the
positions); ``scale`` (heads SCALE times FACTOR); ``patch_head`` (head PATCH_HEAD's output taken from the clean
prompt CLEAN[folder], same picture, same token count); ``patch_residual`` (the stream entering layer
RESIDUAL_LAYER at the last RESIDUAL_LAST positions, from the clean prompt, by a pre-hook on the decoder layer);
``knockout`` (the last KO_QUERIES queries may not see every other image token, in every layer and head) and
``knockout_head`` (the same edges in layer KO_HEAD[0], head KO_HEAD[1] only): the edges set to the dtype's minimum
inside the language model's own eager attention function, on top of the family's mask (PaliGemma's prefix-LM),
so each row renormalises. The edges are kept as ``knockout_removed`` (T, T).

Then it writes attnviz's exported hook scripts (attnviz/checkpoints/intervention_vlm_code.py, loaded by path:
standard library only) for SCRIPTS, runs each as written from the repository root and keeps its sha256 and the
logits it printed (``script_<name>_before`` / ``_after``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "checkpoints"
# folder -> (its pictures, the clean prompt: the golden prompt with a word changed, the same number of tokens)
FOLDERS = {
    "tiny_paligemma": (["image.png"], "answer en what is on the picture?"),
    "tiny_paligemma2": (["image.png"], "answer en what is on the picture?"),  # soft caps, a sliding window
    "tiny_llava": (["image.png"], "USER: <image>\nwhat is in the box? ASSISTANT:"),
    "tiny_smolvlm": (["image.png", "image2.png"],
                     "<|im_start|>User:<image>and<image>which picture is second?<end_of_utterance>\nAssistant:"),
}
ABLATE = [(0, 1), (1, 0)]
SCALE, FACTOR = [(0, 0), (1, 1)], 2.5
PATCH_HEAD = (1, 0)
RESIDUAL_LAYER, RESIDUAL_LAST = 1, 4
KO_QUERIES = 6
KO_HEAD = (1, 1)
# the exported scripts run as written: name -> what they hold (see script_edits)
SCRIPTS = ("edits", "scale", "patch_head", "patch_residual")


def processor(folder: Path):
    if folder.name == "tiny_smolvlm":  # SmolVLM's own processor needs torchvision for its video part
        sys.path.insert(0, str(ROOT / "tools"))
        from make_vlm_goldens import _smolvlm_processor_class

        return _smolvlm_processor_class().from_pretrained(folder)
    return AutoProcessor.from_pretrained(folder)


def golden_inputs(folder: Path) -> dict[str, torch.Tensor]:
    g = np.load(folder / "golden.npz", allow_pickle=False)
    out = {"input_ids": torch.from_numpy(g["input_ids"].astype(np.int64))[None],
           "pixel_values": torch.from_numpy(g["pixel_values"].astype(np.float64))[None]}
    if "pixel_attention_mask" in g:
        out["pixel_attention_mask"] = torch.from_numpy(g["pixel_attention_mask"].astype(bool))[None]
    if "token_type_ids" in g:
        out["token_type_ids"] = torch.from_numpy(g["token_type_ids"].astype(np.int64))[None]
    out["attention_mask"] = torch.ones_like(out["input_ids"])
    return out


def clean_inputs(folder: Path, pictures: list[str], prompt: str, like: dict) -> dict[str, torch.Tensor]:
    images = [Image.open(folder / p) for p in pictures]
    batch = dict(processor(folder)(images=images if len(images) > 1 else images[0], text=prompt, return_tensors="pt"))
    assert batch["input_ids"].shape == like["input_ids"].shape, f"{folder.name}: the clean prompt's length differs"
    assert torch.equal(batch["pixel_values"].double(), like["pixel_values"]), f"{folder.name}: other pixels"
    return {k: v.double() if k == "pixel_values" else v for k, v in batch.items() if k in like}


def language_model(model):
    return model.model.language_model if hasattr(model.model, "language_model") else model.model.text_model


def head_hook(proj, head_dim: int, fn):
    def pre(module, args):
        x = args[0].clone()
        b, t, _ = x.shape
        fn(x.view(b, t, -1, head_dim))
        return (x,) + tuple(args[1:])

    return proj.register_forward_pre_hook(pre)


class Knockout:
    """While active, the language model's eager attention sets the removed edges of the given layers (and heads)
    to the dtype's minimum in its mask."""

    def __init__(self, lm, removed: np.ndarray, layers, head: int | None, n_head: int):
        self.mod = sys.modules[type(lm.layers[0].self_attn).__module__]
        T = removed.shape[0]
        k = torch.zeros(1, n_head, T, T, dtype=torch.bool)
        if head is None:
            k[0, :] = torch.from_numpy(removed)
        else:
            k[0, head] = torch.from_numpy(removed)
        self.knock = {int(i): k for i in layers}

    def __enter__(self):
        self.orig = self.mod.eager_attention_forward
        knock, orig = self.knock, self.orig

        def knocked(module, query, key, value, attention_mask, *args, **kw):
            k = knock.get(module.layer_idx)
            if k is not None:
                attention_mask = attention_mask.masked_fill(k, torch.finfo(attention_mask.dtype).min)
            return orig(module, query, key, value, attention_mask, *args, **kw)

        self.mod.eager_attention_forward = knocked
        return self

    def __exit__(self, *exc):
        self.mod.eager_attention_forward = self.orig


def last_logits(model, batch) -> np.ndarray:
    with torch.no_grad():
        return model(**batch).logits[0, -1].double().numpy()


def hooked(model, batch, hooks) -> np.ndarray:
    try:
        return last_logits(model, batch)
    finally:
        for h in hooks:
            h.remove()


def removed_edges(ids: np.ndarray, image_token_id: int) -> np.ndarray:
    """(T, T) bool: the last KO_QUERIES queries lose every other image token (every row keeps its other keys)."""
    T = ids.size
    img = np.flatnonzero(ids == image_token_id)
    out = np.zeros((T, T), dtype=bool)
    out[np.ix_(np.arange(T - KO_QUERIES, T), img[::2])] = True
    return out


def _code():
    """attnviz/checkpoints/intervention_vlm_code.py and the intervention_code.py it reads, loaded by path (both
    need only the standard library)."""
    for name in ("attnviz", "attnviz.checkpoints"):
        sys.modules.setdefault(name, types.ModuleType(name))
    mods = {}
    for name in ("intervention_code", "intervention_vlm_code"):
        spec = importlib.util.spec_from_file_location(f"attnviz.checkpoints.{name}",
                                                      ROOT / f"attnviz/checkpoints/{name}.py")
        mods[name] = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mods[name]
        spec.loader.exec_module(mods[name])
    return mods["intervention_vlm_code"]


def script_edits(name: str, removed: np.ndarray, nh: int, n_layer: int) -> dict:
    """The keyword arguments of vlm_script for the script ``name``, each one the window's single intervention:
    "edits" zero-ablates ABLATE with the edges knocked out in layer KO_HEAD[0], head KO_HEAD[1] only; "scale"
    scales SCALE by FACTOR with the edges knocked out in every layer and head; "patch_head" mean-ablates ABLATE
    and patches PATCH_HEAD; "patch_residual" patches the stream entering RESIDUAL_LAYER at the last positions."""
    T = removed.shape[0]
    if name == "edits":
        per_head = np.zeros((nh, T, T), dtype=bool)
        per_head[KO_HEAD[1]] = removed
        return {"ablate": {h: "zero" for h in ABLATE}, "knockout": {KO_HEAD[0]: per_head}}
    if name == "scale":
        return {"scale": {h: FACTOR for h in SCALE}, "knockout": {layer: removed for layer in range(n_layer)}}
    if name == "patch_head":
        return {"ablate": {h: "mean" for h in ABLATE}, "patch_head": PATCH_HEAD}
    return {"patch_residual": (RESIDUAL_LAYER, list(range(T - RESIDUAL_LAST, T)))}


def make(name: str) -> None:
    folder = DATA / name
    pictures, clean_prompt = FOLDERS[name]
    g = np.load(folder / "golden.npz", allow_pickle=False)
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager").eval()
    cfg = model.config.get_text_config()
    nh = cfg.num_attention_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // nh
    lm = language_model(model)
    proj = [layer.self_attn.o_proj for layer in lm.layers]
    batch = golden_inputs(folder)
    clean = clean_inputs(folder, pictures, clean_prompt, batch)
    ids = batch["input_ids"][0].numpy()
    T = ids.size
    image_token_id = int(getattr(model.config, "image_token_id", None) or model.config.image_token_index)
    removed = removed_edges(ids, image_token_id)
    out: dict[str, np.ndarray] = {"plain": last_logits(model, batch)}

    def ablate(how):
        def fn(h, head):
            h[:, :, head] = 0 if how == "zero" else h[:, :, head].mean(dim=1, keepdim=True)
        return [head_hook(proj[layer], hd, lambda h, head=head: fn(h, head)) for layer, head in ABLATE]

    out["zero"] = hooked(model, batch, ablate("zero"))
    out["mean"] = hooked(model, batch, ablate("mean"))

    def scaled(h, head):
        h[:, :, head] *= FACTOR

    out["scale"] = hooked(model, batch, [head_hook(proj[layer], hd, lambda h, head=head: scaled(h, head))
                                         for layer, head in SCALE])
    seen = {}
    rec = proj[PATCH_HEAD[0]].register_forward_pre_hook(lambda m, a: seen.__setitem__("x", a[0].clone()))
    hooked(model, clean, [rec])
    clean_heads = seen["x"].view(1, T, nh, hd)

    def put(h):
        h[:, :, PATCH_HEAD[1]] = clean_heads[:, :, PATCH_HEAD[1]]

    out["patch_head"] = hooked(model, batch, [head_hook(proj[PATCH_HEAD[0]], hd, put)])
    layer = lm.layers[RESIDUAL_LAYER]

    def stream(args, kwargs):
        return args[0] if args else kwargs["hidden_states"]

    rec = layer.register_forward_pre_hook(lambda m, a, k: seen.__setitem__("s", stream(a, k).clone()),
                                          with_kwargs=True)
    hooked(model, clean, [rec])
    last = slice(T - RESIDUAL_LAST, T)

    def patch_stream(module, args, kwargs):
        x = stream(args, kwargs).clone()
        x[:, last] = seen["s"][:, last]
        return ((x,) + tuple(args[1:]), kwargs) if args else (args, dict(kwargs, hidden_states=x))

    out["patch_residual"] = hooked(model, batch, [layer.register_forward_pre_hook(patch_stream, with_kwargs=True)])
    with Knockout(lm, removed, range(len(lm.layers)), None, nh):
        out["knockout"] = last_logits(model, batch)
    with Knockout(lm, removed, [KO_HEAD[0]], KO_HEAD[1], nh):
        out["knockout_head"] = last_logits(model, batch)
    for key, z in out.items():
        if key != "plain":
            assert np.abs(z - out["plain"]).max() > 1e-3, f"{name}: {key} changed nothing"
    arrays = {f"logits_{k}": v for k, v in out.items()}
    arrays.update(prompt=np.array(str(g["prompt"])), clean_prompt=np.array(clean_prompt), input_ids=ids,
                  clean_input_ids=clean["input_ids"][0].numpy(), knockout_removed=removed,
                  ablate=np.array(ABLATE), scale=np.array(SCALE), factor=np.float64(FACTOR),
                  patch_head=np.array(PATCH_HEAD), residual_layer=np.int64(RESIDUAL_LAYER),
                  residual_last=np.int64(RESIDUAL_LAST), knockout_head=np.array(KO_HEAD),
                  pictures=np.array(pictures))
    arrays.update(scripts(name, folder, model, ids, clean["input_ids"][0].numpy(), removed, nh))
    np.savez_compressed(folder / "golden_interventions.npz", **arrays)
    print(name, T, {k: float(np.abs(v - out["plain"]).max()) for k, v in out.items() if k != "plain"})


def scripts(name: str, folder: Path, model, ids, clean_ids, removed, nh: int) -> dict[str, np.ndarray]:
    """Each of SCRIPTS written by attnviz's vlm_script, run as written from the repository root: its sha256 and
    the logits before and after it printed."""
    code = _code()
    rel = f"tests/data/checkpoints/{name}"
    pictures, clean_prompt = FOLDERS[name]
    family = model.config.model_type
    out = {}
    for which in SCRIPTS:
        kw = script_edits(which, removed, nh, len(language_model(model).layers))
        if "patch_head" in kw or "patch_residual" in kw:
            kw.update(clean_prompt=clean_prompt, clean_ids=[int(t) for t in clean_ids])
        text = code.vlm_script(rel, [f"{rel}/{p}" for p in pictures], str(np.load(folder / "golden.npz")["prompt"]),
                               [int(t) for t in ids], family=family, **kw)
        run = subprocess.run([sys.executable, "-c", text], cwd=ROOT, capture_output=True, text=True,
                             env=dict(os.environ, TRANSFORMERS_VERBOSITY="error"))
        assert run.returncode == 0, f"{name} {which}: {run.stderr[-2000:]}"
        found = json.loads(run.stdout.strip().splitlines()[-1])
        before, after = np.array(found["before"]), np.array(found["after"])
        assert np.abs(after - before).max() > 1e-3, f"{name} {which}: the script changed nothing"
        out[f"script_{which}_sha256"] = np.array(hashlib.sha256(text.encode("utf-8")).hexdigest())
        out[f"script_{which}_before"] = before
        out[f"script_{which}_after"] = after
    return out


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(FOLDERS), help="write only these folders' goldens")
    args = ap.parse_args()
    torch.manual_seed(0)
    for name in args.only or FOLDERS:
        make(name)


if __name__ == "__main__":
    main()
