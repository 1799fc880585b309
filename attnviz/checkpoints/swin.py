"""Swin (``model_type`` "swin": SwinModel, SwinForImageClassification): windowed attention over shifted
windows, with a learned relative position bias, in stages joined by patch merging.

Each stage s runs on a (h_s, w_s) grid of tokens (the patch grid, halved by each merging) of width
``embed_dim * 2**s`` with its own head count. A layer splits the grid into windows of w x w tokens and each
token attends only to the tokens of its own window; the odd layers of a stage first roll the grid by
w // 2 up and left (transformers' ``torch.roll(-shift)``), so their windows straddle the even layers', and
the tokens a window gathers from opposite edges get -100 added to their scores (the shift mask). A stage
whose grid is no wider than the window runs one unshifted window of that size.

:func:`forward_swin` returns, for every stage, each layer's per-window weights (windows, nh, w*w, w*w),
exactly what transformers' SwinAttention computes, and the same weights *laid into the stage's
(T_s, T_s) map* (T_s = h_s * w_s tokens, row-major): a query's row is 0 outside its window. The map's
:func:`window_mask` ((T_s, T_s) bool: same window, and for a shifted layer the same region) is the mask the
windows make, so the map shows the window blocks.

:func:`attnviz.checkpoints.vision.forward_vision` shows stage 0 (the patch grid, every token a patch) as a
vision model's attentions (L, nh, T, T); :func:`attnviz.checkpoints.swin_stages.stage_attention` makes a run's result for any stage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.forward import _Cast, biased_attention, patchify
from attnviz.checkpoints.layers import activation, layer_norm, linear
from attnviz.checkpoints.model_config import (CheckpointConfig, act_field, bool_field, eps_field, float_field,
                                              int_field, pair_field)

SHIFT_MASK = -100.0  # what transformers adds to the scores of a shifted window's pairs from different regions
TORCH_LN_EPS = 1e-5  # the embeddings' and patch merging's LayerNorms use torch's default epsilon
MAX_MAP_BYTES = 1 << 30  # laid (T_s, T_s) maps of one stage beyond this are refused (per-window weights only)
MAX_TERM_BYTES = 256 << 20  # stage 0's four score terms are laid out only while they take no more than this


@dataclass(frozen=True)
class SwinSpec:
    """What a Swin config says beyond :class:`CheckpointConfig` (which describes stage 0)."""

    depths: tuple[int, ...]  # layers per stage
    heads: tuple[int, ...]  # heads per stage
    window: int  # window side w (tokens)
    embed_dim: int  # stage 0's width; stage s is embed_dim * 2**s wide
    mlp_ratio: float

    def width(self, s: int) -> int:
        return self.embed_dim * 2 ** s

    def ff(self, s: int) -> int:
        return int(self.mlp_ratio * self.width(s))


def parse_swin(cfg: dict) -> CheckpointConfig:
    """The CheckpointConfig of a Swin config.json (defaults: transformers' SwinConfig's); n_layer and n_head are stage
    0's, ``spec`` a :class:`SwinSpec`."""
    depths, heads = (_int_list(cfg, k, d) for k, d in (("depths", [2, 2, 6, 2]), ("num_heads", [3, 6, 12, 24])))
    if len(depths) != len(heads):
        raise CheckpointError(f"config.json: 'depths' has {len(depths)} stages but 'num_heads' {len(heads)}")
    embed = int_field(cfg, "embed_dim", 96)
    for s, nh in enumerate(heads):
        if (embed * 2 ** s) % nh:
            raise CheckpointError(f"config.json: stage {s}'s width {embed * 2 ** s} is not divisible by its {nh} heads")
    ratio = float_field(cfg, "mlp_ratio", 4.0)
    if not ratio > 0:
        raise CheckpointError(f"config.json: 'mlp_ratio' must be > 0 (got {ratio})")
    spec = SwinSpec(depths=tuple(depths), heads=tuple(heads), window=int_field(cfg, "window_size", 7), embed_dim=embed,
                    mlp_ratio=ratio)
    return CheckpointConfig(
        kind="vit", model_type="swin", d_model=embed, n_layer=depths[0], n_head=heads[0], d_ff=spec.ff(0),
        act=act_field(cfg, "hidden_act", "gelu"), ln_eps=eps_field(cfg, "layer_norm_eps", 1e-5),
        image_size=pair_field(cfg, "image_size", 224), patch_size=pair_field(cfg, "patch_size", 4),
        num_channels=int_field(cfg, "num_channels", 3), n_extra=0, qkv_bias=bool_field(cfg, "qkv_bias", True),
        abs_positions=bool_field(cfg, "use_absolute_embeddings", False), spec=spec)


