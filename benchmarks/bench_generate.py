"""Generation speed: NEW tokens after a PROMPT-token prompt on a Qwen2.5-0.5B-shaped decoder (random bf16
weights), greedy, every step's attention kept; attnviz against transformers' ``generate`` on the same CPU
and threads, each in its own process.

    # once: a throw-away venv with torch and transformers (attnviz never imports them)
    python3 -m venv /tmp/gold && /tmp/gold/bin/pip install torch==2.13.0 transformers
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_generate.py \\
        --torch-python /tmp/gold/bin/python [--folder /tmp/qwen05b] [--prompt 512] [--new 128] [--threads 2]

The checkpoint (24 layers, d 896, 14 query heads and 2 key/value heads of 64, d_ff 4864, vocabulary
151,936, tied head, q/k/v biases: 494 M weights, 0.9 GiB bf16) is written once by attnviz's own
writer (benchmarks/bench_decoder.py). attnviz runs ``generate(config, weights, ids, max_new_tokens=NEW)``
(checkpoints.generate: a key/value cache, bf16 matrices read as stored, every step's attention rows kept
in (L, nh, T, T)); transformers 5.24 runs ``Qwen2ForCausalLM.from_pretrained(DIR, dtype=torch.float32,
attn_implementation="eager").generate(ids, do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW,
output_attentions=True, return_dict_in_generate=True)``. Reported: the prompt pass, the new tokens per
second after it, load time and peak resident memory; both after one short warm-up generation.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
          "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
          "vocab_size": 151936, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
          "hidden_act": "silu", "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": True,
          "bos_token_id": 151643, "eos_token_id": 151643}


def vmem(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def prompt_ids(n: int) -> np.ndarray:
    return np.random.default_rng(1).integers(0, 150000, n).astype(np.int64)


def make(folder: Path) -> None:
    sys.path.insert(0, str(HERE.parent))
    from bench_decoder import write_checkpoint

    folder.mkdir(parents=True, exist_ok=True)
    n = write_checkpoint(folder, CONFIG, "bf16")
    print(f"wrote {folder}: {n / 1e6:.0f} M weights")


def run_attnviz(folder: Path, n_prompt: int, n_new: int, threads: int) -> dict:
    from attnviz.checkpoints.config import parse_model_config
    from attnviz.checkpoints.generate import generate
    from attnviz.checkpoints.weights import load_weights
    from attnviz.engine import set_num_threads

    set_num_threads(threads)
    t0 = time.perf_counter()
    c = parse_model_config(json.loads((folder / "config.json").read_text()))
    w = load_weights(folder / "model.safetensors", c, lazy=True)
    t_load = time.perf_counter() - t0
    ids = prompt_ids(n_prompt)
    generate(c, w, ids[:16], max_new_tokens=4)  # warm-up: kernels loaded from the cache
    stamps = []
    t0 = time.perf_counter()
    res = generate(c, w, ids, max_new_tokens=n_new, on_step=lambda i, t: stamps.append(time.perf_counter()))
    t_all = time.perf_counter() - t0
    t_prompt = stamps[0] - t0
    return {"who": "attnviz", "load_s": t_load, "prompt_s": t_prompt, "total_s": t_all,
            "tok_s": (len(stamps) - 1) / (stamps[-1] - stamps[0]), "generated": res.generated.tolist(),
            "peak_mib": vmem("VmHWM:") / 2**20, "attentions": list(res.attentions.shape)}


def run_transformers(folder: Path, n_prompt: int, n_new: int, threads: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, StoppingCriteria, StoppingCriteriaList

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    t_load = time.perf_counter() - t0
    ids = torch.tensor(prompt_ids(n_prompt))[None]
    stamps = []

    class Stamp(StoppingCriteria):
        def __call__(self, input_ids, scores, **kw):
            stamps.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)

    kw = dict(do_sample=False, output_attentions=True, return_dict_in_generate=True, pad_token_id=0)
    with torch.inference_mode():
        model.generate(ids[:, :16], max_new_tokens=4, min_new_tokens=4, **kw)
        t0 = time.perf_counter()
        out = model.generate(ids, max_new_tokens=n_new, min_new_tokens=n_new,
                             stopping_criteria=StoppingCriteriaList([Stamp()]), **kw)
        t_all = time.perf_counter() - t0
    gen = out.sequences[0, n_prompt:].tolist()
    return {"who": "transformers", "load_s": t_load, "prompt_s": stamps[0] - t0, "total_s": t_all,
            "tok_s": (len(stamps) - 1) / (stamps[-1] - stamps[0]), "generated": gen,
            "peak_mib": vmem("VmHWM:") / 2**20, "torch": torch.__version__}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", default="all", choices=("all", "make", "attnviz", "transformers"))
    ap.add_argument("--folder", type=Path, default=Path("/tmp/qwen05b"))
    ap.add_argument("--torch-python", default="/tmp/gold/bin/python")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.what == "make":
        make(a.folder)
        return 0
    if a.what in ("attnviz", "transformers"):
        fn = run_attnviz if a.what == "attnviz" else run_transformers
        print(json.dumps(fn(a.folder, a.prompt, a.new, a.threads)))
        return 0
    if not (a.folder / "model.safetensors").is_file():
        make(a.folder)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    rows = []
    for python, who in ((sys.executable, "attnviz"), (a.torch_python, "transformers")):
        out = subprocess.run([python, str(HERE), who, "--folder", str(a.folder), "--prompt", str(a.prompt),
                              "--new", str(a.new), "--threads", str(a.threads)], check=True, capture_output=True,
                             text=True, env=env)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    with open("/proc/cpuinfo", encoding="ascii") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "unknown CPU")
    print(f"CPU: {cpu}, {a.threads} threads; {a.prompt}-token prompt, {a.new} new tokens, greedy")
    for r in rows:
        print(f"{r['who']:>12}: prompt pass {r['prompt_s']:.2f} s, then {r['tok_s']:.2f} tokens/s "
              f"({r['total_s']:.1f} s in all); load {r['load_s']:.1f} s; peak resident {r['peak_mib']:.0f} MiB")
    av, tf = rows
    same = sum(x == y for x, y in zip(av["generated"], tf["generated"]))
    print(f"tokens/s attnviz / transformers: {av['tok_s'] / tf['tok_s']:.2f}x (aim >= 1.0); "
          f"greedy tokens equal: {same} of {len(tf['generated'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
