"""An encoder-decoder's interventions (MarianMT, BART, mBART, T5 and mT5, Whisper) exported as a plain PyTorch
forward-hook script for transformers, reproducing :func:`attnviz.checkpoints.intervention_seq2seq.seq2seq_run`
(or ``whisper_run``) outside attnviz.

The script loads the folder with eager attention (AutoModelForSeq2SeqLM; Whisper: WhisperForConditionalGeneration),
runs it teacher-forced on the decoder ids once plain and once edited, and prints as JSON the logits of every
decoder row before and after, (T, V) each: what ``Seq2SeqPass.logits`` holds. Its edits:

- a head's output is its slice of what the sublayer's output projection reads (``out_proj``; T5: ``o``, whose
  input is heads x d_kv wide), changed by a forward pre-hook on it: zeroed, set to its mean over that stack's
  positions (the source tokens or audio positions for the encoder, the target tokens for the decoder's self- and
  cross-attention), set to given values, scaled, or patched: put in from a first pass over a clean source (the
  same length, the same decoder ids) recorded by the same pre-hook; in a layer, in that order, as attnviz does;
- a knockout (edges "query i may not see key j" of one stack's layer, for every head or one) set to the dtype's
  minimum in the mask handed to the modeling module's own ``eager_attention_forward``, for the targeted attention
  modules only, so each row renormalises over the keys left (a row left with no key is uniform there; attnviz
  gives it weights 0).

Whisper's encoder reads log-mel features (n_mels, frames) from an .npy file the script names (a path relative to
where it runs: :func:`seq2seq_script` returns the array beside the text, to be saved under that name next to the
script). ``float64`` runs the whole model in float64 (T5's RMSNorm, which transformers takes in float32 whatever
the dtype, is then replaced by the same formula in float64): float32's own rounding on T5's and Whisper's logits
reaches about 1e-5.

For T5 and mT5 the same edits also as TransformerLens 4 hooks (:func:`lens_script`: the model wrapped by its
TransformerBridge, the heads edited on ``hook_z``); its bridges for BART, MarianMT and mBART are not checked and
it has none for Whisper (:func:`lens_problem`).

:func:`hook_script` and :func:`lens_script` are plain text generation with the standard library only (the golden
makers, run where torch lives, load this file by path); :func:`seq2seq_script` turns the window's session (an
``Interventions``) or explicit edits into their arguments and imports attnviz's checks when called.
"""

from __future__ import annotations

from attnviz.checkpoints.hook_edits import RecordedInScript, layer_edits, removed_edges

STACKS = ("encoder", "decoder", "cross")
#: where transformers keeps each stack's attention module (its output projection is PROJ[...] under it)
SUBLAYERS = {
    "bart": {"encoder": "model.encoder.layers.{i}.self_attn", "decoder": "model.decoder.layers.{i}.self_attn",
             "cross": "model.decoder.layers.{i}.encoder_attn"},
    "t5": {"encoder": "encoder.block.{i}.layer.0.SelfAttention", "decoder": "decoder.block.{i}.layer.0.SelfAttention",
           "cross": "decoder.block.{i}.layer.1.EncDecAttention"},
}
PROJ = {"bart": "out_proj", "t5": "o"}
#: attnviz family -> (layout of SUBLAYERS, transformers class that loads the folder)
FAMILIES = {"marian": ("bart", "AutoModelForSeq2SeqLM"), "bart": ("bart", "AutoModelForSeq2SeqLM"),
            "mbart": ("bart", "AutoModelForSeq2SeqLM"), "t5": ("t5", "AutoModelForSeq2SeqLM"),
            "mt5": ("t5", "AutoModelForSeq2SeqLM"), "whisper": ("bart", "WhisperForConditionalGeneration")}
FEATURES_FILE = "intervention_features.npy"  # Whisper: the log-mel features (n_mels, frames) float32
CLEAN_FEATURES_FILE = "intervention_clean_features.npy"  # Whisper: the clean features a patch is taken from


def stack_edits(ablate=None, scale=None, patch=None) -> dict[int, list]:
    """One stack's {layer: [(head, how, None | values | factor)]} (:func:`attnviz.checkpoints.hook_edits.layer_edits`)."""
    return layer_edits(ablate, scale, patch)