def _int_list(cfg: dict, key: str, default: list[int]) -> list[int]:
    value = cfg.get(key, default)
    if not isinstance(value, (list, tuple)) or not value or len(value) > 16:
        raise CheckpointError(f"config.json: {key!r} must be a list of 1 to 16 whole numbers (got {value!r})")
    return [int_field({key: v}, key) for v in value]


def swin_tensors(c: CheckpointConfig) -> dict[str, tuple[int, ...]]:
    """Canonical (published) tensor name -> shape of every tensor Swin's forward pass reads."""
    sp: SwinSpec = c.spec
    d0, (gh, gw) = sp.embed_dim, c.grid
    shapes = {"embeddings.patch_embeddings.projection.weight": (d0, c.num_channels, *c.patch_size),
              "embeddings.patch_embeddings.projection.bias": (d0,),
              "embeddings.norm.weight": (d0,), "embeddings.norm.bias": (d0,)}
    if c.abs_positions:
        shapes["embeddings.position_embeddings"] = (1, gh * gw, d0)
    n_rel = (2 * sp.window - 1) ** 2
    for s, (depth, nh) in enumerate(zip(sp.depths, sp.heads)):
        d, ff = sp.width(s), sp.ff(s)
        for i in range(depth):
            p = f"encoder.layers.{s}.blocks.{i}."
            for n in ("layernorm_before", "layernorm_after"):
                shapes |= {p + n + ".weight": (d,), p + n + ".bias": (d,)}
            for n in ("query", "key", "value"):
                shapes[p + f"attention.self.{n}.weight"] = (d, d)
                if c.qkv_bias:
                    shapes[p + f"attention.self.{n}.bias"] = (d,)
            shapes[p + "attention.self.relative_position_bias_table"] = (n_rel, nh)
            shapes |= {p + "attention.output.dense.weight": (d, d), p + "attention.output.dense.bias": (d,),
                       p + "intermediate.dense.weight": (ff, d), p + "intermediate.dense.bias": (ff,),
                       p + "output.dense.weight": (d, ff), p + "output.dense.bias": (d,)}
        if s < len(sp.depths) - 1:
            p = f"encoder.layers.{s}.downsample."
            shapes |= {p + "norm.weight": (4 * d,), p + "norm.bias": (4 * d,), p + "reduction.weight": (2 * d, 4 * d)}
    d = sp.width(len(sp.depths) - 1)
    return shapes | {"layernorm.weight": (d,), "layernorm.bias": (d,)}


# ---- windows -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Windows:
    """How one layer cuts an (h, w) grid: window side, shift, and each window's tokens (row-major ids)."""

    grid: tuple[int, int]
    size: int  # window side
    shift: int  # roll (0: plain windows)
    tokens: np.ndarray = field(repr=False)  # (nW, size*size) int64 token id of each window position
    region: np.ndarray = field(repr=False)  # (nW, size*size) int64 shift region (all 0 unshifted)

    @property
    def n_windows(self) -> int:
        return self.tokens.shape[0]


