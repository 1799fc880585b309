"""Fast kernels against the reference: errors, times and memory are reported (not asserted fast)."""

import numpy as np
import pytest

from attnviz.model.diagnostics.flash_check import flash_check


@pytest.fixture
def qkv():
    rng = np.random.default_rng(0)
    return tuple(rng.normal(size=(2, 40, 8)).astype(np.float32) for _ in range(3))


def test_reports_every_requested_kernel(qkv):
    q, k, v = qkv
    mask = np.tril(np.ones((40, 40), bool))
    mask[5] = False  # one fully masked row
    c = flash_check(q, k, v, mask, kernels=("naive", "flash"), repeats=2)
    assert c.shape == (2, 40, 40, 8, 8) and c.dtype == "float32"
    assert [r.kernel for r in c.kernels] == ["naive", "flash"]
    assert c.reference.intermediate_bytes == 2 * 40 * 40 * 8
    for r in c.kernels:
        if r.available:
            assert r.out_error.shape == (2,)
            assert r.max_error < 1e-4  # float32 against float64
            assert np.all(r.lse_mismatch == 0)
            assert r.time_s > 0 and r.intermediate_bytes > 0 and r.memory_note
    assert c.error_matrix().shape == (2, 2)


def test_an_unknown_kernel_is_reported_not_raised(qkv, monkeypatch):
    import attnviz.model.diagnostics.flash_check as fc

    real = fc.attention

    def engine(q, k, v, mask=None, *, kernel="flash", **kw):
        if kernel not in ("reference", "naive"):
            raise ValueError(f"unknown kernel {kernel!r}")
        return real(q, k, v, mask, kernel=kernel, **kw)

    monkeypatch.setattr(fc, "attention", engine)
    c = flash_check(*qkv, kernels=("naive", "warp"), repeats=1)
    naive, warp = c.kernels
    assert naive.available and not warp.available and "warp" in warp.message
    assert np.array_equal(c.error_matrix()[1], [0.0, 0.0])


def test_error_reflects_a_wrong_kernel(qkv, monkeypatch):
    import attnviz.model.diagnostics.flash_check as fc
    from attnviz.engine import AttentionResult

    real = fc.attention

    def engine(q, k, v, mask=None, *, kernel="flash", **kw):
        r = real(q, k, v, mask, kernel="reference", **kw)
        return AttentionResult(r.out + (0.5 if kernel == "flash" else 0.0), r.lse, None)

    monkeypatch.setattr(fc, "attention", engine)
    c = flash_check(*qkv, kernels=("flash",), repeats=1)
    assert c.kernels[0].max_error == pytest.approx(0.5, abs=1e-5)


def test_bad_repeats():
    with pytest.raises(ValueError, match="repeats"):
        flash_check(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), repeats=0)
