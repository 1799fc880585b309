"""Decoder LLMs on long inputs: the flash pass keeping q, k and lse, overviews, per-head summaries, limits."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, golden

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints import decoder_run
from attnviz.checkpoints.decoder_run import run_decoder, token_limit

TEXT = " ".join(["the river bank flooded after the rain, and the boats drifted away"] * 3)


@pytest.fixture(scope="module")
def llama():
    return load_checkpoint(DATA / "tiny_llama")


@pytest.fixture(scope="module")
def mistral():
    return load_checkpoint(DATA / "tiny_mistral")


def _summaries_from_maps(a: np.ndarray) -> dict[str, np.ndarray]:
    """The six summaries straight from (L, nh, T, T) maps, float64."""
    a = a.astype(np.float64)
    T = a.shape[-1]
    i = np.arange(T)
    ent = -(np.where(a > 0, a * np.log(np.where(a > 0, a, 1)), 0)).sum(-1).mean(-1)
    return {"entropy": ent, "to_first": a[..., 0].mean(-1), "to_self": a[..., i, i].mean(-1),
            "to_previous": a[..., i[1:], i[1:] - 1].mean(-1),
            "distance": (a * np.abs(i[:, None] - i[None, :])).sum(-1).mean(-1)}


@pytest.mark.parametrize("name", ["llama", "mistral"])
def test_qk_pass_gives_the_maps_and_summaries_of_the_full_pass(request, name):
    ck = request.getfixturevalue(name)
    full = run_decoder(ck, TEXT, mode="weights")
    long = run_decoder(ck, TEXT, mode="qk")
    assert long.T == full.T > 20 and long.attentions is None
    L, nh = full.n_layer, full.n_head
    for layer in range(L):
        for head in range(nh):
            np.testing.assert_allclose(long.head_map(layer, head), full.attentions[layer, head], atol=1e-5)
    want = _summaries_from_maps(full.attentions)
    for s in (full.summaries(), long.summaries()):
        for key, value in want.items():
            np.testing.assert_allclose(getattr(s, key), value, atol=1e-5, err_msg=key)
    # the sliding window of Mistral (5 tokens) shows: no weight further back than 4 tokens
    if name == "mistral":
        assert long.summaries().distance.max() <= 4.0
        assert not np.triu(full.attentions[0, 0], 1).any() and not np.tril(full.attentions[0, 0], -5).any()


def test_overview_and_cells(llama):
    full = run_decoder(llama, TEXT, mode="weights")
    long = run_decoder(llama, TEXT, mode="qk")
    T = full.T
    m = full.attentions[1, 2]
    for res in (full, long):
        img = res.overview(1, 2, (T // 2, T // 2), reduce="max")
        assert img.shape == (T // 2, T // 2)
        np.testing.assert_allclose(img.max(), m.max(), atol=1e-5)
        np.testing.assert_allclose(img[0, 0], m[:2, :2].max(), atol=1e-5)
        np.testing.assert_allclose(res.cells(1, 2, (5, 9), (0, 6)), m[5:9, 0:6], atol=1e-5)
    with pytest.raises(CheckpointError, match=r"no head \(2, 0\)"):
        long.head_map(2, 0)


def test_grouped_query_heads_share_their_kv_head(llama, mistral):
    res = run_decoder(llama, "the river bank", mode="qk")
    assert [res.kv_head(h) for h in range(4)] == [0, 0, 1, 1]
    assert [run_decoder(mistral, "the river", mode="qk").kv_head(h) for h in range(4)] == [0, 0, 0, 0]


def test_input_longer_than_the_context_is_refused(llama):
    text = " ".join(["rain"] * 200)
    with pytest.raises(CheckpointError, match=r"more than the limit of 64.*context of 64 tokens"):
        run_decoder(llama, text)


def test_memory_caps_the_length_and_says_so(llama, monkeypatch):
    from dataclasses import replace

    c = replace(llama.config, max_positions=1_000_000)
    monkeypatch.setattr(decoder_run, "available_memory", lambda: 64 * 2**20)
    limit, why = token_limit(c)
    assert 1000 < limit < 1_000_000 and "half the available memory" in why
    assert decoder_run.pass_bytes(c, limit, "qk") <= 32 * 2**20 < decoder_run.pass_bytes(c, limit + 1, "qk")


def test_bos_comes_first_and_is_special(llama):
    res = run_decoder(llama, "the river")
    assert res.tokens[0] == "<s>" and res.special[0] and not res.special[1:].any()
    assert res.tokens[1] == "the river" or not res.tokens[1].startswith(" ")


def test_a_decoder_config_claiming_a_billion_layers_is_refused_from_the_header(tmp_path):
    import json
    import shutil

    d = tmp_path / "ck"
    shutil.copytree(DATA / "tiny_llama", d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["num_hidden_layers"] = 10**9
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"1,000,000,000 layers.*implies 9,000,000,002 tensors.*holds 20 tensors"):
        load_checkpoint(d)


@pytest.mark.parametrize("extra, windows", [
    ({}, [0, 0, 0, 0]),
    ({"use_sliding_window": True, "sliding_window": 7, "max_window_layers": 2}, [0, 0, 7, 7]),
    ({"use_sliding_window": True, "sliding_window": 7,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}, [7, 0, 7, 0]),
    ({"use_sliding_window": False, "sliding_window": 7, "max_window_layers": 0}, [0, 0, 0, 0]),
])
def test_qwen_sliding_layers_as_transformers_reads_them(extra, windows):
    from attnviz.checkpoints.config import parse_model_config

    cfg = {"model_type": "qwen2", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 10, **extra}
    spec = parse_model_config(cfg).decoder
    assert [spec.window(i) for i in range(4)] == windows


@pytest.mark.parametrize("changes, expected", [
    ({"num_key_value_heads": 3}, "4 attention heads are not a multiple of 3 key/value heads"),
    ({"rope_parameters": {"rope_type": "su", "factor": 2.0, "rope_theta": 10000.0}}, "rope type 'su' is not supported"),
    ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "rope_theta": 10000.0, "low_freq_factor": 4.0,
                          "high_freq_factor": 1.0}}, "high_freq_factor > low_freq_factor"),
    ({"rms_norm_eps": 1e308}, r"rms_norm_eps must be in \(0, 1\)"),
    ({"hidden_act": "gelu"}, "SwiGLU uses 'silu'"),
    ({"head_dim": 7}, "head_dim 7 must be even"),
    ({"layer_types": ["full_attention"], "use_sliding_window": True, "sliding_window": 4, "model_type": "qwen2"},
     "layer_types must list 2 strings"),
])
def test_decoder_config_problems(tmp_path, changes, expected):
    import json
    import shutil

    d = tmp_path / "ck"
    shutil.copytree(DATA / "tiny_llama", d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=expected):
        load_checkpoint(d)


@pytest.mark.parametrize("side", [5, 8, 1000])
def test_thumbnails_are_max_overviews_made_in_the_summaries_pass(llama, side):
    long = run_decoder(llama, TEXT, mode="qk")
    s, thumbs = long.summaries_and_thumbnails(side)
    n = min(side, long.T)
    assert thumbs.shape == (2, 4, n, n)
    for layer in range(2):
        for head in range(4):
            np.testing.assert_allclose(thumbs[layer, head], long.overview(layer, head, (n, n)), atol=1e-6)
    np.testing.assert_array_equal(s.to_first, long.summaries().to_first)
