"""A SmolVLA policy's interventions exported as a plain PyTorch forward-hook script for lerobot, reproducing the
Intervene tab's pass (:func:`attnviz.checkpoints.intervention_vla_study.vla_window_study`) outside attnviz.

The script loads the policy folder with lerobot (``SmolVLAPolicy.from_pretrained`` and the preprocessor saved
beside it, both read from inside the folder, where the policy names its VLM), builds the observation attnviz's
pass reads -- one picture per camera (PNG files saved beside the script), the instruction, the robot state -- runs
the VLM over the prefix and one ``denoise_step`` of the action expert at attnviz's noise
(``numpy.random.default_rng(seed).standard_normal((chunk, max_action_dim))`` in float32, taken as x_t) and flow
time t, once plain and once edited, and prints as JSON the velocity v_t's first ``action_dim`` columns (Ta,
action_dim) before and after, their largest change and cosine. Its edits:

- a head's output is its slice of what the layer's ``self_attn.o_proj`` reads (nh x hd wide; the VLM text
  layers' are called over the prefix, the expert's over the action rows), changed by a forward pre-hook there:
  zeroed, set to its mean over the stack's positions (the prefix's unpadded tokens, or the action rows), scaled,
  or patched: put in from a first pass over the clean instruction (the same token count, the same pictures,
  state, noise and t) recorded by the same pre-hook; in a layer, in that order, as attnviz does;
- a knockout (edges "token i may not see token j" over attnviz's sequence, prefix then actions, for every head or
  one) removed from the mask handed to the policy's own attention function (``eager_attention_forward``, called
  once per layer; a pre-hook on each layer's ``q_proj`` says which layer calls it): a knocked head's slice of the
  output is that function's result under the cut mask, so each row renormalises over the keys left. attnviz's
  token i is lerobot's i-th unpadded position (pads it masks for every query are left out of attnviz's sequence).

:func:`hook_script` is plain text generation with the standard library only (the golden maker, run where lerobot
lives, loads this file by path); :func:`vla_script` turns the window's session (an ``Interventions``) into its
arguments and imports attnviz's checks when called.
"""

from __future__ import annotations

from attnviz.checkpoints.hook_edits import RecordedInScript, layer_edits, removed_edges

STACKS = ("vlm", "expert")
IMAGE_FILES = "interventions_camera{i}.png"  # the pictures a script opens, one per camera (saved beside it)
LENS_PROBLEM = ("TransformerLens has no robot policies (its bridge wraps transformers' language models, not "
                "lerobot's SmolVLA); the PyTorch script holds these edits")


def vla_edits(ablate=None, scale=None, patch=None) -> dict[int, list]:
    """One stack's {layer: [(head, "zero" | "mean" | "scale" | "patch", None | factor)]}, in the order attnviz
    applies them (:func:`attnviz.checkpoints.hook_edits.layer_edits`; the policy's script takes no given values)."""
    for how in (ablate or {}).values():
        if not isinstance(how, str) or how not in ("zero", "mean"):
            raise ValueError(f"ablation {how!r}: the SmolVLA script zeroes a head or sets it to its mean")
    return layer_edits(ablate, scale, patch)


