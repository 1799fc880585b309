"""The per-head summaries of a long decoder run (recomputed band by band from q, k and the log-sum-exp)
equal the summaries of the held (L, nh, T, T) maps of the same input."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from ckpt_helpers import DATA

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.decoder_run import run_decoder

SENTENCE = "the river bank flooded after the rain, and the boats drifted away. "


def _longer_context(tmp_path, name: str, positions: int):
    """The tiny checkpoint with a longer context (positions are rotary: no weight depends on it)."""
    d = tmp_path / name
    shutil.copytree(DATA / name, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["max_position_embeddings"] = positions
    (d / "config.json").write_text(json.dumps(cfg))
    return load_checkpoint(d)


def _from_maps(a: np.ndarray, special: np.ndarray) -> dict[str, np.ndarray]:
    """Every summary straight from (L, nh, T, T) maps, in float64."""
    a = a.astype(np.float64)
    T = a.shape[-1]
    i = np.arange(T)
    logs = np.log(np.where(a > 0, a, 1.0))
    return {"entropy": -(a * logs).sum(-1).mean(-1), "to_special": (a * special).sum(-1).mean(-1),
            "to_self": a[..., i, i].mean(-1), "to_previous": a[..., i[1:], i[1:] - 1].mean(-1),
            "to_first": a[..., 0].mean(-1), "distance": (a * (i[:, None] - i[None, :])).sum(-1).mean(-1)}


@pytest.mark.parametrize("name", ["tiny_llama", "tiny_mistral"])
def test_band_summaries_of_a_long_run_equal_those_of_the_held_maps(tmp_path, name):
    ck = _longer_context(tmp_path, name, 1024)
    text = SENTENCE * 80
    held = run_decoder(ck, text, mode="weights")
    T, L, nh = held.T, held.n_layer, held.n_head
    assert T > 500
    # "auto" takes the long path once the maps do not fit in the budget; bands of 7 rows, not a divisor of T
    long = run_decoder(ck, text, mode="auto", weights_budget=L * nh * T * T * 4 - 1, band_bytes=nh * T * 4 * 7)
    assert long.mode == "qk" and long.attentions is None and T % 7
    assert run_decoder(ck, text, mode="auto", weights_budget=L * nh * T * T * 4).mode == "weights"
    want = _from_maps(held.attentions, held.special)
    got_long, got_held = long.summaries(), held.summaries()
    for key, value in want.items():
        np.testing.assert_allclose(getattr(got_long, key), value, atol=1e-5, rtol=0, err_msg=key)
        np.testing.assert_allclose(getattr(got_held, key), value, atol=1e-5, rtol=0, err_msg=key)
    # the max thumbnails made in the same banded pass are those of the held maps
    s, thumbs = long.summaries_and_thumbnails(64)
    for layer in range(L):
        for head in range(nh):
            np.testing.assert_allclose(thumbs[layer, head], held.overview(layer, head, (64, 64)), atol=1e-5)
    np.testing.assert_allclose(s.entropy, want["entropy"], atol=1e-5, rtol=0)
