"""One input's statistics beside a corpus's: from the maps, or from a long decoder input's summaries."""

from __future__ import annotations

import numpy as np
import pytest
from corpus_helpers import STATS, TINY_GPT2, reference_stats

from attnviz.checkpoints import load_checkpoint, run_text
from attnviz.corpus.compare import input_statistics, result_statistics, shared_levels

TINY_LLAMA = TINY_GPT2.parent / "tiny_llama"
TEXT = "the river bank flooded after the rain"


def test_input_statistics_are_one_document_of_the_corpus():
    want, _rows, _docs = reference_stats(TINY_GPT2, [TEXT])
    got = input_statistics(run_text(load_checkpoint(TINY_GPT2), TEXT).attentions)
    for k in STATS:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-12)


def test_a_long_decoder_input_uses_its_band_by_band_summaries():
    pytest.importorskip("attnviz.checkpoints.decoder_run")
    from attnviz.checkpoints import run_decoder

    ckpt = load_checkpoint(TINY_LLAMA)
    held = run_decoder(ckpt, TEXT, mode="weights")
    long = run_decoder(ckpt, TEXT, mode="qk")  # maps never held: what the panel gets for a long input
    assert long.attentions is None
    got = result_statistics(long, long.summaries())
    want = input_statistics(held.attentions)
    for k in STATS:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=2e-5, err_msg=k)  # float32 bands
    assert result_statistics(long, None) is None


def test_shared_levels():
    assert shared_levels(np.array([[0.2, np.nan]]), np.array([[0.5, 0.1]])) == (0.1, 0.5)
    assert shared_levels(None, None) == (0.0, 1.0)
    lo, hi = shared_levels(np.ones((2, 2)))
    assert lo < 1.0 < hi
