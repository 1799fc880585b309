"""Write the tiny decoder-LLM checkpoints of tests/checkpoints and their golden outputs.

Run once, in an environment with torch (CPU) and transformers; attnviz itself never imports them:

    /path/to/venv/bin/python tools/make_decoder_goldens.py

Under tests/data/checkpoints/ it writes one folder per family, each saved with ``save_pretrained``
(config.json, model.safetensors or shards with model.safetensors.index.json, tokenizer.json,
tokenizer_config.json) and a ``golden.npz`` of transformers' eager attention (``output_attentions``)
on a fixed text: ``text``, ``input_ids`` (as the checkpoint's own AutoTokenizer gives them, BOS
included where it adds one), ``attentions`` (L, nh, T, T) float32 and ``last_hidden_state``.

* ``tiny_llama``   — Llama, grouped-query attention 4 q / 2 kv heads, rope_scaling llama3, SentencePiece-style
                     BPE with BOS ``<s>``;
* ``tiny_mistral`` — Mistral, 4 q / 1 kv head, head_dim set apart, sliding window of 5 tokens, rope_theta 1e6;
* ``tiny_qwen2``   — Qwen2, q/k/v biases, 4 q / 2 kv heads, rope_scaling yarn, byte-level BPE without BOS;
* ``tiny_qwen3``   — Qwen3, q/k RMSNorm, head_dim 12 (d_model 32 / 4 heads would be 8), rope_scaling linear;
* ``tiny_llama_bf16_sharded`` — the Llama weights stored as bfloat16 in three shards (the golden runs the
                     bf16 weights in float32, which is what attnviz computes);
* ``tiny_gemma``   — Gemma, 4 q / 1 kv head, head_dim 12 (d_model 32 / 4 heads would be 8), GeGLU, embeddings
                     times sqrt(d_model), (1 + w) RMSNorms; Gemma-style BPE with BOS ``<bos>``, tokenizer_config.json
                     as GemmaTokenizer writes it (no add_bos_token: transformers follows tokenizer.json's post-processor);
* ``tiny_gemma2``  — Gemma 2, attn_logit_softcapping 50 made to bite (q and k drawn large along the slowest rotary
                     pair: about 40 % of the scaled scores lie past the cap), query_pre_attn_scalar 12 (head_dim 8), sliding window 4 on alternate
                     layers, norms around attention and MLP; tokenizer_config.json with add_bos_token true as the
                     hub's Gemma files carry it;
* ``tiny_gemma3``  — Gemma 3 text (gemma3_text), q/k RMSNorm, local rope base 10000 and global base 1e6 with linear
                     scaling x8, sliding window 4 on layers 0 and 2 of 3, head_dim 16.

The Gemma folders carry more goldens for the inputs vision-language models give the decoder, each with
``input_ids``, ``attentions`` and ``last_hidden_state`` as above:

* ``tiny_gemma/golden_mask.npz`` — a prefix-LM ``mask`` (bool (T, T): the first PREFIX tokens see each other)
  passed to transformers as a custom 4-D float mask;
* ``tiny_gemma2/golden_blocks.npz`` — the masks transformers builds itself from ``block_ids`` (its
  block_sequence_ids: the prefix one block, -1 after it; the prefix is longer than the window), passed as the
  mask mapping ``mask_full`` / ``mask_sliding``, with ``position_ids`` 1 .. T as PaliGemma numbers them;
* ``tiny_gemma3/golden_mask.npz`` — one prefix-LM ``mask`` for every layer, on the sliding ones intersected with
  transformers' sliding_window_overlay (``mask_sliding``, made by its own and_masks / eager_mask);
* ``tiny_gemma3/golden_positions.npz`` — rotary ``position_ids`` 0 .. PREFIX-1, then jumping SHIFT ahead;
* ``tiny_gemma3/golden_embeds.npz`` — ``inputs_embeds``: the scaled token rows with rows ``feature_rows`` replaced
  by ``features`` (what a vision-language model splices in).

Two carry a chat template and a second golden, ``golden_chat.npz``: the text as one user message in the
template with the generation prompt, ``input_ids`` from ``apply_chat_template(..., tokenize=True,
add_generation_prompt=True)``, ``rendered`` (the template's text) and the attentions on those ids.
``tiny_qwen2`` has a ChatML template in ``chat_template.jinja`` (its tokenizer has the ``<|im_start|>``
/ ``<|im_end|>`` special tokens); ``tiny_llama`` has ``[INST]``-style templates in tokenizer_config.json
as a list of named ones ("default" and "tool_use"), the form older files carry.

``chat_templates.json`` holds a few more templates exercising the environment (whitespace control
with trim_blocks / lstrip_blocks, namespace, macros, loop controls, ``tojson`` with non-ASCII text and
``<``, tools) with the text transformers renders from each and the ids it tokenises that to, with
tiny_qwen2's tokenizer; it is written with tiny_qwen2.

``--only NAME ...`` writes only those folders (the others stay as they are).

Weights are drawn wider than the library's initialiser (std 0.3, norm gains around 1) so the maps are
far from uniform and a wrong layer shows.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from tokenizers import normalizers
from transformers import (AutoTokenizer, Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig,
                          GemmaConfig, GemmaForCausalLM, GemmaTokenizer, LlamaConfig, LlamaForCausalLM,
                          LlamaTokenizer, MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen2Tokenizer, Qwen3Config, Qwen3ForCausalLM)
from transformers.masking_utils import (and_masks, create_causal_mask, create_sliding_window_causal_mask,
                                        eager_mask, sliding_window_overlay)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "checkpoints"
TEXT = "the river bank flooded after the rain, and the boats drifted away"
CORPUS = [
    "the river bank flooded after the rain and the boats drifted away",
    "a bank by the river keeps money safe, and a river bank keeps water in",
    "attention lets every token look at every other token and weigh what it sees",
    "the model reads the sentence one token at a time and predicts the next one",
]


CHATML = (
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('roles are system, user and assistant') }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] | trim + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
INST = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] | trim + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] | trim + ' ' + eos_token }}"
    "{% else %}{{ raise_exception('turns are user or assistant') }}{% endif %}"
    "{% endfor %}"
)
INST_TOOLS = "{{ bos_token }}[TOOLS] none [/TOOLS]" + INST.removeprefix("{{ bos_token }}")
CHAT_MESSAGES = [{"role": "user", "content": TEXT}]
EXTRA_TEMPLATES = {
    "chatml_system_tools": (
        "{%- set ns = namespace(system=false) -%}\n"
        "{%- for m in messages -%}{%- if m.role == 'system' -%}{%- set ns.system = true -%}{%- endif -%}{%- endfor -%}\n"
        "{%- if not ns.system -%}\n"
        "<|im_start|>system\n"
        "You are a tiny model.{% if tools %} Tools: {{ tools | tojson }}{% endif %}<|im_end|>\n"
        "{% endif -%}\n"
        "{%- for m in messages -%}\n"
        "<|im_start|>{{ m.role }}\n"
        "{{ m.content }}<|im_end|>\n"
        "{% endfor -%}\n"
        "{%- if add_generation_prompt %}<|im_start|>assistant\n"
        "{% endif -%}\n"
    ),
    "macro_loop_tojson": (
        "{% macro turn(role, text) %}[{{ role | upper }}] {{ text | trim | replace('  ', ' ') }}{% endmacro %}\n"
        "{{ eos_token }}\n"
        "{% for m in messages %}\n"
        "    {% if m.role == 'tool' %}{% continue %}{% endif %}\n"
        "    {{ turn(m.role, m.content) }} #{{ loop.index }}/{{ loop.length }}\n"
        "    {% if loop.last %}{% break %}{% endif %}\n"
        "{% endfor %}\n"
        "{{ {'n': messages | length, 'text': messages[0]['content'], 'pad': pad_token} | tojson(indent=2) }}\n"
        "{% set d = dict(a=1, b='two') %}{{ d.b }}{{ '%03d' % d.a }}\n"
        "{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
    ),
}
EXTRA_TEXT = "  the river bank <flooded> after the rain, déjà vu  "


PREFIX = 6  # tokens of the prefix-LM masks' bidirectional prefix (longer than the Gemma windows of 4)
SHIFT = 5  # the rotary positions of golden_positions.npz jump this far after the prefix


def _train(pre, special: list[str], size: int, normalizer=None) -> tuple[dict, list]:
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    alphabet = pre_tokenizers.ByteLevel.alphabet() if isinstance(pre, pre_tokenizers.ByteLevel) else []
    trainer = trainers.BpeTrainer(vocab_size=size, min_frequency=1, special_tokens=special,
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    spec = json.loads(tok.to_str())["model"]
    return spec["vocab"], [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]


def llama_tokenizer():
    vocab, merges = _train(pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False),
                           ["<unk>", "<s>", "</s>"], 200)
    return LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True, add_eos_token=False)


def qwen_tokenizer(chat: bool = False):
    vocab, merges = _train(pre_tokenizers.ByteLevel(add_prefix_space=False), ["<|endoftext|>"], 320)
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges)
    if chat:  # the ChatML markers, as added special tokens after the trained vocabulary
        tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    return tok


def gemma_tokenizer():
    """Gemma's layout: spaces as "▁" (normaliser), BPE with byte fallback, <pad> <eos> <bos> <unk> <mask> first."""
    vocab, merges = _train(pre_tokenizers.Split("▁", behavior="merged_with_next"),
                           ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"], 200, normalizers.Replace(" ", "▁"))
    # the flags shape tokenizer.json's post-processor (<bos> first), which is what transformers 5.24 follows:
    # it drops add_bos_token / add_eos_token from tokenizer_config.json when a tokenizer.json is present
    return GemmaTokenizer(vocab=vocab, merges=merges, add_bos_token=True, add_eos_token=False)


def _randomise(model: torch.nn.Module, seed: int, norm_centre: float = 1.0,
               slow: tuple[int, float] | None = None) -> None:
    """Weights std 0.3, norm gains norm_centre + 0.3 noise (Gemma's norms multiply by 1 + w: centre 0).

    ``slow`` (head_dim, std): in q_proj and k_proj, the rows of each head's dimension head_dim / 2 - 1, the
    slowest rotary pair, drawn with that std, so scores pass the soft cap as the product of two large numbers
    rather than as a sum of large terms that cancel (the float32 rounding of a score grows with |q| |k|)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "norm" in name:
                p.copy_(norm_centre + 0.3 * noise)
                continue
            p.copy_(0.3 * noise)
            if slow is not None and ("q_proj.weight" in name or "k_proj.weight" in name):
                hd, std = slow
                rows = p.view(-1, hd, p.shape[1])[:, hd // 2 - 1]  # (heads, d_model)
                rows.copy_(std * torch.randn(rows.shape, generator=g))


def _golden(path: Path, run, ids: list[int], inputs: dict | None = None, **extra) -> None:
    """transformers' eager attentions and last hidden state on ``ids`` (or on ``inputs``: the keyword
    arguments of the base model's forward, e.g. inputs_embeds, attention_mask, position_ids)."""
    with torch.no_grad():
        out = run.model(**(inputs or {"input_ids": torch.tensor([ids])}), output_attentions=True)
    att = torch.stack(out.attentions, 0)[:, 0].float().numpy()  # (L, nh, T, T)
    np.savez_compressed(path, text=np.array(TEXT), input_ids=np.array(ids, dtype=np.int64),
                        attentions=att.astype(np.float32),
                        last_hidden_state=out.last_hidden_state[0].float().numpy().astype(np.float32), **extra)


def _prefix_mask(T: int) -> np.ndarray:
    """(T, T) bool prefix-LM mask: causal, and the first PREFIX tokens see each other."""
    m = np.tril(np.ones((T, T), dtype=bool))
    m[:PREFIX, :PREFIX] = True
    return m


def _float_mask(m: np.ndarray) -> torch.Tensor:
    """A bool (T, T) mask as the (1, 1, T, T) additive float mask eager attention adds (0 or float32 min)."""
    t = torch.from_numpy(np.ascontiguousarray(m))[None, None]
    return torch.where(t, torch.zeros((), dtype=torch.float32), torch.finfo(torch.float32).min)


def _bool_mask(t: torch.Tensor) -> np.ndarray:
    """transformers' (1, 1, T, T) eager float mask -> bool (T, T)."""
    return (t[0, 0] == 0).numpy()


def _gemma_extra_goldens(name: str, run, ids: list[int]) -> None:
    """The mask / positions / embeddings goldens of the Gemma folders (see the module docstring)."""
    d, T = OUT / name, len(ids)
    input_ids = torch.tensor([ids])
    if name == "tiny_gemma":
        m = _prefix_mask(T)
        _golden(d / "golden_mask.npz", run, ids, {"input_ids": input_ids, "attention_mask": _float_mask(m)}, mask=m)
    elif name == "tiny_gemma2":
        block_ids = np.where(np.arange(T) < PREFIX, 0, -1).astype(np.int64)
        pos = torch.arange(T)[None] + 1
        emb = run.model.embed_tokens(input_ids)
        kw = dict(config=run.config, inputs_embeds=emb, attention_mask=None, cache=None, position_ids=pos,
                  block_sequence_ids=torch.from_numpy(block_ids)[None])
        masks = {"full_attention": create_causal_mask(**kw), "sliding_attention": create_sliding_window_causal_mask(**kw)}
        _golden(d / "golden_blocks.npz", run, ids, {"input_ids": input_ids, "attention_mask": masks, "position_ids": pos},
                block_ids=block_ids, position_ids=pos[0].numpy(), mask_full=_bool_mask(masks["full_attention"]),
                mask_sliding=_bool_mask(masks["sliding_attention"]))
    else:
        m = _prefix_mask(T)
        mt = torch.from_numpy(m)

        def given(batch_idx, head_idx, q_idx, kv_idx):
            return mt[q_idx, kv_idx]

        sliding = eager_mask(batch_size=1, q_length=T, kv_length=T, dtype=torch.float32,
                             mask_function=and_masks(sliding_window_overlay(run.config.sliding_window), given))
        masks = {"full_attention": _float_mask(m), "sliding_attention": sliding}
        _golden(d / "golden_mask.npz", run, ids, {"input_ids": input_ids, "attention_mask": masks}, mask=m,
                mask_sliding=_bool_mask(sliding))
        # a uniform shift would change nothing (rotary scores depend on i - j): the positions jump by SHIFT after
        # the prefix; the 2-D all-ones attention_mask keeps transformers from reading the jump as packed sequences
        pos = (torch.arange(T) + SHIFT * (torch.arange(T) >= PREFIX))[None]
        _golden(d / "golden_positions.npz", run, ids,
                {"input_ids": input_ids, "position_ids": pos, "attention_mask": torch.ones(1, T, dtype=torch.long)},
                position_ids=pos[0].numpy())
        rows = np.array([2, 3, 4, 9], dtype=np.int64)
        feats = torch.from_numpy(np.random.default_rng(11).standard_normal((rows.size, run.config.hidden_size))
                                 .astype(np.float32) * 1.5)
        with torch.no_grad():
            emb = run.model.embed_tokens(input_ids).clone()  # (1, T, d) scaled by sqrt(d) inside the module
            emb[0, torch.from_numpy(rows)] = feats
        _golden(d / "golden_embeds.npz", run, ids, {"inputs_embeds": emb}, feature_rows=rows,
                features=feats.numpy())


def _save(name: str, model, tok, *, dtype=torch.float32, shard: str | None = None, golden_model=None,
          chat_template: str | dict | None = None, tokenizer_flags: dict | None = None) -> None:
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d, max_shard_size=shard) if shard else model.save_pretrained(d)
    tok.chat_template = chat_template
    # a single template goes to chat_template.jinja; named ones to tokenizer_config.json as a list
    tok.save_pretrained(d, save_jinja_files=not isinstance(chat_template, dict))
    tok.chat_template = None
    for extra in ("generation_config.json", "special_tokens_map.json"):
        (d / extra).unlink(missing_ok=True)
    if chat_template is None:
        (d / "chat_template.jinja").unlink(missing_ok=True)
    if tokenizer_flags:  # written as the hub's files carry them (save_pretrained leaves them out)
        path = d / "tokenizer_config.json"
        path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8")) | tokenizer_flags, indent=2) + "\n",
                        encoding="utf-8")
    loaded = AutoTokenizer.from_pretrained(d)  # what a person's transformers would use
    run = golden_model or model
    _golden(d / "golden.npz", run, loaded(TEXT)["input_ids"])
    if name.startswith("tiny_gemma"):
        _gemma_extra_goldens(name, run, loaded(TEXT)["input_ids"])
    if chat_template is not None:
        rendered = loaded.apply_chat_template(CHAT_MESSAGES, tokenize=False, add_generation_prompt=True)
        ids = loaded.apply_chat_template(CHAT_MESSAGES, tokenize=True, add_generation_prompt=True)["input_ids"]
        _golden(d / "golden_chat.npz", run, list(ids), rendered=np.array(rendered))