def hook_script(folder: str, cameras, image_files, instruction: str, state, *, noise_seed: int, time: float,
                edits: dict | None = None, knockout: dict | None = None, clean: str | None = None) -> str:
    """A runnable script for the SmolVLA policy ``folder``: ``cameras`` the observation keys in config order and
    ``image_files`` the pictures read for them (paths relative to where the script runs); ``instruction`` and
    ``state`` (numbers as the robot gives them: the preprocessor normalises them); ``noise_seed`` and ``time`` as
    attnviz's pass takes them; ``edits`` {stack: {layer: [(head, how, factor)]}} (:func:`vla_edits`), ``knockout``
    {stack: {layer: [[head or -1, i, j], ...]}} (:func:`removed_edges`) over attnviz's tokens; ``clean`` the
    instruction a patched head is taken from."""
    edits = {s: v for s, v in (edits or {}).items() if v}
    knockout = {s: v for s, v in (knockout or {}).items() if v}
    for stack in list(edits) + list(knockout):
        if stack not in STACKS:
            raise ValueError(f"{stack!r} is not a stack of the policy: choose {', '.join(STACKS)}")
    if len(cameras) != len(image_files):
        raise ValueError(f"{len(cameras)} cameras but {len(image_files)} picture files")
    kinds = {how for layers in edits.values() for heads in layers.values() for _h, how, _f in heads}
    patching = "patch" in kinds
    if patching != (clean is not None):
        raise ValueError("a patch needs the clean instruction, and the clean instruction a head to patch")
    lines = [
        "import json",
        "import os",
        "",
        "import numpy as np",
        "import torch",
        "from PIL import Image",
        "from lerobot.policies.factory import make_pre_post_processors",
        "from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy, make_att_2d_masks",
        "from lerobot.processor import PolicyProcessorPipeline",
        "",
        f"folder = os.path.abspath({str(folder)!r})",
        "here = os.getcwd()",
        "os.chdir(folder)  # the policy and its preprocessor name the VLM (weights, tokenizer) relative to the folder",
        "policy = SmolVLAPolicy.from_pretrained(folder).eval()",
        "if os.path.isfile(\"policy_preprocessor.json\"):  # its steps: newline, tokenizer, the state's statistics",
        "    preprocess = PolicyProcessorPipeline.from_pretrained(folder, config_filename=\"policy_preprocessor.json\")",
        "else:  # no statistics saved: the state is read as given",
        "    preprocess = make_pre_post_processors(policy.config)[0]",
        "os.chdir(here)",
        "model, cfg = policy.model, policy.config",
        "vw = model.vlm_with_expert",
        "n_head = vw.num_attention_heads  # the expert's heads are the VLM's: nh of head width hd",
        "head_dim = vw.vlm.config.text_config.head_dim",
        "action_dim = cfg.action_feature.shape[0]",
        "layers = {\"vlm\": list(vw.get_vlm_model().text_model.layers), \"expert\": list(vw.lm_expert.layers)}",
        f"pictures = {{key: torch.from_numpy(np.array(Image.open(path).convert(\"RGB\"))).permute(2, 0, 1).float() / 255.0"
        f" for key, path in zip({[str(c) for c in cameras]!r}, {[str(p) for p in image_files]!r})}}  # (3, H, W) in [0, 1]",
        f"state = torch.tensor({[float(v) for v in state]!r})  # observation.state as given: the preprocessor normalises it",
        f"instruction = {instruction!r}",
    ]
    if patching:
        lines += [f"clean = {clean!r}  # the instruction the patched heads come from"]
    lines += [
        f"noise = np.random.default_rng({int(noise_seed)}).standard_normal((cfg.chunk_size, cfg.max_action_dim))",
        "x_t = torch.from_numpy(noise.astype(np.float32))[None]  # (1, Ta, max_action_dim): attnviz's noise as x_t",
        f"t = torch.tensor([{float(time)!r}], dtype=torch.float32)  # the flow time",
        "valid = None  # (Tp,) the prefix's unpadded positions in this pass: attnviz's prefix tokens",
        "",
        "",
        "def velocity(task):",
        "    \"\"\"The VLM over the prefix, then one denoising step at (x_t, t): v_t's first action_dim columns.\"\"\"",
        "    global valid",
        "    batch = preprocess({**pictures, \"observation.state\": state, \"task\": task})",
        "    images, img_masks = policy.prepare_images(batch)",
        "    lang = batch[\"observation.language.tokens\"], batch[\"observation.language.attention_mask\"]",
        "    with torch.no_grad():",
        "        embs, pad, ar = model.embed_prefix(images, img_masks, *lang, state=policy.prepare_state(batch))",
        "        valid = pad[0]",
        "        _, kv = vw.forward(attention_mask=make_att_2d_masks(pad, ar), position_ids=torch.cumsum(pad, dim=1) - 1,",
        "                           past_key_values=None, inputs_embeds=[embs, None], use_cache=True, fill_kv_cache=True)",
        "        v = model.denoise_step(pad, kv, x_t, t)  # (1, Ta, max_action_dim)",
        "    return v[0, :, :action_dim].double()",
        "",
        "",
        "def out_proj(stack, layer):",
        "    return layers[stack][layer].self_attn.o_proj",
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
            "        recorded[stack, layer] = x.detach().clone().view(x.shape[0], x.shape[1], n_head, -1)",
            "    return pre",
            "",
            "",
        ]
    lines += [
        "def edit(stack, layer, heads):",
        "    \"\"\"A pre-hook on the output projection: its input (1, positions, nh x hd) is every head's output side by",
        "    side.\"\"\"",
        "    def pre(module, args):",
        "        x = args[0].clone()",
        "        b, n, _ = x.shape",
        "        h = x.view(b, n, n_head, -1)",
        "        rows = valid if stack == \"vlm\" else slice(None)  # the stack's positions: unpadded prefix, or actions",
        "        for head, how, factor in heads:",
        "            if how == \"zero\":",
        "                h[:, :, head] = 0",
        "            elif how == \"mean\":",
        "                h[:, :, head] = h[:, rows, head].mean(dim=1, keepdim=True)",
    ]
    if patching:
        lines += ["            elif how == \"patch\":", "                h[:, :, head] = recorded[stack, layer][:, :, head]"]
    lines += [
        "            else:",
        "                h[:, :, head] *= factor",
        "        return (h.view(b, n, -1),) + tuple(args[1:])",
        "    return pre",
        "",
        "",
        "before = velocity(instruction)",
        f"edits = {edits!r}  # stack -> layer -> [(head, how, factor)]",
    ]
    if patching:
        lines += [
            "hooks = [out_proj(stack, layer).register_forward_pre_hook(record(stack, layer))",
            "         for stack, layers_ in edits.items() for layer, heads in layers_.items()",
            "         if any(how == \"patch\" for _head, how, _factor in heads)]",
            "velocity(clean)",
            "for hook in hooks:",
            "    hook.remove()",
        ]
    lines += [
        "hooks = [out_proj(stack, layer).register_forward_pre_hook(edit(stack, layer, heads))",
        "         for stack, layers_ in edits.items() for layer, heads in layers_.items()]",
    ]
    if knockout:
        lines += [
            f"knockout = {knockout!r}  # stack -> layer -> [head (-1: every head), token i, token j]: edges removed",
            "current = [None]  # (stack, layer) of the attention call under way",
            "",
            "",
            "def entering(stack, layer):",
            "    def pre(module, args):",
            "        current[0] = (stack, layer)",
            "    return pre",
            "",
            "",
            "hooks += [layer.self_attn.q_proj.register_forward_pre_hook(entering(stack, i))",
            "          for stack, stack_layers in layers.items() for i, layer in enumerate(stack_layers)]",
            "eager = vw.eager_attention_forward",
            "",
            "",
            "def removed(n_query, n_key):",
            "    \"\"\"(nh, n_query, n_key) bool: the edges removed in this call, in lerobot's positions (None: none).\"\"\"",
            "    stack, layer = current[0]",
            "    edges = knockout.get(stack, {}).get(layer)",
            "    if not edges:",
            "        return None",
            "    where = torch.cat([torch.nonzero(valid)[:, 0], valid.numel() + torch.arange(cfg.chunk_size)])",
            "    n = valid.numel() + cfg.chunk_size  # lerobot's sequence: prefix (pads included), then actions",
            "    full = torch.zeros(n_head, n, n, dtype=torch.bool)  # attnviz's token k is lerobot's position where[k]",
            "    for head, i, j in edges:",
            "        full[slice(None) if head < 0 else head, where[i], where[j]] = True",
            "    rows = slice(0, n_query) if stack == \"vlm\" else slice(n - n_query, n)",
            "    return full[:, rows, :n_key]",
            "",
            "",
            "def knocked(attention_mask, batch_size, head_dim, query_states, key_states, value_states):",
            "    out = eager(attention_mask, batch_size, head_dim, query_states, key_states, value_states)",
            "    cut = removed(attention_mask.shape[1], attention_mask.shape[2])",
            "    if cut is None:",
            "        return out",
            "    out = out.clone()",
            "    for head in range(n_head):",
            "        if cut[head].any():  # the head's slice of the output under the mask with its edges removed",
            "            part = eager(attention_mask & ~cut[head], batch_size, head_dim, query_states, key_states, value_states)",
            "            out[..., head * head_dim:(head + 1) * head_dim] = part[..., head * head_dim:(head + 1) * head_dim]",
            "    return out",
            "",
            "",
            "vw.eager_attention_forward = knocked",
        ]
    lines += ["after = velocity(instruction)"]
    if knockout:
        lines += ["vw.eager_attention_forward = eager"]
    lines += [
        "for hook in hooks:",
        "    hook.remove()",
        "print(json.dumps({\"before\": before.tolist(), \"after\": after.tolist(),",
        "                  \"largest_change\": (after - before).abs().max().item(),",
        "                  \"cosine\": torch.nn.functional.cosine_similarity(before.flatten(), after.flatten(), dim=0).item()}))",
        "",
    ]
    return "\n".join(lines)


