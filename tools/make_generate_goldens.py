"""Write the generation goldens of tests/checkpoints/test_ckpt_generate.py.

Run once, in an environment with torch (CPU) and transformers; attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_generate_goldens.py

For each tiny decoder of tests/data/checkpoints (tied heads) it writes ``golden_generate.npz``:
``prompt_ids``; ``greedy_ids`` (prompt and new tokens) from ``generate(do_sample=False,
max_new_tokens=NEW)``; ``attentions`` (L, nh, T, T) of the eager forward over that whole sequence; and for
the sampling warpers (temperature TEMP, top-k TOPK, top-p TOPP, in transformers' order) ``probs``
(NEW, vocab): the next-token distribution after each prefix of the greedy sequence; ``lens_probs``
(L + 1, vocab): the logit lens at the prompt's last token, each of ``output_hidden_states`` through the
final norm and the head (the last one is normed by transformers already: its logits are the model's).
It also writes ``tiny_llama_lm``: the Llama of ``tiny_llama`` with an untied ``lm_head.weight`` (saved from
LlamaForCausalLM), with the same golden.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM
from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                    TopKLogitsWarper, TopPLogitsWarper)

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "checkpoints"
FAMILIES = ["tiny_llama", "tiny_mistral", "tiny_qwen2", "tiny_qwen3", "tiny_gemma", "tiny_gemma2", "tiny_gemma3"]
PROMPT = [1, 5, 9, 3, 7, 11]
NEW = 8
TEMP, TOPK, TOPP = 0.7, 20, 0.9


def golden(model, folder: Path) -> None:
    prompt = torch.tensor([PROMPT])
    with torch.no_grad():
        out = model.generate(prompt, do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW,
                             pad_token_id=0, eos_token_id=None)
        seq = out[0]
        full = model(seq[None], output_attentions=True)
        warpers = LogitsProcessorList([TemperatureLogitsWarper(TEMP), TopKLogitsWarper(TOPK), TopPLogitsWarper(TOPP)])
        probs = []
        for t in range(len(PROMPT), len(seq)):
            prefix = seq[None, :t]
            z = model(prefix).logits[:, -1].double()
            probs.append(torch.softmax(warpers(prefix, z), dim=-1)[0].numpy())
        hs = model(prompt, output_hidden_states=True).hidden_states
        lens = [model.lm_head(model.model.norm(h[:, -1])) for h in hs[:-1]] + [model.lm_head(hs[-1][:, -1])]
        cap = getattr(model.config, "final_logit_softcapping", None)
        if cap:
            lens = [cap * torch.tanh(z / cap) for z in lens]
        lens_probs = torch.softmax(torch.cat(lens).double(), dim=-1).numpy()
    np.savez_compressed(folder / "golden_generate.npz", prompt_ids=np.array(PROMPT, dtype=np.int64),
                        lens_probs=lens_probs,
                        greedy_ids=seq.numpy().astype(np.int64),
                        attentions=torch.stack(full.attentions)[:, 0].float().numpy(),
                        probs=np.array(probs, dtype=np.float64), temperature=TEMP, top_k=TOPK, top_p=TOPP)
    print(folder.name, seq.tolist())


def main() -> None:
    torch.manual_seed(0)
    for name in FAMILIES:
        folder = DATA / name
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
        golden(model, folder)
    lm = DATA / "tiny_llama_lm"
    if lm.exists():
        shutil.rmtree(lm)
    base = AutoModelForCausalLM.from_pretrained(DATA / "tiny_llama", dtype=torch.float32,
                                                attn_implementation="eager")
    base.config.tie_word_embeddings = False
    model = AutoModelForCausalLM.from_config(base.config, dtype=torch.float32, attn_implementation="eager").eval()
    model.model.load_state_dict(base.model.state_dict())
    with torch.no_grad():
        model.lm_head.weight.copy_(torch.randn_like(model.lm_head.weight) * 0.3)
    model.save_pretrained(lm)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(DATA / "tiny_llama" / f, lm / f)
    golden(model, lm)


if __name__ == "__main__":
    main()
