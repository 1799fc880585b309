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


def make_llava_full() -> None:
    """LLaVA with the class token kept ("full"), two feature layers concatenated and a Qwen2 decoder (q/k/v biases)."""
    from transformers import (CLIPImageProcessorPil, CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration,
                              LlavaProcessor, Qwen2Config, Qwen2Tokenizer)

    out = fresh("tiny_llava_full")
    vocab, merges = train_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"], 320)
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    vision = CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=2,
                              image_size=24, patch_size=8, projection_dim=16, hidden_act="quick_gelu")
    text = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=256)
    cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_id=tok.convert_tokens_to_ids("<image>"),
                      vision_feature_layer=[-3, -1], vision_feature_select_strategy="full",
                      projector_hidden_act="gelu", multimodal_projector_bias=False, image_seq_length=10)
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(cfg).eval()
    randomise(model, 2)
    ip = CLIPImageProcessorPil(size={"height": 24, "width": 24}, do_center_crop=False)
    proc = LlavaProcessor(image_processor=ip, tokenizer=tok, patch_size=8, vision_feature_select_strategy="full",
                          num_additional_image_tokens=1)
    model.save_pretrained(out, safe_serialization=True)
    proc.save_pretrained(out)
    Image.fromarray(test_image(30, 20, seed=3)).save(out / "image.png")
    prompt = "<image>describe the image: the river bank"
    batch = proc(images=Image.open(out / "image.png"), text=prompt, return_tensors="pt")
    model.config._attn_implementation = "eager"
    with torch.no_grad():
        res = model(**batch, output_attentions=True, output_hidden_states=True)
    save_golden(out / "golden.npz", prompt=prompt, input_ids=batch["input_ids"][0],
                pixel_values=batch["pixel_values"][0], attentions=stack_attentions(res.attentions),
                last_hidden_state=res.hidden_states[-1][0].float())


FAMILIES = {"tiny_llava": make_llava, "tiny_llava_full": make_llava_full}


# ---- PaliGemma 1 and 2 ------------------------------------------------------------------------------

PALIGEMMA_CORPUS = [
    "caption en\n", "answer en what is in the picture?\n", "a red square on a blue field",
    "detect the cube ; the box\n", "the river bank flooded after the rain", "where is the cat standing?\n",
    "answer en what colour is the square?\n", "a small red square in the top left of a green field",
]
PALIGEMMA_PROMPT = "answer en what is in the picture?"
PALIGEMMA_SUFFIX = "a red square on a blue field"
PALIGEMMA_EXTRA = [f"<loc{i:0>4}>" for i in range(1024)] + [f"<seg{i:0>3}>" for i in range(128)]


def paligemma_tokenizer():
    """A Gemma-style BPE (spaces as "▁", byte fallback) trained on PALIGEMMA_CORPUS, with <image>."""
    from tokenizers import normalizers
    from transformers import GemmaTokenizer

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    trainer = trainers.BpeTrainer(vocab_size=150, min_frequency=1, special_tokens=["<pad>", "<eos>", "<bos>", "<unk>"],
                                  show_progress=False)
    tok.train_from_iterator(PALIGEMMA_CORPUS, trainer=trainer)
    spec = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]
    gt = GemmaTokenizer(vocab=spec["vocab"], merges=merges)
    gt.add_special_tokens({"additional_special_tokens": ["<image>"]})
    return gt


def _drop_extra_tokens(folder: Path) -> None:
    """The processor adds the 1,152 <locNNNN> / <segNNN> tokens again when it loads; stored they would take
    200 kB, so the saved tokenizer.json keeps only the tokens before them (the ids they get are the same)."""
    path = folder / "tokenizer.json"
    spec = json.loads(path.read_text(encoding="utf-8"))
    extra = set(PALIGEMMA_EXTRA)
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in extra]
    path.write_text(json.dumps(spec, ensure_ascii=False, indent=2), encoding="utf-8")


