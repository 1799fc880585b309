"""Write the generation goldens of tests/checkpoints/test_generate_vlm.py.

Run once, in an environment with torch (CPU) and transformers 5; attnviz itself never imports them:

    /tmp/gold/bin/python tools/make_vlm_generate_goldens.py

For each tiny vision-language checkpoint of tests/data/checkpoints it reads the processor's own
``input_ids`` and ``pixel_values`` kept in that folder's ``golden.npz`` (made by make_vlm_goldens.py) and
writes ``golden_generate.npz``: ``prompt_ids`` (the expanded prompt), ``greedy_ids`` (prompt and new
tokens) from ``generate(do_sample=False, max_new_tokens=NEW)`` with no end-of-sequence stop; ``probs``
(NEW, vocab) the softmax of the logits ``generate`` scored at each step; ``warped`` (NEW, vocab) the same
logits through transformers' temperature, top-k and top-p warpers (TEMP, TOPK, TOPP, in that order) then
the softmax, as a sampled step draws from them; and ``attentions`` (L, nh, T, T)
of the eager forward over the whole final sequence with the same pixels (for PaliGemma the new tokens as
suffix, token type 1: causal, unseen by the prefix, as the cached steps see them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForImageTextToText
from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                    TopKLogitsWarper, TopPLogitsWarper)

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "checkpoints"
FOLDERS = ["tiny_paligemma", "tiny_paligemma2", "tiny_llava", "tiny_llava_full", "tiny_idefics3", "tiny_smolvlm"]
NEW = 6
TEMP, TOPK, TOPP = 0.7, 20, 0.9


def inputs(folder: Path) -> dict[str, torch.Tensor]:
    g = np.load(folder / "golden.npz", allow_pickle=False)
    out = {"input_ids": torch.from_numpy(g["input_ids"].astype(np.int64))[None],
           "pixel_values": torch.from_numpy(g["pixel_values"].astype(np.float32))[None]}
    if "pixel_attention_mask" in g:
        out["pixel_attention_mask"] = torch.from_numpy(g["pixel_attention_mask"].astype(bool))[None]
    if "token_type_ids" in g:
        out["token_type_ids"] = torch.from_numpy(g["token_type_ids"].astype(np.int64))[None]
    out["attention_mask"] = torch.ones_like(out["input_ids"])
    return out


def golden(folder: Path) -> None:
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32,
                                                        attn_implementation="eager").eval()
    batch = inputs(folder)
    n0 = batch["input_ids"].shape[1]
    with torch.no_grad():
        out = model.generate(**batch, do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW, eos_token_id=None,
                             pad_token_id=0, output_scores=True, return_dict_in_generate=True)
        seq = out.sequences[0]
        scores = torch.stack(out.scores)[:, 0].double()  # (NEW, vocab) the logits of each step
        probs = torch.softmax(scores, dim=-1).numpy()
        warpers = LogitsProcessorList([TemperatureLogitsWarper(TEMP), TopKLogitsWarper(TOPK), TopPLogitsWarper(TOPP)])
        warped = np.stack([torch.softmax(warpers(seq[None, :n0 + i], scores[i:i + 1]), dim=-1)[0].numpy()
                           for i in range(len(scores))])  # (NEW, vocab)
        full = dict(batch)
        full["input_ids"] = seq[None]
        full["attention_mask"] = torch.ones_like(seq)[None]
        if "token_type_ids" in full:
            full["token_type_ids"] = torch.cat([batch["token_type_ids"][0], torch.ones(len(seq) - n0, dtype=torch.int64)])[None]
        res = model(**full, output_attentions=True)
        atts = torch.stack(res.attentions)[:, 0].float().numpy()  # (L, nh, T, T)
    np.savez_compressed(folder / "golden_generate.npz", prompt_ids=batch["input_ids"][0].numpy(),
                        greedy_ids=seq.numpy().astype(np.int64), probs=probs, warped=warped, attentions=atts,
                        temperature=TEMP, top_k=TOPK, top_p=TOPP)
    print(folder.name, n0, seq[n0:].tolist(), atts.shape)


def main() -> None:
    torch.manual_seed(0)
    for name in FOLDERS:
        golden(DATA / name)


if __name__ == "__main__":
    main()
