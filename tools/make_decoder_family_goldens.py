"""Write the tiny GPT-NeoX, Phi, Phi-3, OLMo, OLMo 2 and StableLM checkpoints of
tests/checkpoints/test_decoder_families_new.py and their golden outputs.

Run once, in an environment with torch (CPU) and transformers; attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_decoder_family_goldens.py [--only NAME ...]

Under tests/data/checkpoints/ it writes one folder per checkpoint, saved with ``save_pretrained``
(config.json, model.safetensors, tokenizer.json, tokenizer_config.json), with

* ``golden.npz``: transformers' eager attention (``output_attentions=True``) on a fixed text: ``text``,
  ``input_ids`` (as the folder's own AutoTokenizer gives them), ``attentions`` (L, nh, T, T) float32 and
  ``last_hidden_state``;
* ``golden_generate.npz``: ``prompt_ids`` (the first PROMPT ids of the text) and ``greedy_ids`` (prompt and
  NEW new tokens) from ``generate(do_sample=False)``, and ``lens_probs`` (L + 1, vocab): the logit lens at
  the prompt's last token, each of ``output_hidden_states`` through the final norm and the head (the last
  row is the model's own next-token distribution); each golden on a freshly loaded model (the
  length-dependent rotary types keep state between calls in transformers).

The shapes are chosen awkward (head sizes 8 to 16, key/value groups, partial rotary on 1/4, 1/2 and 3/4
of each head) and the weights wide (std 0.3, norm gains around 1) so a wrong layer shows:

* ``tiny_gpt_neox``  — GPT-NeoX / Pythia: parallel residual (the MLP reads its own norm of x), fused
                       query_key_value laid out head after head, rotary_pct 0.25 of head_dim 16, untied head;
* ``tiny_gpt_neox_dynamic`` — GPT-NeoX without the parallel residual, no attention biases, rope ``dynamic``
                       x3 over a context of 12 (the text and the generation run past it), rotary_pct 0.5;
* ``tiny_phi``       — Phi-1/2: one LayerNorm read by attention and MLP in parallel, q/k LayerNorm, dense
                       biases, partial_rotary_factor 0.5, gelu_new, a head with a bias;
* ``tiny_phi3``      — Phi-3 / Phi-4-mini: fused qkv_proj and gate_up_proj, 4 q / 2 kv heads,
                       partial_rotary_factor 0.75, ``longrope`` with an original context of 6 (the text and
                       the generation pass it: long factors from there on);
* ``tiny_olmo``      — OLMo: LayerNorm without weight or bias, clip_qkv 0.5 (q, k and v clamped);
* ``tiny_olmo2``     — OLMo 2: RMSNorm of the whole q and k projections, norms after attention and MLP;
* ``tiny_stablelm``  — StableLM: LayerNorm, q/k/v biases, a LayerNorm per head on q and k, partial rotary 0.25;
* ``tiny_falcon``    — Falcon's new decoder architecture: 6 q / 2 kv heads in the grouped query_key_value
                       layout, two norms (ln_attn, ln_mlp) read in parallel, no biases, tied head;
* ``tiny_falcon_mq`` — the first Falcons: multi-query (one k/v head), one norm read by attention and MLP in
                       parallel, biases;
* ``tiny_falcon_seq`` — Falcon without multi_query and parallel_attn: q/k/v interleaved per head, sequential block;
* ``tiny_opt``       — OPT: learned positions from row 2, LayerNorm, ReLU, biases, tied head, ``</s>`` before every text;
* ``tiny_opt_plain`` — OPT without biases and with LayerNorms that have no weight or bias, GELU;
* ``tiny_bloom``     — BLOOM: ALiBi over 6 heads (not a power of two: the extra slopes are used), a LayerNorm of
                       the token rows, q/k/v interleaved per head, tied head;
* ``tiny_llama_longrope`` — Llama with ``longrope`` (original context 5; Llama, unlike Phi-3, keeps its cache
                       when a generation passes it);
* ``tiny_qwen2_dynamic``  — Qwen2 with ``dynamic`` x4 over a context of 10, q/k/v biases;
* ``tiny_phi3_window``    — Phi-3 as Phi-3-mini-4k is configured: a sliding window (here 5) on every layer, plain rope.

Tokenizers are trained here on a small corpus (byte-level BPE for the GPT-NeoX-style families, the
SentencePiece-style one for Phi-3) and saved with the family's own tokenizer class.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (AutoModelForCausalLM, AutoTokenizer, BloomConfig, BloomForCausalLM, CodeGenTokenizer, FalconConfig, FalconForCausalLM,
                          GPT2Tokenizer, GPTNeoXConfig, GPTNeoXForCausalLM, GPTNeoXTokenizer, LlamaConfig,
                          LlamaForCausalLM, LlamaTokenizer, Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer,
                          Olmo2Config, Olmo2ForCausalLM, OlmoConfig, OlmoForCausalLM, OPTConfig, OPTForCausalLM,
                          Phi3Config, Phi3ForCausalLM, PhiConfig, PhiForCausalLM, StableLmConfig, StableLmForCausalLM)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints"
TEXT = "the river bank flooded after the rain, and the boats drifted away"
CORPUS = [
    "the river bank flooded after the rain and the boats drifted away",
    "a bank by the river keeps money safe, and a river bank keeps water in",
    "attention lets every token look at every other token and weigh what it sees",
    "the model reads the sentence one token at a time and predicts the next one",
]
PROMPT = 6  # prompt tokens of the generation goldens
NEW = 10  # tokens generated after them


def _train(pre, special: list[str], size: int) -> tuple[dict, list]:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre
    alphabet = pre_tokenizers.ByteLevel.alphabet() if isinstance(pre, pre_tokenizers.ByteLevel) else []
    trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=1, special_tokens=special,
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    spec = json.loads(tok.to_str())["model"]
    return spec["vocab"], [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]


def byte_level(cls, special: list[str], size: int, **kw):
    vocab, merges = _train(pre_tokenizers.ByteLevel(add_prefix_space=False), special, size)
    return cls(vocab=vocab, merges=merges, **kw)


def fast_byte_level(special: list[str], size: int):
    """A byte-level BPE as a plain PreTrainedTokenizerFast (how the hub's Falcon tokenizers are saved)."""
    from tokenizers import decoders
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=1, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=special[0])


