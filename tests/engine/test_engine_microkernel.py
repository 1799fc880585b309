"""The register-blocked float32 tile products against numpy, and the flash kernel on them against the reference."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.engine import attention, microkernel
from attnviz.engine.blockmask import classify
from attnviz.engine.flash import _row_extents, _solid_spans, flash_attention, full_tile_state
from attnviz.engine.microkernel import (ALIGN, EXP, MAX, STORE, aligned, aligned_empty, key_panels, pv_accumulate_rows,
                                       rows_product, score_exp_product, score_exp_product_rows, score_product,
                                       target_lanes)
from engine_helpers import make_mask, numpy_attention, qkv


@pytest.mark.parametrize("lanes", [16, 8], ids=["zmm", "ymm"])
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("kdim", [1, 7, 64, 130])
@pytest.mark.parametrize("nrows", [1, 2, 3, 5, 6, 7, 11, 13])
def test_rows_product_matches_numpy(nrows, kdim, accumulate, lanes):
    """C (+)= A B on 64 columns, strided rows of A and C, every row remainder (blocks of 6, then 4, 2, 1),
    in both register shapes (the AVX2 one runs on any x86-64 CPU with AVX2)."""
    rng = np.random.default_rng(nrows * 1000 + kdim)
    A = rng.standard_normal((nrows + 2, kdim + 3)).astype(np.float32)  # rows 1..nrows used, lda = kdim + 3
    B = rng.standard_normal((kdim, 80)).astype(np.float32)  # columns 5..68 used, ldb = 80
    C = rng.standard_normal((nrows + 1, 70)).astype(np.float32)  # columns 3..66 of rows 1.. written
    before = C.copy()
    rows_product(A, 1 * A.shape[1], A.shape[1], B, 5, 80, C, 1 * 70 + 3, 70, nrows, kdim, accumulate, STORE, lanes,
                 C, 0.0, C)
    want = A[1:1 + nrows, :kdim].astype(np.float64) @ B[:, 5:69].astype(np.float64)
    if accumulate:
        want += before[1:1 + nrows, 3:67]
    np.testing.assert_allclose(C[1:1 + nrows, 3:67], want, rtol=1e-5, atol=1e-5 * np.sqrt(kdim))
    untouched = np.ones(C.shape, bool)
    untouched[1:1 + nrows, 3:67] = False
    assert np.array_equal(C[untouched], before[untouched])  # nothing outside the block is written


@pytest.mark.parametrize("bm", [1, 5, 6, 64, 77])
def test_score_product_and_its_row_maxima(bm):
    """The score tile of key panels 1..3 (bn = 192) against numpy, and the row maxima taken in registers."""
    q, k, _ = qkv(2, 100, 300, 64, 64, np.float32, seed=bm)
    kp = key_panels(k)
    S = np.full(bm * 192 + 5, np.nan, dtype=np.float32)
    rowmax = np.full(bm + 3, 7.0, dtype=np.float32)
    score_product(q, 1, 10, bm, kp, 64, 192, S, rowmax)
    want = q[1, 10:10 + bm].astype(np.float64) @ k[1, 64:256].astype(np.float64).T
    got = S[:bm * 192].reshape(bm, 192)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    assert np.array_equal(rowmax[:bm], got.max(axis=1))  # exactly the stored scores' maxima
    assert np.all(rowmax[bm:] == 7.0) and np.all(np.isnan(S[bm * 192:]))


@pytest.mark.parametrize("lanes", [16, 8], ids=["zmm", "ymm"])
def test_row_maxima_in_both_register_shapes(lanes):
    """The row maxima taken from the registers equal the stored rows' maxima, also over a 6-row block
    whose maxima sit in different 16-column blocks."""
    rng = np.random.default_rng(lanes)
    A = rng.standard_normal((13, 64)).astype(np.float32)
    B = rng.standard_normal((64, 64)).astype(np.float32)
    C = np.empty((13, 64), np.float32)
    M = np.full(13, -np.inf, np.float32)
    rows_product(A, 0, 64, B, 0, 64, C, 0, 64, 13, 64, False, MAX, lanes, M, 0.0, M)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-4)
    assert np.array_equal(M, C.max(axis=1))


@pytest.mark.parametrize("lanes", [16, 8], ids=["zmm", "ymm"])
def test_exponentials_from_the_registers(lanes):
    """EXP mode: P = exp2(c A B - m[row]) against float64, the lane sums of each row, the largest exponent
    (taken before the clamp), and exactly 0 where the exponent is below -127."""
    rng = np.random.default_rng(lanes + 1)
    A = rng.standard_normal((13, 64)).astype(np.float32)
    B = rng.standard_normal((64, 64)).astype(np.float32)
    C = np.empty((13, 64), np.float32)
    m = rng.uniform(-2, 3, 13).astype(np.float32)
    m[4] = 400.0  # every exponent of row 4 is below -127
    R = np.zeros(14 * lanes, np.float32)
    R[:lanes] = -np.inf
    c = np.float32(0.3)
    rows_product(A, 0, 64, B, 0, 64, C, 0, 64, 13, 64, False, EXP, lanes, m, c, R)
    x = (A.astype(np.float64) @ B.astype(np.float64)) * float(c) - m[:, None]
    want = np.where(x < -127, 0.0, np.exp2(x))
    np.testing.assert_allclose(C, want, rtol=2e-5, atol=0)  # exponents up to ~30: their float32 rounding
    assert np.all(C[4] == 0.0)
    np.testing.assert_allclose(R[lanes:].reshape(13, lanes).sum(axis=1), C.astype(np.float64).sum(axis=1), rtol=1e-5)
    assert R[:lanes].max() == pytest.approx(x.max(), rel=1e-5)


@pytest.mark.parametrize("bm", [1, 7, 64])
def test_score_exp_product(bm):
    """The fused tile (key panels 1..3) against float64: weights, row sums, the largest exponent."""
    q, k, _ = qkv(2, 100, 300, 64, 64, np.float32, seed=bm)
    kp = key_panels(k)
    L = microkernel.LANES
    if L == 0:
        pytest.skip("no micro-kernel on this CPU")
    c = np.float32(0.125 * 1.4426950408889634)
    s = (q[1, 10:10 + bm].astype(np.float64) @ k[1, 64:256].astype(np.float64).T) * float(c)
    m = (s.max(axis=1) - 1.5).astype(np.float32)  # some exponents above 0, as after a tile with a lower max
    P = np.full(bm * 192 + 5, np.nan, np.float32)
    R = np.full((bm + 2) * L, np.nan, np.float32)
    top = score_exp_product(q, 1, 10, bm, kp, 64, 192, P, m, c, R)
    want = np.exp2(s - m[:, None])
    np.testing.assert_allclose(P[:bm * 192].reshape(bm, 192), want, rtol=2e-5)
    np.testing.assert_allclose(R[L:(bm + 1) * L].reshape(bm, L).sum(axis=1), want.sum(axis=1), rtol=1e-5)
    assert top == pytest.approx((s - m[:, None]).max(), abs=1e-4)
    assert np.all(np.isnan(P[bm * 192:])) and np.all(np.isnan(R[(bm + 1) * L:]))


def _span_tile(bm, bn, seed):
    """lo, hi (bm,) int64 for a 256-key tile: runs of allowed keys per row. Block 0 (rows 0-5): runs in
    panel 0, one across the edge to panel 1, an empty row. Block 1 (rows 6-11): runs at keys 0-9 and
    240-249 in turn, so panels 1 and 2 lie inside its columns and no row of any block allows them
    (zeroed); panel 3 then starts at row 6 (offsets into m, R, lo, hi). Later rows: random runs in
    panel 3, and the last row every key (panels 1 and 2 computed for its block only)."""
    rng = np.random.default_rng(seed)
    lo = np.zeros(bm, np.int64)
    hi = np.zeros(bm, np.int64)
    lo[:6] = rng.integers(0, 40, 6)
    hi[:6] = lo[:6] + rng.integers(1, 24, 6)
    lo[2], hi[2] = 60, 70  # across the edge of panels 0 and 1
    lo[3], hi[3] = 0, 0  # no key
    lo[6:12:2], hi[6:12:2] = 0, 10
    lo[7:12:2], hi[7:12:2] = 240, 250
    lo[12:], hi[12:] = 192 + rng.integers(0, 40, bm - 12), 256
    lo[-1], hi[-1] = 0, bn
    return lo, hi


@pytest.mark.parametrize("bm", [19, 40])
def test_score_exp_product_rows(bm):
    """Rows whose allowed keys are one run [lo, hi): weights exp2(c s - m) inside it against float64, 0 in
    every other cell that pv_accumulate_rows reads, row sums and the largest exponent of the allowed
    keys; P @ V over those rows then equals the float64 product with the denied keys left out."""
    if microkernel.LANES == 0:
        pytest.skip("no micro-kernel on this CPU")
    L = microkernel.LANES
    bn = 256
    q, k, v = qkv(1, 64, 512, 64, 64, np.float32, seed=bm)
    kp = key_panels(k)
    c = np.float32(0.125 * 1.4426950408889634)
    lo, hi = _span_tile(bm, bn, bm)
    s = (q[0, 5:5 + bm].astype(np.float64) @ k[0, 256:512].astype(np.float64).T) * float(c)  # (bm, bn)
    m = (s.max(axis=1) - 1.0).astype(np.float32)
    allowed = (np.arange(bn)[None, :] >= lo[:, None]) & (np.arange(bn)[None, :] < hi[:, None])
    P = np.full(bm * bn, np.nan, np.float32)  # cells the product leaves alone stay NaN
    R = np.full((bm + 1) * L, np.nan, np.float32)
    top = score_exp_product_rows(q, 0, 5, bm, kp, 256, bn, P, m, c, R, lo, hi)
    want = np.where(allowed, np.exp2(s - m[:, None]), 0.0)
    got = P.reshape(bm, bn)
    np.testing.assert_allclose(np.where(allowed, got, 0.0), want, rtol=2e-5)
    for r0 in range(0, bm, 6):  # the columns pv_accumulate_rows reads for each 6-row block hold no NaN
        rows = range(r0, min(bm, r0 + 6))
        spans = [(lo[x], hi[x]) for x in rows if hi[x] > lo[x]]
        if spans:
            k0, k1 = min(a for a, _ in spans), max(b for _, b in spans)
            block = got[r0:r0 + 6, k0:k1]
            assert np.all(np.isfinite(block)) and np.all(block[~allowed[r0:r0 + 6, k0:k1]] == 0)
    np.testing.assert_allclose(R[L:].reshape(bm, L).sum(axis=1), want.sum(axis=1), rtol=1e-5)
    assert top == pytest.approx(np.where(allowed, s - m[:, None], -127).max(), abs=1e-4)
    acc = np.zeros((bm, 64), np.float32)
    pv_accumulate_rows(P, bm, bn, v, 0, 256, acc, lo, hi)
    np.testing.assert_allclose(acc, want @ v[0, 256:512].astype(np.float64), rtol=1e-4, atol=1e-4)


def test_solid_spans():
    """True only when every row allows each key between its first and last allowed one; words of 8 cells
    where a row's cells are adjacent, single cells in a transposed view."""
    for bn in (5, 64, 77):
        tile = np.tri(20, bn, k=3, dtype=bool)
        tile[4] = False
        lo, hi = np.zeros(20, np.int64), np.zeros(20, np.int64)
        for view in (tile, np.ascontiguousarray(tile.T).T):
            _row_extents(view, lo, hi)
            assert _solid_spans(view, lo, hi)
        for j in (1, min(bn - 2, 9)):  # a hole inside row 15's run, inside a word or in the tail
            holed = tile.copy()
            holed[15, j] = False
            for view in (holed, np.ascontiguousarray(holed.T).T):
                _row_extents(view, lo, hi)
                assert not _solid_spans(view, lo, hi)