def _own_masks(ckpt, Tp: int, Ta: int):
    """({"vlm": (Tp, T), "expert": {layer: (Ta, T)}}) bool: the keys each stack's rows see under the policy's block
    mask (images and language see each other, the state sees the prefix; the actions the prefix and, in a
    self-attention layer, causally each other)."""
    import numpy as np

    spec = ckpt.spec
    T = Tp + Ta
    vlm = np.zeros((Tp, T), dtype=bool)
    vlm[:, :Tp] = True
    vlm[:Tp - 1, Tp - 1] = False  # nothing before the state sees it
    expert = {}
    for i, j in enumerate(spec.expert_at):
        if j < 0:
            continue
        m = np.zeros((Ta, T), dtype=bool)
        m[:, :Tp] = True
        if not spec.cross[i]:
            m[:, Tp:] = np.tril(np.ones((Ta, Ta), dtype=bool))
        expert[int(j)] = m
    return {"vlm": vlm, "expert": expert}


def vla_script(ckpt, inp, spec, stack: str, *, allowed=None, folder=None) -> dict:
    """{"pytorch": script, "lens": "", "pytorch_problem": why not or "", "lens_problem": why not, "images": the
    pictures (H, W, 3) uint8 the script opens, "image_files": their names} reproducing the window's intervention
    ``spec`` (an ``attnviz.model.state.Interventions``) on ``stack`` ("vlm" or "expert") of the SmolVLA policy
    ``ckpt`` over ``inp`` (a VlaInput: pictures, instruction, state, noise seed, t), as
    :func:`~attnviz.checkpoints.intervention_vla_study.vla_window_study` applies it: its heads zeroed, set to their
    mean or scaled, the session's mask ``allowed`` (T, T) knocked out of its chosen layers (and heads), a head
    patched from the clean instruction ``spec.clean``. ``folder``: the path the script loads (default
    ``ckpt.folder`` made absolute); save ``images`` under ``image_files`` beside the script and run it from
    there. A request the window refuses is one CheckpointError line; a knockout leaving a row no key (attnviz gives
    it no weight, lerobot spreads it evenly) is said in ``pytorch_problem`` instead of a script."""
    import numpy as np

    from attnviz.checkpoints.errors import CheckpointError
    from attnviz.checkpoints.intervention_vla import check_stack, check_vla, sequence_length
    from attnviz.checkpoints.intervention_vla_study import build_vla_edit
    from attnviz.checkpoints.preprocess import as_rgb_uint8
    from attnviz.checkpoints.vla_config import check_time
    from attnviz.checkpoints.vla_smolvla import _seed, _state

    check_vla(ckpt)
    check_stack(stack)
    s = ckpt.spec
    images = list(getattr(inp, "images", None) or ())
    if len(images) != len(s.cameras):
        raise CheckpointError(f"{ckpt.name} reads one picture per camera ({', '.join(s.cameras)}, in that order); "
                              f"{len(images)} {'was' if len(images) == 1 else 'were'} given")
    images = [as_rgb_uint8(im) for im in images]
    state = _state(s, inp.state)
    seed, t = _seed(inp.noise_seed), check_time(inp.time)
    Tp, Ta = sequence_length(ckpt, inp.text)
    T = Tp + Ta
    clean = None
    if spec.patch == "head":
        clean = spec.clean.strip()
        if not clean:
            raise CheckpointError("a patch needs the clean instruction: type it in the clean prompt field")
        Tc = sum(sequence_length(ckpt, clean))
        if Tc != T:
            raise CheckpointError(f"the clean instruction gives {Tc} tokens and this one {T}: patching needs the "
                                  "same length")
    built, _said = build_vla_edit(ckpt, spec, stack, T, allowed=allowed,
                                  clean=RecordedInScript(stack) if clean is not None else None)
    e = built.stack(stack)
    files = [IMAGE_FILES.format(i=i) for i in range(len(images))]
    out = {"pytorch": "", "lens": "", "pytorch_problem": "", "lens_problem": LENS_PROBLEM, "images": images,
           "image_files": files}
    own = _own_masks(ckpt, Tp, Ta)
    rows = slice(0, Tp) if stack == "vlm" else slice(Tp, T)
    for layer, ko in sorted(e.knockout.items()):
        mask = own["vlm"] if stack == "vlm" else own["expert"].get(int(layer))
        if mask is None:
            continue
        left = mask & ~np.asarray(ko, dtype=bool)[..., rows, :]
        if not left.any(axis=-1).all():
            out["pytorch_problem"] = (f"the knockout leaves a token of {stack} layer {layer} no key at all: attnviz "
                                      "gives that row no weight, lerobot spreads it over the removed keys; keep a key "
                                      "in every row to export it")
            return out
    edits = {stack: vla_edits(e.ablate, e.scale, sorted(e.patch_heads))}
    knock = {stack: {int(layer): removed_edges(np.asarray(ko, dtype=bool)) for layer, ko in sorted(e.knockout.items())}}
    if folder is None:  # the script runs from the folder it is saved in: name the policy by its absolute path
        from pathlib import Path

        folder = Path(ckpt.folder).resolve() if Path(ckpt.folder).is_dir() else ckpt.folder
    name = str(folder)
    out["pytorch"] = hook_script(name, list(s.cameras), files, inp.text, [float(v) for v in state], noise_seed=seed,
                                 time=t, edits=edits, knockout=knock, clean=clean)
    return out
