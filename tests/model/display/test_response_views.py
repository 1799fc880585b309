"""The pure read-outs of a ComputeResponse the panels draw: matrices per head, rows and cells
recomputed from q, k and lse for long sequences, an image's patches among the keys, where a source's
queries start, and axis labels cut in the middle."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.model.commands import EditMask
from attnviz.model.compute import ComputeRequest, run
from attnviz.model.demos import build_demo
from attnviz.model.display.response_views import (cell_values, check_head, compact_label, compact_labels,
                                                  default_query, engine_scale, fully_masked_rows, image_keys,
                                                  matrix_view, patch_weights, query_offset, row_weights,
                                                  token_of_patch)
from attnviz.model.mask.commands import PaintLines


@pytest.fixture(scope="module")
def vla():
    state = build_demo("vla-mask")
    dense = run(ComputeRequest(1, state))
    thin = run(ComputeRequest(2, state, dense_limit=8))  # the same session without full matrices
    assert dense.ok and thin.ok and dense.weights is not None and thin.weights is None
    return state, dense, thin


def test_matrix_view_picks_head_and_mean(vla):
    _, resp, _ = vla
    mv = matrix_view(resp, "weights", 2)
    np.testing.assert_array_equal(mv.values, resp.weights[2])
    assert mv.value_label == "weight" and mv.per_key and mv.col_labels == resp.key_labels
    mean = matrix_view(resp, "weights", "mean")
    np.testing.assert_allclose(mean.values, resp.weights.mean(axis=0))
    out = matrix_view(resp, "output", 1)
    assert out.values.shape == (resp.Tq, resp.v.shape[2]) and out.allowed is None and not out.per_key
    m = matrix_view(resp, "mask", 0)
    np.testing.assert_array_equal(m.values.astype(bool), resp.mask)
    np.testing.assert_array_equal(matrix_view(resp, "scores", 7).values, resp.scores[0])  # stale head -> 0
    with pytest.raises(ValueError, match="unknown matrix"):
        matrix_view(resp, "keys", 0)


def test_long_sequence_matrices_are_not_held(vla):
    _, _, thin = vla
    assert matrix_view(thin, "weights", 0) is None and matrix_view(thin, "scores", "mean") is None
    assert matrix_view(thin, "mask", 0) is not None


def test_rows_and_cells_recomputed_from_q_k_lse_match_the_full_matrix(vla):
    state, dense, thin = vla
    scale = engine_scale(state)
    assert scale == pytest.approx(1 / np.sqrt(state.model.head_size))
    for row in (0, 17, dense.Tq - 1):
        np.testing.assert_allclose(row_weights(thin, row, scale), dense.weights[:, row], atol=1e-12)
    for (i, j) in ((20, 3), (30, 40), (0, 43)):
        s, w, ok = cell_values(thin, i, j, 1, scale)
        s_ref, w_ref, ok_ref = cell_values(dense, i, j, 1, scale)
        assert ok == ok_ref == bool(dense.mask[i, j])
        assert s == pytest.approx(s_ref) and w == pytest.approx(w_ref, abs=1e-12)
        assert w_ref == pytest.approx(dense.weights[1, i, j])
    s, w, _ = cell_values(dense, 5, 6, "mean", scale)
    assert w == pytest.approx(dense.weights[:, 5, 6].mean()) and s == pytest.approx(dense.scores[:, 5, 6].mean())
    assert row_weights(thin, 0, None) is None  # no scale: a rule the lse formula does not cover
    assert row_weights(thin, thin.Tq, scale) is None


def test_fully_masked_row_reads_zero_weights():
    state = build_demo("vla-mask")
    T = run(ComputeRequest(1, state)).Tq
    state, _ = EditMask(PaintLines("row", (3,), T, "deny")).apply(state)
    resp = run(ComputeRequest(2, state, dense_limit=8))
    assert fully_masked_rows(resp, 0)[3] and fully_masked_rows(resp, "mean")[3]
    w = row_weights(resp, 3, engine_scale(state))
    assert np.all(w == 0) and np.all(np.isfinite(w))


def test_engine_scale_is_none_for_other_rules():
    from dataclasses import replace

    from attnviz.model.positional import PositionalConfig
    from attnviz.model.score_rules import ScoreRuleConfig

    state = build_demo("vit-image")
    assert engine_scale(replace(state, score_rule=ScoreRuleConfig("additive"))) is None
    assert engine_scale(replace(state, positional=PositionalConfig("alibi"))) is None
    assert engine_scale(replace(state, score_rule=ScoreRuleConfig("dot"))) == 1.0


def test_image_patches_among_the_keys():
    state = build_demo("vit-image")
    resp = run(ComputeRequest(1, state))
    keys = image_keys(resp.key_tokens, "image")
    assert keys.grid == (14, 14) and keys.class_key == 0
    np.testing.assert_array_equal(keys.patch_keys, np.arange(1, 197))
    pw = patch_weights(resp.weights[:, 0], keys, 2)
    np.testing.assert_allclose(pw.ravel(), resp.weights[2, 0, 1:])
    assert default_query(resp.query_tokens, "image") == 0  # the class token
    assert token_of_patch(resp.query_tokens, "image", 13) == 14
    assert image_keys(resp.key_tokens, "nope") is None
    assert check_head(resp, "mean") == "mean" and check_head(resp, 99) == 0


def test_query_offset_is_where_a_sources_queries_start(vla):
    _, resp, _ = vla
    segs = resp.query_segments
    assert len(segs) > 1
    assert [query_offset(resp, s.name) for s in segs] == [s.start for s in segs]
    assert query_offset(resp, "no such source") is None
    assert query_offset(None, segs[0].name) is None


def test_compact_labels_keep_the_token_index():
    assert compact_label("fast actions3") == "fast actio…3"
    assert compact_label("expert actions15") == "expert ac…15"
    assert len(compact_label("a_very_long_word_piece")) == 12
    assert compact_label("p12") == "p12" and compact_label("exactly12chr") == "exactly12chr"
    labels = compact_labels([f"fast actions{i}" for i in range(8)])
    assert len(set(labels)) == 8  # rows stay distinguishable
