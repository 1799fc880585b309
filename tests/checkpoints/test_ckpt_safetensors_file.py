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


def _bf16_file(tmp_path, shapes=((300, 64), (64, 300)), seed=0):
    rng = np.random.default_rng(seed)
    tensors, values = {}, {}
    for i, shape in enumerate(shapes):
        x = rng.standard_normal(shape).astype(np.float32)
        bits = (x.view(np.uint32) >> 16).astype(np.uint16)
        tensors[f"w{i}"] = ("BF16", bits)
        values[f"w{i}"] = (bits.astype(np.uint32) << 16).view(np.float32)
    _write(tmp_path / "w.safetensors", tensors)
    return StoredTensors([tmp_path / "w.safetensors"]), values


def test_widened_bf16_tensors_are_kept_read_only_and_exact(tmp_path):
    st, values = _bf16_file(tmp_path)
    st.keep(1 << 30)
    first = st["w0"]
    assert st["w0"] is first and not first.flags.writeable  # the second read is the kept copy itself
    np.testing.assert_array_equal(first, values["w0"])
    np.testing.assert_array_equal(st["w1"], values["w1"])
    assert st.kept_bytes == (300 * 64 + 64 * 300) * 4
    with pytest.raises(ValueError):
        first[0, 0] = 1.0  # a caller cannot change what every later pass reads


def test_mapped_pages_of_a_kept_tensor_read_back_the_same(tmp_path):
    """The 16-bit pages of a kept tensor are handed back; the file's bits are still what a fresh read sees."""
    st, values = _bf16_file(tmp_path, shapes=((4096, 8), (3000, 8)))
    st.keep(1 << 30)
    st["w0"]
    np.testing.assert_array_equal(st.rows("w0", np.array([0, 2047, 4095])), values["w0"][[0, 2047, 4095]])
    assert st.check_finite("w0") and st.check_finite("w1")
    np.testing.assert_array_equal(st["w1"], values["w1"])


def test_keep_budget_limits_the_copies(tmp_path):
    st, values = _bf16_file(tmp_path, shapes=((100, 10), (100, 10), (100, 10)))
    st.keep(2 * 100 * 10 * 4)  # room for two
    for n in ("w0", "w1", "w2"):
        np.testing.assert_array_equal(st[n], values[n])
    assert st.kept_bytes == 2 * 4000
    assert st["w2"] is not st["w2"]  # the third is widened on every read
    st.keep(0)  # a smaller budget drops what no longer fits
    assert st.kept_bytes == 0 and st["w0"] is not st["w0"]
    with pytest.raises(ValueError):
        st.keep(-1)


def test_automatic_keeping_leaves_half_the_available_memory(tmp_path, monkeypatch):
    """Copies are kept while the memory available stays above half of what it was at the first copy."""
    import attnviz.checkpoints.safetensors_file as sf

    st, _ = _bf16_file(tmp_path, shapes=((100, 10), (100, 10), (100, 10)))
    avail = [10_000]  # bytes "available": each kept 4,000-byte copy takes them

    monkeypatch.setattr(sf, "available_memory", lambda: avail[0])
    for n in ("w0", "w1", "w2"):
        st[n]
        if st.kept_bytes and n in st._kept:
            avail[0] -= 4000
    assert st.kept_bytes == 4000  # the second copy would leave 2,000 < 5,000 bytes
    monkeypatch.setattr(sf, "available_memory", lambda: None)
    st.keep(None)
    st["w1"]
    assert st.kept_bytes == 4000  # a system that cannot say how much memory is free keeps nothing more


def _raw_file(path, header: bytes, data: bytes):
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


@pytest.mark.parametrize("header, data, expected", [
    # two tensors on the same bytes
    (b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
     bytes(8), "overlaps"),
    # partially overlapping offsets
    (b'{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
     bytes(12), "overlaps"),
    # a duplicate key: the second entry would silently win
    (b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
     bytes(8), "twice"),
    # bytes no tensor covers: a gap, and a tail
    (b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8), "belong to no tensor"),
    (b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', bytes(12), "belong to no tensor"),
    # __metadata__ that is not an object of strings
    (b'{"__metadata__":["x"],"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', bytes(4), "__metadata__"),
    (b'{"__metadata__":{"format":1},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', bytes(4), "__metadata__"),
])
def test_layouts_the_format_refuses_are_refused(tmp_path, header, data, expected):
    """What the safetensors library refuses is refused here too, with the reason, before any tensor is read."""
    f = tmp_path / "model.safetensors"
    _raw_file(f, header, data)
    with pytest.raises(CheckpointError, match=expected):
        StoredTensors([f])


def test_a_valid_layout_with_metadata_and_empty_tensors_is_read(tmp_path):
    f = tmp_path / "model.safetensors"
    header = (b'{"__metadata__":{"format":"pt"},"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},'
              b'"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}')
    _raw_file(f, header, np.array([1.5, -2.0], np.float32).tobytes())
    st = StoredTensors([f])
    np.testing.assert_array_equal(st["a"], [1.5, -2.0])
    assert st["e"].shape == (0,)


@pytest.mark.parametrize("change", ["truncate", "replace", "remove"])
def test_a_file_changed_on_disk_while_mapped_is_an_error_not_a_signal(tmp_path, change):
    """A mapped file that shrank would kill the process with SIGBUS on the next read: it is refused."""
    import os

    x = np.arange(4096, dtype=np.float32).reshape(64, 64)
    f = tmp_path / "model.safetensors"
    _write(f, {"a": ("F32", x), "b": ("F32", x)})
    st = StoredTensors([f])
    np.testing.assert_array_equal(st["a"], x)  # mapped now
    if change == "truncate":
        with open(f, "r+b") as fh:
            fh.truncate(100)
    elif change == "replace":
        other = tmp_path / "other.safetensors"
        _write(other, {"a": ("F32", x[:1]), "b": ("F32", x[:1])})
        os.replace(other, f)
    else:
        f.unlink()
    with pytest.raises(CheckpointError, match="changed on disk|open the model again"):
        st["b"]
