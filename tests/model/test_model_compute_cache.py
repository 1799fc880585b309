"""run() with its caches: every reused or row-patched result equals a cold run of the same state.

A "cold" run empties every cache first (compute_cache.clear, sequence.clear_caches), so it computes
everything from the sources. Float64 arrays are compared at 1e-12; float32 display matrices (large
T) at float32 rounding, and against the float64 formula.
"""

import dataclasses

import numpy as np
import pytest

from attnviz.engine.blockmask import BlockMask
from attnviz.model import compute, compute_cache, sequence
from attnviz.model.commands import (EditMask, SetKernel, SetModel, SetPositional, SetQKComponent, SetScoreRule,
                                    SetText, SetView)
from attnviz.model.compute import EXACT_CELLS, ComputeRequest, run
from attnviz.model.frozen import FrozenArray
from attnviz.model.heads import init_weights
from attnviz.model.mask.commands import OnHead, PaintCells, PaintLines
from attnviz.model.mask.presets import preset
from attnviz.model.positional import PositionalConfig
from attnviz.model.score_rules import ScoreRuleConfig
from attnviz.model.state import CustomSource, KernelConfig, ModelConfig, SessionState, TextSource, ToySource

FIELDS = ("X", "q", "k", "v", "scores", "weights", "output", "lse", "combined", "mask", "fully_masked")


def block_state(T=40, d=16, nh=2, **kw):
    """A custom-block session of T noise tokens."""
    return SessionState(sources=(CustomSource("blk", count=T, generator="noise", seed=2),),
                        model=ModelConfig(d_model=d, nh=nh), **kw)


def cold(state, **kw):
    compute_cache.clear()
    sequence.clear_caches()
    return run(ComputeRequest(0, state, **kw))


def assert_same(warm, ref, atol32=2e-6):
    """Same labels and arrays (float64 at 1e-12, float32 display matrices at float32 rounding)."""
    assert warm.ok and ref.ok, (warm.error, ref.error)
    assert warm.query_labels == ref.query_labels and warm.key_labels == ref.key_labels
    assert warm.messages == ref.messages
    for name in FIELDS:
        a, b = getattr(warm, name), getattr(ref, name)
        assert (a is None) == (b is None), name
        if a is None:
            continue
        assert a.dtype == b.dtype and a.shape == b.shape, name
        if a.dtype == np.bool_:
            assert np.array_equal(a, b), name
        else:
            tol = atol32 if a.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(a, b, rtol=0, atol=tol, err_msg=name)
    assert warm.tile_counts == ref.tile_counts
    assert np.array_equal(warm.block_mask.tile_state, ref.block_mask.tile_state)
    assert warm.row_weights.keys() == ref.row_weights.keys()
    for r in warm.row_weights:
        np.testing.assert_allclose(warm.row_weights[r], ref.row_weights[r], atol=1e-6)


def edit(state, cmd):
    return cmd.apply(state)[0]


def paint(state, cells, value="deny"):
    return edit(state, EditMask(PaintCells(tuple(cells), value)))


# -- mask edits recompute only the changed rows ------------------------------------------------


@pytest.mark.parametrize("T", [12, 300])  # float64 display matrices, then float32 ones
@pytest.mark.parametrize("kernel", ["flash", "naive", "reference"])
def test_mask_edit_recomputes_changed_rows_only(T, kernel):
    st = block_state(T, kernel=KernelConfig(kernel, 16, 16), mask=preset("causal", []))
    cold(st)
    st2 = paint(st, [(5, 2), (9, 0)])
    warm = run(ComputeRequest(1, st2, rows=(5, 0)))
    assert warm.recomputed_rows == 2
    assert warm.weights.dtype == (np.float64 if T * T <= EXACT_CELLS else np.float32)
    assert np.all(warm.weights[:, 5, 2] == 0) and np.all(warm.weights[:, 9, 0] == 0)
    assert_same(warm, cold(st2, rows=(5, 0)))


def test_undoing_a_paint_stroke_gives_back_the_first_numbers():
    st = block_state(300, mask=preset("causal", []))
    first = cold(st)
    st2, inverse = EditMask(PaintCells(((7, 3), (7, 4), (20, 1)), "deny")).apply(st)
    run(ComputeRequest(1, st2))
    back = run(ComputeRequest(2, inverse.apply(st2)[0]))
    assert back.recomputed_rows == 2
    assert_same(back, first)


