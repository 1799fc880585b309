"""Write tiny checkpoints of the encoder and vision families, with transformers' outputs as goldens.

Run once, in a separate environment that has torch (CPU) and transformers 5 (attnviz itself never
imports torch), after tools/make_minilm_golden.py (the RGBA golden reuses its ``tiny_vit``):

    python3 -m venv /tmp/goldenv
    /tmp/goldenv/bin/pip install torch transformers safetensors tokenizers numpy pillow
    /tmp/goldenv/bin/python tools/make_family_goldens.py                     # every folder
    /tmp/goldenv/bin/python tools/make_family_goldens.py --only tiny_siglip  # one folder (repeat --only for more)

It writes, under tests/data/checkpoints/, one folder per family with fixed-seed random weights saved
by ``save_pretrained`` (config.json, model.safetensors, and tokenizer.json trained here or
preprocessor_config.json written by the family's own PIL image processor) and a ``golden.npz`` of
the base model's eager-attention outputs (``attentions`` (L, nh, T, T) and ``last_hidden_state``):

* ``tiny_roberta`` (byte-level BPE, ``<s> ... </s>``, positions from pad + 1), ``tiny_xlmr``
  (Unigram, XLM-RoBERTa), ``tiny_electra`` (embedding size 8 < hidden 16, so ``embeddings_project``
  is used), ``tiny_distilbert`` (WordPiece, ``[CLS] ... [SEP]``);
* ``tiny_clip_vision`` (``CLIPVisionModel``: shortest-edge resize, centre crop), ``tiny_clip`` (a
  whole ``CLIPModel``: its vision half is what attnviz runs), ``tiny_dinov2`` (4 x 4 position table
  interpolated to the 3 x 5 grid its processor's crop gives), ``tiny_vit_interp`` and
  ``tiny_deit_interp`` (4 x 4 tables run at 24 x 40 pixels with ``interpolate_pos_encoding=True``);
* ``rgba_vit/`` — an RGBA PNG and ``tiny_vit``'s outputs on it as transformers sees it
  (``PIL.Image.open(...).convert("RGB")``: alpha dropped);
* ``tiny_siglip_vision`` (``SiglipVisionModel`` with its attention-pooling head, which attnviz does not
  read; its processor stretches the image to 24 x 40, so the 4 x 4 table is interpolated to 3 x 5) and
  ``tiny_siglip`` (a whole ``SiglipModel`` at its trained 32 x 32: its vision half), both with
  ``hidden_states`` (L + 1, T, d) as ``output_hidden_states=True`` gives them;
* ``tiny_idefics3_vision`` (``Idefics3VisionTransformer``: a 32 x 32 tile whose bottom and right are
  padding, its ``pixel_attention_mask`` and the patch mask ``get_image_features`` makes of it; and an
  unpadded 24 x 40 input, ``full_*``), attentions and hidden states;
* ``tiny_clip_vision``'s ``golden.npz`` gains ``hidden_states`` from the saved model, its other arrays
  copied unchanged (``--only tiny_clip_vision_hidden`` does only that).

Weights are drawn wide (std 0.4, norm gains around 1) so the attention maps are far from uniform.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (BitImageProcessorPil, CLIPConfig, CLIPImageProcessorPil, CLIPModel, CLIPVisionConfig,
                          CLIPVisionModel, DeiTConfig, DeiTModel, Dinov2Config, Dinov2Model, DistilBertConfig,
                          DistilBertModel, ElectraConfig, ElectraModel, RobertaConfig, RobertaModel, SiglipConfig,
                          SiglipImageProcessorPil, SiglipModel, SiglipVisionConfig, SiglipVisionModel, ViTConfig,
                          ViTImageProcessorPil, ViTModel, XLMRobertaConfig, XLMRobertaModel)
from transformers.models.idefics3.configuration_idefics3 import Idefics3VisionConfig
from transformers.models.idefics3.modeling_idefics3 import Idefics3VisionTransformer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints"
ONLY: set[str] = set()  # --only: the folders to write (empty: all)
WRITTEN: list[str] = []


def _wanted(name: str) -> bool:
    if ONLY and name not in ONLY:
        return False
    WRITTEN.append(name)
    return True
TEXT = "The river bank flooded after the rain, and the boats drifted away."
CORPUS = [
    "the river bank flooded after the rain and the boats drifted away",
    "a bank by the river keeps money safe, and a river bank keeps water in",
    "attention lets every token look at every other token and weigh what it sees",
    "the model reads the sentence one token at a time and predicts the next one",
]


def _attn(outputs) -> np.ndarray:
    assert outputs.attentions is not None and len(outputs.attentions) > 0
    return torch.stack(outputs.attentions, 0)[:, 0].numpy().astype(np.float32)  # (L, nh, T, T)


def _hidden(outputs) -> np.ndarray:
    assert outputs.hidden_states is not None and len(outputs.hidden_states) > 1
    return torch.stack(outputs.hidden_states, 0)[:, 0].numpy().astype(np.float32)  # (L + 1, T, d)


def _randomise(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * noise)
            else:
                p.copy_(0.4 * noise)


def _eager(model):
    model.set_attn_implementation("eager")
    return model.eval()


# ---- tokenizers -----------------------------------------------------------------------------------


def _byte_bpe() -> Tokenizer:
    """RoBERTa's shape: byte-level BPE, <s> 0, <pad> 1, </s> 2, <unk> 3, <mask> 4, <s> A </s>."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True, add_prefix_space=False)
    return tok