def llama_style():
    vocab, merges = _train(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False),
                           ["<unk>", "<s>", "</s>"], 200)
    return LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True, add_eos_token=False)


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """Weights and biases std 0.3; norm gains 1 + 0.3 noise, norm biases 0.3 noise."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            gain = ("norm" in name or "layernorm" in name) and name.endswith("weight")
            p.copy_(1.0 + 0.3 * noise if gain else 0.3 * noise)


def _model(cls, config, seed: int):
    torch.manual_seed(0)
    m = cls(config).eval()
    m.set_attn_implementation("eager")
    _randomise(m, seed)
    return m


def _fresh(folder: Path):
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()


def _save(name: str, model, tok) -> None:
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d)
    tok.save_pretrained(d)
    for extra in ("generation_config.json", "special_tokens_map.json", "chat_template.jinja"):
        (d / extra).unlink(missing_ok=True)
    ids = AutoTokenizer.from_pretrained(d)(TEXT)["input_ids"]  # what a person's transformers would use
    with torch.no_grad():
        fresh = _fresh(d)
        out = fresh.base_model(input_ids=torch.tensor([ids]), output_attentions=True)
    att = torch.stack(out.attentions, 0)[:, 0].float().numpy()  # (L, nh, T, T)
    np.savez_compressed(d / "golden.npz", text=np.array(TEXT), input_ids=np.array(ids, dtype=np.int64),
                        attentions=att.astype(np.float32),
                        last_hidden_state=out.last_hidden_state[0].float().numpy().astype(np.float32))
    prompt = torch.tensor([ids[:PROMPT]])
    with torch.no_grad():
        seq = _fresh(d).generate(prompt, do_sample=False, max_new_tokens=NEW, min_new_tokens=NEW,
                                 pad_token_id=0, eos_token_id=None)[0]
        m = _fresh(d)
        hs = m(prompt, output_hidden_states=True).hidden_states
        base = getattr(m.base_model, "decoder", m.base_model)  # OPTModel keeps its layers in .decoder
        final = next(getattr(base, n) for n in ("norm", "final_layernorm", "final_layer_norm", "ln_f") if hasattr(base, n))
        lens = [m.lm_head(final(h[:, -1])) for h in hs[:-1]] + [m.lm_head(hs[-1][:, -1])]
        lens_probs = torch.softmax(torch.cat(lens).double(), dim=-1).numpy()
    np.savez_compressed(d / "golden_generate.npz", prompt_ids=np.array(ids[:PROMPT], dtype=np.int64),
                        greedy_ids=seq.numpy().astype(np.int64), lens_probs=lens_probs)
    print(name, len(ids), "tokens; greedy", seq.tolist())


NAMES = ["tiny_gpt_neox", "tiny_gpt_neox_dynamic", "tiny_phi", "tiny_phi3", "tiny_olmo", "tiny_olmo2",
         "tiny_stablelm", "tiny_falcon", "tiny_falcon_mq", "tiny_falcon_seq", "tiny_opt", "tiny_opt_plain",
         "tiny_bloom", "tiny_llama_longrope", "tiny_qwen2_dynamic", "tiny_phi3_window"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=NAMES, default=NAMES, help="write only these checkpoints")
    only = set(ap.parse_args(argv).only)
    OUT.mkdir(parents=True, exist_ok=True)
    neox_tok = byte_level(GPTNeoXTokenizer, ["<|endoftext|>", "<|padding|>"], 300)
    n = len(neox_tok)
    if "tiny_gpt_neox" in only:
        cfg = GPTNeoXConfig(vocab_size=n, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
                            intermediate_size=40, max_position_embeddings=64, rotary_pct=0.25, rotary_emb_base=500.0,
                            use_parallel_residual=True, layer_norm_eps=1e-5, tie_word_embeddings=False,
                            bos_token_id=0, eos_token_id=0)
        _save("tiny_gpt_neox", _model(GPTNeoXForCausalLM, cfg, 21), neox_tok)
    if "tiny_gpt_neox_dynamic" in only:
        cfg = GPTNeoXConfig(vocab_size=n, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=36, max_position_embeddings=12, use_parallel_residual=False,
                            attention_bias=False, layer_norm_eps=1e-5, tie_word_embeddings=True,
                            rope_parameters={"rope_type": "dynamic", "factor": 3.0, "rope_theta": 10000.0,
                                             "partial_rotary_factor": 0.5}, bos_token_id=0, eos_token_id=0)
        _save("tiny_gpt_neox_dynamic", _model(GPTNeoXForCausalLM, cfg, 22), neox_tok)
    if "tiny_phi" in only:
        tok = byte_level(CodeGenTokenizer, ["<|endoftext|>"], 300)
        cfg = PhiConfig(vocab_size=len(tok), hidden_size=40, num_hidden_layers=2, num_attention_heads=5,
                        intermediate_size=36, max_position_embeddings=64, partial_rotary_factor=0.5,
                        qk_layernorm=True, hidden_act="gelu_new", layer_norm_eps=1e-5, tie_word_embeddings=False,
                        bos_token_id=0, eos_token_id=0)
        _save("tiny_phi", _model(PhiForCausalLM, cfg, 23), tok)
    if "tiny_phi3" in only:
        tok = llama_style()
        cfg = Phi3Config(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=40, max_position_embeddings=64,
                         original_max_position_embeddings=6, rms_norm_eps=1e-5, tie_word_embeddings=False,
                         rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                                          "short_factor": [1.0, 1.1, 1.3, 1.7, 2.2, 3.0],
                                          "long_factor": [1.0, 1.9, 3.5, 6.0, 9.5, 14.0]},
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
        _save("tiny_phi3", _model(Phi3ForCausalLM, cfg, 24), tok)
    if "tiny_olmo" in only:
        cfg = OlmoConfig(vocab_size=n, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=24, max_position_embeddings=64, clip_qkv=0.5, tie_word_embeddings=False,
                         pad_token_id=1, bos_token_id=None, eos_token_id=0)
        _save("tiny_olmo", _model(OlmoForCausalLM, cfg, 25), neox_tok)
    if "tiny_olmo2" in only:
        tok = byte_level(GPT2Tokenizer, ["<|endoftext|>"], 300)
        cfg = Olmo2Config(vocab_size=len(tok), hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                          num_key_value_heads=2, intermediate_size=24, max_position_embeddings=64, rms_norm_eps=1e-6,
                          tie_word_embeddings=False, pad_token_id=0, bos_token_id=None, eos_token_id=0)
        _save("tiny_olmo2", _model(Olmo2ForCausalLM, cfg, 26), tok)
    if "tiny_stablelm" in only:
        cfg = StableLmConfig(vocab_size=n, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, intermediate_size=40, max_position_embeddings=64,
                             partial_rotary_factor=0.25, use_qkv_bias=True, qk_layernorm=True,
                             use_parallel_residual=False, layer_norm_eps=1e-5, tie_word_embeddings=False,
                             bos_token_id=0, eos_token_id=0)
        _save("tiny_stablelm", _model(StableLmForCausalLM, cfg, 27), neox_tok)
    ftok = fast_byte_level(["<|endoftext|>", ">>ABSTRACT<<"], 300)
    falcon = dict(vocab_size=len(ftok), num_hidden_layers=2, max_position_embeddings=64, layer_norm_epsilon=1e-5,
                  bos_token_id=0, eos_token_id=0)
    if "tiny_falcon" in only:
        cfg = FalconConfig(hidden_size=48, num_attention_heads=6, num_kv_heads=2, new_decoder_architecture=True,
                           ffn_hidden_size=40, bias=False, rope_theta=1000.0, tie_word_embeddings=True, **falcon)
        _save("tiny_falcon", _model(FalconForCausalLM, cfg, 28), ftok)
    if "tiny_falcon_mq" in only:
        cfg = FalconConfig(hidden_size=40, num_attention_heads=4, multi_query=True, parallel_attn=True, bias=True,
                           tie_word_embeddings=False, **falcon)
        _save("tiny_falcon_mq", _model(FalconForCausalLM, cfg, 29), ftok)
    if "tiny_falcon_seq" in only:
        cfg = FalconConfig(hidden_size=32, num_attention_heads=4, num_kv_heads=4, multi_query=False,
                           parallel_attn=False, bias=True, ffn_hidden_size=24, tie_word_embeddings=True, **falcon)
        _save("tiny_falcon_seq", _model(FalconForCausalLM, cfg, 30), ftok)
    otok = byte_level(GPT2Tokenizer, ["<pad>", "</s>", "<unk>"], 300, bos_token="</s>", eos_token="</s>",
                      pad_token="<pad>", unk_token="<unk>", add_bos_token=True)
    opt = dict(vocab_size=len(otok), num_hidden_layers=2, max_position_embeddings=64, pad_token_id=0,
               bos_token_id=1, eos_token_id=1, tie_word_embeddings=True)
    if "tiny_opt" in only:
        cfg = OPTConfig(hidden_size=40, word_embed_proj_dim=40, num_attention_heads=5, ffn_dim=36,
                        activation_function="relu", **opt)
        _save("tiny_opt", _model(OPTForCausalLM, cfg, 31), otok)
    if "tiny_opt_plain" in only:
        cfg = OPTConfig(hidden_size=32, word_embed_proj_dim=32, num_attention_heads=2, ffn_dim=20, enable_bias=False,
                        layer_norm_elementwise_affine=False, activation_function="gelu", **opt)
        _save("tiny_opt_plain", _model(OPTForCausalLM, cfg, 32), otok)
    if "tiny_bloom" in only:
        cfg = BloomConfig(vocab_size=len(ftok), hidden_size=48, n_layer=2, n_head=6, layer_norm_epsilon=1e-5,
                          bos_token_id=0, eos_token_id=0, tie_word_embeddings=True)
        _save("tiny_bloom", _model(BloomForCausalLM, cfg, 33), ftok)
    if "tiny_llama_longrope" in only:
        tok = llama_style()
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=40, rms_norm_eps=1e-6,
                          rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                           "original_max_position_embeddings": 5, "factor": 8.0,
                                           "short_factor": [1.0, 1.2, 1.5, 2.0], "long_factor": [1.0, 2.5, 6.0, 12.0]},
                          bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
        _save("tiny_llama_longrope", _model(LlamaForCausalLM, cfg, 34), tok)
    if "tiny_qwen2_dynamic" in only:
        tok = byte_level(Qwen2Tokenizer, ["<|endoftext|>"], 300)
        cfg = Qwen2Config(vocab_size=len(tok), hidden_size=48, intermediate_size=40, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=10, rms_norm_eps=1e-6,
                          rope_parameters={"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0},
                          tie_word_embeddings=True)
        _save("tiny_qwen2_dynamic", _model(Qwen2ForCausalLM, cfg, 35), tok)
    if "tiny_phi3_window" in only:
        tok = llama_style()
        cfg = Phi3Config(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=1, intermediate_size=24, max_position_embeddings=64, sliding_window=5,
                         rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
        _save("tiny_phi3_window", _model(Phi3ForCausalLM, cfg, 36), tok)
    names = [x for x in NAMES if x in only]
    sizes = {p.relative_to(OUT).as_posix(): p.stat().st_size for x in names for p in sorted((OUT / x).rglob("*"))}
    print(f"total {sum(sizes.values()) / 1024:.0f} KiB in {len(sizes)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