def test_painting_a_row_fully_masked_then_allowed_again():
    st = block_state(300)
    cold(st)
    st2 = edit(st, EditMask(PaintLines("row", (4,), 300, "deny")))
    r = run(ComputeRequest(1, st2))
    assert r.recomputed_rows == 1 and r.fully_masked.tolist().count(True) == 1
    assert np.all(r.weights[:, 4] == 0) and np.all(r.output[:, 4] == 0) and np.all(np.isneginf(r.lse[:, 4]))
    assert_same(r, cold(st2))
    st3 = edit(st2, EditMask(PaintLines("row", (4,), 300, "allow")))
    cold(st2)
    r3 = run(ComputeRequest(2, st3))
    assert r3.recomputed_rows == 1 and not r3.fully_masked.any()
    assert_same(r3, cold(st3))


def test_a_rule_change_of_every_row_runs_everything_again():
    st = block_state(300)
    cold(st)
    st2 = dataclasses.replace(st, mask=preset("causal", []))
    r = run(ComputeRequest(1, st2))
    assert r.recomputed_rows == 300
    assert_same(r, cold(st2))


def test_per_head_mask_edit():
    st = block_state(300, nh=4)
    cold(st)
    st2 = edit(st, EditMask(OnHead(2, PaintCells(((10, 11), (12, 0)), "deny"))))
    r = run(ComputeRequest(1, st2))
    assert r.mask.shape == (4, 300, 300) and r.recomputed_rows == 300  # 2-D -> per-head: shapes differ
    st3 = edit(st2, EditMask(OnHead(1, PaintCells(((30, 31),), "deny"))))
    r3 = run(ComputeRequest(2, st3))
    assert r3.recomputed_rows == 1
    assert r3.weights[1, 30, 31] == 0 and r3.weights[2, 30, 31] > 0
    assert_same(r3, cold(st3))


@pytest.mark.parametrize("rule, positional", [("additive", "none"), ("linear", "none"), ("scaled_dot", "alibi"),
                                              ("multiplicative", "alibi")])
def test_numpy_path_mask_edit(rule, positional):
    st = block_state(24, score_rule=ScoreRuleConfig(rule, seed=1), positional=PositionalConfig(positional),
                     mask=preset("causal", []))
    cold(st)
    st2 = paint(st, [(6, 1), (6, 2)])
    r = run(ComputeRequest(1, st2, rows=(6,)))
    assert r.path == "numpy" and r.recomputed_rows == 1
    assert_same(r, cold(st2, rows=(6,)))


def test_mask_edit_beyond_the_dense_limit():
    st = block_state(300, mask=preset("causal", []))
    cold(st, dense_limit=100, rows=(9,))
    st2 = paint(st, [(9, 3)])
    r = run(ComputeRequest(1, st2, dense_limit=100, rows=(9,)))
    assert r.weights is None and r.recomputed_rows == 1
    assert r.row_weights[9][:, 3].tolist() == [0.0, 0.0]
    assert_same(r, cold(st2, dense_limit=100, rows=(9,)))


# -- other edits invalidate what they change -----------------------------------------------------


def test_view_edit_reuses_everything():
    st = block_state(300)
    a = cold(st)
    b = run(ComputeRequest(1, edit(st, SetView((("head", 1), ("colormap", "magma"))))))
    assert b.recomputed_rows == 0 and b.request_id == 1
    for name in FIELDS:
        assert getattr(b, name) is getattr(a, name), name


@pytest.mark.parametrize("cmd", [
    SetModel((("seed", 5),)),
    SetModel((("embed_seed", 3),)),
    SetModel((("d_model", 24), ("nh", 3))),
    SetPositional(PositionalConfig("rope")),
    SetPositional(PositionalConfig("sinusoidal")),
    SetScoreRule(ScoreRuleConfig("dot")),
    SetScoreRule(ScoreRuleConfig("multiplicative", seed=2)),
    SetKernel("reference", 16, 16),
    SetKernel("flash", 32, 8),
    SetQKComponent("q", 1, 3, 0, 4.0),
    SetQKComponent("k", 0, 7, 2, -3.0),
], ids=lambda c: type(c).__name__)
def test_model_edits_match_a_cold_run(cmd):
    st = block_state(300, mask=preset("causal", []))
    cold(st)
    st2 = edit(st, cmd)
    r = run(ComputeRequest(1, st2))
    assert r.recomputed_rows == r.Tq
    assert_same(r, cold(st2))
    back = run(ComputeRequest(2, st))  # and back: the earlier projections come from the cache
    assert_same(back, cold(st))


