"""Write the attention-maps goldens of tests/api/test_api.py: real transformers outputs saved by attnviz.save.

Run once, in a throw-away environment with torch (CPU) and transformers 5 (attnviz never imports them):

    PYTHONPATH=. /tmp/gold/bin/python tools/make_maps_goldens.py

Two tiny fixed-seed random models (weights of standard deviation 0.5, so the maps are far from uniform) run in float64 with eager attention and ``output_attentions=True``:

* a BERT (2 layers x 2 heads, hidden 16) on a batch of two sequences, the second padded (its last keys
  masked): ``bert_batch1.npz`` is ``attnviz.save(path, outputs.attentions, tokens, batch=1)`` straight from the
  tuple of torch tensors, ``bert_bf16.safetensors`` the same maps from the model cast to bfloat16;
* a BART (2 + 2 layers, 2 heads, d_model 16) teacher-forced on a target: ``bart_cross.npz`` is
  ``attnviz.save(path, outputs.cross_attentions, source_tokens, target_tokens=target_tokens)``;

and ``reference.npz`` holds, from plain numpy, the float64 maps transformers returned (``bert`` (L, nh, T, T)
of sequence 1, ``bart_cross`` (L, nh, T_dec, T_enc)) and the float32 values of the bfloat16 run (``bert_bf16``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import BartConfig, BartModel, BertConfig, BertModel

import attnviz

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "maps"


def bert():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=32, initializer_range=0.5,
                     attn_implementation="eager")
    model = BertModel(cfg).eval().double()
    ids = torch.tensor([[2, 11, 12, 13, 14, 15, 3], [2, 21, 22, 23, 3, 0, 0]])
    mask = torch.tensor([[1] * 7, [1, 1, 1, 1, 1, 0, 0]])
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    tokens = ["[CLS]", "the", "river", "bank", "[SEP]", "[PAD]", "[PAD]"]
    attnviz.save(OUT / "bert_batch1.npz", out.attentions, tokens, batch=1, title="tiny BERT, sequence 1")
    ref = np.stack([a[1].numpy() for a in out.attentions])  # (L, nh, T, T) float64
    model16 = model.to(torch.bfloat16)
    with torch.no_grad():
        out16 = model16(input_ids=ids, attention_mask=mask, output_attentions=True)
    attnviz.save(OUT / "bert_bf16.safetensors", out16.attentions, tokens, batch=1)
    ref16 = np.stack([a[1].float().numpy() for a in out16.attentions])
    return ref, ref16


def bart():
    torch.manual_seed(1)
    cfg = BartConfig(vocab_size=60, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                     decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=32, init_std=0.5,
                     attn_implementation="eager")
    model = BartModel(cfg).eval().double()
    src = torch.tensor([[0, 31, 32, 33, 34, 2]])
    tgt = torch.tensor([[2, 0, 41, 42, 43]])
    with torch.no_grad():
        out = model(input_ids=src, decoder_input_ids=tgt, output_attentions=True)
    source = ["<s>", "je", "t'", "aime", ".", "</s>"]
    target = ["</s>", "<s>", "I", "love", "you"]
    attnviz.save(OUT / "bart_cross.npz", out.cross_attentions, source, target_tokens=target,
                 title="tiny BART cross-attention")
    return np.stack([a[0].numpy() for a in out.cross_attentions])  # (L, nh, T_dec, T_enc)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    ref, ref16 = bert()
    cross = bart()
    np.savez_compressed(OUT / "reference.npz", bert=ref, bert_bf16=ref16, bart_cross=cross)
    for p in sorted(OUT.iterdir()):
        print(p.name, p.stat().st_size)


if __name__ == "__main__":
    main()