def layer_windows(grid: tuple[int, int], window: int, shifted: bool) -> Windows:
    """The windows of a layer on an (h, w) grid, as SwinLayer cuts them: a grid no wider than the window is one
    unshifted window of its smaller side; a shifted layer rolls by window // 2. Grids transformers would pad
    (a side not a multiple of the window) are refused."""
    h, w = grid
    size, shift = window, (window // 2 if shifted else 0)
    if min(h, w) <= window:
        size, shift = min(h, w), 0
        if size != window:
            raise CheckpointError(f"Swin: a {h}x{w} token grid is smaller than the {window}x{window} window; "
                                  f"transformers cannot run it either (its position bias is for {window}x{window})")
    if h % size or w % size:
        raise CheckpointError(f"Swin: a {h}x{w} token grid is not a whole number of {size}x{size} windows; give an "
                              f"input whose every stage's grid is (transformers pads it)")
    r = (np.arange(h) + shift) % h  # shifted row i holds original row (i + shift) mod h
    col = (np.arange(w) + shift) % w
    ids = r[:, None] * w + col[None, :]  # (h, w) original token at each shifted position
    rr = (np.arange(h) >= h - size).astype(np.int64) + (np.arange(h) >= h - shift)  # (h,) shift regions
    rc = (np.arange(w) >= w - size).astype(np.int64) + (np.arange(w) >= w - shift)  # (w,)
    reg = rr[:, None] * 3 + rc[None, :] if shift else np.zeros((h, w), dtype=np.int64)  # (h, w)

    def part(a: np.ndarray) -> np.ndarray:  # (h, w) -> (nW, size*size), windows row-major as window_partition
        return a.reshape(h // size, size, w // size, size).transpose(0, 2, 1, 3).reshape(-1, size * size)

    return Windows(grid=(h, w), size=size, shift=shift, tokens=part(ids), region=part(reg))


def stage_windows(c: CheckpointConfig, grid: tuple[int, int]) -> list[list[Windows]]:
    """Each stage's layers' windows for an input of (gh, gw) patches (patch merging halves a side, rounding up)."""
    sp: SwinSpec = c.spec
    out = []
    for s, depth in enumerate(sp.depths):
        out.append([layer_windows(grid, sp.window, shifted=i % 2 == 1) for i in range(depth)])
        grid = ((grid[0] + 1) // 2, (grid[1] + 1) // 2)
    return out


def window_mask(win: Windows) -> np.ndarray:
    """(T, T) bool: query i may see key j (same window, same shift region), in row-major token order."""
    T = win.grid[0] * win.grid[1]
    m = np.zeros((T, T), dtype=bool)
    same = win.region[:, :, None] == win.region[:, None, :]  # (nW, n, n)
    m[win.tokens[:, :, None], win.tokens[:, None, :]] = same
    return m


def relative_index(size: int) -> np.ndarray:
    """(n, n) row of the ((2 size - 1)^2, nh) bias table for each (query, key) position of a window, by offset."""
    a, b = np.divmod(np.arange(size * size), size)
    return (a[:, None] - a[None, :] + size - 1) * (2 * size - 1) + (b[:, None] - b[None, :] + size - 1)


def lay(weights: np.ndarray, win: Windows) -> np.ndarray:
    """Per-window weights (nW, nh, n, n) -> the (nh, T, T) map of the grid (0 outside each query's window)."""
    nh, T = weights.shape[1], win.grid[0] * win.grid[1]
    out = np.zeros((nh, T, T), dtype=weights.dtype)
    out[:, win.tokens[:, :, None], win.tokens[:, None, :]] = weights.transpose(1, 0, 2, 3)
    return out


# ---- the forward pass --------------------------------------------------------------------------------


@dataclass
class SwinStage:
    grid: tuple[int, int]  # (h_s, w_s) token grid
    windows: list[Windows]  # one per layer
    weights: list[np.ndarray]  # per layer (nW, nh, n, n), as transformers' SwinAttention returns them
    hidden: np.ndarray  # (T_s, C_s) the stage's output before its patch merging

    def maps(self) -> np.ndarray:
        """(L_s, nh_s, T_s, T_s): every layer's weights laid into the stage's token map."""
        T = self.grid[0] * self.grid[1]
        nh = self.weights[0].shape[1]
        need = len(self.weights) * nh * T * T * self.weights[0].dtype.itemsize
        if need > MAX_MAP_BYTES:
            raise CheckpointError(f"Swin: the {self.grid[0]}x{self.grid[1]} stage's maps would take {need / 2**30:.1f} "
                                  f"GiB; give a smaller image")
        return np.stack([lay(w, win) for w, win in zip(self.weights, self.windows)])

    def masks(self) -> np.ndarray:
        """(L_s, T_s, T_s) bool: each layer's window mask."""
        return np.stack([window_mask(win) for win in self.windows])


def forward_swin(c: CheckpointConfig, weights, pixels: np.ndarray, *, dtype=np.float32, kernel: str = "auto",
                 terms: dict | None = None, edit=None):
    """(stages [SwinStage], last_hidden_state (T_last, C_last)) of Swin on pixels (C, H, W).

    ``edit`` (None: the plain pass) changes layer g (the global index over the stages, stage 0's first) through
    three calls: ``edit.residual(g, x)`` the stream (T_s, C_s) entering it, ``edit.window_mask(g, win, nh)``
    None or a bool (nW * nh, n, n) of the window pairs still allowed (the knockout; ANDed with nothing else, the
    shift mask stays a -100 bias), and ``edit.merged(g, out, nh)`` the heads' outputs (T_s, C_s) in token order
    before the output projection (see :mod:`attnviz.checkpoints.intervention_swin`).

    ``terms``: a dict that receives stage 0's score terms laid into (L, nh, T, T) maps, whose sum is what the
    softmax takes: ``"content"`` (q k^T / sqrt(hs)) and ``"position bias"`` inside each window, ``"shift mask"``
    (-100 for a shifted window's pairs from different regions), ``"window mask"`` (0 inside, -inf outside);
    left empty when the four would take more than MAX_TERM_BYTES (Swin-T at 224 px: 0.9 GB).
    """
    sp: SwinSpec = c.spec
    dt = np.dtype(dtype).type
    W = _Cast(weights, dt)
    ph, pw = c.patch_size
    gh, gw = pixels.shape[1] // ph, pixels.shape[2] // pw
    if gh < 1 or gw < 1:
        raise CheckpointError(f"the model input is {pixels.shape[1]}x{pixels.shape[2]} px, smaller than one {ph}x{pw} px patch")
    pixels = np.ascontiguousarray(pixels[:, : gh * ph, : gw * pw]).astype(dt, copy=False)
    x = linear(patchify(pixels, c.patch_size), W["embeddings.patch_embeddings.projection.weight"].reshape(sp.embed_dim, -1),
               W["embeddings.patch_embeddings.projection.bias"])  # (N, C0)
    x = layer_norm(x, W["embeddings.norm.weight"], W["embeddings.norm.bias"], TORCH_LN_EPS)
    if c.abs_positions:
        if (gh, gw) != c.grid:
            raise CheckpointError(f"Swin: this model's position table is for a {c.grid[0]}x{c.grid[1]} patch grid; "
                                  f"the input gives {gh}x{gw} (resize it to {c.image_size[0]}x{c.image_size[1]} px)")
        x = x + W["embeddings.position_embeddings"][0]
    plan, stages = stage_windows(c, (gh, gw)), []  # every stage's windows first: a bad grid is refused at once
    grid, g = (gh, gw), 0
    for s, wins in enumerate(plan):
        got = []
        for i, win in enumerate(wins):
            x, a = _layer(c, W, f"encoder.layers.{s}.blocks.{i}.", x, win, sp.heads[s], kernel,
                          None if (terms is None or s) else terms.setdefault("_parts", []),
                          None if edit is None else (edit, g))
            got.append(a)
            g += 1
        stages.append(SwinStage(grid=grid, windows=wins, weights=got, hidden=x))
        if s < len(sp.depths) - 1:
            x, grid = _merge(W, f"encoder.layers.{s}.downsample.", x, grid)
    if terms is not None:
        _fill_terms(terms, stages[0])
    return stages, layer_norm(x, W["layernorm.weight"], W["layernorm.bias"], c.ln_eps)


def _layer(c: CheckpointConfig, W: _Cast, p: str, x: np.ndarray, win: Windows, nh: int, kernel: str, parts, edit=None):
    """One SwinLayer; ``edit`` None or (the edit, this layer's global index)."""
    if edit is not None:
        x = edit[0].residual(edit[1], x)
    T, C = x.shape
    n, nW = win.size * win.size, win.n_windows
    h = layer_norm(x, W[p + "layernorm_before.weight"], W[p + "layernorm_before.bias"], c.ln_eps)  # (T, C)
    q, k, v = (linear(h, W[p + f"attention.self.{m}.weight"], W.get(p + f"attention.self.{m}.bias"))
               for m in ("query", "key", "value"))  # 3 x (T, C)

    def by_window(a: np.ndarray) -> np.ndarray:  # (T, C) -> (n, nW * C): window-major, then head-major columns
        return np.ascontiguousarray(a[win.tokens].transpose(1, 0, 2).reshape(n, nW * C))

    table = W[p + "attention.self.relative_position_bias_table"]  # ((2w-1)^2, nh)
    rel = table[relative_index(win.size)].transpose(2, 0, 1)  # (nh, n, n)
    shift = np.where(win.region[:, :, None] == win.region[:, None, :], 0.0, SHIFT_MASK).astype(x.dtype)  # (nW, n, n)
    bias = rel[None] + shift[:, None]  # (nW, nh, n, n)
    content = np.empty((nW * nh, n, n), dtype=x.dtype) if parts is not None else None
    allowed = None if edit is None else edit[0].window_mask(edit[1], win, nh)  # None or (nW*nh, n, n) bool
    ctx, a = biased_attention(by_window(q), by_window(k), by_window(v), nW * nh, bias.reshape(nW * nh, n, n),
                              1.0 / math.sqrt(C // nh), kernel, mask=allowed,
                              content=content)  # (n, nW*C), (nW*nh, n, n)
    out = np.empty_like(x)
    out[win.tokens] = ctx.reshape(n, nW, C).transpose(1, 0, 2)  # (T, C) back in token order
    if edit is not None:
        out = edit[0].merged(edit[1], out, nh)
    x = x + linear(out, W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"])
    h = layer_norm(x, W[p + "layernorm_after.weight"], W[p + "layernorm_after.bias"], c.ln_eps)
    h = activation(c.act, linear(h, W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"]))
    x = x + linear(h, W[p + "output.dense.weight"], W[p + "output.dense.bias"])
    if parts is not None:
        parts.append((content.reshape(nW, nh, n, n), np.broadcast_to(rel[None], (nW, nh, n, n)),
                      np.broadcast_to(shift[:, None], (nW, nh, n, n)), win))
    return x, a.reshape(nW, nh, n, n)


def _merge(W: _Cast, p: str, x: np.ndarray, grid: tuple[int, int]):
    """SwinPatchMerging: 2 x 2 neighbours concatenated ((0,0), (1,0), (0,1), (1,1)), LayerNorm, linear to 2C; an
    odd side is padded with zeros first."""
    h, w = grid
    C = x.shape[1]
    g = x.reshape(h, w, C)
    if h % 2 or w % 2:
        g = np.pad(g, ((0, h % 2), (0, w % 2), (0, 0)))
    g = np.concatenate([g[0::2, 0::2], g[1::2, 0::2], g[0::2, 1::2], g[1::2, 1::2]], axis=-1)  # (h/2, w/2, 4C)
    new = g.shape[:2]
    g = layer_norm(g.reshape(-1, 4 * C), W[p + "norm.weight"], W[p + "norm.bias"], TORCH_LN_EPS)
    return linear(g, W[p + "reduction.weight"], None), (int(new[0]), int(new[1]))


def _fill_terms(terms: dict, stage0: SwinStage) -> None:
    parts = terms.pop("_parts", [])
    if not parts:
        return
    T = stage0.grid[0] * stage0.grid[1]
    nh = parts[0][0].shape[1]
    if len(parts) * 4 * nh * T * T * parts[0][0].dtype.itemsize > MAX_TERM_BYTES:
        return  # too large to lay out four times: the maps alone are returned
    content, rel, shift = (np.stack([lay(np.ascontiguousarray(pt[j]), pt[3]) for pt in parts]) for j in range(3))
    outside = np.stack([np.where(lay(np.ones((pt[3].n_windows, 1, pt[3].size ** 2, pt[3].size ** 2), dtype=bool),
                                     pt[3])[0], 0.0, -np.inf) for pt in parts])  # (L, T, T)
    terms["content"], terms["position bias"], terms["shift mask"] = content, rel, shift
    terms["window mask"] = np.ascontiguousarray(np.broadcast_to(outside[:, None], content.shape)).astype(content.dtype)
