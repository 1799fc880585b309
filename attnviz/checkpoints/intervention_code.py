"""Interventions exported as code that reproduces them outside attnviz: a PyTorch forward-hook script for
transformers (a pre-hook on each layer's attention output projection — ``o_proj``, or the family's own name
for it, :data:`OUT_PROJ_PATHS` — a head's output is its slice of that input) and the
same edits as TransformerLens hooks on ``blocks.L.attn.hook_z``. Plain text generation, no imports beyond
the standard library, so any interpreter can make the scripts.

Exported: zero and mean ablation (over the positions, or to given values such as a corpus's means of the head),
scaling, and knockout masks applied to every layer (as a 4-D attention mask in the PyTorch script). A knockout
on some layers only, and patching, have no one-line hook form and are refused by name.

Encoders and vision models (:func:`encoder_script`): the same pre-hooks on transformers' AutoModel (the output
projection at :data:`ENCODER_OUT_PROJ_PATHS`), the knockout added to the scores inside the modeling module's
eager attention function; the script prints the pooled output before and after and their cosine. For BERT,
RoBERTa and XLM-R the head edits also as TransformerLens 4 hooks (:func:`lens_encoder_script`: the encoder wrapped
by its TransformerBridge, hooks on ``blocks.L.attn.hook_z``), printing the same.
"""

from __future__ import annotations

#: where transformers keeps a decoder layer's attention output projection (its input is every head's output
#: side by side), tried in this order: Llama-likes, Phi, GPT-NeoX, Falcon and BLOOM, OPT, GPT-2 (a Conv1D)
OUT_PROJ_PATHS = ("model.layers.{i}.self_attn.o_proj", "model.layers.{i}.self_attn.dense",
                  "gpt_neox.layers.{i}.attention.dense", "transformer.h.{i}.self_attention.dense",
                  "model.decoder.layers.{i}.self_attn.out_proj", "transformer.h.{i}.attn.c_proj")

def _value(f):
    """A factor (float), given values (a list of floats) or None, as plain Python."""
    if f is None:
        return None
    return [float(x) for x in f] if isinstance(f, (list, tuple)) else float(f)


def _literal(layers: dict) -> str:
    """A Python literal of {layer: [(head, how, factor or values), ...]}."""
    return repr({int(k): [(int(h), str(how), _value(f)) for h, how, f in v] for k, v in layers.items()})


def _heads_by_layer(ablate: dict, scale: dict) -> dict[int, list]:
    """{layer: [(head, "zero" | "mean" | "set" | "scale", None | values | factor)]}: "set" puts given values (a
    corpus's means of the head, (hd,)) in at every position."""
    out: dict[int, list] = {}
    for (layer, head), how in sorted(ablate.items()):
        if isinstance(how, str):
            out.setdefault(int(layer), []).append((int(head), how, None))
        else:
            out.setdefault(int(layer), []).append((int(head), "set", [float(x) for x in how]))
    for (layer, head), f in sorted(scale.items()):
        out.setdefault(int(layer), []).append((int(head), "scale", float(f)))
    return out


def _set_lines(name: str, given: bool) -> list[str]:
    """The hook's branch for given values (written only when some head has them, so other scripts stay as they
    were)."""
    if not given:
        return []
    return ["            elif how == \"set\":",
            f"                {name}[:, :, head] = torch.tensor(factor, dtype={name}.dtype)"]


def _one_knockout_mask(knockout: dict, n_layer: int | None):
    """The one (T, T) mask a knockout applies to every layer and head: the only form a hook script exports."""
    if n_layer is not None and set(knockout) != set(range(n_layer)):
        raise ValueError("a knockout on some layers only has no hook form; export one applied to every layer")
    masks = list(knockout.values())
    first = masks[0]
    if any((m != first).any() for m in masks[1:]) or getattr(first, "ndim", 2) != 2:
        raise ValueError("only one (T, T) knockout mask for every layer and head is exported")
    return first


def _causal_knockout_lines(first) -> list[str]:
    """The script's 4-D additive ``mask``: the causal mask without the (T, T) knockout ``first``'s edges."""
    removed = [[int(i), int(j)] for i, j in zip(*first.nonzero())]
    return [
        "T = ids.shape[1]",
        "allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))",
        f"for i, j in {removed}:",
        "    allowed[i, j] = False  # the knocked-out edges: query i may not see key j",
        "mask = torch.zeros(1, 1, T, T)",
        "mask[0, 0][~allowed] = torch.finfo(torch.float32).min",
    ]