#: the eager attention wrapper of the scripts: the knocked-out edges of the module's stack and layer set to the
#: mask's minimum (``which``: id of an attention module -> (stack, layer); ``knockout``: their removed edges)
_KNOCKED = (
    "def knocked(module, query, key, value, attention_mask, *args, **kwargs):",
    "    where = which.get(id(module))",
    "    if where is not None:",
    "        removed = torch.zeros(1, query.shape[1], query.shape[2], key.shape[2], dtype=torch.bool)",
    "        for head, i, j in knockout[where[0]][where[1]]:",
    "            if head < 0:",
    "                removed[0, :, i, j] = True",
    "            else:",
    "                removed[0, head, i, j] = True",
    "        if attention_mask is None:",
    "            attention_mask = torch.zeros(1, 1, query.shape[2], key.shape[2], dtype=query.dtype)",
    "        if attention_mask.dtype == torch.bool:",
    "            attention_mask = attention_mask & ~removed",
    "        else:",
    "            attention_mask = attention_mask.masked_fill(removed, torch.finfo(attention_mask.dtype).min)",
    "    return eager(module, query, key, value, attention_mask, *args, **kwargs)",
)


def _inputs_line(name: str, ids, features: str | None) -> str:
    if features is not None:
        return (f"{name} = {{\"input_features\": torch.from_numpy(np.load({features!r}))[None].to(dtype)}}"
                "  # (1, n_mels, frames) the log-mel features as attnviz computed them")
    return f"{name} = {{\"input_ids\": torch.tensor([{[int(t) for t in ids]}])}}"


