"""Row bands of a mask design (MaskDesign.compile_rows) equal the rows of its full compile, for every
kind of rule, alignment, preset, painted cell and per-head design: a long sequence's mask is built
band by band without the whole matrix."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attnviz.model.mask.design import MaskDesign
from attnviz.model.mask.paint import ALLOW, DENY, CellOverrides
from attnviz.model.mask.presets import preset
from attnviz.model.mask.rules import Rule
from mask_oracles import combine, combine_preset, segments_from_lengths

NAMES = ["image", "prompt", "fast actions", "expert actions"]


def designs(segs, Tq, Tk):
    rng = np.random.default_rng(0)
    local = MaskDesign(default_rule=Rule.deny(), rules=(
        ("image", "image", Rule.allow()), ("prompt", "prompt", Rule.causal(align="block")),
        ("fast actions", "prompt", Rule.sliding_window(3, True, align="block")),
        ("expert actions", "image", Rule.causal(align="block")), ("fast actions", "fast actions", Rule.causal())))
    n = 40
    painted = CellOverrides.from_cells(rng.integers(0, Tq, n), rng.integers(0, Tk, n),
                                       np.where(rng.random(n) < 0.5, ALLOW, DENY))
    out = {
        "none": preset("none", segs),
        "causal": preset("causal", segs),
        "sliding": preset("sliding_window", segs, w=5),
        "sliding causal": preset("sliding_window", segs, w=4, causal_window=True),
        "vla": preset("vla", segs),
        "prefix_lm": preset("prefix_lm", segs, L=7),
        "documents": preset("block_diagonal", segs, lengths=[5, 9, 3], causal=True),
        "documents by segment": preset("block_diagonal", segs),
        "local rules": local,
        "painted causal": dataclasses.replace(preset("causal", segs), overrides=painted),
        "vla and sliding": combine_preset(preset("vla", segs), "sliding_window", "and", w=6),
        "causal or prefix": combine(preset("causal", segs), preset("prefix_lm", segs, L=4), "or"),
    }
    out["per head"] = (preset("causal", segs).with_head(1, local).with_head(2, out["painted causal"]))
    return out


@pytest.mark.parametrize("sizes", [(6, 9, 5, 7), (1, 0, 12, 3), (10, 10, 0, 1)])
def test_bands_equal_the_rows_of_the_full_compile(sizes):
    segs = segments_from_lengths(sizes, NAMES)
    T = sum(sizes)
    for name, d in designs(segs, T, T).items():
        full = d.compile(segs, nh=3)  # (T, T) or (3, T, T)
        for band in [(0, T), (0, 1), (3, 11), (T - 1, T), (T // 2, T // 2)]:
            got = d.compile_rows(segs, nh=3, rows=band)
            want = full[..., band[0]:band[1], :]
            if d.heads:
                assert got.shape == (3, band[1] - band[0], T)
                want = np.broadcast_to(want, got.shape) if want.ndim == 2 else want
            np.testing.assert_array_equal(got, want, err_msg=f"{name} rows {band}")


def test_cross_attention_bands_are_aligned_at_the_end():
    qs = segments_from_lengths((4, 5), ["prompt", "fast actions"])
    ks = segments_from_lengths((6, 9, 3), ["image", "prompt", "expert actions"])
    for name, d in designs(qs, 9, 18).items():
        if "per head" in name or "painted" in name:
            continue
        full = d.compile(qs, ks, 9, 18)
        for band in [(0, 9), (2, 5), (8, 9)]:
            np.testing.assert_array_equal(d.compile_rows(qs, ks, 9, 18, rows=band), full[band[0]:band[1]],
                                          err_msg=f"{name} rows {band}")


def test_rows_out_of_range_are_refused():
    segs = segments_from_lengths((3, 3), ["a", "b"])
    with pytest.raises(ValueError, match="rows must satisfy"):
        preset("causal", segs).compile_rows(segs, rows=(2, 9))
