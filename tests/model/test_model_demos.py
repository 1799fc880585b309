"""The seeds' worked numbers, to the printed digit, through the real compute path."""

import numpy as np
import pytest

from attnviz.model.compute import ComputeRequest, run
from attnviz.model.demos import ALIGNMENT, build_demo, list_demos


def _run(name, **kw):
    r = run(ComputeRequest(1, build_demo(name), **kw))
    assert r.ok, r.error
    return r


def test_list_demos_names_and_descriptions():
    names = [n for n, _ in list_demos()]
    assert names == ["river-bank", "savings-bank", "translation", "vit-image", "vla-mask", "long-context"]
    assert all(d for _, d in list_demos())


def test_unknown_demo_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown demo 'nope'"):
        build_demo("nope")


def test_river_bank_reproduces_seed_002():
    r = _run("river-bank")
    assert r.query_labels == ("by", "the", "river", "bank")
    assert r.path == "engine:flash"
    bank = 3
    np.testing.assert_allclose(r.q[0, bank], [2.3, 2.3, 0, 0], atol=1e-12)
    dots = r.q[0, bank] @ r.k[0].T
    np.testing.assert_allclose(dots, [0.92, 0, 4.6, 1.38], atol=1e-12)
    assert np.round(r.scores[0, bank], 2).tolist() == [0.46, 0.0, 2.3, 0.69]
    assert np.round(r.weights[0, bank], 2).tolist() == [0.11, 0.07, 0.69, 0.14]
    assert np.round(r.output[0, bank], 2).tolist() == [1.43, 0.06, 0.14, 0.0]
    np.testing.assert_allclose(r.combined, r.output[0], atol=1e-12)  # W_o = identity
    np.testing.assert_allclose(r.weights[0].sum(axis=1), 1.0, atol=1e-12)


def test_savings_bank_same_embedding_attends_to_savings():
    rb, sb = _run("river-bank"), _run("savings-bank")
    np.testing.assert_array_equal(rb.X[3], sb.X[3])  # the identical bank embedding
    assert sb.query_labels[2] == "savings"
    assert int(np.argmax(sb.weights[0, 3])) == 2
    assert np.round(sb.weights[0, 3], 2).tolist() == [0.11, 0.07, 0.69, 0.14]
    # the blend now points down the financial dimension instead of the geographic one
    assert sb.output[0, 3, 1] > 1.4 and sb.output[0, 3, 0] < 0.05
    assert rb.output[0, 3, 0] > 1.4 and rb.output[0, 3, 1] < 0.1


def test_translation_reproduces_seed_001_alignment():
    r = _run("translation")
    assert r.cross
    assert r.query_labels == ("je", "t'", "aime") and r.key_labels == ("I", "love", "you")
    for i, word in enumerate(ALIGNMENT):
        assert np.round(r.weights[0, i], 2).tolist() == list(ALIGNMENT[word])
    assert np.argmax(r.weights[0], axis=1).tolist() == [0, 2, 1]


def test_vit_image_has_patch_grid_and_class_token():
    r = _run("vit-image")
    assert r.Tq == 197 and r.query_labels[0] == "[CLS]"
    assert r.query_tokens[0].patch is None
    assert r.query_tokens[1].patch == 0 and r.query_tokens[1].grid == (14, 14)
    assert r.query_tokens[-1].patch == 195
    assert r.weights.shape == (4, 197, 197)


def test_vla_mask_follows_seed_000_block_matrix():
    r = _run("vla-mask")
    segs = {s.name: s for s in r.query_segments}
    assert list(segs) == ["image", "prompt", "state", "fast actions", "expert actions"]
    m = r.mask
    sl = lambda n: slice(segs[n].start, segs[n].stop)  # noqa: E731
    I, P, S, A, E = (sl(n) for n in segs)
    for q in (I, P, S):  # image and prompt/state: all of I and P, nothing after
        assert m[q, I].all() and m[q, P].all() and m[q, S].all()
        assert not m[q, A].any() and not m[q, E].any()
    assert m[A, I].all() and m[A, P].all() and not m[A, E].any()
    a = m[A, A]
    np.testing.assert_array_equal(a, np.tril(np.ones_like(a)))  # FAST tokens: causal among themselves
    assert m[E, I].all() and m[E, P].all() and m[E, E].all() and not m[E, A].any()
    assert segs["image"].stop - segs["image"].start == 15  # 3 x 5 patch grid, no class token
    w = r.weights
    assert np.all(w[:, ~np.broadcast_to(m, w.shape[1:])] == 0)


@pytest.mark.slow
def test_long_context_is_a_few_thousand_tokens_under_a_sliding_window():
    r = _run("long-context", rows=(2000,))
    assert 2000 <= r.Tq <= 4000
    assert r.weights is None and r.scores is None
    assert any("dense limit" in m for m in r.messages)
    row = r.row_weights[2000]  # (nh, Tk)
    allowed = np.nonzero(r.mask[2000])[0]
    assert allowed.tolist() == list(range(2000 - 127, 2001))
    np.testing.assert_allclose(row.sum(axis=1), 1.0, atol=1e-10)
    assert r.sparsity > 80
