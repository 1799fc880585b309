"""Decoder LLMs (Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Gemma 3; bf16 in shards) against transformers'
eager attention, and the inputs vision-language models give the decoder (embeddings, masks, positions).

The tiny checkpoints and golden outputs come from tools/make_decoder_goldens.py (transformers, eager
attention, ``output_attentions=True``), token ids from the checkpoint's own AutoTokenizer.
"""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, f32_map_atol, golden

from dataclasses import replace

from attnviz.checkpoints import CheckpointError, load_checkpoint, run_text
from attnviz.checkpoints.decoder import (block_sequence_masks, embed_scale, embed_tokens, forward_decoder,
                                         windowed)
from attnviz.checkpoints.decoder_run import run_decoder

GEMMAS = ["tiny_gemma", "tiny_gemma2", "tiny_gemma3"]
FAMILIES = ["tiny_llama", "tiny_mistral", "tiny_qwen2", "tiny_qwen3", "tiny_llama_bf16_sharded"] + GEMMAS


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
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=f32_map_atol(name), rtol=0)
    np.testing.assert_allclose(res.hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_qwen3"] + GEMMAS)
def test_float64_pass_matches_too(decoders, name):
    g = golden(DATA / name / "golden.npz")
    res = run_text(decoders[name], str(g["text"]), dtype=np.float64)
    np.testing.assert_allclose(res.attentions, g["attentions"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_qwen2"] + GEMMAS)
def test_flash_pass_keeping_q_k_lse_gives_the_same_maps(decoders, name):
    g = golden(DATA / name / "golden.npz")
    res = run_decoder(decoders[name], str(g["text"]), mode="qk")
    assert res.attentions is None and res.mode == "qk"
    for layer in range(g["attentions"].shape[0]):
        for head in range(g["attentions"].shape[1]):
            np.testing.assert_allclose(res.head_map(layer, head), g["attentions"][layer, head], atol=f32_map_atol(name),
                                       rtol=0)


def test_bos_and_dtype_stated(decoders):
    llama, qwen = decoders["tiny_llama"], decoders["tiny_qwen2"]
    assert llama.special_tokens.add_bos and not qwen.special_tokens.add_bos
    bf = decoders["tiny_llama_bf16_sharded"]
    assert bf.stored_dtype == "bf16"
    assert "bf16, computed in float32" in bf.describe()
    assert "GQA 4 q / 2 kv heads" in llama.describe()


# -- Gemma -------------------------------------------------------------------------------------------


def test_gemma_configs_are_read_as_transformers_reads_them(decoders):
    g1, g2, g3 = (decoders[n].config for n in GEMMAS)
    assert (g1.decoder.n_kv_head, g1.decoder.head_dim, g1.act) == (1, 12, "gelu_pytorch_tanh")
    assert g1.decoder.embed_scale and g1.decoder.norm_plus_one and not g1.decoder.sandwich_norm
    assert g1.decoder.scale == 12 ** -0.5 and g1.decoder.attn_softcap is None
    s2 = g2.decoder
    assert s2.sandwich_norm and s2.scale == 12 ** -0.5 and s2.head_dim == 8
    assert (s2.attn_softcap, s2.final_softcap) == (50.0, 30.0)
    assert [s2.window(i) for i in range(4)] == [4, 0, 4, 0]
    s3 = g3.decoder
    assert s3.qk_norm and s3.attn_softcap is None and [s3.window(i) for i in range(3)] == [4, 0, 4]
    assert (s3.rope_for(0).theta, s3.rope_for(0).rope_type) == (10000.0, "default")
    assert (s3.rope_for(1).theta, s3.rope_for(1).rope_type, s3.rope_for(1).factor) == (1e6, "linear", 8.0)
    assert "softcap 50" in decoders["tiny_gemma2"].describe() and "scale 1/√12" in decoders["tiny_gemma2"].describe()
    assert "rope base 10000 on sliding layers, rope linear x8 base 1e+06 on global layers" in \
        decoders["tiny_gemma3"].describe()
    assert decoders["tiny_gemma"].special_tokens.add_bos  # no add_bos_token in tokenizer_config.json: BOS all the same


def test_gemma2_soft_cap_bites(decoders):
    """Most scaled scores of tiny_gemma2 lie past the cap, and without it the maps would be far off."""
    ck, g = decoders["tiny_gemma2"], golden(DATA / "tiny_gemma2" / "golden.npz")
    c, ids = ck.config, g["input_ids"]
    trace, _ = forward_decoder(c, ck.weights, ids, keep="qk")
    T = ids.size
    causal = np.tri(T, dtype=bool)
    for layer in range(c.n_layer):
        k = np.repeat(trace.k[layer], c.decoder.group, axis=0)  # (nh, T, hd)
        s = np.einsum("hqd,hkd->hqk", trace.q[layer], k) * c.decoder.scale  # (nh, T, T)
        assert (np.abs(s[:, causal]) > 50).mean() > 0.3
    uncapped = replace(c, decoder=replace(c.decoder, attn_softcap=None))
    atts, _ = forward_decoder(uncapped, ck.weights, ids)
    assert np.abs(atts - g["attentions"]).max() > 0.5


def test_gemma2_refuses_flash_in_weights_mode_but_runs_long_inputs(decoders):
    ck = decoders["tiny_gemma2"]
    g = golden(DATA / "tiny_gemma2" / "golden.npz")
    with pytest.raises(CheckpointError, match="soft-caps its attention scores .* use the reference or naive kernel"):
        run_decoder(ck, str(g["text"]), kernel="flash", mode="weights")
    res = run_decoder(ck, str(g["text"]), mode="qk", band_bytes=64)  # the naive kernel, band by band
    assert res.softcap == 50.0
    for layer in range(4):
        np.testing.assert_allclose(res.head_map(layer, 1), g["attentions"][layer, 1], atol=1e-5)
        # the overview is exp(s - lse) without a row sum: lse's float32 rounding (|lse| ~ 50) is not divided out
        np.testing.assert_allclose(res.overview(layer, 1, (res.T, res.T)), g["attentions"][layer, 1], atol=3e-5)
        np.testing.assert_allclose(res.cells(layer, 2, (3, 9), (1, 6)), g["attentions"][layer, 2, 3:9, 1:6], atol=1e-5)
    sums = res.summaries()
    assert np.isfinite(sums.entropy).all()


def test_embed_tokens_and_embeds_reproduce_the_token_pass(decoders):
    for name in GEMMAS + ["tiny_llama"]:
        ck, g = decoders[name], golden(DATA / name / "golden.npz")
        c, ids = ck.config, g["input_ids"]
        rows = embed_tokens(c, ck.weights, ids, np.float32)  # (T, d) before the scale
        assert rows.shape == (ids.size, c.d_model) and rows.dtype == np.float32
        atts, hidden = forward_decoder(c, ck.weights, ids, embeds=rows)
        ref, ref_hidden = forward_decoder(c, ck.weights, ids)
        np.testing.assert_array_equal(atts, ref)
        np.testing.assert_array_equal(hidden, ref_hidden)
        assert (embed_scale(c) == np.float32(np.sqrt(32))) if name in GEMMAS else embed_scale(c) is None
        forward_decoder(c, ck.weights, None, embeds=rows)  # ids are optional with embeds


def test_spliced_embeddings_match_transformers_inputs_embeds(decoders):
    """Rows transformers gets after its sqrt(d) scale (image features) are given divided by embed_scale."""
    ck = decoders["tiny_gemma3"]
    g = golden(DATA / "tiny_gemma3" / "golden_embeds.npz")
    c = ck.config
    rows = embed_tokens(c, ck.weights, g["input_ids"])
    rows[g["feature_rows"]] = g["features"] / embed_scale(c)
    for dtype in (np.float32, np.float64):
        atts, hidden = forward_decoder(c, ck.weights, g["input_ids"], embeds=rows.astype(dtype), dtype=dtype)
        np.testing.assert_allclose(atts, g["attentions"], atol=1e-5, rtol=0)
        np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)


def test_a_custom_mask_matches_transformers_4d_mask(decoders):
    ck = decoders["tiny_gemma"]
    g = golden(DATA / "tiny_gemma" / "golden_mask.npz")
    for kernel in ("reference", "naive", "flash"):
        atts, hidden = forward_decoder(ck.config, ck.weights, g["input_ids"], mask=g["mask"], kernel=kernel)
        np.testing.assert_allclose(atts, g["attentions"], atol=1e-5, rtol=0)
        np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)
    assert atts[0, 0, 0, 1:6].min() > 0  # the prefix looks ahead
    trace, _ = forward_decoder(ck.config, ck.weights, g["input_ids"], mask=g["mask"], keep="qk")
    assert np.array_equal(trace.masks[0].to_dense()[0], g["mask"])


def test_one_mask_on_sliding_layers_is_intersected_with_the_window_overlay(decoders):
    ck = decoders["tiny_gemma3"]
    g = golden(DATA / "tiny_gemma3" / "golden_mask.npz")
    assert np.array_equal(windowed(g["mask"], 4), g["mask_sliding"])  # transformers' and_masks(sliding_window_overlay)
    for keep in ("weights", "qk"):
        res, hidden = forward_decoder(ck.config, ck.weights, g["input_ids"], mask=g["mask"], keep=keep)
        np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)
        if keep == "weights":
            np.testing.assert_allclose(res, g["attentions"], atol=1e-5, rtol=0)


