"""The selected head's preview (attnviz.model.preview) and the pieces that make it quick: the staged
weight draw, recycled result buffers and the cached position-added rows."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from attnviz.model import buffers, compute_cache, sequence
from attnviz.model.commands import EditMask, SetQKComponent
from attnviz.model.compute import EXACT_CELLS, ComputeRequest, run
from attnviz.model.frozen import FrozenArray
from attnviz.model.heads import init_weights, query_key_weights
from attnviz.model.mask.commands import OnHead, PaintCells
from attnviz.model.mask.presets import preset
from attnviz.model.positional import PositionalConfig
from attnviz.model.preview import PREVIEW_CELLS, wanted
from attnviz.model.score_rules import ScoreRuleConfig
from attnviz.model.state import CrossConfig, CustomSource, KernelConfig, ModelConfig, SessionState

T = 512  # nh * T * T = 2**21 at 8 heads: the smallest previewed size


@pytest.fixture(autouse=True)
def _fresh_caches():
    compute_cache.clear()
    sequence.clear_caches()
    yield
    compute_cache.clear()


def state(T=T, nh=8, seed=0, **kw) -> SessionState:
    return SessionState(sources=(CustomSource("tokens", count=T, generator="noise", seed=1),),
                        model=ModelConfig(d_model=64, nh=nh, hs=16, seed=seed), **kw)


def run_with_preview(st, head=3, rid=1, **kw):
    got = []
    resp = run(ComputeRequest(rid, st, preview_head=head, **kw), on_preview=got.append)
    assert resp.ok, resp.error
    return resp, got


def assert_matches(p, resp):
    h = p.head
    assert p.request_id == resp.request_id and p.nh == resp.weights.shape[0]
    assert p.weights.dtype == resp.weights.dtype and p.weights.shape == (resp.Tq, resp.Tk)
    np.testing.assert_array_equal(p.scores, resp.scores[h])  # the same display pass
    if p.weights.dtype == np.float64:  # the float64 kernel's own weights, from one head's call instead of all
        np.testing.assert_allclose(p.weights, resp.weights[h], rtol=1e-13, atol=1e-16)
    else:  # float32 lse, each row divided by its sum
        np.testing.assert_allclose(p.weights, resp.weights[h], rtol=2e-6, atol=1e-8)
    np.testing.assert_array_equal(p.mask, resp.mask if resp.mask.ndim == 2 else resp.mask[h])
    assert p.query_labels == resp.query_labels and p.key_segments == resp.key_segments
    sums = p.weights.sum(axis=1, dtype=np.float64)
    allowed = p.mask.any(axis=1)
    np.testing.assert_allclose(sums[allowed], 1.0, rtol=1e-5)
    assert np.all(p.weights[~p.mask] == 0)
    assert not p.weights.flags.writeable and p.seconds > 0


def test_a_small_sequence_previews_float64_matrices_identical_to_the_response():
    st = state(T=256, mask=preset("causal"))
    assert 256 * 256 <= EXACT_CELLS
    resp, got = run_with_preview(st, head=1)
    assert len(got) == 1 and got[0].weights.dtype == np.float64
    assert_matches(got[0], resp)


def test_a_model_edit_previews_the_selected_head_with_the_responses_numbers():
    resp, got = run_with_preview(state())
    assert len(got) == 1 and got[0].head == 3
    assert_matches(got[0], resp)
    assert "preview" in resp.timings
    # a new seed: the projections are not cached, the preview projects its one head itself
    resp2, got2 = run_with_preview(state(seed=7), head=5, rid=2)
    assert len(got2) == 1
    assert_matches(got2[0], resp2)
    assert not np.allclose(got2[0].weights, resp.weights[5])


@pytest.mark.parametrize("extra", [
    dict(positional=PositionalConfig(kind="rope")),
    dict(positional=PositionalConfig(kind="sinusoidal")),
    dict(mask=preset("causal")),
])
def test_preview_matches_with_rope_positions_and_masks(extra):
    resp, got = run_with_preview(state(**extra), head=6)
    assert_matches(got[0], resp)


def test_preview_of_a_per_head_mask_and_hand_set_components():
    st = state(mask=preset("causal"))
    st = EditMask(OnHead(2, PaintCells(((5, 2), (9, 0)), "deny"))).apply(st)[0]
    st = SetQKComponent("q", 2, 7, 3, 4.5).apply(st)[0]
    st = SetQKComponent("k", 1, 3, 0, -2.0).apply(st)[0]  # another head's: not in head 2's preview
    resp, got = run_with_preview(st, head=2)
    assert resp.mask.ndim == 3
    assert_matches(got[0], resp)
    assert resp.q[2, 7, 3] == 4.5
    # the hand-set component changes head 2's scores in row 7 only
    plain, got_plain = run_with_preview(state(mask=preset("causal")), head=2, rid=2)
    changed = np.flatnonzero(np.any(got[0].scores != got_plain[0].scores, axis=1))
    assert changed.tolist() == [7]


def test_preview_from_cached_projections_after_a_hand_set_component():
    run(ComputeRequest(1, state()))
    st = SetQKComponent("k", 4, 11, 2, 3.0).apply(state())[0]
    resp, got = run_with_preview(st, head=4, rid=2)
    assert len(got) == 1
    assert_matches(got[0], resp)


def test_cross_attention_preview():
    st = SessionState(sources=(CustomSource("a", count=300, generator="noise", seed=1),
                               CustomSource("b", count=500, generator="noise", seed=2)),
                      model=ModelConfig(d_model=64, nh=16, hs=16), cross=CrossConfig(("a",), ("b",)))
    resp, got = run_with_preview(st, head=9)
    assert got and got[0].cross and (got[0].Tq, got[0].Tk) == (300, 500)
    assert_matches(got[0], resp)


def test_no_preview_where_the_run_is_quick_or_cannot_give_one():
    # a mask edit recomputes one row: no preview
    run(ComputeRequest(1, state()))
    _, got = run_with_preview(EditMask(PaintCells(((3, 1),), "deny")).apply(state())[0], rid=2)
    assert got == []
    # a view-only repeat: everything cached
    _, got = run_with_preview(state(), rid=3)
    assert got == []
    compute_cache.clear()
    for st, head, kw in [
        (state(T=128), 3, {}),  # small: one run is as quick
        (state(), "mean", {}),  # the mean needs every head
        (state(), None, {}),
        (state(), 8, {}),  # no such head
        (state(nh=1), 0, {}),  # one head: the preview would be the run
        (state(), 3, dict(want="summary")),
        (state(), 3, dict(dense_limit=256)),
        (state(positional=PositionalConfig(kind="alibi")), 3, {}),
        (state(score_rule=ScoreRuleConfig(name="additive")), 3, {}),
    ]:
        compute_cache.clear()
        resp, got = run_with_preview(st, head=head, **kw)
        assert got == [], (head, kw, st.positional, st.score_rule)
        assert "preview" not in resp.timings


def test_wanted_follows_its_thresholds():
    st = state()
    assert wanted(st, 0, T, T, True)
    assert not wanted(st, True, T, T, True)  # a bool is not a head
    small = int(math.isqrt(PREVIEW_CELLS // 8)) - 1
    assert not wanted(st, 0, small, small, True)
    assert wanted(st, 0, small + 1, small + 1, True)
    assert not wanted(st, 0, T, T, False)


def test_a_preview_does_not_change_the_response():
    plain = run(ComputeRequest(1, state(seed=3)))
    compute_cache.clear()
    resp, got = run_with_preview(state(seed=3), rid=2)
    assert got
    for name in ("q", "k", "v", "output", "lse", "combined", "weights", "scores"):
        np.testing.assert_array_equal(getattr(resp, name), getattr(plain, name), err_msg=name)


def test_a_cancelled_run_after_its_preview_returns_cancelled():
    calls = {"n": 0}

    def cancel_after_preview():
        return calls["n"] > 0

    def on_preview(p):
        calls["n"] += 1

    resp = run(ComputeRequest(1, state(), preview_head=0), on_preview=on_preview, is_cancelled=cancel_after_preview)
    assert calls["n"] == 1 and resp.cancelled and resp.weights is None


# ------------------------------------------------------------------------------------------------
# the staged draw


def test_query_key_weights_then_the_rest_equal_one_draw():
    model = ModelConfig(d_model=32, nh=4, hs=8, seed=11)
    W_q, W_k = query_key_weights(model)
    W = init_weights(model)
    assert W.W_q is W_q and W.W_k is W_k
    rng = np.random.default_rng(11)
    expect = [rng.normal(0.0, 1 / math.sqrt(32), size=(4, 32, 8)) for _ in range(3)]
    expect.append(rng.normal(0.0, 1 / math.sqrt(32), size=(32, 32)))
    for got, want in zip((W.W_q, W.W_k, W.W_v, W.W_o), expect):
        np.testing.assert_array_equal(got, want)
        assert not got.flags.writeable


def test_staged_draw_keeps_hand_set_matrices_and_the_others_unchanged():
    plain = ModelConfig(d_model=16, nh=2, hs=8, seed=4)
    base = init_weights(plain)
    hand = dataclasses.replace(plain, W_k=FrozenArray(np.full((2, 16, 8), 0.5)))
    W_q, W_k = query_key_weights(hand)
    assert np.all(W_k == 0.5)
    W = init_weights(hand)
    np.testing.assert_array_equal(W.W_q, base.W_q)
    np.testing.assert_array_equal(W.W_v, base.W_v)
    np.testing.assert_array_equal(W.W_o, base.W_o)


# ------------------------------------------------------------------------------------------------
# recycled buffers and cached rows


def pooled_bytes() -> int:
    """Bytes of the arrays the buffer pool refers to (some may also be in use elsewhere)."""
    with buffers._lock:
        return sum(a.nbytes for a in buffers._arrays)


def test_buffers_are_reused_only_when_nobody_holds_them():
    buffers.clear()
    a = buffers.take((300, 1024), np.float32)
    ptr = a.ctypes.data
    a[:] = 1
    a.setflags(write=False)
    view = a[3]
    del a
    b = buffers.take((300, 1024), np.float32)
    assert b.ctypes.data != ptr  # a view still holds the first
    del view, b
    c = buffers.take((300, 1024), np.float32)
    assert c.ctypes.data == ptr  # the oldest free one
    assert c.flags.writeable and c.shape == (300, 1024) and c.dtype == np.float32
    d = buffers.take((300, 1024), np.float64)  # another dtype: never the same memory
    assert d.ctypes.data != c.ctypes.data
    small = buffers.take((4, 4), np.float32)
    assert small.nbytes < buffers.MIN_BYTES
    buffers.clear()
    assert pooled_bytes() == 0


def test_buffer_reuse_after_release():
    buffers.clear()
    a = buffers.take((512, 1024), np.float32)
    ptr = a.ctypes.data
    del a
    b = buffers.take((512, 1024), np.float32)
    assert b.ctypes.data == ptr


def test_buffer_pool_stays_bounded():
    buffers.clear()
    kept = [buffers.take((256, 1024), np.float32) for _ in range(buffers.MAX_ARRAYS + 4)]
    assert len(kept) == buffers.MAX_ARRAYS + 4
    assert pooled_bytes() <= buffers.MAX_ARRAYS * kept[0].nbytes
    buffers.clear()


def test_responses_never_share_a_recycled_buffer_they_still_hold():
    r1 = run(ComputeRequest(1, state(seed=1)))
    w1 = r1.weights.copy()
    for s in range(2, 8):  # enough runs to recycle everything the caches let go
        run(ComputeRequest(s, state(seed=s)))
    np.testing.assert_array_equal(r1.weights, w1)


def test_position_added_rows_are_cached_per_sequence():
    st = state(positional=PositionalConfig(kind="sinusoidal"))
    seq = sequence.assemble(st)[0]
    X1 = sequence.with_positions(st, seq)
    assert sequence.with_positions(st, seq) is X1 and not X1.flags.writeable
    st2 = dataclasses.replace(st, positional=PositionalConfig(kind="none"))
    X2 = sequence.with_positions(st2, seq)
    np.testing.assert_array_equal(X2, seq.embeddings)
    assert not np.array_equal(X1, X2)


# ------------------------------------------------------------------------------------------------
# a first start: the numpy path stands in while the kernels compile


def test_when_compiled_uses_the_numpy_path_until_the_kernels_are_warm(monkeypatch):
    from attnviz.engine import jitcache

    st = state(T=64, mask=preset("causal"))
    monkeypatch.setattr(jitcache, "is_warm", lambda: False)
    cold = run(ComputeRequest(1, st, engine="when-compiled", preview_head=0), on_preview=lambda p: None)
    assert cold.ok and cold.path == "numpy" and cold.stand_in
    assert any("being compiled" in m for m in cold.messages)
    always = run(ComputeRequest(2, st))
    assert always.path == "engine:flash" and not always.stand_in  # not the cached numpy result
    for name in ("output", "lse", "weights", "combined"):
        np.testing.assert_allclose(getattr(cold, name), getattr(always, name), rtol=1e-12, atol=1e-14,
                                   err_msg=name)
    monkeypatch.setattr(jitcache, "is_warm", lambda: True)
    warm = run(ComputeRequest(3, st, engine="when-compiled"))
    assert warm.path == "engine:flash" and not any("being compiled" in m for m in warm.messages)
    with pytest.raises(ValueError, match="engine must be one of"):
        ComputeRequest(4, st, engine="sometimes")


def test_naive_until_warm_runs_the_naive_kernel_for_flash_on_small_inputs_until_the_warm_up(monkeypatch):
    from attnviz.engine import jitcache

    st = state(T=64, mask=preset("causal"))
    monkeypatch.setattr(jitcache, "is_warm", lambda: False)
    cold = run(ComputeRequest(1, st, engine="naive-until-warm"))
    assert cold.ok and cold.path == "engine:naive" and cold.kernel_stand_in == "flash" and not cold.stand_in
    assert any("flash kernel is being compiled" in m for m in cold.messages)
    flash = run(ComputeRequest(2, st))  # "always": flash itself, not the naive result from the cache
    assert flash.path == "engine:flash" and flash.kernel_stand_in == ""
    assert not any("being compiled" in m for m in flash.messages)
    for name in ("output", "lse", "weights", "combined"):
        np.testing.assert_allclose(getattr(cold, name), getattr(flash, name), rtol=1e-12, atol=1e-14, err_msg=name)
    monkeypatch.setattr(jitcache, "is_warm", lambda: True)
    warm = run(ComputeRequest(3, st, engine="naive-until-warm"))
    assert warm.path == "engine:flash" and warm.kernel_stand_in == ""


def test_naive_stands_in_only_for_flash_and_only_where_its_weights_are_the_exact_ones(monkeypatch):
    from attnviz.engine import jitcache

    monkeypatch.setattr(jitcache, "is_warm", lambda: False)
    big = state(T=300)  # 300 x 300 cells: float32 display matrices, made by flash's own fused pass
    assert run(ComputeRequest(1, big, engine="naive-until-warm")).path == "engine:flash"
    chosen = dataclasses.replace(state(T=16), kernel=KernelConfig(name="naive"))
    resp = run(ComputeRequest(2, chosen, engine="naive-until-warm"))
    assert resp.path == "engine:naive" and resp.kernel_stand_in == ""  # asked for: not a stand-in
