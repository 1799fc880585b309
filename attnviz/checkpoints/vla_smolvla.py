"""SmolVLA robot policies as lerobot saves them: loading the folder and one forward pass of the action expert.

A run takes one picture per camera, the task instruction and the robot state, a noise seed and a flow time
t, and returns every attention map of the VLM's prefix pass and of the action expert's pass at that t
(:class:`~attnviz.checkpoints.multimodal.MultimodalAttention`):

* the sequence is the prefix (``"images"``: each camera's tokens after the connector, with lerobot's image
  markers when ``add_image_special_tokens``; ``"language"``: the instruction with a newline, tokenised as
  lerobot's preprocessor does; ``"state"``: one token from ``state_proj``) and the suffix (``"actions"``:
  ``chunk_size`` tokens of the noisy actions and t);
* ``mask`` is the policy's block mask (openpi's ar rule): images and language see each other both ways,
  the state sees them and itself, nothing in the prefix sees the actions, the actions see the whole prefix
  and, causally, each other; ``action_mask`` is that mask's action rows, ``extra["action_layer_masks"]``
  each expert layer's (a cross-attention layer's actions see the prefix only);
* ``attentions`` (L, nh, T, T) holds the VLM's maps over the prefix and, in the action rows, the expert's
  maps at the same layer; ``action_attentions`` (L_e, nh, Ta, T) the expert's alone;
* ``extra`` has ``velocity`` (Ta, max_action_dim: the expert's output v_t, the first ``action_dim``
  columns the action features), ``noise`` (the x_t it was given), ``state_normalized``, ``expert_hidden``;
  ``hidden`` is the VLM's last hidden state over the prefix rows only (Tp, d).

The noise is attnviz's: ``numpy.random.default_rng(seed).standard_normal((chunk_size, max_action_dim))`` in
float32 (torch's generator is not reproduced). Missing cameras that lerobot pads (``empty_cameras``), pad
tokens of ``pad_language_to: max_length`` and of ``prefix_length`` are masked for every query and shift no
position, so they are left out of the sequence: every other map is unchanged by it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from attnviz.checkpoints.decoder import decoder_tensors
from attnviz.checkpoints.decoder_text import SpecialTokens
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.multimodal import (MultimodalAttention, MultimodalCheckpoint, PatchGroup, check_segments,
                                            segments_from_runs)
from attnviz.checkpoints.parts import Part, PartView, load_parts
from attnviz.checkpoints.preprocess import as_rgb_uint8
from attnviz.checkpoints.vla_config import SmolVLASpec, check_time, image_marker_names, parse_smolvla
from attnviz.checkpoints.vla_forward import (Weights, ar_mask_2d, expert_layer, pixel_shuffle, resize_with_pad,
                                             suffix_embedding, vision_tower, vlm_layer)
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer

PREFIX = "model.vlm_with_expert."  # where lerobot's SmolVLA keeps the VLM and the expert
MAX_STATE_VALUE = 1e6  # a state number beyond this is refused (a typo, not a robot)


def _linear(shapes: dict, name: str, n_out: int, n_in: int, bias: bool) -> None:
    shapes[name + ".weight"] = (n_out, n_in)
    if bias:
        shapes[name + ".bias"] = (n_out,)


def _replaced_kv(spec: SmolVLASpec, cross_mode: bool, every: int, j: int) -> bool:
    """lerobot gives expert layer j k/v projections that read the VLM's keys (cross-attention layers)."""
    return cross_mode and not (every > 0 and j % every == 0)


