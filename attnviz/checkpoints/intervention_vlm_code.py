"""A vision-language model's interventions exported as a PyTorch forward-hook script for transformers: the folder
loaded by ``AutoModelForImageTextToText`` (float32, eager attention), its processor run on the pictures and the
prompt, the same head edits as :mod:`attnviz.checkpoints.intervention_code`'s scripts (a pre-hook on each
language-model layer's ``o_proj``: a head's output is its slice of that input), a knockout as the knocked-out
edges set to the dtype's minimum inside the language model's own eager attention function (per layer and head,
on top of the family's mask), and a patch from a clean prompt: the clean pass recorded by the same pre-hook (a
head) or by a pre-hook on the decoder layer (the residual stream entering it), put into the corrupted pass.

The script prints the last position's logits before and after the edits as JSON. Plain text generation with
the standard library only, so any interpreter (the goldens tool's among them) can make the scripts.
"""

from __future__ import annotations

from attnviz.checkpoints.intervention_code import _heads_by_layer, _hook_lines, _literal

#: where transformers 5 keeps a vision-language model's language-model attention output projection: PaliGemma and
#: LLaVA (``model.language_model``), Idefics3 and SmolVLM (``model.text_model``)
VLM_OUT_PROJ_PATHS = ("model.language_model.layers.{i}.self_attn.o_proj", "model.text_model.layers.{i}.self_attn.o_proj")
VLM_LAYER_PATHS = ("model.language_model.layers.{i}", "model.text_model.layers.{i}")
#: families whose processor may not load without torchvision / num2words (their video part): the script falls back
#: to the image processor and the expanded ids attnviz made
FALLBACK_FAMILIES = ("idefics3", "smolvlm")


def _edges(removed) -> list[list[int]]:
    """[head (-1: every head), query, key] of a (T, T) or (nh, T, T) bool array-like of removed edges."""
    rows = removed.tolist() if hasattr(removed, "tolist") else removed
    if rows and rows[0] and isinstance(rows[0][0], (list, tuple)):
        return [[h, i, j] for h, plane in enumerate(rows) for i, row in enumerate(plane) for j, v in enumerate(row) if v]
    return [[-1, i, j] for i, row in enumerate(rows) for j, v in enumerate(row) if v]


def _inputs_lines(prompt: str, ids, name: str, ids_name: str) -> list[str]:
    return [f"{ids_name} = {[int(t) for t in ids]}  # the expanded prompt (image tokens included) as attnviz made it",
            f"{name} = inputs({prompt!r}, {ids_name})"]


