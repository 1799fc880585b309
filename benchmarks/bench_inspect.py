"""Every map of a long input, the whole path a user waits for: ``attnviz-cli model inspect`` against the
transformers script a user would run instead, each a fresh process, wall time and peak resident memory.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_inspect.py \
        --torch-python /tmp/gold/bin/python [--tokens 4096,8192] [--layers 2 --heads 4 --kv-heads 2 --hs 64]
        [--dtype bf16|f32] [--threads 2] [--repeat 1]

A Llama-shaped checkpoint with random weights (std 0.02, norm gains 1; bf16 by default, one safetensors
file) and the tokenizer of ``tests/data/checkpoints/tiny_llama`` is written to a temporary folder. The text is
that tokenizer's pieces repeated until it has T tokens with its ``<s>``. Four processes per T, in one run:

- ``attnviz-cli model inspect DIR --text TEXT --npz OUT``: the default path (kernel auto), every map
  (layers, heads, T, T) float32 written to an .npz;
- the same with ``--kernel reference`` (the float64 kernel, only when asked for);
- transformers: ``AutoModelForCausalLM.from_pretrained(DIR, dtype=torch.float32,
  attn_implementation="eager")``, ``model(ids, output_attentions=True)`` under ``torch.no_grad()``, the maps
  stacked and written with ``np.savez``;
- transformers with ``attn_implementation="sdpa"`` keeping no maps (the aim: no slower than this).

Every process runs with the same thread count (OMP/OpenBLAS/MKL variables and ``torch.set_num_threads``).
Reported: wall seconds of the process (start, imports, load, tokenising, the pass, writing) and its peak
resident set (``/usr/bin/time``'s maximum RSS), and the ratios to eager measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_decoder import write_checkpoint  # noqa: E402

TOKENIZER = ROOT / "tests" / "data" / "checkpoints" / "tiny_llama"

TORCH_SCRIPT = r"""
import sys, time, json
import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, text, impl, out, threads = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3], sys.argv[4], int(sys.argv[5])
torch.set_num_threads(threads)
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation=impl).eval()
ids = tok(text, return_tensors="pt").input_ids
t0 = time.perf_counter()
with torch.no_grad():
    res = model(ids, output_attentions=impl == "eager", use_cache=False)
t_pass = time.perf_counter() - t0
if impl == "eager":
    maps = torch.stack([a[0] for a in res.attentions]).numpy()  # (L, H, T, T) float32
    np.savez(out, attentions=maps, ids=ids[0].numpy())
print(json.dumps({"tokens": int(ids.shape[1]), "pass": t_pass}))
"""


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def make_text(n_tokens: int) -> str:
    """A text of n_tokens tokens (its <s> counted) in tiny_llama's tokenizer."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER / "tokenizer.json"))
    words = "the river bank was steep and the water ran fast under the old stone bridge".split()
    text, i = "", 0
    while len(tok.encode(text).ids) < n_tokens:
        text += ("" if not text else " ") + words[i % len(words)]
        i += 1
    while len(tok.encode(text).ids) > n_tokens:
        text = text[:-1].rstrip()
    return text


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(wall s, peak RSS MiB, stdout) of one process run under /usr/bin/time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", tf.name, *cmd], capture_output=True, text=True,
                           env=env, check=False)
        wall = time.perf_counter() - t0
        if p.returncode:
            raise SystemExit(f"{cmd[0]} failed ({p.returncode}):\n{p.stderr[-2000:]}")
        rss = int(tf.read().strip().splitlines()[-1]) / 1024
    return wall, rss, p.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-python", help="a Python with torch and transformers (no transformers rows without)")
    ap.add_argument("--tokens", default="4096,8192")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--hs", type=int, default=64)
    ap.add_argument("--dtype", choices=("bf16", "f32"), default="bf16")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each process (the best is reported)")
    ap.add_argument("--no-reference", action="store_true", help="skip the float64 reference kernel's run")
    a = ap.parse_args()
    sizes = [int(t) for t in a.tokens.split(",")]
    d = a.heads * a.hs
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": d,
           "intermediate_size": 64 * -(-8 * d // 192), "num_hidden_layers": a.layers,
           "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "head_dim": a.hs, "vocab_size": 194,
           "bos_token_id": 1, "eos_token_id": 2, "max_position_embeddings": max(sizes), "rms_norm_eps": 1e-5,
           "rope_theta": 500000.0, "tie_word_embeddings": False, "hidden_act": "silu"}
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        env[k] = str(a.threads)
    cli = str(Path(sys.executable).with_name("attnviz-cli"))
    print(f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs, {a.threads} threads per process, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"model: {a.layers} layers x {a.heads} heads ({a.kv_heads} kv) x hs {a.hs}, {a.dtype} weights")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "llama"
        folder.mkdir()
        write_checkpoint(folder, cfg, a.dtype)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(TOKENIZER / name, folder / name)
        (folder / "config.json").write_text(json.dumps(cfg))
        for T in sizes:
            text_file = Path(tmp) / f"text{T}.txt"
            text_file.write_text(make_text(T))
            text = text_file.read_text()
            runs = {"attnviz (default: auto)": [cli, "model", "inspect", str(folder), "--text", text,
                                                "--npz", str(Path(tmp) / "a.npz")]}
            if not a.no_reference:
                runs["attnviz --kernel reference"] = [*runs["attnviz (default: auto)"], "--kernel", "reference"]
            if a.torch_python:
                for impl in ("eager", "sdpa"):
                    runs[f"transformers {impl}" + (" + output_attentions" if impl == "eager" else ", no maps")] = [
                        a.torch_python, "-c", TORCH_SCRIPT, str(folder), str(text_file), impl,
                        str(Path(tmp) / "t.npz"), str(a.threads)]
            res = {}
            for label, cmd in runs.items():
                best = None
                for _ in range(a.repeat):
                    wall, rss, _ = timed(cmd, env)
                    best = (wall, rss) if best is None or wall < best[0] else best
                res[label] = best
                print(f"T = {T:>6,}  {label:<42} {best[0]:7.2f} s  peak {best[1]:7.0f} MiB", flush=True)
            eager = res.get("transformers eager + output_attentions")
            if eager:
                for label, (wall, rss) in res.items():
                    if label.startswith("attnviz"):
                        print(f"T = {T:>6,}  {label}: {wall / eager[0]:.2f}x eager's time, {rss / eager[1]:.2f}x its "
                              f"peak memory; {wall / res['transformers sdpa, no maps'][0]:.2f}x SDPA's time")
            rows.append({"tokens": T, **{k: {"s": v[0], "mib": v[1]} for k, v in res.items()}})
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
