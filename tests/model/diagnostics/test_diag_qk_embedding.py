"""Joint PCA of a head's queries and keys."""

import numpy as np
import pytest

from attnviz.model.diagnostics.qk_embedding import qk_embedding


def test_planar_points_are_recovered_exactly():
    # queries and keys lie in a plane of R^5 spanned by two orthonormal directions
    rng = np.random.default_rng(0)
    basis, _ = np.linalg.qr(rng.normal(size=(5, 2)))  # (5, 2)
    a = np.array([[3.0, 0.0], [-3.0, 0.0], [0.0, 1.0]])
    b = np.array([[0.0, -1.0], [1.0, 0.5]])
    q, k = a @ basis.T, b @ basis.T
    e = qk_embedding(q, k)
    assert e.labels == ("q", "q", "q", "k", "k")
    assert np.array_equal(e.token_index, [0, 1, 2, 0, 1])
    assert e.explained_variance.sum() == pytest.approx(1.0)
    assert e.explained_variance[0] > e.explained_variance[1] > 0
    # distances between all points are preserved by the 2-D projection
    pts = np.vstack([a, b])
    d_true = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    d_emb = np.linalg.norm(e.coords[:, None] - e.coords[None], axis=-1)
    assert np.allclose(d_true, d_emb)
    assert np.allclose(e.coords.mean(axis=0), 0)
    assert np.allclose(np.vstack([e.q_xy, e.k_xy]), e.coords)


def test_leading_axis_is_the_long_direction_and_signs_are_fixed():
    q = np.array([[10.0, 0.1, 0.0], [-10.0, 0.0, 0.0]])
    k = np.array([[0.0, 1.0, 0.0], [0.0, -1.0, 0.0]])
    e = qk_embedding(q, k)
    assert abs(e.components[0, 0]) == pytest.approx(1.0, abs=1e-3)
    assert e.components[0][np.argmax(np.abs(e.components[0]))] > 0
    assert e.q_xy[0, 0] > 9 and e.q_xy[1, 0] < -9
    e2 = qk_embedding(-q, -k)
    assert np.allclose(np.abs(e2.coords), np.abs(e.coords))


def test_degenerate_cases():
    e = qk_embedding(np.array([[1.0], [2.0]]), np.array([[3.0]]))
    assert np.allclose(e.coords[:, 1], 0) and e.explained_variance[1] == 0
    same = qk_embedding(np.ones((2, 3)), np.ones((2, 3)))
    assert np.all(same.coords == 0) and np.all(same.explained_variance == 0)
    with pytest.raises(ValueError, match="same hs"):
        qk_embedding(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match="finite"):
        qk_embedding(np.array([[np.nan]]), np.array([[1.0]]))