def _hook_lines(view: str, proj: str, paths, given: bool) -> list[str]:
    """The script's ``edit(heads)`` pre-hook (``view``: the line splitting its input into heads; ``proj``: what
    it hooks, for its docstring) and ``out_proj(layer)``, which tries ``paths`` in turn."""
    return [
        "def edit(heads):",
        f"    \"\"\"A pre-hook on {proj}: its input is every head's output side by side.\"\"\"",
        "    def pre(module, args):",
        "        x = args[0].clone()",
        "        b, t, _ = x.shape",
        f"        {view}",
        "        for head, how, factor in heads:",
        "            if how == \"zero\":",
        "                h[:, :, head] = 0",
        "            elif how == \"mean\":",
        "                h[:, :, head] = h[:, :, head].mean(dim=1, keepdim=True)",
        *_set_lines("h", given),
        "            else:",
        "                h[:, :, head] *= factor",
        "        return (h.view(b, t, -1),) + tuple(args[1:])",
        "    return pre",
        "",
        "",
        "def out_proj(layer):",
        "    \"\"\"The layer's attention output projection, whatever the family calls it.\"\"\"",
        f"    for path in {paths!r}:",
        "        try:",
        "            return model.get_submodule(path.format(i=layer))",
        "        except AttributeError:",
        "            pass",
        "    raise SystemExit(f\"no attention output projection found in layer {layer}\")",
        "",
        "",
    ]


def pytorch_script(model: str, ids, *, ablate=None, scale=None, knockout=None, n_layer: int | None = None) -> str:
    """A runnable script: ``model`` (a folder or repo id) loaded by transformers in float32 with eager
    attention, run on token ``ids`` with the edits, printing the last position's logits as JSON."""
    layers = _heads_by_layer(ablate or {}, scale or {})
    given = any(how == "set" for v in layers.values() for _h, how, _f in v)
    ids = [int(t) for t in ids]
    lines = [
        "import json",
        "",
        "import torch",
        "from transformers import AutoModelForCausalLM",
        "",
        f"model = AutoModelForCausalLM.from_pretrained({model!r}, dtype=torch.float32, attn_implementation=\"eager\").eval()",
        "cfg = model.config",
        "head_dim = getattr(cfg, \"head_dim\", None) or cfg.hidden_size // cfg.num_attention_heads",
        f"ids = torch.tensor([{ids}])",
        "",
        "",
        *_hook_lines("h = x.view(b, t, -1, head_dim)", "the output projection", OUT_PROJ_PATHS, given),
        f"edits = {_literal(layers)}  # layer -> [(head, how, factor)]",
        "hooks = [out_proj(int(layer)).register_forward_pre_hook(edit(heads)) for layer, heads in edits.items()]",
    ]
    kw = ""
    if knockout is not None:
        lines += _causal_knockout_lines(_one_knockout_mask(knockout, n_layer))
        kw = ", attention_mask=mask"
    lines += [
        "with torch.no_grad():",
        f"    logits = model(ids{kw}).logits[0, -1]",
        "for hook in hooks:",
        "    hook.remove()",
        "print(json.dumps(logits.double().tolist()))",
        "",
    ]
    return "\n".join(lines)


def _lens_edit_lines(given: bool) -> list[str]:
    """The TransformerLens hook ``edit(heads)`` on ``blocks.L.attn.hook_z`` (batch, pos, head, d_head)."""
    return [
        "def edit(heads):",
        "    def hook(z, hook):",
        "        for head, how, factor in heads:",
        "            if how == \"zero\":",
        "                z[:, :, head] = 0",
        "            elif how == \"mean\":",
        "                z[:, :, head] = z[:, :, head].mean(dim=1, keepdim=True)",
        *_set_lines("z", given),
        "            else:",
        "                z[:, :, head] *= factor",
        "        return z",
        "    return hook",
        "",
        "",
    ]


def lens_script(model: str, ids, *, ablate=None, scale=None, knockout=None, n_layer: int | None = None) -> str:
    """The same head edits as TransformerLens hooks on ``blocks.L.attn.hook_z`` (batch, pos, head, d_head): a
    runnable script loading ``model`` (a folder or repo id) with TransformerLens 4's TransformerBridge in float32
    (transformers' weights as they are, eager attention; TransformerLens 4 removed HookedTransformer, whose
    ``from_pretrained`` took only the official model names), printing the last position's logits as JSON, as
    :func:`pytorch_script` does. A knockout (one (T, T) mask for every layer) goes in as the same 4-D attention
    mask as in :func:`pytorch_script`, which the bridge hands to transformers' model."""
    layers = _heads_by_layer(ablate or {}, scale or {})
    given = any(how == "set" for v in layers.values() for _h, how, _f in v)
    ids = [int(t) for t in ids]
    lines = [
        "import json",
        "",
        "import torch",
        "from transformer_lens.model_bridge import TransformerBridge",
        "",
        f"model = TransformerBridge.boot_transformers({model!r}, dtype=torch.float32, device=\"cpu\")",
        f"ids = torch.tensor([{ids}])",
        "",
        "",
        *_lens_edit_lines(given),
        f"edits = {_literal(layers)}  # layer -> [(head, how, factor)]",
        "hooks = [(f\"blocks.{layer}.attn.hook_z\", edit(heads)) for layer, heads in edits.items()]",
    ]
    kw = ""
    if knockout is not None:
        lines += _causal_knockout_lines(_one_knockout_mask(knockout, n_layer))
        kw = ", attention_mask=mask"
    lines += [
        "with torch.no_grad():",
        f"    logits = model.run_with_hooks(ids{kw}, fwd_hooks=hooks)[0, -1]",
        "print(json.dumps(logits.double().tolist()))",
        "",
    ]
    return "\n".join(lines)