def test_hand_set_component_on_cached_projections():
    st = block_state(20)
    base = cold(st)
    st2 = edit(st, SetQKComponent("q", 1, 2, 0, 5.0))
    r = run(ComputeRequest(1, st2))
    assert r.q[1, 2, 0] == 5.0 and base.q[1, 2, 0] != 5.0
    assert r.k is base.k  # k has no hand-set component: the cached projection itself
    assert_same(r, cold(st2))


def test_text_edit_retokenises_and_matches_a_cold_run():
    st = SessionState(sources=(TextSource("p", text="the river bank was steep " * 12),),
                      model=ModelConfig(d_model=16, nh=2), mask=preset("causal", []))
    a = cold(st)
    st2 = edit(st, SetText("p", "the savings bank was closed " * 12))
    r = run(ComputeRequest(1, st2))
    assert r.query_labels != a.query_labels and r.recomputed_rows == r.Tq
    assert_same(r, cold(st2))


def test_toy_embedding_change_is_seen():
    rng = np.random.default_rng(0)
    e1 = rng.normal(size=(6, 8))
    e2 = e1.copy()
    e2[3, 1] += 1.0
    st = SessionState(sources=(ToySource("t", labels=tuple("abcdef"), embeddings=FrozenArray(e1)),),
                      model=ModelConfig(d_model=8, nh=2))
    cold(st)
    st2 = dataclasses.replace(st, sources=(ToySource("t", labels=tuple("abcdef"), embeddings=FrozenArray(e2)),))
    r = run(ComputeRequest(1, st2))
    np.testing.assert_allclose(r.X, e2, atol=0)
    assert_same(r, cold(st2))


def test_empty_text_warning_is_repeated_from_the_cache():
    st = SessionState(sources=(TextSource("a", text=" "), TextSource("b", text="bank")),
                      model=ModelConfig(d_model=8, nh=2))
    for rid in range(2):
        r = run(ComputeRequest(rid, st))
        assert r.ok and any("'a' is empty" in m for m in r.messages)


def test_cancelled_run_leaves_no_partial_result():
    st = block_state(300)
    cold(st)
    st2 = edit(st, SetModel((("seed", 9),)))
    calls = []

    def cancel_in_the_attention_stage():
        calls.append(1)
        return len(calls) > 4

    assert run(ComputeRequest(1, st2), is_cancelled=cancel_in_the_attention_stage).cancelled
    assert_same(run(ComputeRequest(2, st2)), cold(st2))


# -- float32 display matrices ------------------------------------------------------------------


def test_large_display_matrices_are_float32_and_match_the_float64_formula():
    T = 300
    st = block_state(T, mask=preset("causal", []))
    st = paint(st, [(40, j) for j in range(41)])  # row 40 fully masked
    r = cold(st)
    assert r.weights.dtype == r.scores.dtype == np.float32
    assert r.weights.flags.c_contiguous and r.scores.flags.c_contiguous
    assert r.output.dtype == r.lse.dtype == r.combined.dtype == np.float64
    X = r.X
    W = init_weights(st.model)
    q = np.einsum("td,hde->hte", X, W.W_q)
    k = np.einsum("td,hde->hte", X, W.W_k)
    v = np.einsum("td,hde->hte", X, W.W_v)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(st.model.head_size)
    np.testing.assert_allclose(r.scores, s, atol=2e-6 * max(1.0, np.abs(s).max()))
    m = r.mask
    sm = np.where(m, s, -np.inf)
    has = m.any(-1)
    mx = np.where(has, sm.max(-1), 0.0)
    p = np.where(m, np.exp(np.where(m, s, 0.0) - mx[..., None]), 0.0)
    w = p / np.where(has, p.sum(-1), 1.0)[..., None]
    np.testing.assert_allclose(r.weights, w, atol=2e-6)
    np.testing.assert_allclose(r.output, w @ v, atol=1e-12)
    assert np.all(r.weights[:, ~m] == 0)
    assert np.all(r.weights[:, 40] == 0) and np.all(np.isneginf(r.lse[:, 40]))
    np.testing.assert_allclose(r.weights[:, has].sum(-1), 1.0, atol=1e-5)