def test_lanes_follow_the_cpu_features():
    assert target_lanes({"avx512f", "avx2", "fma"}) == 16
    assert target_lanes({"avx2", "fma", "avx"}) == 8
    assert target_lanes({"avx", "sse4.2"}) == 0 and target_lanes(None) == 0 and target_lanes(set()) == 0


def test_row_extents():
    m = np.zeros((4, 10), bool)
    m[0, 3] = m[0, 7] = True
    m[2, :] = True
    m[3, 9] = True
    lo, hi = np.full(4, -1, np.int64), np.full(4, -1, np.int64)
    _row_extents(m, lo, hi)
    assert lo.tolist() == [3, 0, 0, 9] and hi.tolist() == [8, 0, 10, 10]


@pytest.mark.parametrize("bn", [1, 7, 8, 9, 64, 77, 256])
def test_row_extents_against_numpy(bn):
    """First and one-past-last allowed column per row, read 8 cells at a time where the row's cells are
    adjacent (a tile of a larger mask, as the kernel gets it) and one at a time where not (a transposed
    view): empty rows, single cells at either end and inside a word, full rows, random rows."""
    rng = np.random.default_rng(bn)
    rows = [np.zeros(bn, bool), np.ones(bn, bool), rng.random(bn) < 0.1, rng.random(bn) < 0.5]
    for j in {0, bn - 1, bn // 2, min(bn - 1, 8), max(0, bn - 9)}:
        row = np.zeros(bn, bool)
        row[j] = True
        rows.append(row)
    tile = np.array(rows)
    allowed = [np.flatnonzero(r) for r in tile]
    want_lo = [int(a[0]) if a.size else 0 for a in allowed]
    want_hi = [int(a[-1]) + 1 if a.size else 0 for a in allowed]
    big = np.zeros((len(rows) + 3, bn + 11), bool)
    big[2:2 + len(rows), 5:5 + bn] = tile
    transposed = np.ascontiguousarray(tile.T).T  # cells of a row 1 apart in memory no more
    for view in (big[2:2 + len(rows), 5:5 + bn], transposed):
        lo, hi = np.full(len(rows), -1, np.int64), np.full(len(rows), -1, np.int64)
        _row_extents(view, lo, hi)
        assert lo.tolist() == want_lo and hi.tolist() == want_hi


def test_key_panels_layout():
    k = np.arange(2 * 200 * 3, dtype=np.float32).reshape(2, 200, 3)
    kp = key_panels(k)
    assert kp.shape == (2, 3, 3, 64) and kp.flags.c_contiguous and kp.ctypes.data % ALIGN == 0
    assert kp[1, 2, 0, 5] == k[1, 2 * 64 + 5, 0]


def _at_offset(a, offset):
    """A C-contiguous copy of a whose data starts `offset` bytes past a cache line."""
    buf = np.empty(a.nbytes + 2 * ALIGN, dtype=np.uint8)
    start = -buf.ctypes.data % ALIGN + offset
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8])
@pytest.mark.parametrize("shape", [(0,), (3, 5), (2, 300, 64), (1, 0, 7)])
def test_aligned_empty_starts_on_a_cache_line(shape, dtype):
    a = aligned_empty(shape, dtype)
    assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
    assert a.ctypes.data % ALIGN == 0 or a.size == 0