def test_prefix_masks_as_transformers_builds_them_from_block_ids(decoders):
    """tiny_gemma2 with PaliGemma's prefix (block_sequence_ids), longer than the window, and positions 1 .. T."""
    ck = decoders["tiny_gemma2"]
    g = golden(DATA / "tiny_gemma2" / "golden_blocks.npz")
    masks = block_sequence_masks(ck.config, g["block_ids"])
    assert np.array_equal(masks["full_attention"], g["mask_full"])
    assert np.array_equal(masks["sliding_attention"], g["mask_sliding"])
    assert not np.array_equal(windowed(g["mask_full"], 4), g["mask_sliding"])  # the block outlives the window
    exact, hidden = forward_decoder(ck.config, ck.weights, g["input_ids"], mask=masks, positions=g["position_ids"],
                                    dtype=np.float64)
    np.testing.assert_allclose(exact, g["attentions"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)
    # this random model's third layer magnifies float32 rounding about tenfold: transformers' own float32
    # maps are 7e-6 from the float64 pass, and ours (another BLAS's rounding, 1.3e-5 on an AVX2 EPYC) may
    # differ from theirs by 1e-5 plus that
    own_error = np.abs(g["attentions"] - exact).max()
    atts, hidden = forward_decoder(ck.config, ck.weights, g["input_ids"], mask=masks, positions=g["position_ids"],
                                   dtype=np.float32)
    np.testing.assert_allclose(atts, g["attentions"], atol=1e-5 + own_error, rtol=0)
    np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)


