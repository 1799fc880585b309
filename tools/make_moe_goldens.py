"""Write the tiny mixture-of-experts checkpoints of tests/checkpoints/test_ckpt_moe.py and their goldens.

Run once, in an environment with torch (CPU) and transformers; attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_moe_goldens.py [--only NAME ...]

Each folder under tests/data/checkpoints/ is saved with ``save_pretrained`` (which writes the experts one
tensor each, as the published checkpoints carry them) and gets the ``golden.npz`` and
``golden_generate.npz`` of tools/make_decoder_family_goldens.py (eager attention, last hidden state,
greedy ids, logit lens), made the same way, and ``golden_experts.npz``: per sparse layer (``layers``) the
experts transformers' router picks for each token of the golden text (``experts`` (S, T, k), most
probable first) and their weights (``weights`` (S, T, k)):

* ``tiny_mixtral``   — Mixtral: 4 experts, top-2 renormalised, 4 q / 2 kv heads, a sliding window of 6 on
                       every layer, Llama-style tokenizer;
* ``tiny_qwen2_moe`` — Qwen2-MoE: 4 experts, top-2 not renormalised, a shared expert behind its sigmoid
                       gate, q/k/v biases, 3 layers of which the middle one keeps a dense MLP (mlp_only_layers);
* ``tiny_qwen3_moe`` — Qwen3-MoE: 4 experts, top-2 renormalised, q/k RMSNorm, head_dim 16 on d_model 32,
                       decoder_sparse_step 2 (layer 0 dense, layer 1 sparse).

Weights are drawn wide (std 0.3) so the routers' choices differ from token to token.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import (MixtralConfig, MixtralForCausalLM, Qwen2MoeConfig, Qwen2MoeForCausalLM, Qwen2Tokenizer,
                          Qwen3MoeConfig, Qwen3MoeForCausalLM)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_decoder_family_goldens as fam  # noqa: E402  (tokenizers, random weights and goldens as there)

NAMES = ["tiny_mixtral", "tiny_qwen2_moe", "tiny_qwen3_moe"]


def _save(name: str, model, tok) -> None:
    """The folder and goldens of make_decoder_family_goldens, then the routers' choices on its golden text."""
    fam._save(name, model, tok)
    d = fam.OUT / name
    ids = np.load(d / "golden.npz")["input_ids"]
    m = fam._fresh(d)
    picked: list[tuple[int, torch.Tensor, torch.Tensor]] = []
    for i, layer in enumerate(m.base_model.layers):
        router = getattr(layer.mlp, "gate", None)
        if type(router).__name__.endswith("TopKRouter"):
            router.register_forward_hook(lambda mod, args, out, i=i: picked.append((i, out[2], out[1])))
    with torch.no_grad():
        m.base_model(input_ids=torch.from_numpy(ids[None]))
    np.savez_compressed(d / "golden_experts.npz", layers=np.array([i for i, _, _ in picked], dtype=np.int64),
                        experts=np.stack([e.numpy() for _, e, _ in picked]).astype(np.int64),
                        weights=np.stack([w.float().numpy() for _, _, w in picked]).astype(np.float32))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=NAMES, default=NAMES, help="write only these checkpoints")
    only = set(ap.parse_args(argv).only)
    fam.OUT.mkdir(parents=True, exist_ok=True)
    if "tiny_mixtral" in only:
        tok = fam.llama_style()
        cfg = MixtralConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=24, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                            max_position_embeddings=64, sliding_window=6, rms_norm_eps=1e-5,
                            bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
        _save("tiny_mixtral", fam._model(MixtralForCausalLM, cfg, 41), tok)
    qtok = fam.byte_level(Qwen2Tokenizer, ["<|endoftext|>"], 300)
    if "tiny_qwen2_moe" in only:
        cfg = Qwen2MoeConfig(vocab_size=len(qtok), hidden_size=32, intermediate_size=40, num_hidden_layers=3,
                             num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                             moe_intermediate_size=16, shared_expert_intermediate_size=20, norm_topk_prob=False,
                             mlp_only_layers=[1], max_position_embeddings=64, rms_norm_eps=1e-6,
                             tie_word_embeddings=False)
        _save("tiny_qwen2_moe", fam._model(Qwen2MoeForCausalLM, cfg, 42), qtok)
    if "tiny_qwen3_moe" in only:
        cfg = Qwen3MoeConfig(vocab_size=len(qtok), hidden_size=32, intermediate_size=28, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=4,
                             num_experts_per_tok=2, moe_intermediate_size=20, norm_topk_prob=True,
                             decoder_sparse_step=2, max_position_embeddings=64, rms_norm_eps=1e-6,
                             tie_word_embeddings=True)
        _save("tiny_qwen3_moe", fam._model(Qwen3MoeForCausalLM, cfg, 43), qtok)
    sizes = {p.relative_to(fam.OUT).as_posix(): p.stat().st_size
             for x in NAMES if x in only for p in sorted((fam.OUT / x).rglob("*"))}
    for x in NAMES:
        if x in only:
            print(x, sum(v for k, v in sizes.items() if k.startswith(x + "/")) // 1024, "KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
