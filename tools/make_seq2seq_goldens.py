"""Write the tiny encoder-decoder checkpoints of tests/checkpoints/test_ckpt_seq2seq.py and their goldens.

Run once, in a throw-away environment with torch (CPU), transformers 5, sentencepiece and tokenizers;
attnviz never imports them:

    /tmp/gold/bin/python tools/make_seq2seq_goldens.py [--only NAME ...]

Each function writes one folder under tests/data/ with fixed-seed random weights (``save_pretrained``
of the model and of its tokenizer: config.json, model.safetensors and the tokenizer files as the
family ships them) and

* ``golden.npz``: ``source`` and ``target`` texts, ``input_ids`` (the tokenizer on the source),
  ``labels`` (on the target, ``text_target=``), ``decoder_input_ids`` (the labels shifted right as the
  model's own ``shift_tokens_right`` makes them), transformers' eager ``encoder_attentions`` (L_enc, nh,
  T_enc, T_enc), ``decoder_attentions`` (L_dec, nh, T_dec, T_dec), ``cross_attentions`` (L_dec, nh,
  T_dec, T_enc) from ``output_attentions=True``, ``encoder_hidden`` and ``decoder_hidden`` (the last
  hidden states of the two stacks, after their final norms) and ``logits``; the three kinds of maps once
  more from the model in float64 (``encoder_attentions_f64`` ...; T5's norms then take their variance in
  float64 too, not in float32 as transformers does), which a float64 pass must meet closely;
* ``golden_generate.npz``: transformers' greedy ``generate`` (``do_sample=False, num_beams=1``,
  ``max_new_tokens``) on a few sources, ``source_<i>`` and ``sequences_<i>`` (the decoder start token first),
  under the folder's generation_config.json, and ``sequences_rules`` for the first source with ``rules`` (JSON:
  no_repeat_ngram_size, repetition_penalty, min_new_tokens, bad_words_ids) added (``--generate-only`` writes
  just these);
* ``cases.json``: more source / target pairs with the ids the tokenizer gives them (language codes,
  unknown characters, several sentences), for the tokenizer tests.

The folders:

* ``tiny_marian``    — MarianMT: separate source / target SentencePiece models (source.spm, target.spm)
                       over one vocab.json, post-LN, sinusoidal positions, embeddings times sqrt(d_model),
                       swish, 4 encoder heads and 2 decoder heads, 2 encoder and 3 decoder layers;
* ``tiny_marian_separate`` — MarianMT with separate vocabularies (vocab.json and target_vocab.json) and
                       token tables for the encoder and the decoder;
* ``tiny_bart``      — BART: byte-level BPE (tokenizer.json), learned positions offset by 2,
                       layernorm_embedding, post-LN, GELU;
* ``tiny_bart_bf16`` — tiny_bart's weights stored as bfloat16 (the golden runs them in float32, as attnviz
                       computes them);
* ``tiny_mbart``     — mBART: a Unigram tokenizer.json with the fairseq language codes, src_lang en_XX and
                       tgt_lang ro_RO, pre-LN with final layer norms, embeddings times sqrt(d_model);
* ``tiny_mbart50``    — mBART-50's tokenizer (the language code first, ``</s>`` last), the decoder starting with
                       ``</s>``, ReLU;
* ``tiny_t5``        — T5 (v1.0 style): relative position buckets in the first layer of each stack, no score
                       scaling, ReLU MLP, RMSNorm without mean, d_kv * heads != d_model, tied embeddings;
* ``tiny_t5_gated``  — T5 v1.1 style: gated-GELU MLP, other bucket settings, 3 encoder and 2 decoder layers;
* ``tiny_t5_mt5``    — mT5 (model_type mt5, its gated-GELU default), d_kv 12 with 2 heads over d_model 16.

The Unigram tokenizers (mBART, T5) are trained afresh on each run and their scores may differ in the last
digits from one run to the next: rewrite a folder only together with its golden.

Weights are drawn wider than the library's initialiser (std 0.25, norm gains around 1) so the maps are
far from uniform and a wrong layer shows; tiny_t5_gated's std 0.18, as T5 does not scale its scores and
wider weights make maps whose float32 rounding alone passes 1e-5.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data"
SRC_CORPUS = [
    "I love you .", "the cat sat on the mat .", "where is the railway station ?", "we read the book together .",
    "attention shows which words the model looks at .", "the river bank flooded after the rain .",
    "she gave him a red apple and a blue cup .", "translation models align words across languages .",
]
TGT_CORPUS = [
    "je t' aime .", "le chat s' est assis sur le tapis .", "où est la gare ?", "nous lisons le livre ensemble .",
    "l' attention montre quels mots le modèle regarde .", "la rive a été inondée après la pluie .",
    "elle lui a donné une pomme rouge et une tasse bleue .", "les modèles de traduction alignent les mots .",
]
SOURCE, TARGET = "I love you, and the cat sat on the mat.", "je t' aime, et le chat est assis sur le tapis."
CASES = [("where is the station?", "où est la gare ?"), ("Zebra quizzed 42 jugs!", "zèbre 42 !"), ("the cat </s> sat", ""),
         ("the book. the river.", "le livre. la pluie."), ("a", "b"),
         (">><<the cat", "</s>"), ("the >>fr<< cat", ">>fr<<\n>>de<< chat"), ("cat <unk> <pad>mat", "  le  chat  ")]


def randomise(model: torch.nn.Module, seed: int, std: float = 0.25) -> None:
    """Every parameter redrawn: norm gains around 1, the rest N(0, std)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name:
                p.copy_(1.0 + 0.3 * noise)
            else:
                p.copy_(std * noise)