def test_shifted_positions_match_transformers(decoders):
    ck = decoders["tiny_gemma3"]
    g = golden(DATA / "tiny_gemma3" / "golden_positions.npz")
    assert g["position_ids"][5] == 5 and g["position_ids"][6] == 11  # a jump after the prefix
    plain, _ = forward_decoder(ck.config, ck.weights, g["input_ids"])
    assert np.abs(plain - g["attentions"]).max() > 1e-3  # the positions count
    for keep in ("weights", "qk"):
        res, hidden = forward_decoder(ck.config, ck.weights, g["input_ids"], positions=g["position_ids"], keep=keep)
        np.testing.assert_allclose(hidden, g["last_hidden_state"], atol=1e-4, rtol=1e-4)
        if keep == "weights":
            np.testing.assert_allclose(res, g["attentions"], atol=1e-5, rtol=0)


def test_bad_embeds_masks_and_positions_are_refused_in_one_line(decoders):
    ck = decoders["tiny_gemma"]
    c, ids = ck.config, golden(DATA / "tiny_gemma" / "golden.npz")["input_ids"]
    T = ids.size
    cases = [
        (dict(embeds=np.zeros((T, 5))), f"embeds must be \\({T}, 32\\): one row of d_model per token"),
        (dict(embeds=np.full((T, 32), np.nan)), "embeds must be finite"),
        (dict(mask=np.ones((T, T))), "mask must be a bool"),
        (dict(mask={"global": np.ones((T, T), bool)}), "unknown layer type"),
        (dict(positions=np.arange(T - 1)), "positions must be"),
        (dict(positions=np.arange(T) * 1.0), "positions must be"),
    ]
    for kw, match in cases:
        with pytest.raises(CheckpointError, match=match):
            forward_decoder(c, ck.weights, ids, **kw)
    with pytest.raises(CheckpointError, match="no 'sliding_attention' entry"):
        g2 = decoders["tiny_gemma2"]
        forward_decoder(g2.config, g2.weights, ids, mask={"full_attention": np.ones((T, T), bool)})
    with pytest.raises(CheckpointError, match="outside the model's"):
        embed_tokens(c, ck.weights, np.array([c.vocab_size]))
    with pytest.raises(CheckpointError, match="give token ids or input embeddings"):
        forward_decoder(c, ck.weights, None)


