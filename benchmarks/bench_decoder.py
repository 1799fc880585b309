"""Decoder LLMs on long inputs: time and peak memory of a T-token pass keeping q, k and lse per layer.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_decoder.py \
        [--layers 2 --heads 4 --kv-heads 2 --hs 64 --tokens 4096] [--d-ff N] [--vocab N] [--dtype bf16|f32]

A Llama-shaped checkpoint with random weights (std 0.02, norm gains 1) is written to a temporary
folder as safetensors (bf16 by default, one file) with a config.json, then loaded as any folder is
(memory-mapped) and run on ``--tokens`` random token ids through the flash kernel under the causal
TiledMask (``forward_decoder(..., keep="qk")``).  Reported: load time and resident memory after
loading (all of it, and the private part: the file's pages read by the finite check are shared,
reclaimable page cache, not a copy); the pass's time and peak extra memory (resident-set high-water growth, /proc/self); the
per-head summaries with thumbnails (tile by tile in the engine, and band by band in numpy as before) and one 1024 x 1024 max overview of the last layer's
first head.  Tokenising is not included (random ids).  Wall and CPU seconds are both printed: on a
shared machine the CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from attnviz.checkpoints.config import parse_model_config
from attnviz.checkpoints.decoder import forward_decoder
from attnviz.checkpoints.decoder_run import DecoderAttention
from attnviz.checkpoints.weights import expected_tensors, load_weights
from attnviz.engine.runtime import process_memory


class Peak:
    """Extra resident memory of a block in MiB (VmHWM after, reset before, minus VmRSS before)."""

    def __enter__(self):
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        self.rss0 = process_memory("VmRSS:")
        return self

    def __exit__(self, *exc):
        self.mib = (process_memory("VmHWM:") - self.rss0) / 2**20


def write_checkpoint(folder: Path, cfg: dict, dtype: str, seed: int = 0) -> int:
    """Random weights for ``cfg`` as one safetensors file; returns the number of weights."""
    c = parse_model_config(cfg)
    shapes = {f"model.{k}": v for k, v in expected_tensors(c).items()}
    rng = np.random.default_rng(seed)
    header, off = {}, 0
    item = 2 if dtype == "bf16" else 4
    for name, shape in shapes.items():
        n = math.prod(shape) * item
        header[name] = {"dtype": "BF16" if dtype == "bf16" else "F32", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(folder / "model.safetensors", "wb") as fh:
        fh.write(len(raw).to_bytes(8, "little") + raw)
        for name, shape in shapes.items():
            rows = shape[0]
            step = max(1, (1 << 22) // max(1, math.prod(shape[1:])))
            for r0 in range(0, rows, step):
                part = (rng.standard_normal((min(step, rows - r0), *shape[1:]), dtype=np.float32) * 0.02
                        if "norm" not in name else np.ones((min(step, rows - r0), *shape[1:]), np.float32))
                fh.write(((part.view(np.uint32) >> 16).astype(np.uint16) if dtype == "bf16" else part).tobytes())
    (folder / "config.json").write_text(json.dumps(cfg))
    return sum(math.prod(s) for s in shapes.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--hs", type=int, default=64)
    ap.add_argument("--d-ff", type=int, default=0, help="MLP width (default 8/3 d_model rounded to 64)")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    ap.add_argument("--no-summaries", action="store_true")
    a = ap.parse_args()
    d = a.heads * a.hs
    ff = a.d_ff or 64 * math.ceil(8 * d / 3 / 64)
    cfg = {"model_type": "llama", "hidden_size": d, "intermediate_size": ff, "num_hidden_layers": a.layers,
           "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "vocab_size": a.vocab,
           "max_position_embeddings": max(4096, a.tokens), "rms_norm_eps": 1e-5, "rope_theta": 500000.0}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        n = write_checkpoint(folder, cfg, a.dtype)
        t_write = time.perf_counter() - t0
        rss0, anon0 = process_memory("VmRSS:"), process_memory("RssAnon:")
        t0 = time.perf_counter()
        c = parse_model_config(cfg)
        w = load_weights(folder / "model.safetensors", c, lazy=True)  # as load_checkpoint does (no tokenizer here)
        t_load = time.perf_counter() - t0
        rss_load = (process_memory("VmRSS:") - rss0) / 2**20
        anon_load = (process_memory("RssAnon:") - anon0) / 2**20  # private memory: what a copy of the weights would cost
        ids = np.random.default_rng(1).integers(0, a.vocab, a.tokens)
        forward_decoder(c, w, ids[:256], keep="qk")  # warm-up: numba kernels compiled or loaded from the cache
        with Peak() as pk:
            t0, c0 = time.perf_counter(), time.process_time()
            trace, hidden = forward_decoder(c, w, ids, keep="qk")
            t_pass, c_pass = time.perf_counter() - t0, time.process_time() - c0
        kept = sum(x.nbytes for x in trace.q + trace.k + trace.lse) / 2**20
        print(f"model: {a.layers} layers x {a.heads} heads ({a.kv_heads} kv) x hs {a.hs}, d_model {d}, d_ff {ff}, "
              f"vocab {a.vocab}: {n / 1e6:.1f} M weights, {a.dtype} ({(folder / 'model.safetensors').stat().st_size / 2**20:.0f} MiB file, written in {t_write:.1f} s)")
        print(f"load (memory-mapped, every tensor checked finite): {t_load:.2f} s, resident +{rss_load:.0f} MiB "
              f"of which private (not file pages) +{anon_load:.0f} MiB")
        print(f"{a.tokens} tokens, flash under the causal TiledMask, keeping q, k, lse: {t_pass:.2f} s ({c_pass:.2f} s CPU), "
              f"peak +{pk.mib:.0f} MiB (q/k/lse kept: {kept:.1f} MiB)")
        res = DecoderAttention(model="bench", tokens=["t"] * a.tokens, labels=["t"] * a.tokens,
                               special=np.zeros(a.tokens, bool), ids=ids, spans=[(0, 0)] * a.tokens, hidden=hidden,
                               n_layer=a.layers, n_head=a.heads, group=a.heads // a.kv_heads,
                               windows=(0,) * a.layers, scale=a.hs ** -0.5, trace=trace)
        t0 = time.perf_counter()
        res.overview(a.layers - 1, 0, (1024, 1024))
        print(f"one 1024 x 1024 max overview: {time.perf_counter() - t0:.2f} s")
        if not a.no_summaries:
            res.summaries_and_thumbnails(64)  # compiled or loaded from the cache
            for tiles, how in ((True, "tile by tile in the engine"), (False, "bands of weights reduced in numpy")):
                with Peak() as pk:
                    t0, c0 = time.perf_counter(), time.process_time()
                    res.summaries_and_thumbnails(256, tiles=tiles)
                print(f"per-head summaries + 256 x 256 thumbnails of all {a.layers * a.heads} heads, {how}: "
                      f"{time.perf_counter() - t0:.2f} s ({time.process_time() - c0:.2f} s CPU), peak +{pk.mib:.0f} MiB")
        print(f"process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
