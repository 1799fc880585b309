"""Decoder LLMs (Llama, Mistral, Qwen2, Qwen3; bf16 in shards) against transformers' eager attention.

The tiny checkpoints and golden outputs come from tools/make_decoder_goldens.py (transformers, eager
attention, ``output_attentions=True``), token ids from the checkpoint's own AutoTokenizer.
"""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import load_checkpoint, run_text
from attnviz.checkpoints.decoder_run import run_decoder

FAMILIES = ["tiny_llama", "tiny_mistral", "tiny_qwen2", "tiny_qwen3", "tiny_llama_bf16_sharded"]


@pytest.fixture(scope="module")
def decoders():
    return {name: load_checkpoint(DATA / name) for name in FAMILIES}


@pytest.mark.parametrize("name", FAMILIES)
def test_every_layer_and_head_matches_transformers(decoders, name):
    g = golden(DATA / name / "golden.npz")
    ck = decoders[name]
    res = run_text(ck, str(g["text"]))
    np.testing.assert_array_equal(res.ids, g["input_ids"])  # BOS exactly as transformers adds it (or not)
    assert res.attentions.shape == g["attentions"].shape
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_qwen3"])
def test_float64_pass_matches_too(decoders, name):
    g = golden(DATA / name / "golden.npz")
    res = run_text(decoders[name], str(g["text"]), dtype=np.float64)
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_qwen2"])
def test_flash_pass_keeping_q_k_lse_gives_the_same_maps(decoders, name):
    g = golden(DATA / name / "golden.npz")
    res = run_decoder(decoders[name], str(g["text"]), mode="qk")
    assert res.attentions is None and res.mode == "qk"
    for layer in range(g["attentions"].shape[0]):
        for head in range(g["attentions"].shape[1]):
            np.testing.assert_allclose(res.head_map(layer, head), g["attentions"][layer, head], atol=1e-5, rtol=0)


def test_bos_and_dtype_stated(decoders):
    llama, qwen = decoders["tiny_llama"], decoders["tiny_qwen2"]
    assert llama.special_tokens.add_bos and not qwen.special_tokens.add_bos
    bf = decoders["tiny_llama_bf16_sharded"]
    assert bf.stored_dtype == "bf16"
    assert "bf16, computed in float32" in bf.describe()
    assert "GQA 4 q / 2 kv heads" in llama.describe()
