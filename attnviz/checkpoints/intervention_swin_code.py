"""A Swin intervention exported as a plain PyTorch forward-hook script for transformers' eager Swin, reproducing
:func:`attnviz.checkpoints.intervention_swin.swin_run` outside attnviz.

The script's pre-hook on each edited layer's ``attention.o_proj`` (transformers 4: ``attention.output.dense``)
sees its input as (windows, window tokens, C): a head's output is its slice of C. Zero, given values and scaling
act per token, so the windows' order does not matter; "mean" is the mean over every window's tokens (the
stage's); a patch puts in the same slice recorded by a pass over the clean picture (whose windows lie the same).
A knockout (edges "query i may not see key j" in the stage's row-major token order) is cut into the layer's
windows by the modeling module's own ``window_partition`` of the rolled token ids and added to the scores inside
its ``eager_attention_forward`` as float32's minimum (edges no window holds are dropped).

Layers are global block indices over the stages (stage 0's first), as attnviz counts them. Plain text
generation with the standard library only, so any interpreter (the golden maker's too) can write the script.
"""

from __future__ import annotations

from attnviz.checkpoints.hook_edits import layer_edits


def swin_edits(ablate=None, scale=None, patch=None) -> dict[int, list]:
    """{layer: [(head, how, None | values | factor)]} (:func:`attnviz.checkpoints.hook_edits.layer_edits`)."""
    return layer_edits(ablate, scale, patch)


def _edges(mask) -> list:
    """A (T, T) mask's removed edges [i, j], or an (nh, T, T) one's [h, i, j] (anything with ``nonzero()``)."""
    return [[int(v) for v in e] for e in zip(*mask.nonzero())]