def _unigram() -> Tokenizer:
    """XLM-RoBERTa's shape: SentencePiece Unigram with the ▁ word marker, <s> 0, <pad> 1, </s> 2, <unk> 3."""
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=120, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    return tok


def _wordpiece() -> Tokenizer:
    """BERT's shape: lower-casing WordPiece, [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    return tok


def text_family(name: str, tok: Tokenizer, model) -> None:
    if not _wanted(name):
        return
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    _randomise(model, seed=len(name))
    model = _eager(model)
    model.save_pretrained(d)
    tok.save(str(d / "tokenizer.json"))
    enc = tok.encode(TEXT)
    ids = torch.tensor([enc.ids])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True)
    np.savez_compressed(d / "golden.npz", text=np.array(TEXT), tokens=np.array(enc.tokens),
                        input_ids=np.array(enc.ids, dtype=np.int64), attentions=_attn(out),
                        last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32))


def encoders() -> None:
    small = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, hidden_act="gelu")
    bpe = _byte_bpe()
    torch.manual_seed(0)
    text_family("tiny_roberta", bpe, RobertaModel(RobertaConfig(
        vocab_size=bpe.get_vocab_size(), max_position_embeddings=40, type_vocab_size=1, pad_token_id=1,
        bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5, **small), add_pooling_layer=False))
    uni = _unigram()
    text_family("tiny_xlmr", uni, XLMRobertaModel(XLMRobertaConfig(
        vocab_size=uni.get_vocab_size(), max_position_embeddings=80, type_vocab_size=1, pad_token_id=1,
        bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5, **small), add_pooling_layer=False))
    wp = _wordpiece()
    text_family("tiny_electra", wp, ElectraModel(ElectraConfig(
        vocab_size=wp.get_vocab_size(), embedding_size=8, max_position_embeddings=32, pad_token_id=0, **small)))
    text_family("tiny_distilbert", wp, DistilBertModel(DistilBertConfig(
        vocab_size=wp.get_vocab_size(), dim=16, n_layers=2, n_heads=2, hidden_dim=32, activation="gelu",
        max_position_embeddings=32, pad_token_id=0)))


# ---- vision ---------------------------------------------------------------------------------------


def _image() -> np.ndarray:
    image = np.random.default_rng(7).integers(0, 256, size=(30, 52, 3), dtype=np.uint8)  # (H, W, 3) not the model's size
    image[:15, :26] = 255  # a bright quarter so the picture has structure
    return image


def vision_family(name: str, model, processor, run=None) -> None:
    if not _wanted(name):
        return
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    _randomise(model, seed=len(name) + 10)
    model = _eager(model)
    model.save_pretrained(d)
    processor.save_pretrained(d)
    image = _image()
    pixel_values = processor(images=image, return_tensors="pt")["pixel_values"]  # (1, 3, H, W)
    with torch.no_grad():
        out = (run or (lambda pv: model(pixel_values=pv, output_attentions=True)))(pixel_values)
    hidden = {} if getattr(out, "hidden_states", None) is None else {"hidden_states": _hidden(out)}
    np.savez_compressed(d / "golden.npz", image=image, pixel_values=pixel_values[0].numpy().astype(np.float32),
                        attentions=_attn(out), last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32),
                        **hidden)


def vision() -> None:
    small = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    clip_pp = dict(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}, resample=3,
                   image_mean=[0.48, 0.46, 0.41], image_std=[0.27, 0.26, 0.28])
    torch.manual_seed(0)
    vision_family("tiny_clip_vision", CLIPVisionModel(CLIPVisionConfig(image_size=32, patch_size=8, **small)),
                  CLIPImageProcessorPil(**clip_pp))
    torch.manual_seed(0)
    full = CLIPModel(CLIPConfig(
        text_config=dict(vocab_size=64, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=16),
        vision_config=dict(image_size=32, patch_size=8, **small), projection_dim=8))
    vision_family("tiny_clip", full, CLIPImageProcessorPil(**clip_pp),
                  run=lambda pv: full.vision_model(pixel_values=pv, output_attentions=True))
    torch.manual_seed(0)
    vision_family("tiny_dinov2", Dinov2Model(Dinov2Config(
        image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
        layer_norm_eps=1e-6)),
        BitImageProcessorPil(size={"shortest_edge": 40}, crop_size={"height": 24, "width": 40}, resample=3,
                             image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]))
    interp_pp = dict(size={"height": 24, "width": 40}, resample=2, image_mean=[0.5, 0.4, 0.3], image_std=[0.2, 0.25, 0.3])
    for name, model in (
        ("tiny_vit_interp", ViTModel(ViTConfig(image_size=32, patch_size=8, **small), add_pooling_layer=False)),
        ("tiny_deit_interp", DeiTModel(DeiTConfig(image_size=32, patch_size=8, **small), add_pooling_layer=False)),
    ):
        vision_family(name, model, ViTImageProcessorPil(**interp_pp),
                      run=lambda pv, m=model: m(pixel_values=pv, output_attentions=True, interpolate_pos_encoding=True))


def rgba_vit() -> None:
    """tiny_vit on a picture with transparency, loaded as transformers loads images (convert("RGB"))."""
    if not _wanted("rgba_vit"):
        return
    d = OUT / "rgba_vit"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    rng = np.random.default_rng(11)
    rgba = rng.integers(0, 256, size=(30, 52, 4), dtype=np.uint8)  # (H, W, 4)
    rgba[:, :20, 3] = 0  # a fully transparent band over coloured pixels
    rgba[:, 20:36, 3] = 128
    rgba[:, 36:, 3] = 255
    Image.fromarray(rgba, "RGBA").save(d / "image.png")
    rgb = Image.open(d / "image.png").convert("RGB")
    model = _eager(ViTModel.from_pretrained(OUT / "tiny_vit", add_pooling_layer=False))
    processor = ViTImageProcessorPil.from_pretrained(OUT / "tiny_vit")
    pixel_values = processor(images=rgb, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        out = model(pixel_values=pixel_values, output_attentions=True)
    np.savez_compressed(d / "golden.npz", pixel_values=pixel_values[0].numpy().astype(np.float32),
                        attentions=_attn(out))


# ---- SigLIP and Idefics3's SigLIP: no class token; hidden states layer by layer ---------------------


def siglip() -> None:
    small = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    torch.manual_seed(0)
    tower = SiglipVisionModel(SiglipVisionConfig(image_size=32, patch_size=8, **small))  # vision_use_head: head.* saved
    vision_family("tiny_siglip_vision", tower, SiglipImageProcessorPil(size={"height": 24, "width": 40}),
                  run=lambda pv: tower(pixel_values=pv, output_attentions=True, output_hidden_states=True,
                                       interpolate_pos_encoding=True))
    torch.manual_seed(0)
    full = SiglipModel(SiglipConfig(
        text_config=dict(vocab_size=64, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=16, projection_size=8),
        vision_config=dict(image_size=32, patch_size=8, hidden_act="gelu_pytorch_tanh", **small)))
    vision_family("tiny_siglip", full, SiglipImageProcessorPil(size={"height": 32, "width": 32}, resample=2,
                                                               image_mean=[0.5, 0.45, 0.4], image_std=[0.5, 0.55, 0.6]),
                  run=lambda pv: full.vision_model(pixel_values=pv, output_attentions=True, output_hidden_states=True))


def _unfold_patch_mask(pixel_mask: torch.Tensor, patch: int) -> torch.Tensor:
    """(1, H, W) pixel mask -> (1, gh, gw) patch mask, as Idefics3Model.get_image_features makes it."""
    sub = pixel_mask.unfold(dimension=1, size=patch, step=patch).unfold(dimension=2, size=patch, step=patch)
    return (sub.sum(dim=(-1, -2)) > 0).bool()


def idefics3_vision() -> None:
    name = "tiny_idefics3_vision"
    if not _wanted(name):
        return
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    torch.manual_seed(0)
    model = Idefics3VisionTransformer(Idefics3VisionConfig(image_size=32, patch_size=8, hidden_size=16,
                                                           num_hidden_layers=2, num_attention_heads=2,
                                                           intermediate_size=32))
    _randomise(model, seed=len(name) + 10)
    model = _eager(model)
    model.save_pretrained(d)
    rng = np.random.default_rng(5)
    pixels = rng.uniform(-1, 1, size=(1, 3, 32, 32)).astype(np.float32)  # (1, 3, H, W) a processed tile
    pixel_mask = np.zeros((1, 32, 32), dtype=bool)  # (1, H, W)
    pixel_mask[:, :20, :13] = True  # real pixels top-left; patches partly covered count as real (3 x 2 of 4 x 4)
    pixels[:, :, ~pixel_mask[0]] = 0.0  # the processor pads with zeros
    patch_mask = _unfold_patch_mask(torch.from_numpy(pixel_mask), 8)  # (1, 4, 4)
    full = rng.uniform(-1, 1, size=(1, 3, 24, 40)).astype(np.float32)  # (1, 3, 24, 40): 3 x 5 patches, none padded
    with torch.no_grad():
        out = model(pixel_values=torch.from_numpy(pixels), patch_attention_mask=patch_mask, output_attentions=True,
                    output_hidden_states=True)
        out_full = model(pixel_values=torch.from_numpy(full), output_attentions=True, output_hidden_states=True)
    np.savez_compressed(d / "golden.npz", pixel_values=pixels[0], pixel_attention_mask=pixel_mask[0],
                        patch_attention_mask=patch_mask[0].numpy(), attentions=_attn(out), hidden_states=_hidden(out),
                        last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32),
                        full_pixel_values=full[0], full_attentions=_attn(out_full), full_hidden_states=_hidden(out_full),
                        full_last_hidden_state=out_full.last_hidden_state[0].numpy().astype(np.float32))


def clip_hidden_states() -> None:
    """Add ``hidden_states`` to tiny_clip_vision's golden.npz, from the saved model; its arrays are kept as they are."""
    if not _wanted("tiny_clip_vision_hidden"):
        return
    d = OUT / "tiny_clip_vision"
    with np.load(d / "golden.npz") as z:
        kept = {k: z[k] for k in z.files if k != "hidden_states"}
    model = _eager(CLIPVisionModel.from_pretrained(d))
    with torch.no_grad():
        out = model(pixel_values=torch.from_numpy(kept["pixel_values"][None]), output_attentions=True,
                    output_hidden_states=True)
    assert np.abs(_attn(out) - kept["attentions"]).max() < 1e-6, "the saved model no longer gives the golden's attentions"
    np.savez_compressed(d / "golden.npz", **kept, hidden_states=_hidden(out))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="write only this folder (tiny_siglip, tiny_idefics3_vision, tiny_clip_vision_hidden, ...)")
    ONLY.update(parser.parse_args(argv).only)
    OUT.mkdir(parents=True, exist_ok=True)
    encoders()
    vision()
    rgba_vit()
    siglip()
    idefics3_vision()
    clip_hidden_states()
    unknown = ONLY - set(WRITTEN)
    if unknown:
        print(f"unknown --only name(s): {', '.join(sorted(unknown))}")
        return 1
    names = [n.removesuffix("_hidden") for n in WRITTEN]
    sizes = {p.relative_to(OUT).as_posix(): p.stat().st_size for n in names for p in sorted((OUT / n).rglob("*"))}
    print(json.dumps(sizes, indent=1))
    print(f"total {sum(sizes.values()) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
