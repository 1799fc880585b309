"""Per-document row sums and how they add up: against the row-by-row definitions, in any order."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.corpus.stats import STATISTICS, HeadSums, document_sums


def _weights(rng, L, nh, T, causal=False):
    s = rng.normal(size=(L, nh, T, T)) * 3  # (L, nh, T, T)
    if causal:
        s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True)


def _row_by_row(a):
    L, nh, T, _ = a.shape
    out = np.zeros((L, nh, 5))
    for l in range(L):
        for h in range(nh):
            for i in range(T):
                w = a[l, h, i]
                out[l, h, 0] += -sum(x * np.log(x) for x in w if x > 0)
                out[l, h, 1] += w[0]
                out[l, h, 2] += w[i]
                out[l, h, 3] += w[i - 1] if i else 0.0
                out[l, h, 4] += sum(w[j] * abs(i - j) for j in range(T))
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T", [1, 2, 9])
def test_document_sums_match_row_definitions(T, causal):
    a = _weights(np.random.default_rng(T), 2, 3, T, causal)
    d = document_sums(a)
    np.testing.assert_allclose(d.sums, _row_by_row(a), rtol=1e-12, atol=1e-12)
    assert (d.rows, d.prev_rows, d.documents) == (T, T - 1, 1)


def test_known_heads():
    T = 5
    prev = np.zeros((T, T))
    prev[0, 0] = 1.0
    prev[np.arange(1, T), np.arange(T - 1)] = 1.0  # every row on the previous token
    uniform = np.full((T, T), 1.0 / T)
    m = document_sums(np.stack([prev, uniform])[None]).means()  # (1, 2)
    assert m["to_prev"][0, 0] == 1.0 and m["entropy"][0, 0] == 0.0
    assert m["distance"][0, 0] == pytest.approx((T - 1) / T)  # rows 1..T-1 at distance 1, row 0 at 0
    assert m["entropy"][0, 1] == pytest.approx(np.log(T))
    assert m["to_first"][0, 1] == pytest.approx(1.0 / T) and m["to_self"][0, 1] == pytest.approx(1.0 / T)


def test_means_are_row_weighted_and_order_free():
    rng = np.random.default_rng(1)
    docs = [document_sums(_weights(rng, 2, 2, T)) for T in (2, 13, 4, 7)]
    fwd = docs[0] + docs[1] + docs[2] + docs[3]
    tree = (docs[3] + docs[1]) + (docs[2] + docs[0])
    for k in STATISTICS:
        np.testing.assert_allclose(fwd.means()[k], tree.means()[k], rtol=1e-14)
    assert (fwd.rows, fwd.prev_rows, fwd.documents) == (26, 22, 4)
    pooled = sum(d.sums[..., 0] for d in docs) / 26
    per_doc = np.mean([d.means()["entropy"] for d in docs], axis=0)
    np.testing.assert_allclose(fwd.means()["entropy"], pooled, rtol=1e-14)
    assert not np.allclose(fwd.means()["entropy"], per_doc)  # not a mean of document means


def test_mismatched_models_do_not_add():
    with pytest.raises(ValueError, match="2 x 2 model and a 3 x 2 model"):
        HeadSums.zeros(2, 2) + HeadSums.zeros(3, 2)


def test_empty_sums_have_no_means():
    assert np.isnan(HeadSums.zeros(1, 1).means()["entropy"]).all()


@pytest.mark.parametrize("shape", [(2, 2, 3), (1, 1, 3, 4), (1, 1, 0, 0)])
def test_bad_shapes(shape):
    with pytest.raises(ValueError, match="layers, heads, T, T"):
        document_sums(np.zeros(shape))


def test_worker_cache_loads_once_and_again_when_the_files_change(tmp_path):
    import os
    import shutil

    from corpus_helpers import TINY_GPT2

    from attnviz.corpus import worker

    folder = tmp_path / "m"
    shutil.copytree(TINY_GPT2, folder)
    before = worker.load_count()
    a = worker.cached_checkpoint(str(folder), None)
    assert worker.cached_checkpoint(str(folder), None) is a and worker.load_count() == before + 1
    cfg = folder / "config.json"
    st = cfg.stat()
    os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # rewritten in place
    b = worker.cached_checkpoint(str(folder), None)
    assert b is not a and worker.load_count() == before + 2
    assert len(worker._cache) <= worker.MAX_CACHED
    with pytest.raises(worker.ModelUnavailable, match="checkpoint folder not found"):
        worker.cached_checkpoint(str(tmp_path / "gone"), None)