def _paligemma_hostile_images() -> dict[str, np.ndarray]:
    """Inputs the processor converts to RGB: grey (L), CMYK, RGBA with varied alpha, a 1x1 picture."""
    rng = np.random.default_rng(7)
    rgba = rng.integers(0, 256, size=(9, 13, 4), dtype=np.uint8)
    rgba[:3, :, 3] = 0
    rgba[3:6, :, 3] = 255
    return {"grey": rng.integers(0, 256, size=(11, 7), dtype=np.uint8),
            "cmyk": rng.integers(0, 256, size=(6, 10, 4), dtype=np.uint8),
            "rgba": rgba, "one": np.array([[[200, 40, 90]]], dtype=np.uint8)}


def _paligemma_pil(name: str, arr: np.ndarray):
    return Image.fromarray(arr, mode={"grey": "L", "cmyk": "CMYK", "rgba": "RGBA", "one": "RGB"}[name])


def _paligemma(name: str, text_config, seed: int, hostile: bool) -> None:
    from transformers import (AutoProcessor, PaliGemmaConfig, PaliGemmaForConditionalGeneration, PaliGemmaProcessor,
                              SiglipImageProcessorPil, SiglipVisionConfig)

    out = fresh(name)
    tok = paligemma_tokenizer()
    image_token_id = tok.convert_tokens_to_ids("<image>")
    n_vocab = len(tok)  # before the processor's location / segmentation tokens
    vision = SiglipVisionConfig(hidden_size=24, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                                image_size=32, patch_size=8, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6,
                                vision_use_head=False)
    text_config.vocab_size = n_vocab
    text_config.pad_token_id, text_config.eos_token_id, text_config.bos_token_id = (
        tok.pad_token_id, tok.eos_token_id, tok.bos_token_id)
    cfg = PaliGemmaConfig(vision_config=vision, text_config=text_config, image_token_index=image_token_id,
                          vocab_size=n_vocab, projection_dim=text_config.hidden_size,
                          hidden_size=text_config.hidden_size)
    torch.manual_seed(0)
    model = PaliGemmaForConditionalGeneration(cfg).eval()
    randomise(model.model.vision_tower, seed, norm_centre=1.0)
    randomise(model.model.multi_modal_projector, seed + 1)
    randomise(model.model.language_model, seed + 2, norm_centre=0.0)  # Gemma's norms scale by (1 + w)
    ip = SiglipImageProcessorPil(size={"height": 32, "width": 32}, resample=3, image_mean=[0.5, 0.5, 0.5],
                                 image_std=[0.5, 0.5, 0.5])
    ip.image_seq_length = (32 // 8) ** 2
    PaliGemmaProcessor(image_processor=ip, tokenizer=tok).save_pretrained(out)
    model.save_pretrained(out, safe_serialization=True)
    _drop_extra_tokens(out)
    Image.fromarray(test_image(40, 56, seed=3)).save(out / "image.png")
    proc = AutoProcessor.from_pretrained(out)  # what the folder itself gives
    assert type(proc).__name__ == "PaliGemmaProcessor" and type(proc.image_processor).__name__.endswith("Pil")
    model.config._attn_implementation = "eager"
    image = Image.open(out / "image.png")

    def run(batch, *, labels: bool = False, types: bool = True):
        batch = {k: v for k, v in batch.items() if (labels or k != "labels") and (types or k != "token_type_ids")}
        with torch.no_grad():
            res = model(**batch, output_attentions=True, output_hidden_states=True)
        return stack_attentions(res.attentions), res.hidden_states[-1][0].float().numpy()

    plain = proc(images=image, text=PALIGEMMA_PROMPT, return_tensors="pt")
    att, hid = run(plain)
    both = proc(images=image, text=PALIGEMMA_PROMPT, suffix=PALIGEMMA_SUFFIX, return_tensors="pt")
    s_att, s_hid = run(both)
    # training-style calls (labels given, train mode without dropout) build the same prefix-LM mask
    t_att, _ = run(both, labels=True)
    model.train()
    tr_att, _ = run(both, labels=True)
    model.eval()
    assert np.array_equal(t_att, s_att) and np.array_equal(tr_att, s_att)
    c_att, _ = run(both, types=False)  # without token_type_ids transformers falls back to a causal mask
    assert not np.allclose(c_att, s_att)
    arrays = dict(prompt=PALIGEMMA_PROMPT, suffix=PALIGEMMA_SUFFIX, input_ids=plain["input_ids"][0],
                  token_type_ids=plain["token_type_ids"][0], pixel_values=plain["pixel_values"][0],
                  attentions=att, last_hidden_state=hid,
                  suffix_input_ids=both["input_ids"][0], suffix_token_type_ids=both["token_type_ids"][0],
                  suffix_attentions=s_att, suffix_last_hidden_state=s_hid)
    if hostile:
        for key, arr in _paligemma_hostile_images().items():
            px = proc.image_processor(_paligemma_pil(key, arr), return_tensors="pt")["pixel_values"][0]
            arrays[f"hostile_{key}"] = arr
            arrays[f"hostile_{key}_pixels"] = px
        odd = "<image>what is <loc0003> this?"
        arrays["odd_prompt"] = odd  # an <image> the prompt already carries, and a location token
        arrays["odd_input_ids"] = proc(images=image, text=odd, return_tensors="pt")["input_ids"][0]
        mid = "answer en <image> here"
        arrays["mid_prompt"] = mid  # the image placeholder after some text: BOS goes after it
        arrays["mid_input_ids"] = proc(images=image, text=mid, return_tensors="pt")["input_ids"][0]
        arrays["mid_token_type_ids"] = proc(images=image, text=mid, return_tensors="pt")["token_type_ids"][0]
    save_golden(out / "golden.npz", **arrays)


def make_paligemma() -> None:
    """PaliGemma 1: Gemma text model with one key/value head (MQA)."""
    from transformers import GemmaConfig

    text = GemmaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=1, head_dim=8, max_position_embeddings=128, hidden_act="gelu_pytorch_tanh")
    _paligemma("tiny_paligemma", text, 11, hostile=True)


