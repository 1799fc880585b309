"""A first pass on a fresh installation does not wait for the flash kernel to compile: until a warm-up is
recorded (attnviz.engine.jitcache.is_warm), "auto" runs attention calls of at most STAND_IN_CELLS cells
on the float64 reference, with the same maps (within transformers' goldens); larger calls and a warm
cache keep the compiled kernels."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, golden
from PIL import Image

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints import layers
from attnviz.engine import jitcache
import attnviz.engine.api as engine_api


@pytest.fixture
def cold(monkeypatch):
    monkeypatch.setattr(jitcache, "is_warm", lambda: False)


@pytest.fixture
def warm(monkeypatch):
    monkeypatch.setattr(jitcache, "is_warm", lambda: True)


def test_auto_is_the_reference_for_small_calls_on_a_cold_cache(cold):
    assert layers.pick_kernel("auto", cells=8 * 266 * 266) == "reference"
    assert layers.pick_kernel("auto", softcap=50.0, cells=1000) == "reference"
    assert layers.pick_kernel("auto", cells=layers.STAND_IN_CELLS + 1) == "flash"
    assert layers.pick_kernel("auto") == "flash"  # no size given: a long decoder's tiled path
    assert layers.pick_kernel("naive", cells=10) == "naive"  # a named kernel is kept


def test_auto_is_flash_or_naive_on_a_warm_cache(warm):
    assert layers.pick_kernel("auto", cells=10) == "flash"
    assert layers.pick_kernel("auto", softcap=30.0, cells=10) == "naive"


def _kernels_used(monkeypatch):
    used = []
    real = engine_api.attention

    def spy(*a, kernel="flash", **kw):
        used.append(kernel)
        return real(*a, kernel=kernel, **kw)

    for mod in ("attnviz.checkpoints.layers", "attnviz.checkpoints.decoder"):
        monkeypatch.setattr(f"{mod}.attention", spy)
    return used


def test_a_cold_vision_language_pass_runs_on_the_reference_and_matches_transformers(cold, monkeypatch):
    used = _kernels_used(monkeypatch)
    g = golden(DATA / "tiny_paligemma" / "golden.npz")
    m = load_checkpoint(DATA / "tiny_paligemma")
    res = m.run([Image.open(DATA / "tiny_paligemma" / "image.png")], str(g["prompt"]))
    assert used and set(used) == {"reference"}
    assert res.attentions.dtype == np.float32
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5


def test_a_warm_vision_language_pass_runs_on_flash(warm, monkeypatch):
    used = _kernels_used(monkeypatch)
    g = golden(DATA / "tiny_paligemma" / "golden.npz")
    m = load_checkpoint(DATA / "tiny_paligemma")
    res = m.run([Image.open(DATA / "tiny_paligemma" / "image.png")], str(g["prompt"]))
    assert "flash" in used and "reference" not in used
    assert np.abs(res.attentions - g["attentions"]).max() <= 1e-5