def test_shared_arrays_are_read_only():
    r = cold(block_state(300))
    for name in ("scores", "weights", "output", "combined", "X", "fully_masked"):
        assert not getattr(r, name).flags.writeable, name
    assert not r.block_mask.dense.flags.writeable and np.shares_memory(r.block_mask.dense, r.mask)


# -- the pieces ----------------------------------------------------------------------------------


def test_changed_rows_and_incremental_tile_map():
    rng = np.random.default_rng(1)
    for shape in [(37, 53), (64, 64), (3, 37, 40)]:
        a = rng.random(shape) < 0.5
        b = a.copy()
        rows = [2, 20, 33]
        for r in rows:
            b[..., r, r % shape[-1]] ^= True
        np.testing.assert_array_equal(compute_cache.changed_rows(a, b), rows)
        assert compute_cache.changed_rows(a, a.copy()).size == 0
        bm_a = compute_cache.block_mask(a, 8, 16)
        bm_b = compute_cache.block_mask(b, 8, 16, bm_a, np.array(rows))
        ref = BlockMask.from_dense(b, 8, 16)
        np.testing.assert_array_equal(bm_b.tile_state, ref.tile_state)
        assert bm_b.counts() == ref.counts()
        np.testing.assert_array_equal(compute_cache.block_mask(a, 8, 16).tile_state,
                                      BlockMask.from_dense(a, 8, 16).tile_state)


def test_caches_stay_bounded():
    cache = sequence.LRUCache(3, max_bytes=100, nbytes=len)
    for i in range(5):
        cache.put(i, b"x" * 40)
    assert len(cache) == 2 and cache.peek(4) is not None and cache.peek(0) is None
    cache.put("big", b"x" * 500)  # the newest entry is kept even when it alone is over the bound
    assert len(cache) == 1 and cache.peek("big") is not None


def test_sequence_cache_returns_the_same_sequence():
    st = SessionState(sources=(TextSource("p", text="by the river bank"),), model=ModelConfig(d_model=8, nh=2))
    a, _ = sequence.assemble(st)
    b, _ = sequence.assemble(dataclasses.replace(st, mask=preset("causal", [])))
    assert a is b
    c, _ = sequence.assemble(edit(st, SetModel((("embed_seed", 1),))))
    assert c is not a and not np.array_equal(c.embeddings, a.embeddings)


def test_module_constants_are_sane():
    assert compute.EXACT_CELLS >= 256 * 256  # the worked examples keep float64 matrices
    assert 0 < compute.ROW_SHARE < 1


# -- the engine gets the cached mask itself: no copy per run, no second compile ------------------


def test_runs_pass_the_cached_mask_without_copies_or_new_compiles():
    from attnviz.engine import warmup
    from attnviz.engine.display import _display_kernel, _display_serial
    from attnviz.engine.weights import _weights_kernel, _weights_serial
    from attnviz.engine.flash import flash_kernel

    warmup()
    st = block_state(300, nh=2, mask=preset("causal", []))
    st = edit(st, EditMask(OnHead(1, PaintCells(((10, 3),), "deny"))))  # a per-head mask
    kernels = (flash_kernel, _display_kernel, _display_serial, _weights_kernel, _weights_serial)
    n_sigs = [len(f.signatures) for f in kernels]
    r = cold(st)
    assert r.ok and r.weights.dtype == np.float32 and r.mask.ndim == 3
    kernel_mask = r.block_mask.kernel_arrays()[0]
    assert np.shares_memory(kernel_mask, r.mask) and kernel_mask.flags.writeable
    r2 = run(ComputeRequest(1, paint(st, [(40, 2)])))
    r3 = run(ComputeRequest(2, edit(st, SetModel((("seed", 5),)))))
    assert r2.ok and r3.ok and r2.recomputed_rows == 1
    assert [len(f.signatures) for f in kernels] == n_sigs


def test_a_custom_block_over_the_token_limit_is_refused_before_it_is_embedded(monkeypatch):
    from attnviz.sources import custom

    def no_embedding(*_a, **_k):
        raise AssertionError("the block was embedded")

    monkeypatch.setattr(custom.CustomBlock, "embed", no_embedding)
    st = SessionState(sources=(CustomSource("many", count=5000, generator="noise"),), model=ModelConfig(d_model=8))
    resp = run(ComputeRequest(1, st, max_tokens=4096))
    assert not resp.ok and "more than 4,096 tokens" in resp.error and "'many'" in resp.error