def fresh(name: str) -> Path:
    out = OUT / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def stack(atts) -> np.ndarray:
    """transformers' tuple of (1, nh, T, T') -> (L, nh, T, T') float32."""
    return torch.stack([a[0] for a in atts]).float().numpy()


@contextlib.contextmanager
def wide_norms():
    """T5LayerNorm (and mT5's copy) takes its variance in float32 whatever the input: for the float64 goldens it is taken in
    the input's own dtype, so they are the formula in float64 throughout."""
    from transformers.models.mt5.modeling_mt5 import MT5LayerNorm
    from transformers.models.t5.modeling_t5 import T5LayerNorm

    narrow = {cls: cls.forward for cls in (T5LayerNorm, MT5LayerNorm)}

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    for cls in narrow:
        cls.forward = forward
    try:
        yield
    finally:
        for cls, f in narrow.items():
            cls.forward = f


def golden(out: Path, model, tok, shift, source: str = SOURCE, target: str = TARGET) -> None:
    """Reload the saved folder (what transformers gives on it: Marian's sinusoidal positions are not saved
    but rebuilt), run it eagerly on (source, target) teacher-forced and write golden.npz and cases.json."""
    model = type(model).from_pretrained(out, attn_implementation="eager", dtype=torch.float32).eval()
    tok = type(tok).from_pretrained(out)
    enc = tok(source, return_tensors="pt")["input_ids"]
    labels = tok(text_target=target, return_tensors="pt")["input_ids"]
    dec = shift(labels)
    with torch.no_grad():
        res = model(input_ids=enc, decoder_input_ids=dec, output_attentions=True)
        e = model.get_encoder()(input_ids=enc)
        d = model.get_decoder()(input_ids=dec, encoder_hidden_states=e.last_hidden_state)
        with wide_norms():
            wide = model.double()(input_ids=enc, decoder_input_ids=dec, output_attentions=True)
    f64 = {f"{k}_f64": torch.stack([a[0] for a in getattr(wide, k)]).numpy()
           for k in ("encoder_attentions", "decoder_attentions", "cross_attentions")}
    np.savez_compressed(
        out / "golden.npz", source=source, target=target, input_ids=enc[0].numpy(), labels=labels[0].numpy(),
        decoder_input_ids=dec[0].numpy(), encoder_attentions=stack(res.encoder_attentions),
        decoder_attentions=stack(res.decoder_attentions), cross_attentions=stack(res.cross_attentions),
        encoder_hidden=e.last_hidden_state[0].float().numpy(), decoder_hidden=d.last_hidden_state[0].float().numpy(),
        logits=res.logits[0].float().numpy(), **f64)
    cases = []
    for s, t in CASES:
        lab = tok(text_target=t, return_tensors="pt")["input_ids"]
        cases.append({"source": s, "target": t, "input_ids": tok(s)["input_ids"], "labels": lab[0].tolist(),
                      "decoder_input_ids": shift(lab)[0].tolist()})
    (out / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def shift_right(start: int, pad: int):
    from transformers.models.bart.modeling_bart import shift_tokens_right

    return lambda labels: shift_tokens_right(labels, pad, start)


# ---- MarianMT ----------------------------------------------------------------------------------------

def train_spm(corpus: list[str], size: int) -> bytes:
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus * 4), model_writer=buf, vocab_size=size,
                                   model_type="unigram", hard_vocab_limit=False, character_coverage=1.0,
                                   normalization_rule_name="identity",
                                   minloglevel=2)
    return buf.getvalue()