def hook_script(folder: str, family: str, n_head: dict, dec_ids, *, src_ids=None, features: str | None = None,
                edits: dict | None = None, knockout: dict | None = None, clean_ids=None,
                clean_features: str | None = None, float64: bool = False) -> str:
    """A runnable script for the encoder-decoder ``folder`` (a path or repo id) of attnviz ``family`` (FAMILIES):
    ``n_head`` {stack: heads}; the source ``src_ids`` or Whisper's ``features`` (.npy path); ``dec_ids`` the
    decoder's input (its start token first); ``edits`` {stack: {layer: [(head, how, factor)]}} (:func:`stack_edits`);
    ``knockout`` {stack: {layer: [[head or -1, query, key], ...]}} (:func:`removed_edges`); ``clean_ids`` /
    ``clean_features`` the clean source a "patch" is taken from."""
    if family not in FAMILIES:
        raise ValueError(f"no hook script for the {family!r} family: written for {', '.join(FAMILIES)}")
    layout, auto = FAMILIES[family]
    whisper = family == "whisper"
    if whisper != (features is not None) or (src_ids is None) == (features is None):
        raise ValueError("give Whisper its features file and the other families their source ids")
    edits = {s: v for s, v in (edits or {}).items() if v}
    knockout = {s: v for s, v in (knockout or {}).items() if v}
    for stack in list(edits) + list(knockout):
        if stack not in STACKS:
            raise ValueError(f"{stack!r} is not an attention of the model: choose {', '.join(STACKS)}")
    kinds = {how for layers in edits.values() for heads in layers.values() for _h, how, _f in heads}
    patching = "patch" in kinds
    if patching != (clean_ids is not None or clean_features is not None):
        raise ValueError("a patch needs the clean source, and the clean source a head to patch")
    lines = ["import json"] + (["import sys"] if knockout else []) + [""]
    if whisper:
        lines += ["import numpy as np"]
    lines += [
        "import torch",
        f"from transformers import {auto}",
        "",
        f"dtype = torch.{'float64' if float64 else 'float32'}",
        f"model = {auto}.from_pretrained({folder!r}, dtype=dtype, attn_implementation=\"eager\").eval()",
    ]
    if float64 and layout == "t5":
        lines += [
            "for norm in model.modules():  # T5's RMSNorm takes the variance in float32 whatever the dtype: keep float64",
            "    if type(norm).__name__ in (\"T5LayerNorm\", \"MT5LayerNorm\"):",
            "        norm.forward = lambda x, m=norm: m.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)",
            "                                                                    + m.variance_epsilon))",
        ]
    lines += [
        f"sublayers = {SUBLAYERS[layout]!r}  # stack -> its attention in layer i",
        f"n_head = {({s: int(n_head[s]) for s in STACKS})!r}",
        _inputs_line("source", src_ids, features),
    ]
    if patching:
        lines += [_inputs_line("clean", clean_ids, clean_features) + "  # the source the patched heads come from"]
    lines += [
        f"dec_ids = torch.tensor([{[int(t) for t in dec_ids]}])  # the decoder's input, its start token first",
        "",
        "",
        "def attention(stack, layer):",
        "    return model.get_submodule(sublayers[stack].format(i=layer))",
        "",
        "",
        "def out_proj(stack, layer):",
        f"    return attention(stack, layer).{PROJ[layout]}",
        "",
        "",
        "def logits(inputs):",
        "    with torch.no_grad():",
        "        out = model(**inputs, decoder_input_ids=dec_ids, use_cache=False)",
        "    return out.logits[0].double()  # (T, V): the next token after each decoder row",
        "",
        "",
    ]
    if patching:
        lines += [
            "recorded = {}",
            "",
            "",
            "def record(stack, layer):",
            "    def pre(module, args):",
            "        x = args[0]",
            "        recorded[stack, layer] = x.detach().clone().view(x.shape[0], x.shape[1], n_head[stack], -1)",
            "    return pre",
            "",
            "",
        ]
    lines += [
        "def edit(stack, layer, heads):",
        "    \"\"\"A pre-hook on the output projection: its input (1, positions, heads x head width) is every head's",
        "    output side by side.\"\"\"",
        "    def pre(module, args):",
        "        x = args[0].clone()",
        "        b, t, _ = x.shape",
        "        h = x.view(b, t, n_head[stack], -1)",
        "        for head, how, factor in heads:",
        "            if how == \"zero\":",
        "                h[:, :, head] = 0",
        "            elif how == \"mean\":",
        "                h[:, :, head] = h[:, :, head].mean(dim=1, keepdim=True)  # over the stack's positions",
    ]
    if "set" in kinds:
        lines += ["            elif how == \"set\":", "                h[:, :, head] = torch.tensor(factor, dtype=h.dtype)"]
    if patching:
        lines += ["            elif how == \"patch\":", "                h[:, :, head] = recorded[stack, layer][:, :, head]"]
    lines += [
        "            else:",
        "                h[:, :, head] *= factor",
        "        return (h.view(b, t, -1),) + tuple(args[1:])",
        "    return pre",
        "",
        "",
        "before = logits(source)",
        f"edits = {edits!r}  # stack -> layer -> [(head, how, factor)]",
    ]
    if patching:
        lines += [
            "hooks = [out_proj(stack, layer).register_forward_pre_hook(record(stack, layer))",
            "         for stack, layers in edits.items() for layer, heads in layers.items()",
            "         if any(how == \"patch\" for _head, how, _factor in heads)]",
            "logits(clean)",
            "for hook in hooks:",
            "    hook.remove()",
        ]
    lines += [
        "hooks = [out_proj(stack, layer).register_forward_pre_hook(edit(stack, layer, heads))",
        "         for stack, layers in edits.items() for layer, heads in layers.items()]",
    ]
    if knockout:
        lines += [
            f"knockout = {knockout!r}  # stack -> layer -> [head (-1: every head), query i, key j]: edges removed",
            "modeling = sys.modules[type(attention(next(iter(knockout)), 0)).__module__]",
            "eager = modeling.eager_attention_forward",
            "which = {id(attention(stack, layer)): (stack, layer) for stack, layers in knockout.items() for layer in layers}",
            "",
            "",
            *_KNOCKED,
            "",
            "",
            "modeling.eager_attention_forward = knocked",
        ]
    lines += ["after = logits(source)"]
    if knockout:
        lines += ["modeling.eager_attention_forward = eager"]
    lines += [
        "for hook in hooks:",
        "    hook.remove()",
        "print(json.dumps({\"before\": before.tolist(), \"after\": after.tolist()}))",
        "",
    ]
    return "\n".join(lines)