@pytest.mark.parametrize("offset", [0, 4, 16, 32, 60])
def test_aligned_copies_only_what_is_not_aligned(offset):
    rng = np.random.default_rng(offset)
    v = _at_offset(rng.standard_normal((3, 700, 64)).astype(np.float32), offset)
    out = aligned(v)
    assert out.ctypes.data % ALIGN == 0 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, v)
    assert (out is v) == (offset == 0)
    strided = rng.standard_normal((3, 700, 128)).astype(np.float32)[:, :, ::2]  # not C-contiguous
    np.testing.assert_array_equal(aligned(strided), strided)


@pytest.mark.parametrize("offset", [0, 4, 16, 48])
def test_flash_takes_v_at_any_offset(offset):
    """The products load v's rows as vectors: v starting anywhere in a cache line (numpy's large arrays
    start 16 bytes past one) gives the same output as the reference."""
    q, k, v = qkv(2, 300, 260, 64, 64, np.float32, seed=offset)
    mask = np.tri(300, 260, dtype=bool)
    vo = _at_offset(v, offset)
    want = numpy_attention(q, k, v, mask, 1 / 8)[0]
    got = _flash(q, k, vo, mask, 64, 128, True)[0]
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=0)
    np.testing.assert_array_equal(got, _flash(q, k, _at_offset(v, 0), mask, 64, 128, True)[0])