def swin_script(model: str, pixels: str, n_head, *, ablate=None, scale=None, knockout=None, grids=None,
                patch=None, clean: str | None = None, classifier: bool = False) -> str:
    """A runnable script: ``model`` (a folder or repo id) loaded by transformers in float32 with eager attention
    (AutoModelForImageClassification when ``classifier``, else AutoModel), run on the preprocessed pixels saved at
    ``pixels`` (a .npy file of (C, H, W) float32) once plain and once edited, printing as JSON the pooled output
    before and after, their cosine, and the class logits before and after when ``classifier``.

    ``n_head``: each global layer's head count; ``ablate`` {(layer, head): "zero" | "mean" | values},
    ``scale`` {(layer, head): factor}; ``knockout`` {layer: bool (T_s, T_s) or (nh_s, T_s, T_s) of removed edges}
    with ``grids`` {layer: (h_s, w_s)} its stage's token grid; ``patch`` [(layer, head)] taken from the pass
    over ``clean`` (a second .npy file of the same size)."""
    if bool(patch) != (clean is not None):
        raise ValueError("a patch needs the clean picture's pixels file, and the clean file a head to patch")
    edits = swin_edits(ablate, scale, patch)
    kinds = {how for v in edits.values() for _h, how, _f in v}
    knockout = knockout or {}
    if knockout and (grids is None or any(int(k) not in grids for k in knockout)):
        raise ValueError("a knockout needs the token grid of each layer it edits")
    auto = "AutoModelForImageClassification" if classifier else "AutoModel"
    lines = ["import json"] + (["import sys"] if knockout else []) + [
        "",
        "import numpy as np",
        "import torch",
        f"from transformers import {auto}",
        "",
        f"model = {auto}.from_pretrained({model!r}, dtype=torch.float32, attn_implementation=\"eager\").eval()",
        "base = getattr(model, \"swin\", model)  # SwinForImageClassification keeps its SwinModel as .swin",
        "blocks = [block for stage in base.encoder.layers for block in stage.blocks]  # global layer -> SwinLayer",
        f"n_head = {[int(h) for h in n_head]}  # each layer's stage's heads",
        f"pixels = torch.from_numpy(np.load({pixels!r}))[None]  # (1, C, H, W) as attnviz preprocessed the picture",
    ]
    if clean is not None:
        lines += [f"clean = torch.from_numpy(np.load({clean!r}))[None]  # the picture the patched heads come from"]
    lines += [
        "",
        "",
        "def out_proj(layer):",
        "    \"\"\"The layer's attention output projection (transformers 5: o_proj; 4: output.dense).\"\"\"",
        "    attention = blocks[layer].attention",
        "    return attention.o_proj if hasattr(attention, \"o_proj\") else attention.output.dense",
        "",
        "",
        "def run(x):",
        "    with torch.no_grad():",
        "        pooled = base(pixel_values=x).pooler_output  # (1, C): the last stage's tokens averaged",
    ]
    lines += (["        logits = model.classifier(pooled)[0].double()", "    return pooled[0].double(), logits"]
              if classifier else ["    return pooled[0].double(), None"])
    lines += ["", ""]
    if "patch" in kinds:
        lines += [
            "recorded = {}",
            "",
            "",
            "def record(layer):",
            "    def pre(module, args):",
            "        x = args[0]",
            "        recorded[layer] = x.detach().clone().view(x.shape[0], x.shape[1], n_head[layer], -1)",
            "    return pre",
            "",
            "",
        ]
    lines += [
        "def edit(layer, heads):",
        "    \"\"\"A pre-hook on the output projection: its input (windows, window tokens, C) is every head's output side",
        "    by side.\"\"\"",
        "    def pre(module, args):",
        "        x = args[0].clone()",
        "        w, t, _ = x.shape",
        "        h = x.view(w, t, n_head[layer], -1)",
        "        for head, how, factor in heads:",
        "            if how == \"zero\":",
        "                h[:, :, head] = 0",
        "            elif how == \"mean\":",
        "                h[:, :, head] = h[:, :, head].mean(dim=(0, 1), keepdim=True)  # over every window's tokens",
    ]
    if "set" in kinds:
        lines += ["            elif how == \"set\":", "                h[:, :, head] = torch.tensor(factor, dtype=h.dtype)"]
    if "patch" in kinds:
        lines += ["            elif how == \"patch\":", "                h[:, :, head] = recorded[layer][:, :, head]"]
    lines += [
        "            else:",
        "                h[:, :, head] *= factor",
        "        return (h.view(w, t, -1),) + tuple(args[1:])",
        "    return pre",
        "",
        "",
        "before, logits_before = run(pixels)",
        f"edits = {edits!r}  # layer -> [(head, how, factor)]",
    ]
    if "patch" in kinds:
        lines += [
            "hooks = [out_proj(layer).register_forward_pre_hook(record(layer)) for layer, heads in edits.items()",
            "         if any(how == \"patch\" for _head, how, _factor in heads)]",
            "run(clean)",
            "for hook in hooks:",
            "    hook.remove()",
        ]
    lines += ["hooks = [out_proj(layer).register_forward_pre_hook(edit(layer, heads)) for layer, heads in edits.items()]"]
    if knockout:
        lines += [
            f"grids = {({int(k): (int(grids[k][0]), int(grids[k][1])) for k in sorted(knockout)})!r}  # layer -> its "
            "stage's token grid",
            f"knockout = {({int(k): _edges(v) for k, v in sorted(knockout.items())})!r}  # layer -> removed edges "
            "[query, key] (or [head, query, key]) in the stage's token order",
            "modeling = sys.modules[type(base).__module__]",
            "eager = modeling.eager_attention_forward",
            "which = {id(blocks[layer].attention): layer for layer in knockout}",
            "",
            "",
            "def knock(layer, nh):",
            "    \"\"\"(windows, nh, n, n) to add to the layer's scores: float32's minimum on the removed edges.\"\"\"",
            "    block, (gh, gw) = blocks[layer], grids[layer]",
            "    ids = torch.arange(gh * gw).view(1, gh, gw, 1)  # each token's id, cut into windows as the layer cuts",
            "    if block.shift_size > 0:",
            "        ids = torch.roll(ids, shifts=(-block.shift_size, -block.shift_size), dims=(1, 2))",
            "    win = modeling.window_partition(ids, block.window_size).reshape(-1, block.window_size ** 2)",
            "    removed = torch.zeros(nh, gh * gw, gh * gw, dtype=torch.bool)",
            "    for edge in knockout[layer]:",
            "        if len(edge) == 2:",
            "            removed[:, edge[0], edge[1]] = True",
            "        else:",
            "            removed[edge[0], edge[1], edge[2]] = True",
            "    cut = removed[:, win[:, :, None], win[:, None, :]].transpose(0, 1)  # (windows, nh, n, n)",
            "    return torch.zeros(cut.shape).masked_fill(cut, torch.finfo(torch.float32).min)",
            "",
            "",
            "def knocked(module, query, key, value, attention_mask, *args, **kwargs):",
            "    layer = which.get(id(module))",
            "    if layer is not None:",
            "        attention_mask = attention_mask + knock(layer, query.shape[1])",
            "    return eager(module, query, key, value, attention_mask, *args, **kwargs)",
            "",
            "",
            "modeling.eager_attention_forward = knocked",
        ]
    lines += ["after, logits_after = run(pixels)"]
    if knockout:
        lines += ["modeling.eager_attention_forward = eager"]
    lines += [
        "for hook in hooks:",
        "    hook.remove()",
        "out = {\"pooled_before\": before.tolist(), \"pooled_after\": after.tolist(),",
        "       \"cosine\": torch.nn.functional.cosine_similarity(before, after, dim=0).item()}",
        "if logits_before is not None:",
        "    out |= {\"logits_before\": logits_before.tolist(), \"logits_after\": logits_after.tolist()}",
        "print(json.dumps(out))",
        "",
    ]
    return "\n".join(lines)
