"""pool_matrix: a matrix made ready for a heatmap without Qt (checked, in display units, max-pooled,
with its levels and fully masked rows)."""

import numpy as np
import pytest

from attnviz.model.display.pooled_matrix import pool_matrix
from attnviz.model.display.pooling import pool_max


def test_pooled_picture_levels_and_masked_rows():
    T = 300
    rng = np.random.default_rng(0)
    v = rng.random((T, T)).astype(np.float64) * 0.1  # float64 in: float32 out
    mask = np.tril(np.ones((T, T), dtype=bool))
    mask[7] = False  # a row with no allowed key
    v[250, 3] = 0.9
    pm = pool_matrix(v, mask, (64, 80))
    assert pm.image.shape == (64, 80) and pm.pooled and pm.shape == (T, T)
    want, ok = pool_max(v.astype(np.float32), mask, (64, 80))
    np.testing.assert_array_equal(pm.image_allowed, ok)
    np.testing.assert_allclose(np.nan_to_num(pm.image, nan=-1), np.nan_to_num(want, nan=-1))
    assert pm.levels[1] == pytest.approx(0.9) and pm.levels[0] == pytest.approx(float(v[mask].min()), rel=1e-6)
    assert pm.row_flags is not None and pm.row_flags[7] and pm.row_flags.sum() == 1
    assert pm.values.dtype == np.float32 and pm.allowed is not mask  # a copy: the caller may edit its mask


def test_log_scale_given_levels_and_small_matrices():
    v = np.array([[1e-9, 0.1], [1.0, -np.inf]], dtype=np.float32)
    pm = pool_matrix(v, None, (64, 64), log_scale=True, levels=(1e-3, 1.0))
    assert not pm.pooled and pm.levels == (pytest.approx(-3.0), pytest.approx(0.0))
    assert pm.image[0, 0] == pytest.approx(-6.0)  # floored at 1e-6 before log10
    assert np.isnan(pm.image[1, 1]) and not pm.image_allowed[1, 1]  # -inf is masked
    assert pool_matrix(v, keep_values=False).values is None


@pytest.mark.parametrize("values, mask, match", [
    (np.zeros((0, 3)), None, "non-empty"),
    (np.array([[np.nan, 1.0]]), None, "NaN"),
    (np.array([[np.inf, 1.0]]), None, r"\+inf"),
    (np.ones((2, 2)), np.ones((2, 3), dtype=bool), "mask"),
])
def test_bad_input_is_one_value_error(values, mask, match):
    with pytest.raises(ValueError, match=match):
        pool_matrix(values, mask)