def _flash(q, k, v, mask, bm, bn, fast):
    nh, Tq, hs = q.shape
    dense = None if mask is None else np.broadcast_to(mask, (nh,) + mask.shape[-2:]) if mask.ndim == 2 else mask
    dense = None if dense is None else np.ascontiguousarray(dense)
    state = full_tile_state(Tq, k.shape[1], bm, bn) if dense is None else classify(dense, bm, bn)
    return flash_attention(q, k, v, dense, state, 1.0 / np.sqrt(hs), bm, bn, fast=fast)


@pytest.mark.parametrize("tiles", [(64, 128), (128, 256), (96, 64), (16, 32)], ids=lambda t: f"{t[0]}x{t[1]}")
@pytest.mark.parametrize("mask_kind", ["none", "causal", "random", "block", "dead_rows", "band"])
@pytest.mark.parametrize("hs, hv", [(64, 64), (32, 128), (64, 40)])
def test_flash_on_the_micro_kernel_matches_reference(hs, hv, mask_kind, tiles):
    """float32 flash with the micro-kernel products (ragged query and key edges, hv = 40 on BLAS for P @ V,
    16 x 32 tiles on BLAS for both; mask-reading tiles over only the rows and keys they allow): within
    twice plain numpy float32's error of the float64 reference, like the BLAS path beside it; fully
    masked rows give 0 and -inf."""
    nh, Tq, Tk = 2, 301, 1000
    q, k, v = qkv(nh, Tq, Tk, hs, hv, np.float32, seed=hs + hv)
    if mask_kind == "band":  # a sliding window with a ragged edge: partial tiles whose rows allow few panels
        i, j = np.arange(Tq)[:, None] * 3, np.arange(Tk)[None, :]
        mask = (j <= i) & (j > i - 150) & ((i + j) % 7 != 0)
    else:
        mask = make_mask(mask_kind, nh, Tq, Tk, seed=3)
    scale = 1.0 / np.sqrt(hs)
    ref = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), mask, kernel="reference")
    valid = np.isfinite(ref.lse)
    base_out, base_lse = numpy_attention(q, k, v, mask, scale)
    base = float(np.abs(base_out.astype(np.float64) - ref.out).max())
    base_l = float(np.abs(base_lse.astype(np.float64)[valid] - ref.lse[valid]).max(initial=0.0))
    floor = 8 * np.finfo(np.float32).eps * max(1.0, float(np.abs(v).max()))
    for fast in (True, False):
        out, lse = _flash(q, k, v, mask, *tiles, fast=fast)
        assert out.dtype == np.float32 and not np.isnan(out).any()
        assert np.all(out[~valid] == 0) and np.all(lse[~valid] == -np.inf)
        err = float(np.abs(out.astype(np.float64) - ref.out).max())
        err_l = float(np.abs(lse.astype(np.float64)[valid] - ref.lse[valid]).max(initial=0.0))
        assert err <= 2 * base + floor, f"fast={fast}: out error {err:.3g} vs numpy {base:.3g}"
        assert err_l <= 2 * base_l + 8 * np.finfo(np.float32).eps * 16, f"fast={fast}: lse error {err_l:.3g}"


