"""What the engine is compared with: a block-sparse test mask, plain numpy attention, and torch SDPA on its
CPU fast path when torch is importable."""

from __future__ import annotations

import numpy as np


def sparse_tile_mask(T: int, block_m: int, block_n: int, empty: float, seed: int) -> np.ndarray:
    """(T, T) bool mask made of whole tiles, about ``empty`` of them empty; the diagonal tiles stay."""
    rng = np.random.default_rng(seed)
    nQ, nK = -(-T // block_m), -(-T // block_n)
    diag = np.zeros((nQ, nK), dtype=bool)  # (nQ, nK) tiles holding a diagonal cell
    rows = np.arange(T)
    diag[rows // block_m, rows // block_n] = True
    free = ~diag
    n_empty = min(int(round(empty * nQ * nK)), int(free.sum()))
    keep = np.ones((nQ, nK), dtype=bool)  # (nQ, nK)
    keep.flat[rng.choice(np.flatnonzero(free), size=n_empty, replace=False)] = False
    # np.repeat keeps the result C-contiguous (fancy indexing along axis 1 would not: a copy in every call)
    return np.repeat(np.repeat(keep, block_m, axis=0)[:T], block_n, axis=1)[:, :T].copy()  # (T, T)


def numpy_attention(q, k, v, mask, scale):
    """Plain numpy attention one head at a time (bounded memory): the baseline a user would write."""
    out = np.empty((q.shape[0], q.shape[1], v.shape[2]), dtype=q.dtype)  # (nh, T, hv)
    for h in range(q.shape[0]):
        s = q[h] @ k[h].T  # (T, T)
        s *= q.dtype.type(scale)
        if mask is not None:
            s[~mask] = -np.inf
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        np.matmul(s, v[h], out=out[h])
    return out


def import_torch():
    try:
        import torch  # optional: only to compare against
    except ImportError:
        return None
    return torch


def sdpa_calls(torch, q, k, v, masks: dict, threads: int) -> tuple[dict, dict]:
    """torch SDPA on its CPU fast path, per mask name: ({name: callable}, {name: backend name}).

    q, k, v (nh, T, hs) float32 become contiguous (1, nh, T, hs) tensors, the (batch, heads, T, hs)
    layout of torch's CPU flash kernel (3-D inputs were seen on the slow math path); a bool mask becomes a (1, 1, T, T) ``attn_mask``, the causal
    one ``is_causal=True``. Each call runs under ``sdpa_kernel(FLASH_ATTENTION)`` when torch's own choice
    for it is that kernel, so a silent fallback to the math path would raise instead of being timed.
    """
    F = torch.nn.functional
    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(a[None])) for a in (q, k, v))  # (1, nh, T, hs)
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # an old torch: run it as it comes
        SDPBackend = sdpa_kernel = None
    calls, backends = {}, {}
    for name, m in masks.items():
        if name == "dense":
            kw = {}
        elif name == "causal":
            kw = {"is_causal": True}
        else:
            kw = {"attn_mask": torch.from_numpy(np.ascontiguousarray(m))[None, None]}  # (1, 1, T, T)
        backend = "default"
        if SDPBackend is not None and hasattr(torch, "_fused_sdp_choice"):
            backend = SDPBackend(int(torch._fused_sdp_choice(tq, tk, tv, **kw))).name

        def call(kw=kw, backend=backend):
            # again before every call: numba's parallel kernels in between reset the OpenMP thread count
            # torch's kernels read when both use the same OpenMP runtime
            torch.set_num_threads(threads)
            with torch.inference_mode():
                if backend == "FLASH_ATTENTION":
                    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                        return F.scaled_dot_product_attention(tq, tk, tv, **kw)
                return F.scaled_dot_product_attention(tq, tk, tv, **kw)

        calls[name], backends[name] = call, backend
    return calls, backends


def tile_table(mask: np.ndarray, block_m: int, block_n: int) -> np.ndarray | None:
    """(nQ, nK) bool: which (block_m x block_n) tiles of ``mask`` are allowed, when the mask is made of whole tiles
    (as :func:`sparse_tile_mask` makes it); None when it is not."""
    T, S = mask.shape
    table = np.ascontiguousarray(mask[::block_m, ::block_n])  # (nQ, nK) each tile's first cell
    whole = np.repeat(np.repeat(table, block_m, axis=0)[:T], block_n, axis=1)[:, :S]
    return table if np.array_equal(whole, mask) else None


def flex_calls(torch, q, k, v, masks: dict, threads: int, tiles: dict | None = None) -> tuple[dict, dict, dict]:
    """Compiled FlexAttention (``torch.compile(flex_attention)``) per mask name: ({name: callable}, {name: note},
    {name: seconds of its first call}), or three empty dicts when this torch has no FlexAttention.

    The dense mask runs without a BlockMask, the causal one with ``q_idx >= kv_idx``, a mask made of whole
    tiles (``tiles``: name -> (block_m, block_n)) with a ``mask_mod`` reading its small tile table, as one writes a
    block-sparse mask for FlexAttention, any other bool mask with one reading the (T, T) mask; each BlockMask is made once (``create_block_mask``, torch's 128 x 128
    blocks). The first call of each compiles its kernel: that time is returned apart and never timed
    with the calls. A mask whose compilation fails (no C++ compiler, say) is left out with its reason as
    its note."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError:
        return {}, {}, {}
    import time

    tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(a[None])) for a in (q, k, v))  # (1, nh, T, hs)
    T = q.shape[1]
    compiled = torch.compile(flex_attention, dynamic=False)
    calls, notes, first = {}, {}, {}
    for name, m in masks.items():
        torch.set_num_threads(threads)
        t0 = time.perf_counter()
        how = ""
        try:
            if name == "dense":
                block = None
            elif name == "causal":
                block = create_block_mask(lambda b, h, qi, ki: qi >= ki, 1, 1, T, T, device="cpu")
            else:
                bm, bn = (tiles or {}).get(name, (0, 0))
                table = tile_table(m, bm, bn) if bm else None
                if table is not None:
                    tt = torch.from_numpy(table)  # (nQ, nK) bool

                    def mask_mod(b, h, qi, ki, tt=tt, bm=bm, bn=bn):
                        return tt[qi // bm, ki // bn]
                    how = f", mask_mod reads a {table.shape[0]}x{table.shape[1]} tile table"
                else:
                    tt = torch.from_numpy(np.ascontiguousarray(m))  # (T, T) bool

                    def mask_mod(b, h, qi, ki, tt=tt):
                        return tt[qi, ki]
                    how = ", mask_mod reads the (T, T) mask"
                block = create_block_mask(mask_mod, 1, 1, T, T, device="cpu")
            with torch.inference_mode():
                compiled(tq, tk, tv, block_mask=block)
        except Exception as exc:  # noqa: BLE001 - a missing compiler or an old torch: the row is left out
            notes[name] = f"not run: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
            continue
        first[name] = time.perf_counter() - t0

        def call(block=block):
            torch.set_num_threads(threads)  # numba's kernels in between may reset the OpenMP thread count
            with torch.inference_mode():
                return compiled(tq, tk, tv, block_mask=block)

        calls[name] = call
        notes[name] = ("compiled, no BlockMask" if block is None else "compiled, BlockMask 128x128") + how + \
            f"; first call {first[name]:.1f} s"
    return calls, notes, first