# ---- TransformerLens ---------------------------------------------------------------------------------

#: TransformerLens 4's TransformerBridge hook on each stack's heads' outputs, (batch, positions, heads, head width)
LENS_HOOKS = {"encoder": "encoder_blocks.{i}.attn.hook_z", "decoder": "decoder_blocks.{i}.self_attn.hook_z",
              "cross": "decoder_blocks.{i}.cross_attn.hook_z"}
#: the families whose TransformerLens script was run as written (tools/make_seq2seq_lens_goldens.py) and gave
#: attnviz's logits: T5 v1.0, v1.1 gated and mT5 (TransformerLens' T5 adapter takes both architectures)
LENS_FAMILIES = ("t5", "mt5")


def lens_problem(family: str) -> str:
    """Why an encoder-decoder family has no TransformerLens script ("" when it has one)."""
    if family in LENS_FAMILIES:
        return ""
    if family == "whisper":
        return ("TransformerLens 4 has no adapter for Whisper (its bridge adapts T5, BART, MarianMT and mBART among "
                "the encoder-decoders); the PyTorch script holds these edits")
    return (f"the TransformerLens script is checked on T5 and mT5; TransformerLens 4's {family} adapter refuses "
            "encoders and decoders of different head counts, layer counts or MLP widths, which attnviz's test models "
            "have, so none is checked; the PyTorch script holds these edits")


