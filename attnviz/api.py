"""Attention maps from anywhere: :func:`save` writes maps a model computed elsewhere to a file attnviz opens,
:func:`show` opens the desktop application on them in a new process (and, in a notebook, draws the
layers x heads grid inline).

What it takes is what transformers returns: ``outputs.attentions``, a tuple with one (batch, heads, T, T)
tensor per layer (torch or numpy; ``batch=`` picks one sequence of a batch), or one array (layers, heads,
Tq, Tk). Cross-attention (``outputs.cross_attentions``) has the decoder's ``target_tokens`` as its query
rows and the encoder's ``tokens`` as its key columns. A tensor is read through ``.detach().cpu().numpy()``
or ``__array__``, so torch is never imported here. Maps that are not attention weights — NaN or inf,
negative values, rows that do not sum to one (beyond 1e-3, 1e-2 for float16 or bfloat16 maps; a fully
masked all-zero row is allowed) — are refused with one ValueError line that names what and where.

The file (``.npz``, or ``.safetensors`` with the tokens in its metadata) holds::

    attnviz_maps   () int64, the format version (FORMAT_VERSION)
    attentions     (layers, heads, Tq, Tk) float32 (float16 when asked for)
    tokens         (Tk,) str, the key tokens (and the query tokens of self-attention)
    target_tokens  (Tq,) str, cross-attention only: the query tokens
    image          (H, W, 3) uint8, optional
    title          () str, optional
    computed       () str, the dtype the maps were given in ("bfloat16", "float16", "float32", "float64")

This module imports numpy only (Pillow when it draws); ``attnviz.checkpoints.maps_file`` reads the files.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

FORMAT_NAME = "attnviz-maps"  # the safetensors metadata's "format"
FORMAT_VERSION = 1  # the npz's attnviz_maps / the safetensors metadata's "version"
SUFFIXES = (".npz", ".safetensors")
ROW_TOLERANCE = 1e-3  # |sum of a row - 1| allowed
ROW_TOLERANCE_16 = 1e-2  # the same for maps computed in float16 or bfloat16 (8 bits of mantissa: ~4e-3 per value)
MAX_TOKENS = 65_536  # query or key tokens of one map (the window's overview reaches this far)
MAX_VALUES = 2**30  # attention values of one file (4 GiB of float32)
MAX_TOKEN_CHARS = 1_000  # characters of one token
MAX_TITLE_CHARS = 200
MAX_IMAGE_SIDE = 8_192
STORE_DTYPES = {"float32": np.float32, "float16": np.float16}


def _as_array(x, what: str) -> np.ndarray:
    """A numpy array of ``x``: a torch-like tensor through ``.detach().cpu().numpy()``, anything else through
    ``__array__`` / ``np.asarray``; ValueError naming ``what`` when it cannot be read as numbers."""
    if isinstance(x, np.ndarray):
        return x
    try:
        if hasattr(x, "detach") and hasattr(x, "cpu"):
            t = x.detach().cpu()
            if "bfloat16" in str(getattr(t, "dtype", "")) and hasattr(t, "float"):
                t = t.float()  # numpy has no bfloat16
            return np.asarray(t.numpy())
        return np.asarray(x)
    except Exception as exc:  # noqa: BLE001 - any library's conversion error becomes one line
        raise ValueError(f"{what} cannot be read as an array ({type(exc).__name__}: {exc})") from None


def _layer(x, index: int | None, batch: int | None) -> np.ndarray:
    """One layer's (heads, Tq, Tk) maps from a (batch, heads, Tq, Tk) or (heads, Tq, Tk) tensor."""
    what = "attentions" if index is None else f"attentions[{index}]"
    a = _as_array(x, what)
    if a.ndim == 4:
        n = a.shape[0]
        if batch is None:
            if n != 1:
                raise ValueError(f"{what} holds a batch of {n} sequences (shape {tuple(a.shape)}): choose one "
                                 f"with batch=0..{n - 1}")
            return a[0]
        if not 0 <= batch < n:
            raise ValueError(f"batch={batch} is out of range for {what}'s batch of {n}")
        return a[batch]
    if a.ndim == 3:
        return a
    raise ValueError(f"{what} must be (batch, heads, Tq, Tk) or (heads, Tq, Tk) (got shape {tuple(a.shape)})")