def make_paligemma2() -> None:
    """PaliGemma 2: Gemma 2 text model, soft-capped scores, a window shorter than the prefix, query_pre_attn_scalar."""
    from transformers import Gemma2Config

    text = Gemma2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=8, max_position_embeddings=128, query_pre_attn_scalar=12,
                        sliding_window=6, attn_logit_softcapping=4.0, final_logit_softcapping=30.0,
                        layer_types=["sliding_attention", "full_attention"])
    _paligemma("tiny_paligemma2", text, 21, hostile=False)


FAMILIES.update({"tiny_paligemma": make_paligemma, "tiny_paligemma2": make_paligemma2})


# ---- Idefics3 / SmolVLM ------------------------------------------------------------------------------

IDEFICS3_CORPUS = CORPUS + [
    "User: what is in the picture?\nAssistant: a red square on a blue field",
    "User: which picture is brighter?\nAssistant: the second one\n\nUser: why?",
]
IDEFICS3_PROMPT = "User:<image>what is in the picture?<end_of_utterance>\nAssistant:"
SMOLVLM_PROMPT = "<|im_start|>User:<image>and<image>which picture is brighter?<end_of_utterance>\nAssistant:"
IDEFICS3_MARKERS = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]
ROW_COL = [f"<row_{i + 1}_col_{j + 1}>" for i in range(6) for j in range(6)]


def _smolvlm_processor_class():
    """SmolVLMProcessor without its video processor (which needs torchvision): the same code for images and
    text, and AutoProcessor loads the saved folder with the two parts it lists."""
    from transformers import ProcessorMixin, SmolVLMProcessor

    class Processor(SmolVLMProcessor):
        def __init__(self, image_processor, tokenizer, image_seq_len: int = 169, chat_template=None, **kwargs):
            self.fake_image_token = getattr(tokenizer, "fake_image_token", "<fake_token_around_image>")
            self.image_token = getattr(tokenizer, "image_token", "<image>")
            self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
            self.end_of_utterance_token = getattr(tokenizer, "end_of_utterance_token", "<end_of_utterance>")
            self.global_image_token = getattr(tokenizer, "global_image_token", "<global-img>")
            self.image_seq_len = image_seq_len
            self.video_token = getattr(tokenizer, "video_token", "<video>")
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template, **kwargs)

    Processor.__name__ = Processor.__qualname__ = "SmolVLMProcessor"
    return Processor