def lens_script(folder: str, family: str, n_head: dict, dec_ids, src_ids, *, edits: dict | None = None,
                knockout: dict | None = None, clean_ids=None) -> str:
    """The same intervention as :func:`hook_script` for a T5 or mT5 ``folder``, in float32, with TransformerLens 4:
    transformers' model wrapped by its TransformerBridge, the head edits as hooks on ``LENS_HOOKS`` (a patch from a
    first run over ``clean_ids`` recording the same hook), printing what :func:`hook_script` prints. A knockout is
    set in the mask inside the modeling module's eager attention function, as in :func:`hook_script`: the bridge
    hands each attention to transformers' module, which discards an edit of ``hook_attn_scores`` or
    ``hook_pattern``; the attention modules are looked up before the bridge wraps them."""
    if family not in LENS_FAMILIES:
        raise ValueError(lens_problem(family))
    edits = {st: v for st, v in (edits or {}).items() if v}
    knockout = {st: v for st, v in (knockout or {}).items() if v}
    kinds = {how for layers in edits.values() for heads in layers.values() for _h, how, _f in heads}
    patching = "patch" in kinds
    if patching != (clean_ids is not None):
        raise ValueError("a patch needs the clean source, and the clean source a head to patch")
    lines = ["import json"] + (["import sys"] if knockout else []) + [
        "",
        "import torch",
        "from transformer_lens.model_bridge import TransformerBridge",
        "from transformers import AutoModelForSeq2SeqLM",
        "",
        f"hf = AutoModelForSeq2SeqLM.from_pretrained({folder!r}, dtype=torch.float32, attn_implementation=\"eager\").eval()",
    ]
    if knockout:
        lines += [
            f"sublayers = {SUBLAYERS['t5']!r}  # stack -> its attention in layer i",
            f"knockout = {knockout!r}  # stack -> layer -> [head (-1: every head), query i, key j]: edges removed",
            "which = {id(hf.get_submodule(sublayers[stack].format(i=layer))): (stack, layer)  # before the bridge wraps them",
            "         for stack, layers in knockout.items() for layer in layers}",
        ]
    lines += [
        f"model = TransformerBridge.boot_transformers({folder!r}, hf_model=hf, dtype=torch.float32, device=\"cpu\")",
        f"hook_names = {LENS_HOOKS!r}  # stack -> hook_z of layer i: (batch, positions, heads, head width)",
        f"source = torch.tensor([{[int(t) for t in src_ids]}])",
    ]
    if patching:
        lines += [f"clean = torch.tensor([{[int(t) for t in clean_ids]}])  # the source the patched heads come from"]
    lines += [
        f"dec_ids = torch.tensor([{[int(t) for t in dec_ids]}])  # the decoder's input, its start token first",
        "",
        "",
        "def logits(ids, hooks):",
        "    with torch.no_grad():",
        "        return model.run_with_hooks(ids, decoder_input_ids=dec_ids, fwd_hooks=hooks)[0].double()  # (T, V)",
        "",
        "",
    ]
    if patching:
        lines += [
            "recorded = {}",
            "",
            "",
            "def record(stack, layer):",
            "    def hook(z, hook):",
            "        recorded[stack, layer] = z.detach().clone()",
            "    return hook",
            "",
            "",
        ]
    lines += [
        "def edit(stack, layer, heads):",
        "    def hook(z, hook):",
        "        z = z.clone()",
        "        for head, how, factor in heads:",
        "            if how == \"zero\":",
        "                z[:, :, head] = 0",
        "            elif how == \"mean\":",
        "                z[:, :, head] = z[:, :, head].mean(dim=1, keepdim=True)  # over the stack's positions",
    ]
    if "set" in kinds:
        lines += ["            elif how == \"set\":", "                z[:, :, head] = torch.tensor(factor, dtype=z.dtype)"]
    if patching:
        lines += ["            elif how == \"patch\":", "                z[:, :, head] = recorded[stack, layer][:, :, head]"]
    lines += [
        "            else:",
        "                z[:, :, head] *= factor",
        "        return z",
        "    return hook",
        "",
        "",
        "before = logits(source, [])",
        f"edits = {edits!r}  # stack -> layer -> [(head, how, factor)]",
    ]
    if patching:
        lines += [
            "logits(clean, [(hook_names[stack].format(i=layer), record(stack, layer))",
            "               for stack, layers in edits.items() for layer, heads in layers.items()",
            "               if any(how == \"patch\" for _head, how, _factor in heads)])",
        ]
    lines += [
        "hooks = [(hook_names[stack].format(i=layer), edit(stack, layer, heads))",
        "         for stack, layers in edits.items() for layer, heads in layers.items()]",
    ]
    if knockout:
        lines += [
            "modeling = sys.modules[type(hf).__module__]",
            "eager = modeling.eager_attention_forward",
            "",
            "",
            *_KNOCKED,
            "",
            "",
            "modeling.eager_attention_forward = knocked",
        ]
    lines += ["after = logits(source, hooks)"]
    if knockout:
        lines += ["modeling.eager_attention_forward = eager"]
    lines += ["print(json.dumps({\"before\": before.tolist(), \"after\": after.tolist()}))", ""]
    return "\n".join(lines)