def parts(spec: SmolVLASpec, cross_mode: bool, every: int) -> list[Part]:
    t, e, v = spec.text, spec.expert, spec.vision
    s = t.decoder
    hd, nh, nkv = s.head_dim, t.n_head, s.n_kv_head
    vis: dict = {"embeddings.patch_embedding.weight": (v.d, 3, v.patch, v.patch),
                 "embeddings.patch_embedding.bias": (v.d,),
                 "embeddings.position_embedding.weight": ((v.image_size // v.patch) ** 2, v.d),
                 "post_layernorm.weight": (v.d,), "post_layernorm.bias": (v.d,)}
    for i in range(v.n_layer):
        p = f"encoder.layers.{i}."
        for n in ("layer_norm1", "layer_norm2"):
            vis[p + n + ".weight"] = (v.d,)
            vis[p + n + ".bias"] = (v.d,)
        for n in ("q", "k", "v", "out"):
            _linear(vis, p + f"self_attn.{n}_proj", v.d, v.d, True)
        _linear(vis, p + "mlp.fc1", v.d_ff, v.d, True)
        _linear(vis, p + "mlp.fc2", v.d, v.d_ff, True)
    conn = {"modality_projection.proj.weight": (t.d_model, v.d * spec.scale_factor ** 2)}
    exp: dict = {"norm.weight": (e.d_model,)}
    for j in range(e.n_layer):
        p = f"layers.{j}."
        kv_in = nkv * hd if _replaced_kv(spec, cross_mode, every, j) else e.d_model
        exp[p + "input_layernorm.weight"] = (e.d_model,)
        exp[p + "post_attention_layernorm.weight"] = (e.d_model,)
        _linear(exp, p + "self_attn.q_proj", nh * hd, e.d_model, s.qkv_bias)
        _linear(exp, p + "self_attn.k_proj", nkv * hd, kv_in, s.qkv_bias)
        _linear(exp, p + "self_attn.v_proj", nkv * hd, kv_in, s.qkv_bias)
        _linear(exp, p + "self_attn.o_proj", e.d_model, nh * hd, s.o_bias)
        _linear(exp, p + "mlp.gate_proj", e.d_ff, e.d_model, s.mlp_bias)
        _linear(exp, p + "mlp.up_proj", e.d_ff, e.d_model, s.mlp_bias)
        _linear(exp, p + "mlp.down_proj", e.d_model, e.d_ff, s.mlp_bias)
    head: dict = {}
    _linear(head, "state_proj", t.d_model, spec.max_state_dim, True)
    _linear(head, "action_in_proj", e.d_model, spec.max_action_dim, True)
    _linear(head, "action_out_proj", spec.max_action_dim, e.d_model, True)
    _linear(head, "action_time_mlp_in", e.d_model, 2 * e.d_model, True)
    _linear(head, "action_time_mlp_out", e.d_model, e.d_model, True)
    return [Part("vision", vis, (PREFIX + "vlm.model.vision_model.",)),
            Part("connector", conn, (PREFIX + "vlm.model.connector.",)),
            Part("text", decoder_tensors(t), (PREFIX + "vlm.model.text_model.",)),
            Part("expert", exp, (PREFIX + "lm_expert.",)),
            Part("head", head, ("model.",))]


def _special(tok: BpeTokenizer) -> SpecialTokens:
    """What the tokenizer's own post-processor adds (lerobot tokenises with add_special_tokens on)."""
    try:
        plain = tok.encode("a").ids
        full = tok.encode("a", add_special_tokens=True).ids
    except SourceError:
        plain = full = np.zeros(0, np.int64)
    lead = len(full) - len(plain) if len(full) > len(plain) and list(full[-len(plain):]) == list(plain) else 0
    return SpecialTokens(bos_id=int(full[0]) if lead else None, eos_id=None, add_bos=bool(lead), add_eos=False,
                         has_chat_template=False)


def load(folder: Path, cfg: dict, name: str | None) -> MultimodalCheckpoint:
    """A lerobot SmolVLA folder -> MultimodalCheckpoint (the VLM's config and tokenizer from vlm_model_name)."""
    folder = Path(folder)
    spec = parse_smolvla(folder, cfg)
    mode = cfg.get("attention_mode", "cross_attn")
    every = cfg.get("self_attn_every_n_layers", 2)
    every = every if isinstance(every, int) and not isinstance(every, bool) else 2
    cross_mode = "cross" in mode
    s = spec.text.decoder
    for i, j in enumerate(spec.expert_at):
        if j < 0 and not spec.cross[i]:
            raise CheckpointError(f"config.json: VLM layer {i} is a self-attention layer with no expert layer beside it "
                                  "(num_expert_layers, self_attn_every_n_layers): lerobot's denoising step cannot run it")
        if j >= 0 and _replaced_kv(spec, cross_mode, every, j) != spec.cross[i] and s.n_kv_head * s.head_dim != spec.expert.d_model:
            raise CheckpointError(f"config.json: expert layer {j} runs beside VLM layer {i} as "
                                  f"{'cross' if spec.cross[i] else 'self'}-attention but has the other kind's k/v "
                                  "projections (lerobot itself cannot run this layout)")
    store = load_parts(folder, parts(spec, cross_mode, every), "SmolVLA")
    path = spec.vlm_folder / "tokenizer.json"
    if not path.is_file():
        raise CheckpointError(f"the VLM's tokenizer is missing: {path} not found")
    try:
        tok = BpeTokenizer.from_file(path, name=spec.vlm_name)
    except SourceError as exc:
        raise CheckpointError(str(exc)) from None
    if tok.vocab_size > spec.text.vocab_size:
        raise CheckpointError(f"the VLM's tokenizer has {tok.vocab_size} tokens but the embedding table only "
                              f"{spec.text.vocab_size} rows: tokenizer and weights do not belong together")
    n_cross = sum(1 for i, j in enumerate(spec.expert_at) if j >= 0 and spec.cross[i])
    summary = (f"{len(spec.cameras)} camera{'s' if len(spec.cameras) > 1 else ''} x {spec.tokens_per_image} tokens, "
               f"VLM {spec.text.n_layer} layers x {spec.text.n_head} heads (d {spec.text.d_model}), expert "
               f"{spec.expert.n_layer} layers (d {spec.expert.d_model}, {n_cross} cross-attention), "
               f"{spec.chunk} actions x {spec.max_action_dim}, state {spec.state_dim}")
    return MultimodalCheckpoint(
        folder=folder, name=name or folder.name, family="smolvla", spec=spec, weights=store, tokenizer=tok,
        special_tokens=_special(tok), runner=run, summary=summary, n_images=len(spec.cameras),
        prompt_hint=f"the task instruction; one picture per camera ({', '.join(spec.cameras)}), the robot state "
                    f"({spec.state_dim} numbers), a noise seed and a flow time t in [0, 1]",
        options=("state", "noise_seed", "time"))


def _instruction_ids(tok: BpeTokenizer, text: str, max_len: int) -> tuple[np.ndarray, list[str], list[bool]]:
    """lerobot's tokenizer step: a newline appended, special tokens as the tokenizer adds them, truncated
    to ``max_len`` tokens (the added markers kept)."""
    if not isinstance(text, str) or not text.strip():
        raise CheckpointError("the task instruction is empty: a policy reads what it should do")
    if not text.endswith("\n"):
        text = text + "\n"
    try:
        full = tok.encode(text, add_special_tokens=True)
        plain = tok.encode(text)
    except SourceError as exc:
        raise CheckpointError(str(exc)) from None
    ids, pieces, special = list(full.ids), list(full.pieces), list(full.special)
    if len(ids) > max_len:
        n_add = len(ids) - len(plain.ids)
        lead = next((k for k in range(n_add + 1) if ids[k:k + len(plain.ids)] == list(plain.ids)), 0)
        keep = max(0, max_len - n_add)
        idx = list(range(lead)) + list(range(lead, lead + keep)) + list(range(lead + len(plain.ids), len(ids)))
        ids, pieces, special = [ids[k] for k in idx], [pieces[k] for k in idx], [special[k] for k in idx]
    return np.asarray(ids, dtype=np.int64), pieces, special


def _visible(piece: str) -> str:
    return piece.replace("\n", "\\n").replace(" ", "\u2423") or "\u2205"


def _state(spec: SmolVLASpec, state) -> np.ndarray:
    if state is None:
        raise CheckpointError(f"the policy needs the robot state: {spec.state_dim} numbers (--state x,y,...)")
    try:
        x = np.asarray(list(state), dtype=np.float64).reshape(-1)  # (S,)
    except (TypeError, ValueError):
        raise CheckpointError(f"the robot state must be {spec.state_dim} numbers (got {state!r})") from None
    if x.shape != (spec.state_dim,):
        raise CheckpointError(f"the robot state has {x.size} number{'s' if x.size != 1 else ''}; this policy reads "
                              f"{spec.state_dim} (observation.state)")
    if not np.all(np.isfinite(x)) or np.abs(x).max(initial=0) > MAX_STATE_VALUE:
        raise CheckpointError(f"the robot state must hold finite numbers of at most {MAX_STATE_VALUE:g} in size")
    return x.astype(np.float32)


def _seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise CheckpointError(f"the noise seed must be a whole number >= 0 (got {seed!r})")
    return int(seed)


def action_noise(seed: int, chunk: int, width: int) -> np.ndarray:
    """(chunk, width) float32 noise x_t of a seed: numpy's PCG64 standard normal."""
    return np.random.default_rng(seed).standard_normal((chunk, width)).astype(np.float32)  # (Ta, A)


def run(ckpt: MultimodalCheckpoint, images: list, text: str, *, dtype=np.float32, kernel: str = "auto",
        state=None, noise_seed: int = 0, time: float = 1.0, edit=None) -> MultimodalAttention:
    """One forward pass of the VLM over the prefix and of the action expert at flow time ``time``.

    ``edit`` (None: the plain pass) is an object with ``vlm`` and ``expert``, each an
    :class:`attnviz.checkpoints.interventions.Edit` or None, in each stack's own coordinates: the VLM's over the
    prefix (knockouts (Tp, Tp)), the expert's over the action rows (knockouts (Ta, Tp + Ta)); built and checked by
    :mod:`attnviz.checkpoints.intervention_vla`."""
    spec: SmolVLASpec = ckpt.spec
    dtype = np.dtype(dtype).type
    if dtype not in (np.float32, np.float64):
        raise CheckpointError(f"dtype must be float32 or float64 (got {np.dtype(dtype).name})")
    if len(images) != len(spec.cameras):
        raise CheckpointError(f"{ckpt.name} reads one picture per camera ({', '.join(spec.cameras)}, in that order); "
                              f"{len(images)} {'was' if len(images) == 1 else 'were'} given")
    x_state = _state(spec, state)
    t = check_time(time)
    seed = _seed(noise_seed)
    ids, pieces, lang_special = _instruction_ids(ckpt.tokenizer, text, spec.tokenizer_max_length)
    if ids.size and int(ids.max()) >= spec.text.vocab_size:
        raise CheckpointError(f"token id {int(ids.max())} is outside the VLM's {spec.text.vocab_size}-row embedding table")
    pictures = [as_rgb_uint8(im) for im in images]
    store = ckpt.weights
    T_ = Weights(PartView(store, "text"), dtype)
    V = Weights(PartView(store, "vision"), dtype)
    E = Weights(PartView(store, "expert"), dtype)
    H = Weights(PartView(store, "head"), dtype)
    proj = Weights(PartView(store, "connector"), dtype)["modality_projection.proj.weight"]
    d = spec.text.d_model
    w_px, h_px = spec.resize

    # ---- prefix: images, language, state --------------------------------------------------------------
    embs, names, tokens, labels, special, tok_ids, groups = [], [], [], [], [], [], []
    pixels, vmaps, notes = [], [], []
    fake, glob = image_marker_names(spec.vlm_folder)
    marker_ids = {m: ckpt.tokenizer.token_to_id(m) for m in (fake, glob)}
    if spec.image_special_tokens and None in marker_ids.values():
        raise CheckpointError(f"the VLM's tokenizer lacks {fake!r} or {glob!r}, which add_image_special_tokens writes")
    image_id = ckpt.tokenizer.token_to_id("<image>")
    image_id = -1 if image_id is None else int(image_id)

    def markers(which: list[str], cam: str) -> None:
        rows = np.array([marker_ids[m] for m in which], dtype=np.int64)
        embs.append(T_.rows("embed_tokens.weight", rows))  # (n, d): lerobot does not scale the markers
        for m, i in zip(which, rows):
            names.append("images"); tokens.append(m); labels.append(f"{cam} {m}"); special.append(True)
            tok_ids.append(int(i))

    for c_i, (cam, pic) in enumerate(zip(spec.cameras, pictures)):
        short = cam.split(".")[-1]
        img = np.ascontiguousarray(pic.transpose(2, 0, 1)).astype(np.float32) / np.float32(255.0)  # (3, H, W)
        canvas, (rh, rw, ph, pw) = resize_with_pad(img, w_px, h_px)  # (3, h_px, w_px)
        px = (canvas * np.float32(2.0) - np.float32(1.0)).astype(np.float32)  # (3, h_px, w_px) in [-1, 1]
        pixels.append(px)
        maps, hv = vision_tower(spec.vision, V, px.astype(dtype), dtype, kernel)  # (L_v, nh, P, P), (P, d_v)
        vmaps.append(maps)
        feats = pixel_shuffle(hv, spec.scale_factor) @ proj.T  # (n_img, d)
        feats = feats * dtype(d ** 0.5)  # lerobot: torch.tensor(dim ** 0.5) in the features' dtype
        if spec.image_special_tokens:
            markers([fake, glob], short)
        start = len(names)
        embs.append(feats.astype(dtype, copy=False))
        gh, gw = spec.grid
        for r in range(gh):
            for c in range(gw):
                names.append("images"); tokens.append("<image>"); labels.append(f"{short} {r},{c}")
                special.append(True); tok_ids.append(image_id)
        H0, W0 = pic.shape[:2]
        sy, sx = H0 / rh, W0 / rw  # original pixels per resized pixel
        box = (-ph * sy, -pw * sx, (h_px - ph) * sy, (w_px - pw) * sx)
        groups.append(PatchGroup(image=c_i, name=short, tokens=np.arange(start, start + gh * gw, dtype=np.int64),
                                 grid=(gh, gw), box=tuple(float(b) for b in box)))
        if spec.image_special_tokens:
            markers([fake], short)
    for n in range(spec.n_empty):  # lerobot's padded cameras: image tokens masked (left out), markers visible
        if spec.image_special_tokens:
            markers([fake, glob, fake], f"empty{n}")
    lang = T_.rows("embed_tokens.weight", ids) * dtype(math.sqrt(d))  # (n_lang, d)
    embs.append(lang.astype(dtype, copy=False))
    for p, i, sp in zip(pieces, ids, lang_special):
        names.append("language"); tokens.append(p); labels.append(_visible(p)); special.append(bool(sp))
        tok_ids.append(int(i))
    s_norm = spec.state_norm.apply(x_state)  # (S,)
    s_pad = np.zeros(spec.max_state_dim, dtype=dtype)  # (max_state_dim,)
    s_pad[: spec.state_dim] = s_norm
    embs.append(linear_row(s_pad, H["state_proj.weight"], H["state_proj.bias"]))  # (1, d)
    names.append("state"); tokens.append("<state>"); labels.append("state"); special.append(True); tok_ids.append(-1)
    x = np.concatenate(embs, axis=0).astype(dtype, copy=False)  # (Tp, d)
    Tp = x.shape[0]
    ar = np.zeros(Tp, dtype=np.int64)  # (Tp,): 0 for images and language, 1 where the state opens its block
    ar[-1] = 1
    valid = np.ones(Tp, dtype=bool)
    prefix_mask = ar_mask_2d(ar, valid)  # (Tp, Tp)
    positions = np.cumsum(valid) - 1  # (Tp,)

    # ---- the VLM over the prefix, keeping each layer's keys and values ---------------------------------
    vlm_edit, expert_edit = (None, None) if edit is None else (edit.vlm, edit.expert)
    c = spec.text
    L, nh = c.n_layer, c.n_head
    Ta = spec.chunk
    T = Tp + Ta
    atts = np.zeros((L, nh, T, T), dtype=dtype)  # (L, nh, T, T)
    k_cache, v_cache = [], []
    for i in range(L):
        x, w, k, v = vlm_layer(c, T_, i, x, positions, prefix_mask, kernel, edit=vlm_edit)
        atts[i, :, :Tp, :Tp] = w
        k_cache.append(k)
        v_cache.append(v)
    from attnviz.checkpoints.decoder import rms_norm

    hidden = rms_norm(x, T_["norm.weight"], c.ln_eps)  # (Tp, d)

    # ---- the action expert at flow time t ------------------------------------------------------------
    noise = action_noise(seed, Ta, spec.max_action_dim)  # (Ta, A)
    e = suffix_embedding(H, noise.astype(dtype), t, spec, dtype)  # (Ta, d_e)
    suffix_pos = Tp + np.arange(Ta)  # (Ta,): after the prefix's valid tokens
    causal = np.tril(np.ones((Ta, Ta), dtype=bool))  # (Ta, Ta): ar = 1 on every action token
    self_mask = np.concatenate([np.ones((Ta, Tp), dtype=bool), causal], axis=1)  # (Ta, Tp + Ta)
    cross_mask = np.ones((Ta, Tp), dtype=bool)  # (Ta, Tp)
    n_e = spec.expert.n_layer
    act_maps = np.zeros((n_e, nh, Ta, T), dtype=dtype)  # (L_e, nh, Ta, T)
    layer_masks = np.zeros((n_e, Ta, T), dtype=bool)  # (L_e, Ta, T)
    beside = np.full(n_e, -1, dtype=np.int64)  # (L_e,) the VLM layer each expert layer runs beside
    cross = np.zeros(n_e, dtype=bool)  # (L_e,)
    for i in range(L):
        j = spec.expert_at[i]
        if j < 0:
            continue
        m = cross_mask if spec.cross[i] else self_mask
        e, w = expert_layer(spec.expert, E, j, e, k_cache[i], v_cache[i], spec.cross[i], suffix_pos, m, kernel,
                            edit=expert_edit)
        act_maps[j, :, :, : w.shape[-1]] = w
        layer_masks[j, :, : m.shape[1]] = m
        atts[i, :, Tp:, :] = act_maps[j]
        beside[j], cross[j] = i, spec.cross[i]
    e_hidden = rms_norm(e, E["norm.weight"], c.ln_eps)  # (Ta, d_e)
    velocity = (e_hidden.astype(np.float32) @ H["action_out_proj.weight"].astype(np.float32).T
                + H["action_out_proj.bias"].astype(np.float32)).astype(dtype)  # (Ta, A): upcast as lerobot does

    action_mask = layer_masks.any(axis=0)  # (Ta, T)
    mask = np.zeros((T, T), dtype=bool)  # (T, T)
    mask[:Tp, :Tp] = prefix_mask
    mask[Tp:] = action_mask
    for a in range(Ta):
        names.append("actions"); tokens.append("<action>"); labels.append(f"act {a}"); special.append(True)
        tok_ids.append(-1)
    segments = segments_from_runs(names)
    check_segments(segments, T)
    norm = spec.state_norm
    notes = [f"flow time t = {t:g}, noise seed {seed} (numpy default_rng standard normal, {Ta} x {spec.max_action_dim})",
             f"state {'normalised ' + norm.mode if norm.mode != 'IDENTITY' else 'used as given'}: "
             + ", ".join(f"{v:.4g}" for v in s_norm),
             f"expert layers {', '.join(str(j) for j in np.flatnonzero(cross)) or 'none'} cross-attend to the prefix "
             "only (keys and values: the expert's projections of the VLM's cached ones); the others attend to the "
             "prefix and causally to the actions",
             f"rotary base {10_000} as lerobot's apply_rope (the VLM's rope_theta {c.decoder.rope.theta:g} is not read)",
             f"velocity v_t ({Ta}, {spec.max_action_dim}); its first {spec.action_dim} columns are the action"]
    if spec.n_empty:
        notes.append(f"{spec.n_empty} empty camera(s) lerobot pads: their image tokens are masked for every query, "
                     "so left out" + ("; their markers are seen and kept" if spec.image_special_tokens else ""))
    return MultimodalAttention(
        model=ckpt.name, family="smolvla", tokens=tokens, labels=labels, special=np.asarray(special, dtype=bool),
        ids=np.asarray(tok_ids, dtype=np.int64), attentions=atts, mask=mask, segments=segments,
        patches=tuple(groups), images=pictures, hidden=hidden, pixels=np.stack(pixels),
        vision_attentions=np.stack(vmaps), kv_group=c.decoder.group, notes=tuple(notes),
        action_attentions=act_maps, action_mask=action_mask,
        extra={"velocity": velocity, "noise": noise, "state_normalized": s_norm.astype(np.float32),
               "expert_hidden": e_hidden, "action_layer_masks": layer_masks, "expert_cross": cross,
               "expert_vlm_layer": beside})


def linear_row(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(1, out) of one input row through a torch Linear."""
    return (x[None, :] @ w.T + b).astype(w.dtype, copy=False)  # (1, out)