def make_idefics3_family(smol: bool) -> None:
    """tiny_idefics3: Llama-style SentencePiece BPE with BOS, the row/column markers as special tokens, one
    picture split into 2 x 3 tiles of 32 px, a vision table for 64 px (8 x 8 positions bucketised onto each
    4 x 4 tile). tiny_smolvlm: byte-level BPE without BOS (GPT-2 class), ``<global-img>`` and the row/column
    markers as added tokens that are not special, two pictures (2 x 1 and 2 x 2 tiles), a
    vision table for exactly the tile size, 2 query heads on 1 key/value head."""
    from transformers import AutoProcessor, GPT2Tokenizer, LlamaConfig, LlamaTokenizer

    out = fresh("tiny_smolvlm" if smol else "tiny_idefics3")
    if smol:
        from transformers import SmolVLMConfig as Config
        from transformers import SmolVLMForConditionalGeneration as Model
        from transformers import SmolVLMImageProcessorPil as ImageProcessor
        from transformers import SmolVLMVisionConfig as VisionConfig

        vocab, merges = train_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>", "<|im_start|>"],
                                  300, IDEFICS3_CORPUS)
        tok = GPT2Tokenizer(vocab=vocab, merges=merges, bos_token="<|im_start|>", eos_token="<end_of_utterance>",
                            unk_token="<|endoftext|>", pad_token="<|endoftext|>")
        tok.add_special_tokens({"additional_special_tokens": IDEFICS3_MARKERS[:3]})
        tok.add_tokens(IDEFICS3_MARKERS[3:] + ROW_COL)  # added tokens that are not special
        Processor = _smolvlm_processor_class()
    else:
        from transformers import Idefics3Config as Config
        from transformers import Idefics3ForConditionalGeneration as Model
        from transformers import Idefics3ImageProcessorPil as ImageProcessor
        from transformers import Idefics3Processor as Processor
        from transformers import Idefics3VisionConfig as VisionConfig

        vocab, merges = train_bpe(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False),
                                  ["<unk>", "<s>", "</s>", "<pad>"], 200, IDEFICS3_CORPUS)
        tok = LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True, add_eos_token=False)
        tok.add_special_tokens({"additional_special_tokens": IDEFICS3_MARKERS + ROW_COL})
        tok.pad_token = "<pad>"
    vision = VisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                          image_size=32 if smol else 64, patch_size=8, hidden_act="gelu_pytorch_tanh")
    text = LlamaConfig(vocab_size=len(tok), hidden_size=24, intermediate_size=48, num_hidden_layers=2,
                       num_attention_heads=2 if smol else 4, num_key_value_heads=1 if smol else 2,
                       max_position_embeddings=512, tie_word_embeddings=True, rope_theta=500.0 if smol else 10000.0,
                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    cfg = Config(vision_config=vision, text_config=text, image_token_id=tok.convert_tokens_to_ids("<image>"),
                 scale_factor=2, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = Model(cfg).eval()
    randomise(model, 3 if smol else 2)
    ip = ImageProcessor(size={"longest_edge": 64 if smol else 96}, max_image_size={"longest_edge": 32})
    proc = Processor(image_processor=ip, tokenizer=tok, image_seq_len=4)
    model.save_pretrained(out)
    proc.save_pretrained(out)
    (out / "generation_config.json").unlink(missing_ok=True)
    shapes = [(64, 24), (20, 30)] if smol else [(40, 72)]
    names = ["image.png", "image2.png"][:len(shapes)]
    for i, ((h, w), name) in enumerate(zip(shapes, names)):
        Image.fromarray(test_image(h, w, seed=i)).save(out / name)
    loaded = (Processor if smol else AutoProcessor).from_pretrained(out)  # what AutoProcessor dispatches to
    prompt = SMOLVLM_PROMPT if smol else IDEFICS3_PROMPT
    images = [Image.open(out / n) for n in names]
    batch = loaded(images=images if smol else images[0], text=prompt, return_tensors="pt")
    model.set_attn_implementation("eager")
    with torch.no_grad():
        res = model(**batch, output_attentions=True, output_hidden_states=True)
    save_golden(out / "golden.npz", prompt=prompt, input_ids=batch["input_ids"][0],
                pixel_values=batch["pixel_values"][0], pixel_attention_mask=batch["pixel_attention_mask"][0],
                attentions=stack_attentions(res.attentions), last_hidden_state=res.hidden_states[-1][0].float())


def _processor_cases() -> dict[str, tuple[list, str, dict]]:
    """name -> (pictures, prompt, processor call overrides) of tiny_idefics3_processor/cases.npz."""
    rgb = test_image(30, 50, seed=3)
    alpha = np.linspace(0, 255, 30 * 50).reshape(30, 50, 1).astype(np.uint8)
    rgba = np.concatenate([rgb, alpha], axis=2)
    y, x = np.mgrid[0:10, 0:20000]
    long = np.stack([x * 255 // 19999, y * 25, (x // 97) % 256], -1).astype(np.uint8)
    two = IDEFICS3_PROMPT.replace("<image>", "<image><image>")
    return {
        "grey": ([Image.fromarray(rgb).convert("L")], IDEFICS3_PROMPT, {}),
        "cmyk": ([Image.fromarray(rgb).convert("CMYK")], IDEFICS3_PROMPT, {}),
        "rgba": ([Image.fromarray(rgba, "RGBA")], IDEFICS3_PROMPT, {}),
        "la": ([Image.fromarray(rgba, "RGBA").convert("LA")], IDEFICS3_PROMPT, {}),
        "rgba_array": ([rgba], IDEFICS3_PROMPT, {}),
        "one_pixel": ([Image.fromarray(rgb[:1, :1])], IDEFICS3_PROMPT, {}),
        "long": ([Image.fromarray(long)], IDEFICS3_PROMPT, {}),
        "no_split": ([Image.fromarray(rgb), Image.fromarray(rgb[:, :20])], two, {"do_image_splitting": False}),
        "one_tile": ([Image.fromarray(rgb)], IDEFICS3_PROMPT, {"size": {"longest_edge": 32}}),
        "exact_size": ([Image.fromarray(rgb)], IDEFICS3_PROMPT, {"size": {"height": 40, "width": 70}}),
        "bicubic": ([Image.fromarray(rgb)], IDEFICS3_PROMPT, {"resample": 3}),
    }


def _picture_arrays(image) -> tuple[np.ndarray, str]:
    """A case's picture as (array, PIL mode or "array") for the npz."""
    if isinstance(image, Image.Image):
        return np.asarray(image), image.mode
    return np.asarray(image), "array"


def make_idefics3() -> None:
    from transformers import AutoProcessor

    make_idefics3_family(smol=False)
    loaded = AutoProcessor.from_pretrained(OUT / "tiny_idefics3")
    out = fresh("tiny_idefics3_processor")
    arrays: dict[str, np.ndarray] = {}
    for name, (images, prompt, over) in _processor_cases().items():
        batch = loaded(images=images, text=prompt, return_tensors="np", **over)
        arrays[f"{name}.prompt"] = np.array(prompt)
        arrays[f"{name}.overrides"] = np.array(json.dumps(over))
        for i, image in enumerate(images):
            arrays[f"{name}.image{i}"], mode = _picture_arrays(image)
            arrays[f"{name}.mode{i}"] = np.array(mode)
        arrays[f"{name}.input_ids"] = batch["input_ids"][0]
        arrays[f"{name}.pixel_values"] = batch["pixel_values"][0]
        arrays[f"{name}.pixel_attention_mask"] = batch["pixel_attention_mask"][0]
    save_golden(out / "cases.npz", **arrays)


def make_smolvlm() -> None:
    make_idefics3_family(smol=True)


FAMILIES.update({"tiny_idefics3": make_idefics3, "tiny_smolvlm": make_smolvlm})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(FAMILIES), help="write only these folders")
    args = ap.parse_args()
    for name in args.only or sorted(FAMILIES):
        print("writing", name)
        FAMILIES[name]()


if __name__ == "__main__":
    main()
