"""Write the tiny vision-language checkpoints of tests/checkpoints and their golden outputs.

Run once, in a throw-away environment with torch (CPU) and transformers 5; attnviz never imports them:

    python3 -m venv /tmp/gold
    /tmp/gold/bin/pip install torch==2.13.0 transformers pillow safetensors tokenizers numpy
    /tmp/gold/bin/python tools/make_vlm_goldens.py [--only NAME ...]

Each family's function writes one folder under tests/data/checkpoints/ with fixed-seed random weights
(``save_pretrained`` of the model and of its processor: config.json, model.safetensors, tokenizer and
processor files), a small non-square test picture ``image.png`` and ``golden.npz``: the prompt, the
processor's ``input_ids`` and ``pixel_values`` and transformers' eager attention of the language model
(``output_attentions=True``) with the last hidden state.

Weights are drawn wide (std 0.3, norm gains around 1) so the maps are far from uniform and a wrong
layer shows.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints"
CORPUS = [
    "what is in the picture? a red square on a blue field",
    "describe the image: the river bank flooded after the rain",
    "pick up the cube and put it in the box",
    "USER: ASSISTANT: the model reads the picture one patch at a time",
]


def test_image(h: int = 40, w: int = 56, seed: int = 0) -> np.ndarray:
    """(h, w, 3) uint8: a smooth gradient with a bright square, so patches differ."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 127 // max(h + w - 2, 1)], -1)
    img[h // 4: h // 2, w // 3: w // 2] = (250, 30, 30)
    img = img + rng.integers(0, 20, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def randomise(model: torch.nn.Module, seed: int, std: float = 0.3, norm_centre: float = 1.0) -> None:
    """Every parameter redrawn: norm gains around ``norm_centre``, the rest N(0, std)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name:
                p.copy_(norm_centre + 0.3 * noise)
            else:
                p.copy_(std * noise)


def train_bpe(pre, special: list[str], size: int, corpus=CORPUS) -> tuple[dict, list]:
    """(vocab, merges) of a small BPE trained on ``corpus`` with ``special`` tokens first."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    alphabet = pre_tokenizers.ByteLevel.alphabet() if isinstance(pre, pre_tokenizers.ByteLevel) else []
    trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=1, special_tokens=special,
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    spec = json.loads(tok.to_str())["model"]
    return spec["vocab"], [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]


def fresh(name: str) -> Path:
    out = OUT / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def save_golden(path: Path, **arrays) -> None:
    np.savez_compressed(path, **{k: (v.detach().numpy() if isinstance(v, torch.Tensor) else np.asarray(v))
                                 for k, v in arrays.items()})


def stack_attentions(atts) -> np.ndarray:
    """transformers' tuple of (1, nh, T, T) -> (L, nh, T, T) float32."""
    return torch.stack([a[0] for a in atts]).float().numpy()


# ---- LLaVA-1.5 ---------------------------------------------------------------------------------------

LLAVA_PROMPT = "USER: <image>\nwhat is in the picture? ASSISTANT:"


def make_llava() -> None:
    from transformers import (CLIPImageProcessorPil, CLIPVisionConfig, LlamaConfig, LlamaTokenizer, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    out = fresh("tiny_llava")
    vocab, merges = train_bpe(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False),
                              ["<unk>", "<s>", "</s>", "<pad>"], 220)
    tok = LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True, add_eos_token=False)
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    tok.pad_token = "<pad>"
    image_token_id = tok.convert_tokens_to_ids("<image>")
    vision = CLIPVisionConfig(hidden_size=24, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
                              image_size=32, patch_size=8, projection_dim=16, hidden_act="quick_gelu")
    text = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_id=image_token_id,
                      vision_feature_layer=-2, vision_feature_select_strategy="default",
                      projector_hidden_act="gelu", image_seq_length=16)
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(cfg).eval()
    randomise(model, 1)
    ip = CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    proc = LlavaProcessor(image_processor=ip, tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
                          num_additional_image_tokens=1)
    model.save_pretrained(out, safe_serialization=True)
    proc.save_pretrained(out)
    img = test_image()
    Image.fromarray(img).save(out / "image.png")
    batch = proc(images=Image.open(out / "image.png"), text=LLAVA_PROMPT, return_tensors="pt")
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        res = model(**batch, output_attentions=True, output_hidden_states=True)
    save_golden(out / "golden.npz", prompt=LLAVA_PROMPT, input_ids=batch["input_ids"][0],
                pixel_values=batch["pixel_values"][0], attentions=stack_attentions(res.attentions),
                last_hidden_state=res.hidden_states[-1][0].float())


FAMILIES = {"tiny_llava": make_llava}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(FAMILIES), help="write only these folders")
    args = ap.parse_args()
    for name in args.only or sorted(FAMILIES):
        print("writing", name)
        FAMILIES[name]()


if __name__ == "__main__":
    main()