def vlm_script(model: str, image_files, prompt: str, ids, *, family: str, ablate=None, scale=None, knockout=None,
               patch_head=None, patch_residual=None, clean_prompt: str | None = None, clean_ids=None) -> str:
    """A runnable script for the vision-language folder ``model`` on the pictures ``image_files`` and ``prompt``
    (``ids``: the expanded sequence attnviz made, which the processor's must equal): ``ablate`` {(layer, head):
    "zero" | "mean" | values}, ``scale`` {(layer, head): factor}, ``knockout`` {layer: removed edges (T, T) or
    (nh, T, T) bool}, ``patch_head`` (layer, head) or ``patch_residual`` (layer, positions or None for every
    position) from ``clean_prompt`` (same pictures, ``clean_ids`` as long as ``ids``)."""
    if (patch_head is not None or patch_residual is not None) and clean_prompt is None:
        raise ValueError("a patch needs the clean prompt")
    if patch_head is not None and patch_residual is not None:
        raise ValueError("patch a head or the residual stream, not both")
    layers = _heads_by_layer(ablate or {}, scale or {})
    given = any(how == "set" for v in layers.values() for _h, how, _f in v)
    fallback = family in FALLBACK_FAMILIES
    lines = [
        "import json",
        "import sys",
        "",
        "import torch",
        "from PIL import Image",
        "from transformers import AutoModelForImageTextToText, AutoProcessor",
        "",
        f"folder = {model!r}",
        "model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32, attn_implementation=\"eager\").eval()",
        "cfg = model.config.get_text_config()",
        "head_dim = getattr(cfg, \"head_dim\", None) or cfg.hidden_size // cfg.num_attention_heads",
        f"images = [Image.open(path).convert(\"RGB\") for path in {[str(p) for p in image_files]!r}]",
        "",
        "",
        "def inputs(prompt, ids):",
        "    \"\"\"The processor on the pictures and the prompt; its expanded ids must be attnviz's.\"\"\"",
    ]
    if fallback:
        lines += [
            "    try:",
            "        processor = AutoProcessor.from_pretrained(folder)",
            "    except (ImportError, OSError, ValueError):  # its video part needs torchvision and num2words",
            "        from transformers import AutoImageProcessor",
            "",
            "        batch = dict(AutoImageProcessor.from_pretrained(folder)(images=[images], return_tensors=\"pt\"))",
            "        batch[\"input_ids\"] = torch.tensor([ids])",
            "        batch[\"attention_mask\"] = torch.ones_like(batch[\"input_ids\"])",
            "        return batch",
            "    batch = processor(images=[images], text=prompt, return_tensors=\"pt\")",
        ]
    else:
        lines += [
            "    processor = AutoProcessor.from_pretrained(folder)",
            "    batch = processor(images=images[0] if len(images) == 1 else images, text=prompt, return_tensors=\"pt\")",
        ]
    lines += [
        "    if batch[\"input_ids\"][0].tolist() != ids:",
        "        sys.exit(\"the processor expands the prompt into other tokens than attnviz did\")",
        "    return batch",
        "",
        "",
        "def last_logits(batch):",
        "    with torch.no_grad():",
        "        return model(**batch).logits[0, -1].double()",
        "",
        "",
        *_hook_lines("h = x.view(b, t, -1, head_dim)", "the language model's output projection",
                     VLM_OUT_PROJ_PATHS, given),
        *_inputs_lines(prompt, ids, "batch", "ids"),
        "before = last_logits(batch)",
    ]
    if patch_head is not None or patch_residual is not None:
        layer = int((patch_head or patch_residual)[0])
        lines += [*_inputs_lines(clean_prompt, clean_ids, "clean", "clean_ids"), "seen = {}", ""]
        if patch_head is not None:
            head = int(patch_head[1])
            lines += [
                "",
                "def record(module, args):",
                "    seen[\"x\"] = args[0].clone()  # every head's output of the clean pass",
                "",
                "",
                "def patch(module, args):",
                "    x = args[0].clone()",
                "    b, t, _ = x.shape",
                f"    x.view(b, t, -1, head_dim)[:, :, {head}] = seen[\"x\"].view(b, t, -1, head_dim)[:, :, {head}]",
                "    return (x,) + tuple(args[1:])",
                "",
                "",
                f"target = out_proj({layer})",
                "recording = target.register_forward_pre_hook(record)",
                "last_logits(clean)",
                "recording.remove()",
            ]
        else:
            pos = patch_residual[1]
            where = "slice(None)" if pos is None or len(pos) == 0 else repr([int(p) for p in pos])
            lines += [
                "",
                "def layer(i):",
                f"    for path in {VLM_LAYER_PATHS!r}:",
                "        try:",
                "            return model.get_submodule(path.format(i=i))",
                "        except AttributeError:",
                "            pass",
                "    sys.exit(f\"no decoder layer {i} found\")",
                "",
                "",
                "def stream(args, kwargs):",
                "    return args[0] if args else kwargs[\"hidden_states\"]",
                "",
                "",
                "def record(module, args, kwargs):",
                "    seen[\"x\"] = stream(args, kwargs).clone()  # the clean pass's stream entering the layer",
                "",
                "",
                "def patch(module, args, kwargs):",
                "    x = stream(args, kwargs).clone()",
                f"    x[:, {where}] = seen[\"x\"][:, {where}]",
                "    if args:",
                "        return (x,) + tuple(args[1:]), kwargs",
                "    return args, dict(kwargs, hidden_states=x)",
                "",
                "",
                f"target = layer({layer})",
                "recording = target.register_forward_pre_hook(record, with_kwargs=True)",
                "last_logits(clean)",
                "recording.remove()",
            ]
    lines += [
        f"edits = {_literal(layers)}  # layer -> [(head, how, factor)]",
        "hooks = [out_proj(int(layer)).register_forward_pre_hook(edit(heads)) for layer, heads in edits.items()]",
    ]
    if patch_head is not None:
        lines += ["hooks.append(target.register_forward_pre_hook(patch))  # after the edits: the patch has the last word"]
    elif patch_residual is not None:
        lines += ["hooks.append(target.register_forward_pre_hook(patch, with_kwargs=True))"]
    if knockout:
        removed = {int(layer): _edges(m) for layer, m in sorted(knockout.items())}
        lines += [
            f"removed = {removed!r}  # layer -> [head (-1: every head), query i, key j]: the knocked-out edges",
            "T = len(ids)",
            "knock = {}",
            "for layer, edges in removed.items():",
            "    k = torch.zeros(1, cfg.num_attention_heads, T, T, dtype=torch.bool)",
            "    for head, i, j in edges:",
            "        if head < 0:",
            "            k[0, :, i, j] = True",
            "        else:",
            "            k[0, head, i, j] = True",
            "    knock[layer] = k",
        ]
        lines += [
            "",
            "",
            "def attention(i):",
            "    \"\"\"Layer i's attention module (its modeling module holds the eager attention function).\"\"\"",
            f"    for path in {tuple(p.replace('.o_proj', '') for p in VLM_OUT_PROJ_PATHS)!r}:",
            "        try:",
            "            return model.get_submodule(path.format(i=i))",
            "        except AttributeError:",
            "            pass",
            "    sys.exit(f\"no attention found in layer {i}\")",
            "",
            "",
            "modeling = sys.modules[type(attention(0)).__module__]",
            "eager = modeling.eager_attention_forward",
            "",
            "",
            "def knocked(module, query, key, value, attention_mask, *args, **kwargs):",
            "    k = knock.get(getattr(module, \"layer_idx\", None))",
            "    if k is not None:",
            "        if attention_mask is None:",
            "            sys.exit(\"the eager attention got no mask to knock edges out of\")",
            "        k = k[..., :attention_mask.shape[-2], :attention_mask.shape[-1]]",
            "        if attention_mask.dtype == torch.bool:",
            "            attention_mask = attention_mask & ~k",
            "        else:",
            "            attention_mask = attention_mask.masked_fill(k, torch.finfo(attention_mask.dtype).min)",
            "    return eager(module, query, key, value, attention_mask, *args, **kwargs)",
            "",
            "",
            "modeling.eager_attention_forward = knocked",
        ]
    lines += ["after = last_logits(batch)"]
    if knockout:
        lines += ["modeling.eager_attention_forward = eager"]
    lines += [
        "for hook in hooks:",
        "    hook.remove()",
        "print(json.dumps({\"before\": before.tolist(), \"after\": after.tolist()}))",
        "",
    ]
    return "\n".join(lines)
