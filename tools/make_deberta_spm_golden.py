"""Write a tiny DeBERTa-v3 checkpoint that ships only ``spm.model`` (no tokenizer.json), as the published
DeBERTa-v3 repositories do, with AutoTokenizer's ids of several texts and the model's eager attention as goldens.

Run once, in a separate environment that has torch (CPU), transformers 5 and sentencepiece:

    /tmp/gold/bin/python tools/make_deberta_spm_golden.py

``tests/data/checkpoints/tiny_deberta_v3_spm``: a SentencePiece Unigram model trained here on a small corpus
(``[PAD]`` 0, ``[CLS]`` 1, ``[SEP]`` 2 as control pieces, ``[UNK]`` 3, a user-defined ``<br>``), a
``tokenizer_config.json`` that says only what deberta-v3-base's does (``do_lower_case`` false, ``vocab_type``
spm), so transformers' DebertaV2Tokenizer appends ``[MASK]`` after the pieces; a random ``DebertaV2Model`` in
DeBERTa v3's layout (shared keys, log position buckets). ``golden.npz``: ``texts`` and, for text i,
``ids_<i>`` (AutoTokenizer's ids); ``text``, ``input_ids``, ``attentions`` (L, nh, T, T) and
``last_hidden_state`` of the first text. ``golden_options.npz``: the ids of the same texts with
``tokenizer_config.json`` set to :data:`OPTIONS` (lower case, punctuation split, no prefix space, ``<mask>`` as an
added token at id 82).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import sentencepiece as spm
import torch
from transformers import AutoTokenizer, DebertaV2Config, DebertaV2Model

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints" / "tiny_deberta_v3_spm"
CORPUS = [
    "the river bank flooded after the rain and the boats drifted away",
    "a bank by the river keeps money safe, and a river bank keeps water in",
    "attention lets every token look at every other token and weigh what it sees",
    "the model reads the sentence one token at a time and predicts the next one",
    "slowly the water rose over the bank while the boats drifted further away",
    "Rivers, banks and boats: the Model reads 3 sentences; then 42 more!",
]
TEXTS = [
    "The river bank flooded after the rain; the boats drifted away, slowly.",
    "  Two  spaces,\ttabs\nand new lines  ",
    "[CLS] typed specials [SEP] and [MASK] stay whole<br>here",
    "caf\u00e9 and cafe\u0301, \ufb01ne \u00bd \u2460 \u4e2d\u6587 emoji \U0001f600",
    "UPPER lower MiXeD 12345 !?.,;:",
    "",
]

OPTIONS = {"do_lower_case": True, "split_by_punct": True, "add_prefix_space": False, "mask_token": "<mask>",
           "added_tokens_decoder": {"82": {"content": "<mask>", "special": True}}}


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 4), model_writer=buf, model_type="unigram", vocab_size=90,
        hard_vocab_limit=False, pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2, eos_piece="[SEP]",
        unk_id=3, unk_piece="[UNK]", user_defined_symbols=["<br>"], character_coverage=1.0)
    (OUT / "spm.model").write_bytes(buf.getvalue())
    (OUT / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "vocab_type": "spm"}, indent=2))
    n_pieces = spm.SentencePieceProcessor(model_proto=buf.getvalue()).get_piece_size()
    torch.manual_seed(0)
    model = DebertaV2Model(DebertaV2Config(
        vocab_size=n_pieces + 1, hidden_size=12, num_hidden_layers=2, num_attention_heads=3, intermediate_size=20,
        max_position_embeddings=64, type_vocab_size=0, position_biased_input=False, pos_att_type=["p2c", "c2p"],
        share_att_key=True, position_buckets=8, max_relative_positions=-1, norm_rel_ebd="layer_norm",
        hidden_act="gelu", layer_norm_eps=1e-7, relative_attention=True, pad_token_id=0))
    g = torch.Generator().manual_seed(53)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            p.copy_(1.0 + 0.3 * noise if "norm" in name.lower() and name.endswith("weight") else 0.4 * noise)
    model.set_attn_implementation("eager")
    model.eval()
    model.save_pretrained(OUT)
    tok = AutoTokenizer.from_pretrained(OUT)
    print(type(tok).__name__, len(tok), tok.convert_ids_to_tokens(tok(TEXTS[2])["input_ids"]))
    ids = {f"ids_{i}": np.array(tok(t)["input_ids"], dtype=np.int64) for i, t in enumerate(TEXTS)}
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids["ids_0"]]), output_attentions=True)
    np.savez_compressed(OUT / "golden.npz", texts=np.array(TEXTS), text=TEXTS[0], input_ids=ids["ids_0"],
                        attentions=torch.stack(out.attentions, 0)[:, 0].numpy().astype(np.float32),
                        last_hidden_state=out.last_hidden_state[0].numpy().astype(np.float32), **ids)
    assert not (OUT / "tokenizer.json").exists()
    # the tokenizer's options, from a copy whose tokenizer_config.json sets them
    tmp = Path("/tmp/deberta_spm_options")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(OUT, tmp)
    (tmp / "tokenizer_config.json").write_text(json.dumps(OPTIONS))
    tok = AutoTokenizer.from_pretrained(tmp)
    np.savez_compressed(OUT / "golden_options.npz", texts=np.array(TEXTS[:-1]),
                        **{f"ids_{i}": np.array(tok(t)["input_ids"], dtype=np.int64) for i, t in enumerate(TEXTS[:-1])})


if __name__ == "__main__":
    main()