@pytest.mark.parametrize("tiles, Tk", [((64, 96), 928), ((128, 160), 864)], ids=["64x96", "128x160"])
@pytest.mark.parametrize("mask_kind", ["none", "causal"])
def test_last_key_tile_starting_inside_a_panel(tiles, Tk, mask_kind):
    """Key tiles whose width is not a multiple of 64, the last one 64 wide and starting 32 keys into a
    key panel: it must not take the panels' products. Within the accuracy rule of the reference; it once
    read the wrong keys (an error of 0.6)."""
    nh, Tq = 2, 200
    j0 = tiles[1] * (Tk // tiles[1])  # the last key tile's first key
    assert Tk - j0 == 64 and j0 % 64 == 32
    q, k, v = qkv(nh, Tq, Tk, 64, 64, np.float32, seed=tiles[1])
    mask = make_mask(mask_kind, nh, Tq, Tk, seed=2)
    ref = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), mask, kernel="reference")
    base_out, _ = numpy_attention(q, k, v, mask, 1.0 / 8)
    base = float(np.abs(base_out.astype(np.float64) - ref.out).max())
    out = attention(q, k, v, mask, block_m=tiles[0], block_n=tiles[1]).out
    err = float(np.abs(out.astype(np.float64) - ref.out).max())
    assert err <= 2 * base + 8 * np.finfo(np.float32).eps * max(1.0, float(np.abs(v).max())), err


