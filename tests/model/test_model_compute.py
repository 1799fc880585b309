"""run(): the compute pipeline against an independent float64 formula, edge cases and bad input."""

import dataclasses
import io

import numpy as np
import pytest

from attnviz.model import sequence
from attnviz.model.compute import ComputeRequest, run
from attnviz.model.frozen import FrozenArray
from attnviz.model.heads import init_weights
from attnviz.model.mask.design import MaskDesign
from attnviz.model.mask.presets import preset
from attnviz.model.positional import PositionalConfig, alibi_bias
from attnviz.model.score_rules import ScoreRuleConfig
from attnviz.model.state import (CrossConfig, CustomSource, ImageSource, KernelConfig, ModelConfig, SessionState,
                                 TextSource, ToySource)


def toy_state(T=7, d=8, nh=2, seed=3, **kw):
    rng = np.random.default_rng(seed)
    src = ToySource("toy", labels=tuple(f"t{i}" for i in range(T)), embeddings=FrozenArray(rng.normal(size=(T, d))))
    return SessionState(sources=(src,), model=ModelConfig(d_model=d, nh=nh, seed=seed), **kw)


def formula(state, mask, scale_fn):
    """Independent float64 multi-head attention for toy sources without positions."""
    X = np.concatenate([s.embeddings.array for s in state.sources])
    W = init_weights(state.model)
    q = np.einsum("td,hde->hte", X, W.W_q)
    k = np.einsum("td,hde->hte", X, W.W_k)
    v = np.einsum("td,hde->hte", X, W.W_v)
    s = scale_fn(q, k)
    s = np.where(mask, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = w / w.sum(-1, keepdims=True)
    out = w @ v
    comb = out.transpose(1, 0, 2).reshape(X.shape[0], -1) @ W.W_o
    return w, out, comb


@pytest.mark.parametrize("kernel", ["flash", "naive", "reference"])
@pytest.mark.parametrize("rule", ["scaled_dot", "dot"])
def test_dot_family_matches_formula_under_a_causal_mask(kernel, rule):
    st = toy_state(T=9, kernel=KernelConfig(kernel, 4, 4), score_rule=ScoreRuleConfig(rule),
                   mask=preset("causal", []))
    r = run(ComputeRequest(1, st))
    assert r.ok and r.path == f"engine:{kernel}"
    mask = np.tril(np.ones((9, 9), bool))
    hs = st.model.head_size
    sc = (1 / np.sqrt(hs)) if rule == "scaled_dot" else 1.0
    w, out, comb = formula(st, mask, lambda q, k: (q @ k.transpose(0, 2, 1)) * sc)
    np.testing.assert_allclose(r.weights, w, atol=1e-12)
    np.testing.assert_allclose(r.output, out, atol=1e-12)
    np.testing.assert_allclose(r.combined, comb, atol=1e-12)
    assert np.all(r.weights[:, ~mask] == 0)
    np.testing.assert_allclose(r.scores, (r.q @ r.k.transpose(0, 2, 1)) * sc, atol=1e-12)


def test_uniform_rule_spreads_weight_evenly_over_allowed_keys():
    st = toy_state(T=5, score_rule=ScoreRuleConfig("uniform"), mask=preset("causal", []))
    r = run(ComputeRequest(1, st))
    for i in range(5):
        np.testing.assert_allclose(r.weights[:, i, : i + 1], 1 / (i + 1), atol=1e-14)


def test_fully_masked_rows_are_zero_with_minus_inf_lse_and_flagged():
    from attnviz.model.mask.paint import DENY, CellOverrides

    T = 5
    over = CellOverrides.from_cells([2] * T, list(range(T)), DENY)  # paint row 2 "deny"
    design = MaskDesign.default()
    design = dataclasses.replace(design, overrides=over)
    r = run(ComputeRequest(1, toy_state(T=T, mask=design)))
    assert r.ok
    assert r.fully_masked.tolist() == [False, False, True, False, False]
    assert np.all(r.weights[:, 2] == 0) and np.all(r.output[:, 2] == 0)
    assert np.all(np.isneginf(r.lse[:, 2]))
    assert any("fully masked" in m for m in r.messages)
    assert np.all(np.isfinite(r.combined))


def test_alibi_runs_on_numpy_path_with_bias_and_says_so():
    st = toy_state(T=6, positional=PositionalConfig("alibi"))
    r = run(ComputeRequest(1, st))
    assert r.ok and r.path == "numpy"
    assert any("ALiBi" in m for m in r.messages)
    hs = st.model.head_size
    bias = alibi_bias(st.model.nh, 6, 6)
    w, out, _ = formula(st, np.ones((6, 6), bool),
                        lambda q, k: (q @ k.transpose(0, 2, 1)) / np.sqrt(hs) + bias)
    np.testing.assert_allclose(r.weights, w, atol=1e-12)
    np.testing.assert_allclose(r.output, out, atol=1e-12)


def test_alibi_with_the_linear_rule_says_only_that_it_is_not_applied():
    st = toy_state(T=6, positional=PositionalConfig("alibi"), score_rule=ScoreRuleConfig("linear"))
    r = run(ComputeRequest(1, st))
    plain = run(ComputeRequest(2, toy_state(T=6, score_rule=ScoreRuleConfig("linear"))))
    assert r.ok and any("not applied to linear attention" in m for m in r.messages)
    assert not any("bias added" in m for m in r.messages)
    np.testing.assert_array_equal(r.output, plain.output)  # no bias in the linear rule's numbers


def test_rope_rotates_q_and_k_so_scores_depend_on_offsets():
    st = toy_state(T=6, positional=PositionalConfig("rope"))
    r = run(ComputeRequest(1, st))
    plain = run(ComputeRequest(1, toy_state(T=6)))
    assert r.ok and not np.allclose(r.q, plain.q)
    np.testing.assert_allclose(np.linalg.norm(r.q, axis=-1), np.linalg.norm(plain.q, axis=-1), atol=1e-12)
    np.testing.assert_allclose(r.q[:, 0], plain.q[:, 0], atol=1e-12)  # position 0 is not rotated


def test_rope_with_odd_head_size_is_a_message_not_a_crash():
    st = toy_state(T=4, d=6, nh=2, positional=PositionalConfig("rope"))  # hs = 3
    r = run(ComputeRequest(1, st))
    assert not r.ok and "even head size" in r.error and r.error in r.messages


def test_sinusoidal_positions_are_added_to_X():
    from attnviz.model.positional import sinusoidal

    st = toy_state(T=5, positional=PositionalConfig("sinusoidal"))
    r = run(ComputeRequest(1, st))
    np.testing.assert_allclose(r.X, st.sources[0].embeddings.array + sinusoidal(5, 8), atol=1e-15)


def test_selected_rows_beyond_dense_limit_match_full_weights():
    st = toy_state(T=12, mask=preset("causal", []))
    full = run(ComputeRequest(1, st))
    small = run(ComputeRequest(2, st, rows=(3, 11), dense_limit=8))
    assert small.ok and small.weights is None and small.scores is None
    assert any("dense limit" in m for m in small.messages)
    for r_ in (3, 11):
        np.testing.assert_allclose(small.row_weights[r_], full.weights[:, r_], atol=1e-12)
    np.testing.assert_allclose(small.output, full.output, atol=1e-12)


def test_summary_mode_has_no_matrices():
    r = run(ComputeRequest(1, toy_state(T=4), want="summary"))
    assert r.ok and r.weights is None and r.output is not None


def test_cross_attention_has_different_lengths():
    rng = np.random.default_rng(0)
    a = ToySource("dec", labels=("x", "y"), embeddings=FrozenArray(rng.normal(size=(2, 8))))
    b = ToySource("enc", labels=("p", "q", "r", "s", "t"), embeddings=FrozenArray(rng.normal(size=(5, 8))))
    st = SessionState(sources=(a, b), cross=CrossConfig(("dec",), ("enc",)), model=ModelConfig(d_model=8, nh=2))
    r = run(ComputeRequest(1, st))
    assert r.ok and r.cross and r.weights.shape == (2, 2, 5) and r.combined.shape == (2, 8)
    assert r.key_segments[0].name == "enc"


def test_cancel_and_progress():
    seen = []
    r = run(ComputeRequest(1, toy_state()), progress=lambda f, s: seen.append((f, s)))
    assert r.ok and seen[-1] == (1.0, "done")
    assert [f for f, _ in seen] == sorted(f for f, _ in seen)
    calls = []

    def cancel_after_two():
        calls.append(1)
        return len(calls) > 2

    r = run(ComputeRequest(7, toy_state()), is_cancelled=cancel_after_two)
    assert r.cancelled and not r.ok and r.request_id == 7 and r.weights is None


def test_hand_set_component_flows_through_scores():
    from attnviz.model.commands import SetQKComponent

    st = toy_state(T=4)
    st2, _ = SetQKComponent("q", 1, 2, 0, 5.0).apply(st)
    r1, r2 = run(ComputeRequest(1, st)), run(ComputeRequest(2, st2))
    assert r2.q[1, 2, 0] == 5.0
    assert not np.allclose(r1.weights[1, 2], r2.weights[1, 2])
    np.testing.assert_allclose(r1.weights[0], r2.weights[0])  # other head untouched
    np.testing.assert_allclose(r1.weights[1, [0, 1, 3]], r2.weights[1, [0, 1, 3]])


# -- text, images, custom blocks, caching ------------------------------------------------------


def png_bytes(h, w, mode="RGB"):
    from PIL import Image

    buf = io.BytesIO()
    Image.new(mode, (w, h), 128).save(buf, format="PNG")
    return buf.getvalue()


def test_text_image_custom_sequence_and_token_info():
    st = SessionState(sources=(TextSource("prompt", text="by the river"),
                               ImageSource("cam", data=png_bytes(32, 48), patch=16),
                               CustomSource("state", count=2, generator="noise", seed=4)),
                      model=ModelConfig(d_model=16, nh=2))
    r = run(ComputeRequest(1, st))
    assert r.ok, r.error
    names = [s.name for s in r.query_segments]
    assert names == ["prompt", "cam", "state"]
    cam = r.query_segments[1]
    assert cam.stop - cam.start == 1 + 2 * 3  # class token + 2x3 grid
    ti = r.query_tokens[0]
    assert ti.kind == "text" and ti.span == (0, 2)
    img = r.query_tokens[cam.start + 4]
    assert img.patch == 3 and img.grid == (2, 3)
    assert r.query_labels[-2:] == ("state0", "state1")
    assert r.query_segments[0].color == st.sources[0].color


def test_mask_edit_does_not_retokenise():
    sequence.clear_caches()
    st = SessionState(sources=(TextSource("p", text="the savings bank"),), model=ModelConfig(d_model=8, nh=2))
    n0 = sequence.PREPARE_COUNTS["tokenize"]
    run(ComputeRequest(1, st))
    run(ComputeRequest(2, dataclasses.replace(st, mask=preset("causal", []))))
    assert sequence.PREPARE_COUNTS["tokenize"] == n0 + 1


@pytest.mark.parametrize("sources, needle", [
    ((TextSource("p", text=""),), "no tokens"),
    ((ImageSource("img", data=b"\x89PNG\r\n\x1a\nbroken"),), "img"),
    ((ImageSource("img", data=png_bytes(8, 8), patch=16),), "smaller than one"),
    ((ImageSource("img", data=png_bytes(64, 64)[:60]),), "img"),
])
def test_bad_sources_give_clear_messages(sources, needle):
    r = run(ComputeRequest(1, SessionState(sources=sources, model=ModelConfig(d_model=8, nh=2))))
    assert not r.ok and needle in r.error and r.error in r.messages


def test_empty_text_next_to_other_tokens_is_a_warning():
    st = SessionState(sources=(TextSource("a", text="   "), TextSource("b", text="bank")),
                      model=ModelConfig(d_model=8, nh=2))
    r = run(ComputeRequest(1, st))
    assert r.ok and any("'a' is empty" in m for m in r.messages)
    assert r.query_segments[0].start == r.query_segments[0].stop == 0


def test_huge_text_is_refused_with_a_message():
    st = SessionState(sources=(TextSource("p", text="river bank " * 40_000),), model=ModelConfig(d_model=8, nh=2))
    r = run(ComputeRequest(1, st))
    assert not r.ok and "limit" in r.error and "'p'" in r.error


def test_emoji_and_rtl_text_work_with_spans():
    text = "שלום bank 🙂 مرحبا"
    st = SessionState(sources=(TextSource("p", text=text),), model=ModelConfig(d_model=8, nh=2))
    r = run(ComputeRequest(1, st))
    assert r.ok and np.all(np.isfinite(r.weights))
    for t in r.query_tokens:
        a, b = t.span
        assert 0 <= a <= b <= len(text)


def test_target_not_multiple_of_patch_is_refused_at_construction():
    with pytest.raises(ValueError, match="not a multiple of the patch size"):
        ImageSource("img", data=png_bytes(32, 32), patch=16, target=(30, 32))