def as_maps(attentions, *, batch: int | None = None) -> np.ndarray:
    """(layers, heads, Tq, Tk) maps from a tuple/list of per-layer tensors (what transformers returns), one
    (layers, heads, Tq, Tk) array, or one (layers, batch, heads, Tq, Tk) array (a stacked tuple)."""
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, (int, np.integer))):
        raise ValueError(f"batch must be a whole number (got {batch!r})")
    batch = None if batch is None else int(batch)
    if isinstance(attentions, (tuple, list)):
        if not attentions:
            raise ValueError("attentions is empty: run the model with output_attentions=True and "
                             "attn_implementation='eager' (sdpa and flash attention return no maps)")
        if any(x is None for x in attentions):
            raise ValueError("attentions holds None: run the model with output_attentions=True "
                             "(and attn_implementation='eager')")
        layers = [_layer(x, i, batch) for i, x in enumerate(attentions)]
        shape = layers[0].shape
        for i, m in enumerate(layers):
            if m.shape != shape:
                raise ValueError(f"attentions[{i}] has shape {tuple(m.shape)}, attentions[0] {tuple(shape)}: "
                                 "every layer must have the same heads and tokens")
        a = np.stack([np.asarray(m) for m in layers])
    else:
        if attentions is None:
            raise ValueError("attentions is None: run the model with output_attentions=True "
                             "(and attn_implementation='eager')")
        a = _as_array(attentions, "attentions")
        if a.ndim == 5:
            a = np.stack([_layer(a[i], i, batch) for i in range(a.shape[0])])
        elif a.ndim == 4:
            if batch is not None:
                raise ValueError("batch= is for (batch, heads, T, T) tensors per layer; these attentions are one "
                                 f"(layers, heads, Tq, Tk) array of shape {tuple(a.shape)}")
        else:
            raise ValueError("attentions must be a tuple of (batch, heads, T, T) tensors, one per layer, or a "
                             f"(layers, heads, Tq, Tk) array (got shape {tuple(a.shape)})")
    if a.dtype.kind not in "f" or a.dtype.itemsize not in (2, 4, 8):
        raise ValueError(f"attentions must be floating-point weights (got dtype {a.dtype})")
    if 0 in a.shape:
        raise ValueError(f"attentions has an empty axis (shape {tuple(a.shape)})")
    return a


def check_tokens(tokens, n: int, what: str = "tokens", axis: str = "key") -> list[str]:
    """``tokens`` as a list of ``n`` strings; ValueError saying how they do not fit."""
    if tokens is None:
        raise ValueError(f"{what} is missing: give the {n} {axis} tokens, one string each")
    if isinstance(tokens, str):
        raise ValueError(f"{what} must be a list of strings, one per token (got one string)")
    if isinstance(tokens, np.ndarray):
        tokens = tokens.tolist()
    try:
        out = list(tokens)
    except TypeError:
        raise ValueError(f"{what} must be a list of strings (got {type(tokens).__name__})") from None
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ValueError(f"{what}[{i}] is a {type(t).__name__}, not a string (decode ids first, e.g. with "
                             "tokenizer.convert_ids_to_tokens)")
        if len(t) > MAX_TOKEN_CHARS:
            raise ValueError(f"{what}[{i}] is {len(t):,} characters long (at most {MAX_TOKEN_CHARS:,})")
    if len(out) != n:
        raise ValueError(f"{len(out)} {what} for maps with {n} {axis} positions: they must match")
    return out


def _where(index: tuple, cross: bool) -> str:
    layer, head, row = (int(i) for i in index[:3])
    return f"layer {layer}, head {head}, {'target ' if cross else ''}query {row}"


ROWS_AT_ONCE = 2**22  # values of a map checked (or summarised) in one float64 block