def make_marian() -> None:
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    out = fresh("tiny_marian")
    tmp = out / "_spm"
    tmp.mkdir()
    pieces = []
    for name, corpus in (("source.spm", SRC_CORPUS), ("target.spm", TGT_CORPUS)):
        blob = train_spm(corpus, 90)
        (tmp / name).write_bytes(blob)
        sp = spm.SentencePieceProcessor(model_proto=blob)
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                   if not (sp.is_control(i) or sp.is_unknown(i))]
    vocab = {"</s>": 0, "<unk>": 1, ">>fr<<": 2, ">>de<<": 3}
    for p in pieces:
        vocab.setdefault(p, len(vocab))
    vocab["<pad>"] = len(vocab)
    (tmp / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    tok = MarianTokenizer(source_spm=str(tmp / "source.spm"), target_spm=str(tmp / "target.spm"),
                          vocab=str(tmp / "vocab.json"), source_lang="en", target_lang="fr")
    pad = vocab["<pad>"]
    cfg = MarianConfig(vocab_size=len(vocab), d_model=32, encoder_layers=2, decoder_layers=3,
                       encoder_attention_heads=4, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=48,
                       max_position_embeddings=64, activation_function="swish", scale_embedding=True,
                       pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad, forced_eos_token_id=0)
    torch.manual_seed(0)
    model = MarianMTModel(cfg).eval()
    randomise(model, 1)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    shutil.rmtree(tmp)
    golden(out, model, tok, shift_right(pad, pad))


def make_marian_separate() -> None:
    """Marian with separate source and target vocabularies (vocab.json, target_vocab.json) and token tables."""
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    out = fresh("tiny_marian_separate")
    tmp = out / "_spm"
    tmp.mkdir()
    vocabs = []
    for name, corpus, size in (("source.spm", SRC_CORPUS, 80), ("target.spm", TGT_CORPUS, 100)):
        blob = train_spm(corpus, size)
        (tmp / name).write_bytes(blob)
        sp = spm.SentencePieceProcessor(model_proto=blob)
        vocab = {"</s>": 0, "<unk>": 1}
        for i in range(sp.get_piece_size()):
            if not (sp.is_control(i) or sp.is_unknown(i)):
                vocab.setdefault(sp.id_to_piece(i), len(vocab))
        vocabs.append(vocab)
    n = max(len(v) for v in vocabs) + 1  # <pad> at the same id in both, the shorter one filled up
    for v in vocabs:
        for k in range(n - 1 - len(v)):
            v[f"<fill_{k}>"] = len(v)
        v["<pad>"] = n - 1
    (tmp / "vocab.json").write_text(json.dumps(vocabs[0], ensure_ascii=False), encoding="utf-8")
    (tmp / "target_vocab.json").write_text(json.dumps(vocabs[1], ensure_ascii=False), encoding="utf-8")
    tok = MarianTokenizer(source_spm=str(tmp / "source.spm"), target_spm=str(tmp / "target.spm"),
                          vocab=str(tmp / "vocab.json"), target_vocab_file=str(tmp / "target_vocab.json"),
                          separate_vocabs=True, source_lang="en", target_lang="fr")
    pad = n - 1
    cfg = MarianConfig(vocab_size=n, decoder_vocab_size=n, share_encoder_decoder_embeddings=False, d_model=16,
                       encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=4,
                       encoder_ffn_dim=32, decoder_ffn_dim=24, max_position_embeddings=48, activation_function="swish",
                       scale_embedding=True, pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad,
                       forced_eos_token_id=0, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = MarianMTModel(cfg).eval()
    randomise(model, 6)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    shutil.rmtree(tmp)
    golden(out, model, tok, shift_right(pad, pad))


# ---- BART / mBART ------------------------------------------------------------------------------------

def make_bart(name: str = "tiny_bart", bf16: bool = False) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizer

    out = fresh(name)
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t.train_from_iterator(SRC_CORPUS + TGT_CORPUS, trainer=trainer)
    spec = json.loads(t.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]
    tok = BartTokenizer(vocab=spec["vocab"], merges=merges)
    cfg = BartConfig(vocab_size=len(tok), d_model=24, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=3, encoder_ffn_dim=40, decoder_ffn_dim=56, max_position_embeddings=48,
                     activation_function="gelu", scale_embedding=False, pad_token_id=tok.pad_token_id,
                     bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, decoder_start_token_id=tok.eos_token_id,
                     forced_bos_token_id=tok.bos_token_id)
    torch.manual_seed(0)
    model = BartForConditionalGeneration(cfg).eval()
    randomise(model, 2)
    if bf16:
        model = model.to(torch.bfloat16)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    golden(out, model, tok, shift_right(cfg.decoder_start_token_id, cfg.pad_token_id))


def make_bart_bf16() -> None:
    """tiny_bart's weights stored as bfloat16; the golden runs them in float32, as attnviz computes them."""
    make_bart("tiny_bart_bf16", bf16=True)


def unigram_vocab(corpus: list[str], special: list[str], size: int) -> list[tuple[str, float]]:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    t = Tokenizer(models.Unigram())
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.UnigramTrainer(vocab_size=size, special_tokens=special, unk_token="<unk>",
                                      show_progress=False)
    t.train_from_iterator(corpus, trainer=trainer)
    return [tuple(v) for v in json.loads(t.to_str())["model"]["vocab"]]


def make_mbart() -> None:
    from transformers import MBartConfig, MBartForConditionalGeneration, MBartTokenizer
    from transformers.models.mbart.modeling_mbart import shift_tokens_right

    out = fresh("tiny_mbart")
    vocab = unigram_vocab(SRC_CORPUS + TGT_CORPUS, ["<s>", "<pad>", "</s>", "<unk>"], 160)
    tok = MBartTokenizer(vocab=vocab, src_lang="en_XX", tgt_lang="ro_RO")
    cfg = MBartConfig(vocab_size=len(tok), d_model=32, encoder_layers=3, decoder_layers=2, encoder_attention_heads=2,
                      decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=64, max_position_embeddings=40,
                      activation_function="gelu", scale_embedding=True, pad_token_id=tok.pad_token_id,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      decoder_start_token_id=tok.convert_tokens_to_ids("ro_RO"))
    torch.manual_seed(0)
    model = MBartForConditionalGeneration(cfg).eval()
    randomise(model, 3)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    golden(out, model, tok, lambda labels: shift_tokens_right(labels, cfg.pad_token_id))


def make_mbart50() -> None:
    """mBART-50's tokenizer (MBart50Tokenizer: the language code first, ``</s>`` last) on an mBART model whose
    decoder starts with ``</s>``, as mbart-large-50 checkpoints do."""
    from transformers import MBart50Tokenizer, MBartConfig, MBartForConditionalGeneration
    from transformers.models.mbart.modeling_mbart import shift_tokens_right

    out = fresh("tiny_mbart50")
    vocab = unigram_vocab(SRC_CORPUS + TGT_CORPUS, ["<unk>", "<s>", "</s>"], 140)
    tok = MBart50Tokenizer(vocab=vocab, src_lang="en_XX", tgt_lang="ro_RO")
    cfg = MBartConfig(vocab_size=len(tok), d_model=24, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                      decoder_attention_heads=2, encoder_ffn_dim=40, decoder_ffn_dim=32, max_position_embeddings=40,
                      activation_function="relu", scale_embedding=True, pad_token_id=tok.pad_token_id,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      decoder_start_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    model = MBartForConditionalGeneration(cfg).eval()
    randomise(model, 7)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    golden(out, model, tok, lambda labels: shift_tokens_right(labels, cfg.pad_token_id))


# ---- T5 ----------------------------------------------------------------------------------------------

def _t5(name: str, seed: int, std: float, mt5: bool = False, **kw) -> None:
    from transformers import (MT5Config, MT5ForConditionalGeneration, T5Config, T5ForConditionalGeneration,
                              T5Tokenizer)

    out = fresh(name)
    vocab = unigram_vocab(SRC_CORPUS + TGT_CORPUS, ["<pad>", "</s>", "<unk>"], 150)
    tok = T5Tokenizer(vocab=vocab, extra_ids=4)
    config, cls = (MT5Config, MT5ForConditionalGeneration) if mt5 else (T5Config, T5ForConditionalGeneration)
    cfg = config(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                 decoder_start_token_id=tok.pad_token_id, **kw)
    torch.manual_seed(0)
    model = cls(cfg).eval()
    randomise(model, seed, std)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    golden(out, model, tok, shift_right(cfg.decoder_start_token_id, cfg.pad_token_id))


def make_t5() -> None:
    _t5("tiny_t5", 4, 0.25, d_model=24, d_kv=8, d_ff=40, num_layers=2, num_decoder_layers=3, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=20, feed_forward_proj="relu",
        tie_word_embeddings=True)


def make_t5_gated() -> None:
    _t5("tiny_t5_gated", 5, 0.18, d_model=32, d_kv=8, d_ff=48, num_layers=3, num_decoder_layers=2, num_heads=4,
        relative_attention_num_buckets=16, relative_attention_max_distance=12, feed_forward_proj="gated-gelu",
        tie_word_embeddings=False, layer_norm_epsilon=1e-6)  # (transformers 5 ties the head all the same)


def make_mt5() -> None:
    _t5("tiny_t5_mt5", 8, 0.2, mt5=True, d_model=16, d_kv=12, d_ff=40, num_layers=2, num_decoder_layers=2,
        num_heads=2, relative_attention_num_buckets=10, relative_attention_max_distance=16)


GENERATE_SOURCES = (SOURCE, "where is the railway station ?", "the cat")
CLASSES = {"marian": ("MarianMTModel", "MarianTokenizer"), "bart": ("BartForConditionalGeneration", "AutoTokenizer"),
           "mbart": ("MBartForConditionalGeneration", "AutoTokenizer"), "t5": ("T5ForConditionalGeneration", "AutoTokenizer"),
           "mt5": ("MT5ForConditionalGeneration", "AutoTokenizer")}


def generate_golden(out: Path, max_new_tokens: int = 10) -> None:
    """golden_generate.npz of a saved folder: transformers' greedy generate (do_sample=False, num_beams=1) on a few
    sources, ``source_<i>`` and ``sequences_<i>`` (the decoder start token first), with the folder's
    generation_config.json."""
    import transformers

    kind = json.loads((out / "config.json").read_text())["model_type"]
    model_cls, tok_cls = (getattr(transformers, n) for n in CLASSES[kind])
    model = model_cls.from_pretrained(out, attn_implementation="eager", dtype=torch.float32).eval()
    tok = tok_cls.from_pretrained(out)
    arrays = {}
    for i, text in enumerate(GENERATE_SOURCES):
        enc = tok(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            # use_cache=False: transformers 5.24 sizes T5's cache by num_layers, which fails when the decoder
            # has more layers (tiny_t5); greedy search gives the same tokens either way
            seq = model.generate(input_ids=enc, do_sample=False, num_beams=1, max_new_tokens=max_new_tokens,
                                 use_cache=False)
        arrays[f"source_{i}"], arrays[f"sequences_{i}"] = text, seq[0].numpy()
    first = arrays["sequences_0"]  # the rules: ban the token greedy search wrote most, forbid repeats
    rules = {"no_repeat_ngram_size": 2, "repetition_penalty": 1.5, "min_new_tokens": 4,
             "bad_words_ids": [[int(np.bincount(first[1:]).argmax())]]}
    enc = tok(GENERATE_SOURCES[0], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        seq = model.generate(input_ids=enc, do_sample=False, num_beams=1, max_new_tokens=max_new_tokens,
                             use_cache=False, **rules)
    arrays["rules"], arrays["sequences_rules"] = json.dumps(rules), seq[0].numpy()
    np.savez_compressed(out / "golden_generate.npz", max_new_tokens=max_new_tokens, **arrays)


MAKERS = {"tiny_marian": make_marian, "tiny_marian_separate": make_marian_separate, "tiny_bart": make_bart, "tiny_bart_bf16": make_bart_bf16, "tiny_mbart": make_mbart, "tiny_mbart50": make_mbart50, "tiny_t5": make_t5,
          "tiny_t5_gated": make_t5_gated, "tiny_t5_mt5": make_mt5}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", choices=sorted(MAKERS), help="write only these folders")
    ap.add_argument("--generate-only", action="store_true",
                    help="write only golden_generate.npz of the folders already there")
    args = ap.parse_args()
    for name in args.only or MAKERS:
        if not args.generate_only:
            MAKERS[name]()
        generate_golden(OUT / name)
        print("wrote", OUT / name)


if __name__ == "__main__":
    main()
