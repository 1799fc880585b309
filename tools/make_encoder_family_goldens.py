"""Write tiny checkpoints of DINOv2 with registers, ALBERT, MPNet and BEiT, with transformers' outputs as goldens.

Run once, in a separate environment that has torch (CPU) and transformers 5 (attnviz itself never
imports torch):

    python3 -m venv /tmp/goldenv
    /tmp/goldenv/bin/pip install torch transformers safetensors tokenizers numpy pillow
    /tmp/goldenv/bin/python tools/make_encoder_family_goldens.py                      # every folder
    /tmp/goldenv/bin/python tools/make_encoder_family_goldens.py --only tiny_albert   # one (repeat --only)

Each folder under tests/data/checkpoints/ holds fixed-seed random weights saved by ``save_pretrained``,
the tokenizer files its own transformers tokenizer class writes (a vocabulary trained here; the ids in
the golden are what ``AutoTokenizer.from_pretrained(folder)`` gives) or the preprocessor config its
own image processor writes, and a ``golden.npz`` of the base model's eager attention
(``output_attentions=True``): ``attentions`` (L, nh, T, T) and ``last_hidden_state``.

* ``tiny_dinov2_reg``: ``Dinov2WithRegistersModel`` with 3 register tokens, a 4 x 4 position table run
  on the 3 x 5 grid its processor's crop gives (transformers resizes the table bicubically with
  antialiasing, which for a shrinking axis widens the filter);
* ``tiny_albert``: embeddings 8 wide projected to 16, 5 layers running 2 groups of shared weights
  (layers 0-2 group 0, 3-4 group 1), SentencePiece-style Unigram ``[CLS] ... [SEP]``;
* ``tiny_mpnet``: WordPiece ``<s> ... </s>``, 3 heads of 5, the 32-bucket relative position bias of the
  encoder added to every layer's scores; ``position_bias`` (nh, T, T) is saved too;
* ``tiny_deberta_v3``: DeBERTa v3's layout (``deberta-v2`` model_type): disentangled attention with
  content-to-position and position-to-content terms, keys shared with the positions (``share_att_key``),
  8 log position buckets (so a 30-token text reaches the logarithmic ones), the relative embeddings
  layer-normed, no absolute positions; ``c2c``, ``c2p``, ``p2c`` (L, nh, T, T) saved too, each already
  divided by sqrt(hs * 3) as transformers adds them;
* ``tiny_deberta_v2``: DeBERTa v2's other options: separate ``pos_key_proj`` / ``pos_query_proj``, no
  buckets (relative distances clamped at max_relative_positions 6), absolute positions added to a
  narrower embedding projected up (``embed_proj``), token types, the convolution after layer 0;
* ``tiny_beit_shared``: BEiT's other options: trained on a 4 x 4 grid and run on 3 x 5, one shared bias table
  (resized bilinearly for the new grid), an absolute position table (resized bicubically), no layer scale,
  a final LayerNorm (no mean pooling);
* ``tiny_dinov2_reg/golden_resize.npz``: torch's antialiased bicubic and bilinear resizes of a random
  (7, 5) grid to (3, 9), (11, 2) and (7, 5);
* ``tiny_deberta``: DeBERTa v1 (``deberta``): fused ``in_proj`` with per-head interleaved q / k / v, q and v
  biases, ``pos_proj`` / ``pos_q_proj``, relative distances clamped at max_relative_positions 5 (shorter
  than the text, so the table's span is 5), byte-level BPE ``[CLS] ... [SEP]``;
* ``tiny_beit``: 3 x 5 patches (non-square), a relative position bias in every layer, layer scale, mean
  pooling (so no final LayerNorm on ``last_hidden_state``); ``position_bias`` (L, nh, T, T).

Weights are drawn wide (std 0.4, norm gains around 1) so the attention maps are far from uniform.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
from transformers import (AlbertConfig, AlbertModel, AlbertTokenizer, AutoTokenizer, BeitConfig, BeitImageProcessorPil,
                          BeitModel, BitImageProcessorPil, DebertaConfig, DebertaModel, DebertaTokenizer, DebertaV2Config, DebertaV2Model, DebertaV2Tokenizer,
                          Dinov2WithRegistersConfig, Dinov2WithRegistersModel, MPNetConfig, MPNetModel, MPNetTokenizer)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints"
ONLY: set[str] = set()
TEXT = "The river bank flooded after the rain; the boats drifted away, slowly."
CORPUS = [
    "the river bank flooded after the rain and the boats drifted away",
    "a bank by the river keeps money safe, and a river bank keeps water in",
    "attention lets every token look at every other token and weigh what it sees",
    "the model reads the sentence one token at a time and predicts the next one",
    "slowly the water rose over the bank while the boats drifted further away",
]


def _wanted(name: str) -> bool:
    return not ONLY or name in ONLY


def _attn(outputs) -> np.ndarray:
    assert outputs.attentions is not None and len(outputs.attentions) > 0
    return torch.stack(outputs.attentions, 0)[:, 0].numpy().astype(np.float32)  # (L, nh, T, T)


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


def _fresh(name: str) -> Path:
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


# ---- text --------------------------------------------------------------------------------------------


def _unigram_vocab(pad: str = "<pad>", unk: str = "<unk>") -> list[tuple[str, float]]:
    """(piece, score) of a small SentencePiece-style Unigram over the corpus, the specials first."""
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=110, special_tokens=[pad, unk, "[CLS]", "[SEP]", "[MASK]"],
                                      unk_token=unk, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    return [(p, float(s)) for p, s in tok.get_vocab_with_scores()] if hasattr(tok, "get_vocab_with_scores") else \
        [tuple(x) for x in __import__("json").loads(tok.to_str())["model"]["vocab"]]


def _wordpiece_vocab() -> dict[str, int]:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=160, special_tokens=["<s>", "<pad>", "</s>", "[UNK]", "<mask>"],
                                        show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    return tok.get_vocab()


def text_golden(name: str, tokenizer, model, seed: int, **extra) -> None:
    d = _fresh(name)
    _randomise(model, seed)
    model = _eager(model)
    model.save_pretrained(d)
    tokenizer.save_pretrained(d)
    for f in ("special_tokens_map.json",):
        (d / f).unlink(missing_ok=True)
    loaded = AutoTokenizer.from_pretrained(d)
    ids = loaded(TEXT)["input_ids"]
    t = torch.tensor([ids])
    with torch.no_grad():
        out = model(input_ids=t, attention_mask=torch.ones_like(t), output_attentions=True)
    np.savez_compressed(d / "golden.npz", text=np.array(TEXT), tokens=np.array(loaded.convert_ids_to_tokens(ids)),
                        input_ids=np.array(ids, dtype=np.int64), attentions=_attn(out),
                        last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32),
                        **{k: f(model, t) for k, f in extra.items()})


def albert() -> None:
    if not _wanted("tiny_albert"):
        return
    tok = AlbertTokenizer(vocab=_unigram_vocab())
    torch.manual_seed(0)
    model = AlbertModel(AlbertConfig(
        vocab_size=len(tok), embedding_size=8, hidden_size=12, num_hidden_layers=5, num_hidden_groups=2,
        num_attention_heads=3, intermediate_size=20, hidden_act="gelu_new", max_position_embeddings=48,
        type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0, bos_token_id=2, eos_token_id=3),
        add_pooling_layer=True)
    text_golden("tiny_albert", tok, model, seed=31)


def _mpnet_bias(model, t):
    with torch.no_grad():
        x = model.embeddings(input_ids=t)
        return model.encoder.compute_position_bias(x)[0].numpy().astype(np.float32)  # (nh, T, T)


def mpnet() -> None:
    if not _wanted("tiny_mpnet"):
        return
    tok = MPNetTokenizer(vocab=_wordpiece_vocab())
    torch.manual_seed(0)
    model = MPNetModel(MPNetConfig(
        vocab_size=len(tok), hidden_size=15, num_hidden_layers=2, num_attention_heads=3, intermediate_size=24,
        hidden_act="gelu", max_position_embeddings=40, relative_attention_num_buckets=32, layer_norm_eps=1e-5,
        pad_token_id=1, bos_token_id=0, eos_token_id=2), add_pooling_layer=False)
    with torch.no_grad():  # wide bias values so the position term visibly moves the weights
        model.encoder.relative_attention_bias.weight.mul_(1.0)
    text_golden("tiny_mpnet", tok, model, seed=47, position_bias=_mpnet_bias)


def _deberta_terms(model, t):
    """(3, L, nh, T, T): content-to-content, content-to-position, position-to-content, as transformers adds them."""
    from transformers.models.deberta_v2 import modeling_deberta_v2 as md

    cfg = model.config
    out = []
    with torch.no_grad():
        x = model.embeddings(input_ids=t, mask=torch.ones_like(t))
        enc = model.encoder
        rel_pos = enc.get_rel_pos(x)
        rel = enc.get_rel_embedding()
        h = x
        for i, layer in enumerate(enc.layer):
            a = layer.attention.self
            q = a.transpose_for_scores(a.query_proj(h), a.num_attention_heads)
            k = a.transpose_for_scores(a.key_proj(h), a.num_attention_heads)
            sf = 1 + len(a.pos_att_type)
            scale = md.scaled_size_sqrt(q, sf)
            c2c = torch.bmm(q, k.transpose(-1, -2) / scale)
            saved = a.pos_att_type
            parts = []
            for kind in ("c2p", "p2c"):
                a.pos_att_type = [kind]
                parts.append(a.disentangled_attention_bias(q, k, rel_pos, rel, sf) if kind in saved else c2c * 0)
            a.pos_att_type = saved
            out.append(torch.stack([c2c, *parts]))
            h2, _ = layer(h, torch.ones_like(t), relative_pos=rel_pos, rel_embeddings=rel)
            if i == 0 and enc.conv is not None:
                h2 = enc.conv(x, h2, torch.ones_like(t))
            h = h2
    return torch.stack(out, 1).numpy().astype(np.float32)  # (3, L, nh, T, T)


def _byte_bpe_files() -> tuple[dict, list]:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, min_frequency=1, special_tokens=["[PAD]", "[CLS]", "[SEP]", "[UNK]",
                                                                                   "[MASK]"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    model = __import__("json").loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return model["vocab"], merges


def deberta() -> None:
    if _wanted("tiny_deberta"):
        vocab, merges = _byte_bpe_files()
        tok = DebertaTokenizer(vocab=vocab, merges=merges)
        torch.manual_seed(0)
        model = DebertaModel(DebertaConfig(
            vocab_size=len(tok), hidden_size=12, num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
            hidden_act="gelu", max_position_embeddings=64, type_vocab_size=0, layer_norm_eps=1e-7,
            relative_attention=True, max_relative_positions=5, position_biased_input=False, pos_att_type="c2p|p2c",
            pad_token_id=0))
        text_golden("tiny_deberta", tok, model, seed=67, terms=_deberta_v1_terms)
    common = dict(hidden_act="gelu", layer_norm_eps=1e-7, relative_attention=True, pad_token_id=0)
    if _wanted("tiny_deberta_v3"):
        tok = DebertaV2Tokenizer(vocab=_unigram_vocab("[PAD]", "[UNK]"), unk_id=1)
        torch.manual_seed(0)
        model = DebertaV2Model(DebertaV2Config(
            vocab_size=len(tok), hidden_size=12, num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
            max_position_embeddings=64, type_vocab_size=0, position_biased_input=False, pos_att_type=["p2c", "c2p"],
            share_att_key=True, position_buckets=8, max_relative_positions=-1, norm_rel_ebd="layer_norm", **common))
        text_golden("tiny_deberta_v3", tok, model, seed=59, terms=_deberta_terms)
    if _wanted("tiny_deberta_v2"):
        tok = DebertaV2Tokenizer(vocab=_unigram_vocab("[PAD]", "[UNK]"), unk_id=1, do_lower_case=True)
        torch.manual_seed(0)
        model = DebertaV2Model(DebertaV2Config(
            vocab_size=len(tok), hidden_size=12, embedding_size=8, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=20, max_position_embeddings=64, type_vocab_size=2, position_biased_input=True,
            pos_att_type="c2p|p2c", share_att_key=False, max_relative_positions=6, conv_kernel_size=3,
            conv_act="tanh", **common))
        text_golden("tiny_deberta_v2", tok, model, seed=61, terms=_deberta_terms)


def _deberta_v1_terms(model, t):
    """(3, L, nh, T, T) of DeBERTa v1: content-to-content, content-to-position, position-to-content."""
    out = []
    with torch.no_grad():
        x = model.embeddings(input_ids=t, mask=torch.ones_like(t))
        enc = model.encoder
        rel_pos = enc.get_rel_pos(x)
        rel = enc.get_rel_embedding()
        h = x
        for layer in enc.layer:
            a = layer.attention.self
            qp = a.in_proj(h)
            q, k, _ = a.transpose_for_scores(qp).chunk(3, dim=-1)
            q = q + a.transpose_for_scores(a.q_bias[None, None, :])
            sf = 1 + len(a.pos_att_type)
            q = q / torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * sf)
            c2c = q @ k.transpose(-1, -2)
            saved = a.pos_att_type
            parts = []
            for kind in ("c2p", "p2c"):
                a.pos_att_type = [kind]
                parts.append(a.disentangled_att_bias(q, k, rel_pos, rel, sf))
            a.pos_att_type = saved
            out.append(torch.stack([c2c, *parts])[:, 0])
            h, _ = layer(h, enc.get_attention_mask(torch.ones_like(t)), relative_pos=rel_pos, rel_embeddings=rel)
    return torch.stack(out, 1).numpy().astype(np.float32)  # (3, L, nh, T, T)


# ---- vision ------------------------------------------------------------------------------------------


def _image() -> np.ndarray:
    image = np.random.default_rng(13).integers(0, 256, size=(34, 50, 3), dtype=np.uint8)  # (H, W, 3)
    image[:17, 25:] = 250  # a bright quarter so the picture has structure
    return image


def vision_golden(name: str, model, processor, seed: int, **extra) -> None:
    d = _fresh(name)
    _randomise(model, seed)
    model = _eager(model)
    model.save_pretrained(d)
    processor.save_pretrained(d)
    image = _image()
    pv = processor(images=image, return_tensors="pt")["pixel_values"]  # (1, 3, H, W)
    with torch.no_grad():
        out = model(pixel_values=pv, output_attentions=True)
    np.savez_compressed(d / "golden.npz", image=image, pixel_values=pv[0].numpy().astype(np.float32),
                        attentions=_attn(out), last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32),
                        **{k: f(model, pv) for k, f in extra.items()})


def dinov2_reg() -> None:
    if not _wanted("tiny_dinov2_reg"):
        return
    torch.manual_seed(0)
    model = Dinov2WithRegistersModel(Dinov2WithRegistersConfig(
        image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, mlp_ratio=2,
        num_register_tokens=3, layer_norm_eps=1e-6))
    vision_golden("tiny_dinov2_reg", model, BitImageProcessorPil(
        size={"shortest_edge": 40}, crop_size={"height": 24, "width": 40}, resample=3,
        image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]), seed=71)


def _beit_bias(model, pv):
    h, w = pv.shape[2:]
    gh, gw = h // model.config.patch_size, w // model.config.patch_size
    with torch.no_grad():
        return torch.stack([layer.relative_position_bias((gh, gw))[0] for layer in model.layers]).numpy()


def beit() -> None:
    if not _wanted("tiny_beit"):
        return
    torch.manual_seed(0)
    model = BeitModel(BeitConfig(
        image_size=(24, 40), patch_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=24, use_relative_position_bias=True, use_absolute_position_embeddings=False,
        use_shared_relative_position_bias=False, layer_scale_init_value=0.1, use_mean_pooling=True,
        vocab_size=64), add_pooling_layer=True)
    vision_golden("tiny_beit", model, BeitImageProcessorPil(
        size={"height": 30, "width": 48}, crop_size={"height": 24, "width": 40}, do_center_crop=True, resample=2,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5]), seed=83, position_bias=_beit_bias)


def beit_shared() -> None:
    """A square-trained BEiT (4 x 4) run on the 3 x 5 grid of its processor's crop: one shared bias table resized
    bilinearly, an absolute position table resized bicubically, no layer scale, a final LayerNorm."""
    if not _wanted("tiny_beit_shared"):
        return
    torch.manual_seed(0)
    model = BeitModel(BeitConfig(
        image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=24, hidden_act="gelu", use_relative_position_bias=False, use_absolute_position_embeddings=True,
        use_shared_relative_position_bias=True, layer_scale_init_value=0.0, use_mean_pooling=False,
        layer_norm_eps=1e-6, vocab_size=64), add_pooling_layer=False)

    def bias(m, pv):
        gh, gw = pv.shape[2] // 8, pv.shape[3] // 8
        with torch.no_grad():
            b = m.shared_position_bias((gh, gw))[0]  # (nh, T, T)
        return np.broadcast_to(b.numpy(), (2, *b.shape)).copy()

    vision_golden("tiny_beit_shared", model, BeitImageProcessorPil(
        size={"height": 30, "width": 44}, crop_size={"height": 24, "width": 40}, do_center_crop=True, resample=3,
        image_mean=[0.5, 0.45, 0.4], image_std=[0.25, 0.3, 0.35]), seed=89, position_bias=bias)


def resizes() -> None:
    """tiny_dinov2_reg/golden_resize.npz: torch's bicubic (antialiased) and bilinear resizes of a random grid, shrinking
    one axis and growing the other, as the position tables and BEiT's bias tables are resized."""
    if not _wanted("tiny_dinov2_reg_resize"):
        return
    grid = torch.from_numpy(np.random.default_rng(3).normal(size=(1, 4, 7, 5)).astype(np.float32))  # (1, d, h, w)
    out = {"grid": grid[0].permute(1, 2, 0).numpy()}  # (h, w, d)
    for size in ((3, 9), (11, 2), (7, 5)):
        tag = f"{size[0]}x{size[1]}"
        aa = torch.nn.functional.interpolate(grid, size=size, mode="bicubic", align_corners=False, antialias=True)
        bl = torch.nn.functional.interpolate(grid, size=size, mode="bilinear", align_corners=False)
        out[f"bicubic_aa_{tag}"] = aa[0].permute(1, 2, 0).numpy()
        out[f"bilinear_{tag}"] = bl[0].permute(1, 2, 0).numpy()
    np.savez_compressed(OUT / "tiny_dinov2_reg" / "golden_resize.npz", **out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[], help="write only this folder (repeatable)")
    ONLY.update(ap.parse_args().only)
    dinov2_reg()
    albert()
    mpnet()
    deberta()
    beit()
    beit_shared()
    resizes()


if __name__ == "__main__":
    main()