def row_blocks(Tq: int, Tk: int):
    """(start, stop) blocks of query rows holding about ROWS_AT_ONCE values each, so no check or summary makes a
    float64 copy of a whole long map."""
    step = max(1, ROWS_AT_ONCE // max(Tk, 1))
    return [(i, min(i + step, Tq)) for i in range(0, Tq, step)]


def check_values(a: np.ndarray, cross: bool = False, tolerance: float = ROW_TOLERANCE) -> None:
    """ValueError naming the first problem of maps (L, nh, Tq, Tk) that should be softmax weights: values that
    are not finite, negative values, rows not summing to one (beyond ``tolerance``) that are not all zero."""
    L, nh, Tq, Tk = a.shape
    blocks = row_blocks(Tq, Tk)
    for layer in range(L):
        for head in range(nh):
            for r0, r1 in blocks:
                m = np.asarray(a[layer, head, r0:r1], dtype=np.float64)  # (rows, Tk)
                bad = ~np.isfinite(m)
                if bad.any():
                    n = int(np.count_nonzero(~np.isfinite(a)))
                    i, j = np.argwhere(bad)[0]
                    raise ValueError(f"attentions hold {n:,} NaN or infinite value(s), the first at "
                                     f"{_where((layer, head, r0 + i), cross)}, key {int(j)}: not drawn")
                neg = m < 0
                if neg.any():
                    i, j = np.argwhere(neg)[0]
                    raise ValueError(f"attentions hold negative values (the smallest {float(np.min(a)):.3g}, the first "
                                     f"at {_where((layer, head, r0 + i), cross)}, key {int(j)}): attention weights "
                                     "are >= 0")
                sums = m.sum(axis=-1)  # (rows,)
                off = (np.abs(sums - 1.0) > tolerance) & (sums != 0.0)
                if off.any():
                    n = _rows_off(a, layer, tolerance)
                    i = int(np.flatnonzero(off)[0])
                    raise ValueError(f"{n:,} row(s) of layer {layer} do not sum to one (the first at "
                                     f"{_where((layer, head, r0 + i), cross)} sums to {sums[i]:.6g}): give softmax "
                                     "weights (rows = queries over keys), not scores")


def _rows_off(a: np.ndarray, layer: int, tolerance: float) -> int:
    """How many rows of ``layer`` sum to neither one nor zero."""
    n = 0
    for head in range(a.shape[1]):
        for r0, r1 in row_blocks(a.shape[2], a.shape[3]):
            sums = np.asarray(a[layer, head, r0:r1], dtype=np.float64).sum(axis=-1)
            n += int(np.count_nonzero((np.abs(sums - 1.0) > tolerance) & (sums != 0.0)))
    return n


def check_image(image) -> np.ndarray | None:
    """An (H, W, 3) uint8 image (RGBA drops its alpha), or None."""
    if image is None:
        return None
    img = _as_array(image, "image")
    if img.ndim != 3 or img.shape[2] not in (3, 4) or img.dtype != np.uint8:
        raise ValueError(f"image must be (H, W, 3) uint8 pixels (got {img.dtype} {tuple(img.shape)})")
    if not (0 < img.shape[0] <= MAX_IMAGE_SIDE and 0 < img.shape[1] <= MAX_IMAGE_SIDE):
        raise ValueError(f"image is {img.shape[1]} x {img.shape[0]} pixels (each side 1..{MAX_IMAGE_SIDE:,})")
    return np.ascontiguousarray(img[:, :, :3])


def check_title(title) -> str | None:
    if title is None:
        return None
    if not isinstance(title, str):
        raise ValueError(f"title must be a string (got {type(title).__name__})")
    if len(title) > MAX_TITLE_CHARS:
        raise ValueError(f"title is {len(title):,} characters long (at most {MAX_TITLE_CHARS})")
    return title


def check_maps(a: np.ndarray, tokens, target_tokens=None, low_precision: bool = False
               ) -> tuple[list[str], list[str] | None]:
    """(tokens, target_tokens) checked against maps (L, nh, Tq, Tk); ValueError for the first problem. Without
    ``target_tokens`` the maps are self-attention (Tq = Tk = len(tokens)); ``low_precision``: they were computed
    in float16 or bfloat16 (rows then sum to one within ROW_TOLERANCE_16)."""
    L, nh, Tq, Tk = a.shape
    if max(Tq, Tk) > MAX_TOKENS:
        raise ValueError(f"maps of {Tq:,} x {Tk:,} tokens: at most {MAX_TOKENS:,} tokens each way")
    if a.size > MAX_VALUES:
        raise ValueError(f"{L} x {nh} maps of {Tq:,} x {Tk:,} are {a.size:,} values (at most {MAX_VALUES:,})")
    keys = check_tokens(tokens, Tk, "tokens", "key")
    queries = None
    if target_tokens is not None:
        queries = check_tokens(target_tokens, Tq, "target_tokens", "query")
    elif Tq != Tk:
        raise ValueError(f"the maps are {Tq} queries x {Tk} keys: cross-attention needs target_tokens, the "
                         f"{Tq} query (decoder) tokens")
    low = low_precision or a.dtype == np.float16
    check_values(a, cross=queries is not None, tolerance=ROW_TOLERANCE_16 if low else ROW_TOLERANCE)
    return keys, queries


LOW_PRECISION = ("float16", "bfloat16")


def _computed_in(attentions, converted: np.ndarray) -> str:
    """The dtype the maps were given in ("bfloat16", "float16", "float32" ...), from their first layer."""
    first = attentions[0] if isinstance(attentions, (tuple, list)) and attentions else attentions
    name = str(getattr(first, "dtype", "")).replace("torch.", "")
    return "bfloat16" if "bfloat16" in name else str(converted.dtype)


def prepare(attentions, tokens, *, target_tokens=None, image=None, title=None, batch=None,
            dtype: str = "float32") -> dict:
    """Every checked field of a maps file: attentions (L, nh, Tq, Tk) in ``dtype``, tokens, target_tokens,
    image, title."""
    if dtype not in STORE_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(STORE_DTYPES)} (got {dtype!r})")
    a = as_maps(attentions, batch=batch)
    computed = _computed_in(attentions, a)
    keys, queries = check_maps(a, tokens, target_tokens, low_precision=computed in LOW_PRECISION)
    stored = np.ascontiguousarray(a, dtype=STORE_DTYPES[dtype])
    if dtype == "float16" and a.dtype != np.float16:
        check_values(stored, cross=queries is not None, tolerance=ROW_TOLERANCE_16)  # rounding must not break rows
    return {"attentions": stored, "tokens": keys, "target_tokens": queries, "image": check_image(image),
            "title": check_title(title), "computed": computed}


