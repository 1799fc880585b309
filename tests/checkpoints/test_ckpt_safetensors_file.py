"""Memory-mapped safetensors: F32 used in place, BF16/F16 converted per access or per row, shards through
the index, and damaged or hostile headers and indexes refused with the file named."""

from __future__ import annotations

import json
import shutil
import struct

import numpy as np
import pytest
from ckpt_helpers import DATA

from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.safetensors_file import StoredTensors, weight_files


def _write(path, tensors: dict[str, tuple[str, np.ndarray]], header_extra=None, raw_header: bytes | None = None):
    header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header.update(header_extra or {})
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def test_f32_weights_are_the_mapped_file_not_a_copy():
    ck = load_checkpoint(DATA / "tiny_llama")
    w = ck.weights["layers.0.self_attn.q_proj.weight"]
    base = w
    while isinstance(base.base, np.ndarray):
        base = base.base
    assert isinstance(base, np.memmap) and not w.flags.writeable


def test_bf16_rows_convert_only_what_is_asked(tmp_path):
    x = np.random.default_rng(0).standard_normal((1000, 8)).astype(np.float32)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16)
    _write(tmp_path / "w.safetensors", {"emb": ("BF16", bits), "h": ("F16", x[:3].astype(np.float16))})
    st = StoredTensors([tmp_path / "w.safetensors"])
    rows = st.rows("emb", np.array([5, 999]))
    np.testing.assert_array_equal(rows, (bits[[5, 999]].astype(np.uint32) << 16).view(np.float32))
    assert rows.shape == (2, 8) and rows.dtype == np.float32
    np.testing.assert_array_equal(st["h"], x[:3].astype(np.float16).astype(np.float32))
    assert st.n_params == 8024 and st.dtypes() == ["BF16", "F16"]


def test_bf16_infinity_is_found_without_converting(tmp_path):
    bits = np.zeros((4, 4), np.uint16)
    bits[2, 3] = 0x7F80  # +inf in bfloat16
    _write(tmp_path / "w.safetensors", {"emb": ("BF16", bits)})
    assert not StoredTensors([tmp_path / "w.safetensors"]).check_finite("emb")


@pytest.mark.parametrize("raw, expected", [
    (b"[" * 200_000 + b"]" * 200_000, "header is not JSON"),
    (b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}', "does not fit its shape"),
    (b'{"a": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 4]}}', "unknown dtype 'Q4'"),
    (b'{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}', "malformed shape"),
    (b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, true]}}', "malformed data_offsets"),
], ids=["nested", "size", "dtype", "shape", "offsets"])
def test_hostile_headers(tmp_path, raw, expected):
    _write(tmp_path / "w.safetensors", {}, raw_header=raw)
    with pytest.raises(CheckpointError, match=expected) as exc:
        StoredTensors([tmp_path / "w.safetensors"])
    assert "w.safetensors is not a readable safetensors file" in str(exc.value)


def test_sharded_folder_loads_through_its_index():
    files = weight_files(DATA / "tiny_llama_bf16_sharded")
    assert [f.name for f in files] == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]


@pytest.mark.parametrize("wmap, expected", [
    ({"model.norm.weight": "../model.safetensors"}, "names the shard '../model.safetensors'"),
    ({"model.norm.weight": "model-00009-of-00003.safetensors"}, "names the shard"),
    ({}, "no 'weight_map'"),
    ("nonsense", "no 'weight_map'"),
], ids=["outside", "missing-shard", "empty", "not-a-map"])
def test_bad_index(tmp_path, wmap, expected):
    d = tmp_path / "ck"
    shutil.copytree(DATA / "tiny_llama_bf16_sharded", d)
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wmap}))
    with pytest.raises(CheckpointError, match=expected):
        load_checkpoint(d)


def test_shard_missing_a_tensor_is_named(tmp_path):
    d = tmp_path / "ck"
    shutil.copytree(DATA / "tiny_llama_bf16_sharded", d)
    (d / "model-00003-of-00003.safetensors").unlink()
    idx = json.loads((d / "model.safetensors.index.json").read_text())
    idx["weight_map"] = {k: v for k, v in idx["weight_map"].items() if not v.startswith("model-00003")}
    (d / "model.safetensors.index.json").write_text(json.dumps(idx))
    with pytest.raises(CheckpointError, match=r"2 shards lacks tensors the llama config.json implies"):
        load_checkpoint(d)
