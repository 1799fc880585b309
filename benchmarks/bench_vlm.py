"""A PaliGemma-3B-shaped vision-language pass keeping every attention map: attnviz against transformers' eager
forward with ``output_attentions=True``, on the same CPU and threads, each in its own process.

    # once: a throw-away venv with torch and transformers (attnviz never imports them)
    python3 -m venv /tmp/gold && /tmp/gold/bin/pip install torch==2.13.0 transformers pillow numpy
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_vlm.py \
        --torch-python /tmp/gold/bin/python [--folder /tmp/paligemma3b] [--threads 2] [--repeat 3]

``make`` (run by the torch interpreter) writes the checkpoint: PaliGemma-3B's shapes (SigLIP So400m/14 at
224 px, 27 layers, d 1152, 16 heads: 256 image tokens; Gemma 2B: 18 layers, d 2048, 8 query heads and one
key/value head of 256, d_ff 16,384, vocabulary 257,216), random bf16 weights (std 0.02, norm gains 0) in
one safetensors file under 5.24's tensor names (read off the model built on torch's meta device), a small
trained tokenizer carrying ``<image>`` and the processor's files. ``attnviz`` and ``transformers`` each time
the whole pass a user waits for after loading (processor, vision tower, projector, language model, every map
kept) ``--repeat`` times after one warm-up, and report the median and the process's peak resident memory
(VmHWM) above what it held after loading. attnviz computes in float32 from the memory-mapped bf16 weights;
transformers is loaded with ``dtype=torch.float32`` (bf16 weights converted once at load). attnviz runs
twice: on the user's kernel cache (warm after ``make setup`` / ``attnviz-cli warmup``) and on an empty one,
what a fresh installation's first pass waits for (``--no-cold`` skips that run).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PROMPT = "describe the picture in detail, then say where the red square is"
HERE = Path(__file__).resolve()


def vmem(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
        f.write("5")


def picture() -> np.ndarray:
    y, x = np.mgrid[0:300, 0:400]
    img = np.stack([x * 255 // 399, y * 255 // 299, (x + y) * 127 // 698], -1).astype(np.uint8)
    img[80:160, 150:260] = (230, 20, 20)
    return img


# ---- make (torch interpreter) ---------------------------------------------------------------------

def make(folder: Path) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import (GemmaConfig, GemmaTokenizer, PaliGemmaConfig, PaliGemmaForConditionalGeneration,
                              PaliGemmaProcessor, SiglipImageProcessorPil, SiglipVisionConfig)

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    words = (PROMPT + " the a picture image red blue square left right top bottom corner of in on is").split()
    tok.train_from_iterator([" ".join(words)] * 4, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<pad>", "<eos>", "<bos>", "<unk>"], show_progress=False))
    spec = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]
    gtok = GemmaTokenizer(vocab=spec["vocab"], merges=merges)
    gtok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    vision = SiglipVisionConfig(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27, num_attention_heads=16,
                                patch_size=14, image_size=224, projection_dim=2048, hidden_act="gelu_pytorch_tanh")
    text = GemmaConfig(vocab_size=257216, hidden_size=2048, intermediate_size=16384, num_hidden_layers=18,
                       num_attention_heads=8, num_key_value_heads=1, head_dim=256, max_position_embeddings=8192,
                       hidden_activation="gelu_pytorch_tanh")
    cfg = PaliGemmaConfig(vision_config=vision, text_config=text, image_token_index=gtok.convert_tokens_to_ids("<image>"),
                          projection_dim=2048, hidden_size=2048)
    with torch.device("meta"):
        model = PaliGemmaForConditionalGeneration(cfg)
    cfg.save_pretrained(folder)
    ip = SiglipImageProcessorPil(size={"height": 224, "width": 224})
    ip.image_seq_length = 256  # (224 / 14)^2: PaliGemmaProcessor reads it off its image processor
    proc = PaliGemmaProcessor(image_processor=ip, tokenizer=gtok)
    proc.save_pretrained(folder)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items() if not k.endswith("lm_head.weight")}
    rng = np.random.default_rng(0)
    header, off = {}, 0
    for name, shape in shapes.items():
        n = math.prod(shape) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(folder / "model.safetensors", "wb") as fh:
        fh.write(len(raw).to_bytes(8, "little") + raw)
        for name, shape in shapes.items():
            rows, inner = shape[0], math.prod(shape[1:])
            step = max(1, (1 << 22) // max(1, inner))
            for r0 in range(0, rows, step):
                sub = (min(step, rows - r0), *shape[1:])
                if "vision_tower" in name and "norm" in name:  # SigLIP's LayerNorms: gain 1, bias 0
                    part = np.full(sub, 1.0 if name.endswith("weight") else 0.0, np.float32)
                elif "norm" in name:  # Gemma's RMSNorms scale by (1 + w)
                    part = np.zeros(sub, np.float32)
                else:
                    part = rng.standard_normal(sub, dtype=np.float32) * 0.02
                fh.write((part.view(np.uint32) >> 16).astype(np.uint16).tobytes())
    print(f"wrote {folder}: {sum(math.prod(s) for s in shapes.values()) / 1e9:.2f} B weights, "
          f"{(folder / 'model.safetensors').stat().st_size / 2**30:.1f} GiB bf16")


# ---- the two passes --------------------------------------------------------------------------------

def run_attnviz(folder: Path, repeat: int, threads: int) -> dict:
    from attnviz.checkpoints import load_checkpoint
    from attnviz.engine import set_num_threads

    set_num_threads(threads)
    t0 = time.perf_counter()
    ck = load_checkpoint(folder)
    t_load = time.perf_counter() - t0
    img = picture()
    t0 = time.perf_counter()
    ck.run([img], PROMPT)  # the first pass: kernels loaded from the cache, bf16 weights widened (and kept)
    t_first = time.perf_counter() - t0
    rss_loaded = vmem("VmRSS:")
    times = []
    reset_peak()
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = ck.run([img], PROMPT)
        times.append(time.perf_counter() - t0)
    return {"who": "attnviz", "load_s": t_load, "first_s": t_first, "kept_mib": ck.weights.kept_bytes / 2**20,
            "median_s": statistics.median(times), "times": times,
            "peak_extra_mib": (vmem("VmHWM:") - rss_loaded) / 2**20, "rss_loaded_mib": rss_loaded / 2**20,
            "tokens": int(res.T), "maps": list(res.attentions.shape)}


def run_transformers(folder: Path, repeat: int, threads: int) -> dict:
    import torch
    from PIL import Image
    from transformers import AutoProcessor, PaliGemmaForConditionalGeneration

    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    model = PaliGemmaForConditionalGeneration.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    proc = AutoProcessor.from_pretrained(folder)
    t_load = time.perf_counter() - t0
    img = Image.fromarray(picture())

    def once():
        batch = proc(images=img, text=PROMPT, return_tensors="pt")
        with torch.inference_mode():
            return model(**batch, output_attentions=True)

    t0 = time.perf_counter()
    once()
    t_first = time.perf_counter() - t0
    rss_loaded = vmem("VmRSS:")
    times = []
    reset_peak()
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = once()
        times.append(time.perf_counter() - t0)
    a = out.attentions
    return {"who": "transformers", "load_s": t_load, "first_s": t_first, "median_s": statistics.median(times), "times": times,
            "peak_extra_mib": (vmem("VmHWM:") - rss_loaded) / 2**20, "rss_loaded_mib": rss_loaded / 2**20,
            "tokens": int(a[0].shape[-1]), "maps": [len(a), *a[0].shape[1:]],
            "torch": torch.__version__, "torch_threads": torch.get_num_threads()}


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="ascii"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", default="all", choices=("all", "make", "attnviz", "transformers"))
    ap.add_argument("--folder", type=Path, default=Path("/tmp/paligemma3b"))
    ap.add_argument("--torch-python", default="/tmp/gold/bin/python", help="an interpreter with torch and transformers")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-cold", dest="cold", action="store_false",
                    help="skip the third run, attnviz on an empty kernel cache (what a fresh installation waits for)")
    a = ap.parse_args()
    if a.what == "make":
        make(a.folder)
        return 0
    if a.what in ("attnviz", "transformers"):
        fn = run_attnviz if a.what == "attnviz" else run_transformers
        print(json.dumps(fn(a.folder, a.repeat, a.threads)))
        return 0
    if not (a.folder / "model.safetensors").is_file():
        subprocess.run([a.torch_python, str(HERE), "make", "--folder", str(a.folder)], check=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    rows = []
    with tempfile.TemporaryDirectory(prefix="attnviz-cold-kernels-") as cold:
        runs = [(sys.executable, "attnviz", env), (a.torch_python, "transformers", env)]
        if a.cold:  # a fresh installation: nothing compiled yet (the "auto" kernel choice runs the reference)
            runs.append((sys.executable, "attnviz", dict(env, NUMBA_CACHE_DIR=cold)))
        for python, who, run_env in runs:
            out = subprocess.run([python, str(HERE), who, "--folder", str(a.folder), "--threads", str(a.threads),
                                  "--repeat", str(a.repeat)], check=True, capture_output=True, text=True,
                                 env=run_env)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    if a.cold:
        rows[2]["who"] = "attnviz cold"
    print(f"CPU: {cpu_name()}, {a.threads} threads; load average {os.getloadavg()[0]:.1f}")
    for r in rows:
        print(f"{r['who']:>13}: {r['tokens']} tokens, maps {tuple(r['maps'])}, median {r['median_s']:.2f} s "
              f"(runs {', '.join(f'{t:.2f}' for t in r['times'])}), peak +{r['peak_extra_mib']:.0f} MiB over "
              f"{r['rss_loaded_mib']:.0f} MiB after the first pass; {r['load_s']:.1f} s to load, "
              f"{r['first_s']:.1f} s the first pass")
    av, tf = rows[:2]
    print(f"time attnviz / transformers: {av['median_s'] / tf['median_s']:.2f}x (aim <= 0.7, bound <= 1.0); "
          f"peak extra memory {av['peak_extra_mib'] / max(tf['peak_extra_mib'], 1):.2f}x; "
          f"resident after the first pass {av['rss_loaded_mib'] / tf['rss_loaded_mib']:.2f}x; "
          f"load + first pass {(av['load_s'] + av['first_s']) / (tf['load_s'] + tf['first_s']):.2f}x "
          f"(attnviz kept {av['kept_mib']:.0f} MiB of float32 weights)")
    if a.cold:
        co = rows[2]
        print(f"on a cold kernel cache (a fresh installation): load + first pass "
              f"{(co['load_s'] + co['first_s']) / (tf['load_s'] + tf['first_s']):.2f}x, repeated pass "
              f"{co['median_s'] / tf['median_s']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
