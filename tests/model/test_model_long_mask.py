"""Sequences beyond the dense-mask size: the mask design is compiled band by band into a TiledMask
and never made dense; results equal those of the dense path (here with the size lowered)."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import TiledMask
from attnviz.model import compute_cache, sequence
from attnviz.model.commands import EditMask, SetKernel, set_view
from attnviz.model.compute import ComputeRequest, run
from attnviz.model.mask.commands import OnHead, PaintCells, PaintLines
from attnviz.model.mask.presets import preset
from attnviz.model.score_rules import ScoreRuleConfig
from attnviz.model.state import CustomSource, ModelConfig, SessionState
from long_sessions import lowered

T = 300


@pytest.fixture(autouse=True)
def _fresh():
    compute_cache.clear()
    sequence.clear_caches()
    yield
    compute_cache.clear()


def state(**kw) -> SessionState:
    st = SessionState(sources=(CustomSource("a", count=120, generator="noise", seed=1),
                               CustomSource("b", count=T - 120, generator="noise", seed=2)),
                      model=ModelConfig(d_model=32, nh=2, seed=3), mask=preset("sliding_window", (), w=50), **kw)
    st = EditMask(PaintLines("row", 7, T, "deny")).apply(st)[0]  # a fully masked row
    return EditMask(OnHead(1, PaintCells(((20, 250), (21, 0)), "allow"))).apply(st)[0]


def both(st, rows=(7, 20, 299)):
    dense = run(ComputeRequest(1, st, rows=rows))
    compute_cache.clear()
    with lowered():
        tiled = run(ComputeRequest(2, st, rows=rows))
    return dense, tiled


def test_a_long_sequence_gets_a_tiled_mask_and_the_dense_paths_numbers():
    dense, tiled = both(state())
    assert dense.ok and tiled.ok, tiled.error
    assert dense.mask is not None and tiled.mask is None
    assert isinstance(tiled.block_mask, TiledMask) and tiled.block_mask.n_heads == 2
    np.testing.assert_array_equal(tiled.block_mask.to_dense(), dense.mask)
    np.testing.assert_array_equal(tiled.fully_masked, dense.fully_masked)
    assert tiled.tile_counts == dense.tile_counts and tiled.sparsity == pytest.approx(dense.sparsity)
    for name in ("output", "lse", "combined"):
        np.testing.assert_allclose(getattr(tiled, name), getattr(dense, name), rtol=1e-12, atol=1e-14, err_msg=name)
    for r in (7, 20, 299):
        np.testing.assert_allclose(tiled.row_weights[r], dense.row_weights[r], rtol=1e-12, atol=1e-15)
    assert np.all(tiled.lse[:, 7] == -np.inf) and any("fully masked" in m for m in tiled.messages)


def test_other_kernels_run_as_flash_and_other_rules_are_refused():
    st = SetKernel(name="naive").apply(state())[0]
    with lowered():
        resp = run(ComputeRequest(1, st))
    assert resp.ok and resp.path == "engine:flash"
    assert any("naive kernel needs the dense mask" in m for m in resp.messages)
    with lowered():
        bad = run(ComputeRequest(2, state(score_rule=ScoreRuleConfig(name="additive"))))
    assert not bad.ok and "additive rule" in bad.error and "dense mask" in bad.error


def test_view_edits_reuse_and_mask_edits_recompute_every_row():
    st = state()
    with lowered():
        first = run(ComputeRequest(1, st))
    with lowered():
        again = run(ComputeRequest(2, set_view(head=1).apply(st)[0]))
    assert again.recomputed_rows == 0 and again.block_mask is first.block_mask
    painted = EditMask(PaintCells(((100, 3),), "allow")).apply(st)[0]
    with lowered():
        resp = run(ComputeRequest(3, painted))
    assert resp.recomputed_rows == T
    assert resp.block_mask.rows([100])[0, 0, 3]
    compute_cache.clear()
    ref = run(ComputeRequest(4, painted))
    np.testing.assert_allclose(resp.output, ref.output, rtol=1e-12, atol=1e-14)


def test_dense_exports_are_refused_beyond_the_dense_mask_size(tmp_path, monkeypatch):
    from attnviz.model.mask import export as mask_export
    from mask_oracles import segments_from_lengths

    monkeypatch.setattr(mask_export, "VERIFY_CELLS", 100 * 100)
    segs = segments_from_lengths((150, 150), ["a", "b"])
    design = preset("causal", segs)
    with pytest.raises(ValueError, match="not made for 300 x 300 tokens"):
        mask_export.export_mask(design, "npy", tmp_path / "m.npy", segs)
    mask_export.export_mask(design, "flex", tmp_path / "m.py", segs)  # written, not checked densely
    assert "def mask_mod" in (tmp_path / "m.py").read_text()


def test_the_report_of_a_long_sequence_counts_the_tiled_mask():
    from attnviz.model.report import response_to_json

    with lowered():
        tiled = run(ComputeRequest(1, state()))
    compute_cache.clear()
    dense = run(ComputeRequest(2, state(), dense_limit=100))
    a, b = response_to_json(tiled), response_to_json(dense)
    assert a["summary"] and b["summary"]
    assert a["mask_density"] == pytest.approx(b["mask_density"], abs=1e-12)
    assert a["tiles"] == b["tiles"] and a["fully_masked_rows"] == b["fully_masked_rows"] == 2