# ---- encoders and vision models -------------------------------------------------------------------------

#: where transformers' AutoModel keeps an encoder layer's attention output projection, tried in this order:
#: BERT, RoBERTa, XLM-R and ELECTRA (and ViT, DeiT, DINOv2 before transformers 5); ViT and DeiT; DINOv2;
#: DistilBERT; CLIP's and SigLIP's vision towers (the second: as a tower inside a whole CLIP / SigLIP model)
ENCODER_OUT_PROJ_PATHS = ("encoder.layer.{i}.attention.output.dense", "layers.{i}.attention.o_proj",
                          "encoder.layer.{i}.attention.o_proj", "transformer.layer.{i}.attention.out_lin",
                          "encoder.layers.{i}.self_attn.out_proj", "vision_model.encoder.layers.{i}.self_attn.out_proj")


def encoder_script(model: str, *, ids=None, pixels: str | None = None, pooled_first: bool = True, ablate=None,
                   scale=None, knockout=None, n_layer: int | None = None) -> str:
    """A runnable script: ``model`` loaded by transformers' AutoModel in float32 with eager attention, run on token
    ``ids`` (a text encoder) or on the preprocessed pixels saved at ``pixels`` (a .npy file of (C, H, W) float32, a
    vision model), once plain and once with the edits, printing as JSON the pooled output before and after (the
    first token's last hidden state, ``pooled_first``; else the mean over the tokens) and their cosine.

    A knockout (one (T, T) mask of removed edges for every layer) is added to the scores inside the modeling
    module's eager attention function, so each row renormalises over the keys left."""
    if (ids is None) == (pixels is None):
        raise ValueError("give the token ids of a text encoder or the pixels file of a vision model")
    layers = _heads_by_layer(ablate or {}, scale or {})
    given = any(how == "set" for v in layers.values() for _h, how, _f in v)
    lines = ["import json"] + (["import sys"] if knockout is not None else []) + [""]
    if pixels is not None:
        lines += ["import numpy as np"]
    lines += [
        "import torch",
        "from transformers import AutoModel",
        "",
        f"model = AutoModel.from_pretrained({model!r}, dtype=torch.float32, attn_implementation=\"eager\").eval()",
        "cfg = model.config",
        "n_head = getattr(cfg, \"num_attention_heads\", None) or cfg.n_heads",
    ]
    if pixels is not None:
        lines += [f"inputs = {{\"pixel_values\": torch.from_numpy(np.load({pixels!r}))[None]}}  # (1, C, H, W) "
                  "as attnviz preprocessed the image"]
    else:
        lines += [f"inputs = {{\"input_ids\": torch.tensor([{[int(t) for t in ids]}])}}"]
    lines += [
        "",
        "",
        *_hook_lines("h = x.view(b, t, n_head, -1)", "the attention's output projection", ENCODER_OUT_PROJ_PATHS,
                     given),
        "def pooled():",
        "    with torch.no_grad():",
        "        h = model(**inputs).last_hidden_state[0]  # (T, C)",
        f"    return {'h[0]' if pooled_first else 'h.mean(dim=0)'}.double()"
        f"  # {'the class token' if pooled_first else 'no class token: the mean over the tokens'}",
        "",
        "",
        "before = pooled()",
        f"edits = {_literal(layers)}  # layer -> [(head, how, factor)]",
        "hooks = [out_proj(int(layer)).register_forward_pre_hook(edit(heads)) for layer, heads in edits.items()]",
    ]
    if knockout is not None:
        first = _one_knockout_mask(knockout, n_layer)
        removed = [[int(i), int(j)] for i, j in zip(*first.nonzero())]
        T = int(first.shape[0])
        lines += [
            f"knock = torch.zeros(1, 1, {T}, {T})",
            f"for i, j in {removed}:",
            "    knock[0, 0, i, j] = torch.finfo(torch.float32).min  # the knocked-out edges: query i may not see key j",
            "modeling = sys.modules[type(model).__module__]",
            "eager = modeling.eager_attention_forward",
            "",
            "",
            "def knocked(module, query, key, value, attention_mask, *args, **kwargs):",
            "    mask = knock if attention_mask is None else attention_mask + knock",
            "    return eager(module, query, key, value, mask, *args, **kwargs)",
            "",
            "",
            "modeling.eager_attention_forward = knocked",
        ]
    lines += ["after = pooled()"]
    if knockout is not None:
        lines += ["modeling.eager_attention_forward = eager"]
    lines += [
        "for hook in hooks:",
        "    hook.remove()",
        "cosine = torch.nn.functional.cosine_similarity(before, after, dim=0).item()",
        "print(json.dumps({\"pooled_before\": before.tolist(), \"pooled_after\": after.tolist(), \"cosine\": cosine}))",
        "",
    ]
    return "\n".join(lines)