@pytest.mark.parametrize("gap", ["windows", "far_apart", "holed"])
def test_mask_reading_tiles_after_a_full_one(gap):
    """A full key tile, then a tile that reads the mask and goes the exponentials-in-registers way when
    each row allows one run of keys: sliding windows, neighbouring rows with runs 384 keys apart (the
    panels between them are no row's and must hold 0), and the same with a hole in some runs (the
    two-pass way). Against the float64 reference within the accuracy rule."""
    nh, Tq, Tk = 2, 60, 1024
    q, k, v = qkv(nh, Tq, Tk, 64, 64, np.float32, seed=11)
    r = np.arange(Tq)[:, None]
    j = np.arange(Tk)[None, :]
    if gap == "windows":
        second = (j >= 512 + 7 * r) & (j < 600 + 7 * r)
    else:
        start = 512 + np.where(r % 2 == 0, 0, 384)
        second = (j >= start) & (j < start + 64)
        if gap == "holed":
            second &= ~((r % 5 == 0) & (j == start + 20))
    mask = (j < 512) | second
    ref = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), mask, kernel="reference")
    base_out, _ = numpy_attention(q, k, v, mask, 1.0 / 8)
    base = float(np.abs(base_out.astype(np.float64) - ref.out).max())
    out = attention(q, k, v, mask, block_m=64, block_n=512).out
    err = float(np.abs(out.astype(np.float64) - ref.out).max())
    assert err <= 2 * base + 8 * np.finfo(np.float32).eps * max(1.0, float(np.abs(v).max())), err


def test_float64_never_takes_the_micro_kernel():
    """fast=True on float64 inputs keeps BLAS (the intrinsic is float32 only) and stays exact."""
    q, k, v = qkv(1, 130, 256, 64, 64, np.float64, seed=5)
    out, _ = _flash(q, k, v, None, 64, 128, fast=True)
    ref = attention(q, k, v, kernel="reference")
    assert np.abs(out - ref.out).max() < 1e-12


_AVX2_PROBE = """
import json, numpy as np
from attnviz.engine import attention
from attnviz.engine.microkernel import LANES, enabled
rng = np.random.default_rng(1)
q, k, v = (rng.standard_normal((2, 300, 64)).astype(np.float32) for _ in range(3))
errs = {}
for name, mask in (("none", None), ("causal", np.tri(300, dtype=bool)),
                   ("random", rng.random((300, 300)) < 0.3)):
    ref = attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), mask, kernel="reference")
    out = attention(q, k, v, mask, block_m=64, block_n=128).out
    errs[name] = float(np.abs(out.astype(np.float64) - ref.out).max())
print(json.dumps({"lanes": LANES, "enabled": enabled(), "errs": errs}))
"""


@pytest.mark.slow
def test_flash_on_the_avx2_micro_kernel_matches_reference():
    """On a CPU with AVX-512 the AVX2 kernels are compiled in a child process whose numba targets the
    CPU without AVX-512 (as ``bench --isa avx2`` does): flash float32 there runs on the 8-lane micro-kernel
    and stays within float32 rounding of the float64 reference."""
    import json
    import os
    import subprocess
    import sys

    from attnviz.bench.machine import avx2_environment
    from attnviz.engine.jitcache import host_cpu_features

    features = host_cpu_features()
    if not features.get("avx2"):
        pytest.skip("this CPU has no AVX2")
    env = avx2_environment(features, dict(os.environ))
    out = subprocess.run([sys.executable, "-c", _AVX2_PROBE], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["lanes"] == 8 and got["enabled"]
    assert all(e < 2e-6 for e in got["errs"].values()), got["errs"]