def write_npz(fh, fields: dict) -> None:
    """Write the checked ``fields`` of :func:`prepare` to ``fh`` as a compressed ``.npz`` maps file."""
    arrays = {"attnviz_maps": np.array(FORMAT_VERSION, dtype=np.int64), "attentions": fields["attentions"],
              "tokens": np.array(fields["tokens"], dtype=str), "computed": np.array(fields["computed"], dtype=str)}
    if fields["target_tokens"] is not None:
        arrays["target_tokens"] = np.array(fields["target_tokens"], dtype=str)
    if fields["image"] is not None:
        arrays["image"] = fields["image"]
    if fields["title"] is not None:
        arrays["title"] = np.array(fields["title"], dtype=str)
    np.savez_compressed(fh, **arrays)


def _write_safetensors(fh, fields: dict) -> None:
    tensors = [("attentions", fields["attentions"])]
    if fields["image"] is not None:
        tensors.append(("image", fields["image"]))
    meta = {"format": FORMAT_NAME, "version": str(FORMAT_VERSION), "tokens": json.dumps(fields["tokens"]),
            "computed": fields["computed"]}
    if fields["target_tokens"] is not None:
        meta["target_tokens"] = json.dumps(fields["target_tokens"])
    if fields["title"] is not None:
        meta["title"] = fields["title"]
    header: dict = {"__metadata__": meta}
    at = 0
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.uint8): "U8"}
    for name, arr in tensors:
        n = arr.nbytes
        header[name] = {"dtype": names[arr.dtype], "shape": list(arr.shape), "data_offsets": [at, at + n]}
        at += n
    raw = json.dumps(header, ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned
    fh.write(struct.pack("<Q", len(raw)))
    fh.write(raw)
    for _name, arr in tensors:
        fh.write(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())


def save(path, attentions, tokens, *, target_tokens=None, image=None, title=None, batch=None,
         dtype: str = "float32") -> Path:
    """Check the maps and write them to ``path`` (``.npz``, or ``.safetensors`` with the tokens in its metadata)
    for ``attnviz PATH`` to open; returns the path. The file is written whole or not at all."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{path.name}: save maps as .npz or .safetensors (got {suffix or 'no suffix'!r})")
    fields = prepare(attentions, tokens, target_tokens=target_tokens, image=image, title=title, batch=batch,
                     dtype=dtype)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ValueError(f"cannot save {path.name}: the folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            (write_npz if suffix == ".npz" else _write_safetensors)(fh, fields)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


# ------------------------------------------------------------------------------------------------
# the layers x heads grid as a PNG, without Qt

# viridis, 256 RGB entries (the table of attnviz.ui.colormaps, CC0 like matplotlib's)
_VIRIDIS_HEX = (
    "44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769"
    "48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a"
    "472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85"
    "4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b"
    "3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d"
    "33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e"
    "2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e"
    "26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d"
    "21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88"
    "1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81"
    "28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74"
    "3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863"
    "5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d"
    "84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32"
    "addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a"
    "d8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725"
)
_BACKGROUND = (0x1B, 0x1B, 0x1B)  # the dark theme's plot background
_FOREGROUND = (0xD0, 0xD0, 0xD0)


def viridis() -> np.ndarray:
    """(256, 3) uint8 viridis lookup table."""
    return np.frombuffer(bytes.fromhex("".join(_VIRIDIS_HEX)), dtype=np.uint8).reshape(256, 3)


def _fit(m: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """``m`` (Tq, Tk) drawn into rows x cols cells: nearest neighbour where it is smaller, the max of each
    block where it is larger (so a single strong weight is never lost)."""
    def axis(n: int, out: int):
        if n <= out:
            return np.minimum((np.arange(out) * n) // out, n - 1), None
        return None, (np.arange(out) * n) // out  # block starts

    ri, rb = axis(m.shape[0], rows)
    m = m[ri] if ri is not None else np.maximum.reduceat(m, rb, axis=0)
    ci, cb = axis(m.shape[1], cols)
    return m[:, ci] if ci is not None else np.maximum.reduceat(m, cb, axis=1)


def grid_image(maps: np.ndarray, cell: int | None = None):
    """A Pillow RGB image of the layers x heads grid of ``maps`` (L, nh, Tq, Tk): each map in viridis, scaled
    from 0 to its own largest weight, rows = layers (L0 at the top), columns = heads."""
    from PIL import Image, ImageDraw

    a = np.asarray(maps)
    L, nh, Tq, Tk = a.shape
    if cell is None:
        cell = int(np.clip(960 // max(nh, 1), 24, 96))
    aspect = Tq / Tk
    ch, cw = (cell, max(4, round(cell / aspect))) if aspect >= 1 else (max(4, round(cell * aspect)), cell)
    gap, left, top = 3, 30, 16
    width, height = left + nh * (cw + gap), top + L * (ch + gap)
    canvas = np.empty((height, width, 3), dtype=np.uint8)
    canvas[:] = _BACKGROUND
    table = viridis()
    for layer in range(L):
        for head in range(nh):
            m = _fit(np.asarray(a[layer, head]), ch, cw).astype(np.float64)  # pooled first: no copy of a long map
            hi = m.max()
            idx = np.zeros(m.shape, dtype=np.uint8) if hi <= 0 else np.clip(m / hi * 255.0 + 0.5, 0, 255).astype(np.uint8)
            y, x = top + layer * (ch + gap), left + head * (cw + gap)
            canvas[y:y + ch, x:x + cw] = table[idx]
    img = Image.fromarray(canvas, "RGB")
    draw = ImageDraw.Draw(img)
    for head in range(nh):
        draw.text((left + head * (cw + gap) + 2, 2), f"h{head}", fill=_FOREGROUND)
    for layer in range(L):
        draw.text((2, top + layer * (ch + gap) + ch // 2 - 5), f"L{layer}", fill=_FOREGROUND)
    return img


def grid_png(maps: np.ndarray, cell: int | None = None) -> bytes:
    """The PNG bytes of :func:`grid_image`."""
    import io

    buf = io.BytesIO()
    grid_image(maps, cell).save(buf, format="PNG")
    return buf.getvalue()


class Shown:
    """What :func:`show` returns: the file written, the application's process and, for a notebook, the
    layers x heads grid as a PNG (``_repr_png_``, which IPython draws inline)."""

    def __init__(self, path: Path, process, maps: np.ndarray):
        self.path = path
        self.process = process
        self._maps = maps
        self._png: bytes | None = None

    def png(self) -> bytes:
        if self._png is None:
            self._png = grid_png(self._maps)
        return self._png

    def _repr_png_(self) -> bytes:
        return self.png()

    def __repr__(self) -> str:
        L, nh, Tq, Tk = self._maps.shape
        return f"<attnviz window on {self.path} ({L} layers x {nh} heads, {Tq} x {Tk} tokens)>"


def app_command(path) -> list[str]:
    """The command that opens the desktop application on ``path`` (this Python's ``-m attnviz``)."""
    return [sys.executable, "-m", "attnviz", str(path)]


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    try:
        shell = get() if get is not None else None
    except Exception:  # noqa: BLE001
        return False
    return shell is not None and type(shell).__name__ != "TerminalInteractiveShell"


def show(attentions, tokens, *, target_tokens=None, image=None, title=None, batch=None, folder=None):
    """Check the maps, save them to a temporary ``.npz`` (in ``folder`` if given) and open the desktop
    application on it in a new process; returns at once with a :class:`Shown` (in a notebook the grid PNG
    is drawn inline as the cell's result)."""
    folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="attnviz-maps-"))
    stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in (title or "attention"))[:60] or "attention"
    path = save(folder / f"{stem}.npz", attentions, tokens, target_tokens=target_tokens, image=image,
                title=title, batch=batch)
    kwargs = {"stdin": subprocess.DEVNULL}
    if os.name == "posix":
        kwargs["start_new_session"] = True  # the window outlives a notebook kernel's interrupt
    process = subprocess.Popen(app_command(path), **kwargs)
    maps = np.load(path, allow_pickle=False)["attentions"]
    shown = Shown(path, process, maps)
    if _in_notebook():
        shown.png()  # drawn now, so the cell's result appears with it
    return shown