def seq2seq_script(ckpt, source, dec_ids, stack: str = "decoder", spec=None, *, edits: dict | None = None,
                   allowed=None, clean=None, folder: str | None = None, float64: bool = False) -> dict:
    """{"pytorch": script, "lens": script or "", "pytorch_problem": "", "lens_problem": why not or ""} reproducing an
    intervention
    on the loaded encoder-decoder ``ckpt`` (a Seq2SeqCheckpoint or WhisperCheckpoint; ``folder``: the path the
    script loads, default ``ckpt.folder``): over ``source`` (S,) source ids, or Whisper's log-mel features
    (n_mels, frames), teacher-forced on ``dec_ids`` (T,).

    The edits are the session's ``spec`` (an ``attnviz.model.state.Interventions``) on ``stack``, as the window
    applies them (``build_edits``: the heads of ``stack``, the knockout of ``allowed`` (S, S) on the encoder's
    self-attention, a head patch from ``clean``), or explicit ``edits`` {stack: Edit} as ``seq2seq_run`` takes
    them (a patched head's values are not written: the script records them from ``clean``). ``clean``: the clean
    source, ids (S,) or features like ``source``. For Whisper the dict also holds ``"features"`` (the float32
    array) and ``"features_file"`` (the name the script reads it from, relative to where it runs: save the array
    there with numpy.save), and with a patch ``"clean_features"`` and ``"clean_features_file"``. ``float64`` runs
    the PyTorch script's model in float64 (compare with attnviz's float64 pass); the TransformerLens script
    (:func:`lens_script`, T5 and mT5 only) runs in float32. Bad input is one CheckpointError line."""
    import numpy as np

    from attnviz.checkpoints.errors import CheckpointError
    from attnviz.checkpoints.intervention_seq2seq import _check
    from attnviz.checkpoints.intervention_seq2seq_study import build_edits, check_stack

    s = getattr(ckpt, "spec", None)
    family = getattr(s, "family", None)
    if family not in FAMILIES:
        raise CheckpointError(f"the encoder-decoder hook script is written for MarianMT, BART, mBART, T5, mT5 and "
                              f"Whisper; this checkpoint is {family or getattr(ckpt, 'name', None) or type(ckpt).__name__}")
    whisper = family == "whisper"
    check_stack(stack)
    if (spec is None) == (edits is None):
        raise CheckpointError("export the session's interventions or explicit edits, one of the two")
    dec = np.asarray(dec_ids, dtype=np.int64).reshape(-1)
    if dec.size == 0:
        raise CheckpointError("an intervention needs a decoder token (the start token)")
    if whisper:
        feats = np.asarray(source, dtype=np.float32)
        if feats.shape != (s.n_mels, s.n_frames):
            raise CheckpointError(f"Whisper's features are (n_mels, frames) = ({s.n_mels}, {s.n_frames}) for this "
                                  f"model; got {feats.shape}")
        S = int(s.n_frames // 2)
    else:
        src = np.asarray(source, dtype=np.int64).reshape(-1)
        if src.size == 0:
            raise CheckpointError("an intervention needs a source token")
        S = int(src.size)
    T = int(dec.size)
    if clean is not None:
        shape = np.shape(clean) if whisper else (np.size(clean),)
        want = feats.shape if whisper else (S,)
        if tuple(shape) != tuple(want):
            raise CheckpointError(f"the clean source is {shape} and the corrupted one {want}: patching needs the "
                                  "same length")
    if spec is not None:
        built, _said = build_edits(ckpt, spec, stack, S, T, allowed=allowed,
                                   clean=RecordedInScript(stack) if clean is not None else None)
        patch = {st: sorted(e.patch_heads) for st, e in built.items()}
    else:
        built = dict(edits)
        patch = {st: sorted(e.patch_heads) for st, e in built.items()}
        _check(ckpt, built, S, T)
    if any(patch.values()) and clean is None:
        raise CheckpointError("a patch needs the clean source: type it in the clean prompt field")
    script_edits = {st: stack_edits(e.ablate, e.scale, patch[st]) for st, e in built.items()}
    knock = {st: {int(layer): removed_edges(np.asarray(m)) for layer, m in sorted(e.knockout.items())}
             for st, e in built.items() if e.knockout}
    n_head = {"encoder": s.enc_heads, "decoder": s.dec_heads, "cross": s.dec_heads}
    patching = any(patch.values())
    out = {"pytorch": "", "lens": "", "pytorch_problem": "", "lens_problem": lens_problem(family)}
    kw = {}
    if whisper:
        kw["features"] = FEATURES_FILE
        out["features"], out["features_file"] = np.ascontiguousarray(feats), FEATURES_FILE
        if patching:
            kw["clean_features"] = CLEAN_FEATURES_FILE
            out["clean_features"] = np.ascontiguousarray(np.asarray(clean, dtype=np.float32))
            out["clean_features_file"] = CLEAN_FEATURES_FILE
    else:
        kw["src_ids"] = [int(t) for t in src]
        if patching:
            kw["clean_ids"] = [int(t) for t in np.asarray(clean).reshape(-1)]
    name = str(folder if folder is not None else ckpt.folder)
    out["pytorch"] = hook_script(name, family, n_head, dec.tolist(), edits=script_edits, knockout=knock,
                                 float64=float64, **kw)
    if not out["lens_problem"]:
        out["lens"] = lens_script(name, family, n_head, dec.tolist(), kw["src_ids"], edits=script_edits,
                                  knockout=knock, clean_ids=kw.get("clean_ids"))
    return out