def _model(cls, config, seed: int, **randomise):
    torch.manual_seed(0)
    m = cls(config).eval()
    m.set_attn_implementation("eager")
    _randomise(m, seed, **randomise)
    return m


NAMES = ["tiny_llama", "tiny_llama_bf16_sharded", "tiny_mistral", "tiny_qwen2", "tiny_qwen3", "tiny_gemma",
         "tiny_gemma2", "tiny_gemma3"]
# Gemma 2: about 40 % of the scaled scores past the cap of 50. Maps this sharp are sensitive to float32
# rounding: over seeds 6-19 transformers' own float32 maps differed from attnviz's float64 pass by 3e-6 to 7e-5,
# so the seed is one where both float32 passes land well inside the 1e-5 the maps are checked to (5e-6 here).
GEMMA2_SLOW = (8, 3.0)


def _template_renders(folder: Path) -> None:
    """chat_templates.json: transformers' rendered text and ids of EXTRA_TEMPLATES with the folder's tokenizer."""
    tok = AutoTokenizer.from_pretrained(folder)
    messages = [{"role": "user", "content": EXTRA_TEXT}]
    out = {}
    for name, template in EXTRA_TEMPLATES.items():
        rendered = tok.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=True)
        ids = tok.apply_chat_template(messages, chat_template=template, tokenize=True,
                                      add_generation_prompt=True)["input_ids"]
        out[name] = {"template": template, "text": EXTRA_TEXT, "rendered": rendered, "input_ids": list(ids)}
    (OUT / "chat_templates.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=NAMES, default=NAMES, help="write only these checkpoints")
    only = set(ap.parse_args(argv).only)
    OUT.mkdir(parents=True, exist_ok=True)
    ltok = llama_tokenizer()
    qtok = qwen_tokenizer()
    qtok_chat = qwen_tokenizer(chat=True)
    common = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                  max_position_embeddings=64, rms_norm_eps=1e-6, tie_word_embeddings=True)

    llama_cfg = LlamaConfig(vocab_size=len(ltok), num_key_value_heads=2, bos_token_id=1, eos_token_id=2,
                            rope_theta=10000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                              "original_max_position_embeddings": 16}, **common)
    llama = _model(LlamaForCausalLM, llama_cfg, 1)
    if "tiny_llama" in only:
        _save("tiny_llama", llama, ltok, chat_template={"default": INST, "tool_use": INST_TOOLS})

    bf = LlamaForCausalLM(llama_cfg).eval()
    bf.load_state_dict(llama.state_dict())
    bf = bf.to(torch.bfloat16)
    as_f32 = LlamaForCausalLM(llama_cfg).eval()
    as_f32.load_state_dict({k: v.float() for k, v in bf.state_dict().items()})
    as_f32.set_attn_implementation("eager")
    if "tiny_llama_bf16_sharded" in only:
        _save("tiny_llama_bf16_sharded", bf, ltok, shard="20KB", golden_model=as_f32)

    mistral_cfg = MistralConfig(vocab_size=len(ltok), num_key_value_heads=1, head_dim=16, sliding_window=5,
                                rope_theta=1e6, bos_token_id=1, eos_token_id=2, **common)
    if "tiny_mistral" in only:
        _save("tiny_mistral", _model(MistralForCausalLM, mistral_cfg, 2), ltok)

    qwen2_cfg = Qwen2Config(vocab_size=len(qtok_chat), num_key_value_heads=2, rope_theta=10000.0,
                            rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
                            **common)
    if "tiny_qwen2" in only:
        _save("tiny_qwen2", _model(Qwen2ForCausalLM, qwen2_cfg, 3), qtok_chat, chat_template=CHATML)
        _template_renders(OUT / "tiny_qwen2")

    qwen3_cfg = Qwen3Config(vocab_size=len(qtok), num_key_value_heads=2, head_dim=12, rope_theta=10000.0,
                            rope_scaling={"rope_type": "linear", "factor": 2.0}, **common)
    if "tiny_qwen3" in only:
        _save("tiny_qwen3", _model(Qwen3ForCausalLM, qwen3_cfg, 4), qtok)

    gtok = gemma_tokenizer()
    small = dict(hidden_size=32, num_attention_heads=4, max_position_embeddings=64, rms_norm_eps=1e-6,
                 tie_word_embeddings=True, vocab_size=len(gtok), pad_token_id=0, eos_token_id=1, bos_token_id=2)
    gemma_cfg = GemmaConfig(intermediate_size=48, num_hidden_layers=2, num_key_value_heads=1, head_dim=12,
                            rope_theta=10000.0, **small)
    if "tiny_gemma" in only:
        _save("tiny_gemma", _model(GemmaForCausalLM, gemma_cfg, 5, norm_centre=0.0), gtok)

    gemma2_cfg = Gemma2Config(intermediate_size=32, num_hidden_layers=4, num_key_value_heads=2, head_dim=8,
                              query_pre_attn_scalar=12, sliding_window=4, attn_logit_softcapping=50.0,
                              final_logit_softcapping=30.0, **small)
    if "tiny_gemma2" in only:
        _save("tiny_gemma2", _model(Gemma2ForCausalLM, gemma2_cfg, 11, norm_centre=0.0, slow=GEMMA2_SLOW), gtok,
              tokenizer_flags={"add_bos_token": True, "add_eos_token": False})

    gemma3_cfg = Gemma3TextConfig(intermediate_size=32, num_hidden_layers=3, num_key_value_heads=2, head_dim=16,
                                  query_pre_attn_scalar=16, sliding_window=4,
                                  layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                  rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                   "full_attention": {"rope_type": "linear", "factor": 8.0,
                                                                      "rope_theta": 1e6}}, **small)
    if "tiny_gemma3" in only:
        _save("tiny_gemma3", _model(Gemma3ForCausalLM, gemma3_cfg, 7, norm_centre=0.0), gtok)

    names = [n for n in NAMES if n in only]
    sizes = {p.relative_to(OUT).as_posix(): p.stat().st_size for n in names for p in sorted((OUT / n).rglob("*"))}
    print(json.dumps(sizes, indent=1))
    print(f"total {sum(sizes.values()) / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
