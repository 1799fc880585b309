"""The FlexAttention anchor of ``attnviz-cli bench``: each mask's mask_mod says what the mask says, its first
call (the compilation) is returned apart from the timed calls, and a compilation that fails leaves that row out
with its reason, never the whole run. torch itself is stood in for, so the plumbing is checked without it."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from attnviz.bench.anchors import flex_calls, sparse_tile_mask


class FakeTorch(types.SimpleNamespace):
    """Just enough of torch for flex_calls: from_numpy, set_num_threads, inference_mode, compile."""

    def __init__(self, fail_on=None):
        super().__init__()
        self.compiled_calls, self.blocks, self.fail_on = [], [], fail_on
        self.from_numpy = lambda a: a

    def set_num_threads(self, n):
        self.threads = n

    def inference_mode(self):
        import contextlib

        return contextlib.nullcontext()

    def compile(self, fn, dynamic=False):
        def run(q, k, v, block_mask=None):
            self.compiled_calls.append(block_mask)
            if block_mask is not None and block_mask == self.fail_on:
                raise RuntimeError("no C++ compiler\nmore detail")
            return q
        return run


@pytest.fixture
def fake(monkeypatch):
    torch = FakeTorch()
    made = []

    def create_block_mask(mask_mod, B, H, Q, K, device):
        qi, ki = np.meshgrid(np.arange(Q), np.arange(K), indexing="ij")
        dense = np.asarray(mask_mod(0, 0, qi, ki), dtype=bool)  # (Q, K): what the mask_mod allows
        made.append(dense)
        return f"block{len(made)}"

    mod = types.ModuleType("torch.nn.attention.flex_attention")
    mod.create_block_mask, mod.flex_attention = create_block_mask, object()
    for name in ("torch", "torch.nn", "torch.nn.attention"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch.nn.attention.flex_attention", mod)
    return torch, made


def test_mask_mods_match_the_masks_and_first_calls_are_apart(fake):
    torch, made = fake
    T = 96
    q = k = v = np.zeros((2, T, 8), dtype=np.float32)
    causal, sparse = np.tri(T, dtype=bool), sparse_tile_mask(T, 32, 32, 0.4, seed=1)
    calls, notes, first = flex_calls(torch, q, k, v, {"dense": None, "causal": causal, "sparse": sparse}, 2)
    assert set(calls) == set(first) == {"dense", "causal", "sparse"}
    np.testing.assert_array_equal(made[0], causal)
    np.testing.assert_array_equal(made[1], sparse)
    assert torch.compiled_calls == [None, "block1", "block2"]  # one compiling call each, before any timing
    calls["sparse"]()
    assert torch.compiled_calls[-1] == "block2" and torch.threads == 2
    assert "no BlockMask" in notes["dense"] and "first call" in notes["causal"]


def test_a_failed_compilation_leaves_only_that_row_out(fake):
    torch, _ = fake
    torch.fail_on = "block1"
    T = 64
    q = k = v = np.zeros((1, T, 8), dtype=np.float32)
    calls, notes, first = flex_calls(torch, q, k, v, {"dense": None, "causal": np.tri(T, dtype=bool)}, 1)
    assert set(calls) == {"dense"} and "causal" not in first
    assert notes["causal"] == "not run: RuntimeError: no C++ compiler"


def test_a_torch_without_flex_gives_nothing(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.nn.attention.flex_attention", None)  # ImportError on import
    assert flex_calls(FakeTorch(), *(np.zeros((1, 8, 4), np.float32),) * 3, {"dense": None}, 1) == ({}, {}, {})


def test_a_mask_of_whole_tiles_is_read_from_its_tile_table(fake):
    from attnviz.bench.anchors import tile_table

    torch, made = fake
    T = 100
    sparse = sparse_tile_mask(T, 32, 64, 0.4, seed=2)
    table = tile_table(sparse, 32, 64)
    assert table.shape == (4, 2)
    assert tile_table(np.tri(T, dtype=bool), 32, 64) is None  # a causal mask is not made of whole tiles
    q = k = v = np.zeros((1, T, 8), dtype=np.float32)
    calls, notes, _ = flex_calls(torch, q, k, v, {"sparse": sparse}, 1, {"sparse": (32, 64)})
    np.testing.assert_array_equal(made[0], sparse)  # the tile table's mask_mod gives the mask cell for cell
    assert "4x2 tile table" in notes["sparse"]