def test_bf16_matrices_are_multiplied_block_by_block_never_kept_whole():
    """A bf16 checkpoint's weight matrices go to the matrix products as stored bits (no float32 copy of
    them is made or kept); the pass equals one on the widened float32 weights."""
    from attnviz.checkpoints.safetensors_file import Bf16Matrix

    ck = load_checkpoint(DATA / "tiny_llama_bf16_sharded")  # its own: nothing read whole before
    w = ck.weights
    assert isinstance(w.matrix("layers.0.mlp.down_proj.weight"), Bf16Matrix)
    ids = np.array([1, 7, 3, 11, 2])
    atts, hidden = forward_decoder(ck.config, w, ids)
    matrices = sum(4 * int(np.prod(w.shape(n))) for n in w if n.startswith("layers.") and n.endswith("proj.weight"))
    assert w.kept_bytes < matrices / 4  # the norms and the embedding rows' table at most, not the matrices
    plain = {n: np.array(w[n]) for n in w}  # every tensor widened once, as plain float32 arrays
    atts2, hidden2 = forward_decoder(ck.config, plain, ids)
    np.testing.assert_allclose(atts, atts2, atol=1e-6, rtol=0)
    np.testing.assert_allclose(hidden, hidden2, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name, flags, want", [
    # transformers 5.24 (measured): the post-processor of tokenizer.json decides, whatever the flags say
    ("tiny_llama", {"add_bos_token": False}, (True, False)),
    ("tiny_llama", {"add_eos_token": True}, (True, False)),
    ("tiny_gemma", {"add_bos_token": False}, (True, False)),
    ("tiny_qwen2", {"add_bos_token": True, "add_eos_token": True}, (False, False)),
])
def test_bos_and_eos_follow_the_post_processor_not_the_flags(tmp_path, name, flags, want):
    import json
    import shutil

    from attnviz.checkpoints.decoder_text import encode

    d = tmp_path / name
    shutil.copytree(DATA / name, d)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg.update(flags)
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    ck = load_checkpoint(d)
    sp = ck.special_tokens
    assert (sp.add_bos, sp.add_eos) == want
    ids = encode(ck.tokenizer, sp, "hello world", 64).ids
    assert ids.tolist() == ck.tokenizer.tokenizer.encode("hello world", add_special_tokens=True).ids