#: the transformers class whose TransformerLens 4 adapter (TransformerBridge) lays out an encoder family's modules:
#: BERT's masked-LM model, and RoBERTa's for XLM-R too (the same modules under ``roberta.``). TransformerLens 4 has no
#: adapter for ELECTRA, DistilBERT, ALBERT, DeBERTa or MPNet, and its HookedEncoder (TransformerLens 1 to 3) is gone
LENS_ENCODER_ADAPTERS = {"bert": "BertForMaskedLM", "roberta": "RobertaForMaskedLM",
                         "xlm-roberta": "RobertaForMaskedLM"}


def lens_encoder_script(model: str, ids, adapter: str, *, ablate=None, scale=None, knockout=None,
                        n_layer: int | None = None) -> str:
    """A runnable script: the text encoder in ``model`` (a folder or repo id) loaded by transformers'
    AutoModelForMaskedLM in float32 with eager attention and wrapped by TransformerLens 4's TransformerBridge with
    the ``adapter`` class's layout (:data:`LENS_ENCODER_ADAPTERS`), run on token ``ids`` once plain and once with the
    head edits as hooks on ``blocks.L.attn.hook_z``, printing as JSON the class token's last hidden state
    (``blocks.{last}.hook_resid_post``) before and after, and their cosine: what :func:`encoder_script` prints.
    The masked-LM head (newly made when the folder holds the base model only) is never read. A knockout (one
    (T, T) mask of removed edges for every layer) goes in the edited pass as a 4-D additive attention mask, which
    the bridge hands to transformers' model (an edit of ``hook_attn_scores`` or ``hook_pattern`` would be
    discarded: the bridge leaves the attention to transformers' module)."""
    layers = _heads_by_layer(ablate or {}, scale or {})
    given = any(how == "set" for v in layers.values() for _h, how, _f in v)
    ids = [int(t) for t in ids]
    lines = [
        "import json",
        "",
        "import torch",
        "from transformer_lens.model_bridge import TransformerBridge",
        "from transformers import AutoModelForMaskedLM",
        "",
        f"hf = AutoModelForMaskedLM.from_pretrained({model!r}, dtype=torch.float32, attn_implementation=\"eager\").eval()",
        f"model = TransformerBridge.boot_transformers({model!r}, hf_model=hf, dtype=torch.float32, device=\"cpu\",",
        f"                                            hf_config_overrides={{\"architectures\": [{adapter!r}]}})",
        f"ids = torch.tensor([{ids}])",
        "last = f\"blocks.{model.cfg.n_layers - 1}.hook_resid_post\"  # the last hidden state",
        "",
        "",
        *_lens_edit_lines(given),
        "def pooled(hooks" + (", **kw):" if knockout is not None else "):"),
        "    kept = {}",
        "",
        "    def keep(x, hook):",
        "        kept[\"h\"] = x[0, 0].detach().double()  # the class token",
        "",
        "    with torch.no_grad():",
        "        model.run_with_hooks(ids, fwd_hooks=hooks + [(last, keep)]" + (", **kw)" if knockout is not None
                                                                              else ")"),
        "    return kept[\"h\"]",
        "",
        "",
        "before = pooled([])",
        f"edits = {_literal(layers)}  # layer -> [(head, how, factor)]",
    ]
    kw = ""
    if knockout is not None:
        first = _one_knockout_mask(knockout, n_layer)
        removed = [[int(i), int(j)] for i, j in zip(*first.nonzero())]
        T = int(first.shape[0])
        lines += [
            f"knock = torch.zeros(1, 1, {T}, {T})",
            f"for i, j in {removed}:",
            "    knock[0, 0, i, j] = torch.finfo(torch.float32).min  # the knocked-out edges: query i may not see key j",
        ]
        kw = ", attention_mask=knock"
    lines += [
        f"after = pooled([(f\"blocks.{{layer}}.attn.hook_z\", edit(heads)) for layer, heads in edits.items()]{kw})",
        "cosine = torch.nn.functional.cosine_similarity(before, after, dim=0).item()",
        "print(json.dumps({\"pooled_before\": before.tolist(), \"pooled_after\": after.tolist(), \"cosine\": cosine}))",
        "",
    ]
    return "\n".join(lines)
