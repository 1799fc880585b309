"""Attention-maps files loaded as a checkpoint (attnviz/checkpoints/maps_file.py): npz and safetensors round
trips through load_checkpoint, other tools' npz files, the per-head summaries against a float64 reference,
the CLI's ``maps`` command, and hostile files refused in one line before anything large is read."""

from __future__ import annotations

import io
import json
import struct
import zipfile

import numpy as np
import pytest

import attnviz
from attnviz.checkpoints import CheckpointError, load_checkpoint
from attnviz.checkpoints.maps_file import map_summaries, read_maps
from attnviz.cli import main as cli_main

TOKENS = ["[CLS]", "a", "b", "c", "[SEP]"]


def maps(L=2, nh=2, Tq=5, Tk=5, seed=0):
    x = np.random.default_rng(seed).normal(size=(L, nh, Tq, Tk)) * 2
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def refused(path, *fragments):
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    text = str(info.value)
    assert "\n" not in text and len(text) < 400, text
    for f in fragments:
        assert f in text, text
    return text


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_round_trip_through_load_checkpoint(tmp_path, suffix):
    a = maps()
    img = np.arange(5 * 7 * 3, dtype=np.uint8).reshape(5, 7, 3)
    path = attnviz.save(tmp_path / f"m{suffix}", a, TOKENS, image=img, title="five tokens")
    ckpt = load_checkpoint(path)
    assert ckpt.kind == "maps" and ckpt.name == "five tokens" and ckpt.folder == path
    assert "2 layers x 2 heads, 5 tokens" in ckpt.describe() and "read-only" in ckpt.describe()
    r = ckpt.run()
    assert r.kind == "maps" and r.shape == (2, 2, 5, 5) and r.tokens == TOKENS
    np.testing.assert_allclose(r.attentions, a, atol=6e-8)
    np.testing.assert_array_equal(r.special, [True, False, False, False, True])
    np.testing.assert_array_equal(ckpt.rgb, img)
    assert r.row_labels == r.labels


def test_whitespace_is_made_visible_in_labels(tmp_path):
    toks = ["a", " b", "c\n", "\td", "e"]
    r = load_checkpoint(attnviz.save(tmp_path / "w.npz", maps(), toks)).run()
    assert r.tokens == toks and r.labels == ["a", "\u2423b", "c\u21b5", "\u21e5d", "e"]


def test_cross_attention_file(tmp_path):
    a = maps(Tq=3, Tk=5)
    ckpt = load_checkpoint(attnviz.save(tmp_path / "c.npz", a, TOKENS, target_tokens=["x", "y z", "w"]))
    r = ckpt.run()
    assert r.query_tokens == ["x", "y z", "w"] and r.row_labels == ["x", "y\u2423z", "w"] and r.labels[0] == "[CLS]"
    assert "3 target x 5 source tokens (cross-attention)" in ckpt.describe()
    s = ckpt.summaries()
    assert s.to_self is None and s.to_previous is None and s.distance is None  # nothing to compare between sequences
    assert s.entropy.shape == (2, 2)


def test_an_npz_of_another_tool_opens(tmp_path):
    """np.savez with attentions and tokens only (as attnviz-cli model inspect --npz writes, with more arrays)."""
    a = maps().astype(np.float64)
    path = tmp_path / "inspect.npz"
    np.savez(path, tokens=np.array(TOKENS), attentions=a, hidden=np.zeros((5, 4)), ids=np.arange(5))
    m = read_maps(path)
    assert m.computed == "float64" and m.stored == "float64" and m.title is None
    np.testing.assert_allclose(m.attentions, a, atol=6e-8)


def test_summaries_match_a_float64_reference():
    a = maps(L=1, nh=2, Tq=4, Tk=4, seed=3)
    a[0, 1, 2] = 0.0  # a fully masked row is left out of the means
    special = np.array([True, False, False, True])
    s = map_summaries(a, special)
    for h in range(2):
        rows = [i for i in range(4) if a[0, h, i].sum() > 0]
        w = a[0, h, rows].astype(np.float64)
        ent = -(w * np.log(np.where(w > 0, w, 1))).sum(axis=-1).mean()
        assert s.entropy[0, h] == pytest.approx(ent, rel=1e-9)
        assert s.to_first[0, h] == pytest.approx(w[:, 0].mean(), rel=1e-12)
        assert s.to_special[0, h] == pytest.approx(w[:, [0, 3]].sum(axis=-1).mean(), rel=1e-12)
        assert s.to_self[0, h] == pytest.approx(np.mean([a[0, h, i, i] for i in rows]), rel=1e-12)
        assert s.distance[0, h] == pytest.approx(np.mean([sum(a[0, h, i, j] * abs(i - j) for j in range(4))
                                                          for i in rows]), rel=1e-12)
        prev = [a[0, h, i, i - 1] for i in range(1, 4) if a[0, h, i].sum() > 0]
        assert s.to_previous[0, h] == pytest.approx(np.mean(prev), rel=1e-12)


def test_cli_maps_prints_shape_tokens_and_summaries(tmp_path, capsys):
    a = maps()
    path = attnviz.save(tmp_path / "m.safetensors", a, TOKENS)
    assert cli_main(["maps", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 layers x 2 heads, 5 tokens" in out and "0:'[CLS]' 1:'a'" in out
    first = -(a[0, 0] * np.log(a[0, 0])).sum(axis=-1).mean()
    row = next(line for line in out.splitlines() if line.split()[:2] == ["0", "0"])
    assert float(row.split()[2]) == pytest.approx(first, abs=1e-4)
    assert float(row.split()[3]) == pytest.approx(a[0, 0, :, 0].mean(), abs=1e-4)
    assert cli_main(["maps", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["layers"] == 2 and doc["tokens"] == TOKENS and doc["cross"] is False
    np.testing.assert_allclose(doc["heads_summaries"]["to_first"], a[..., 0].mean(axis=-1), atol=1e-6)


def test_cli_maps_bad_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    assert cli_main(["maps", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: bad.npz is not a readable attention-maps file") and err.count("\n") == 1


# ------------------------------------------------------------------ hostile files

def npz_with(path, **arrays):
    np.savez(path, **arrays)
    return path


def test_truncated_files(tmp_path):
    good = attnviz.save(tmp_path / "g.npz", maps(), TOKENS)
    raw = good.read_bytes()
    for cut in (10, len(raw) // 2, len(raw) - 5):
        p = tmp_path / f"cut{cut}.npz"
        p.write_bytes(raw[:cut])
        refused(p, f"cut{cut}.npz is not a readable attention-maps file")
    good = attnviz.save(tmp_path / "g.safetensors", maps(), TOKENS)
    raw = good.read_bytes()
    for cut in (4, 40, len(raw) - 8):
        p = tmp_path / f"cut{cut}.safetensors"
        p.write_bytes(raw[:cut])
        refused(p, "not a readable safetensors file")


def test_pickled_object_arrays_are_never_loaded(tmp_path):
    obj = np.empty(5, dtype=object)
    obj[:] = TOKENS
    p = npz_with(tmp_path / "obj.npz", attentions=maps(), tokens=obj)
    refused(p, "tokens holds Python objects, which attnviz never unpickles")
    p = npz_with(tmp_path / "obj2.npz", attentions=np.array([maps()], dtype=object)[0], tokens=np.array(TOKENS))
    refused(p, "attentions holds Python objects")


@pytest.mark.parametrize(("arrays", "fragments"), [
    (dict(attentions=maps().astype(np.int32), tokens=np.array(TOKENS)), ["float16, float32 or float64, got int32"]),
    (dict(attentions=maps()[0], tokens=np.array(TOKENS)), ["must be (layers, heads, Tq, Tk), got shape (2, 5, 5)"]),
    (dict(attentions=maps(), tokens=np.arange(5)), ["tokens must be strings, got int64"]),
    (dict(attentions=maps(), tokens=np.array(TOKENS[:4])), ["4 tokens for maps with 5 key positions"]),
    (dict(attentions=maps(), tokens=np.array([TOKENS])), ["tokens has shape (1, 5)"]),
    (dict(attentions=maps()), ["no 'tokens' array"]),
    (dict(tokens=np.array(TOKENS)), ["no 'attentions' array"]),
    (dict(attentions=maps() * 2, tokens=np.array(TOKENS)), ["do not sum to one"]),
    (dict(attentions=maps(Tq=3), tokens=np.array(TOKENS)), ["cross-attention needs target_tokens"]),
    (dict(attentions=maps(), tokens=np.array(TOKENS), image=np.zeros((4, 4, 3), np.float32)),
     ["image must be (H, W, 3) uint8"]),
    (dict(attentions=maps(), tokens=np.array(TOKENS), attnviz_maps=np.array(99)), ["format version 99 is newer"]),
    (dict(attentions=maps(), tokens=np.array(TOKENS), computed=np.array("int4")), ["'computed' is 'int4'"]),
])
def test_bad_npz_contents(tmp_path, arrays, fragments):
    refused(npz_with(tmp_path / "bad.npz", **arrays), "bad.npz", *fragments)


def test_nan_in_a_file(tmp_path):
    a = maps()
    a[1, 0, 3, 2] = np.nan
    refused(npz_with(tmp_path / "nan.npz", attentions=a, tokens=np.array(TOKENS)),
            "nan.npz: attentions hold 1 NaN or infinite value(s), the first at layer 1, head 0, query 3, key 2")


def test_a_huge_declared_shape_is_refused_before_reading(tmp_path):
    """An npy header that claims 70,000 x 70,000 maps (19.6 GB) over a few bytes of data."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False,
                                               "shape": (1, 1, 70_000, 70_000)})
    buf.write(b"\0" * 64)
    p = tmp_path / "huge.npz"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("attentions.npy", buf.getvalue())
        zf.writestr("tokens.npy", _npy(np.array(TOKENS)))
    refused(p, "attentions of shape (1, 1, 70000, 70000) are larger than attnviz reads")


def test_a_deflate_bomb_member_is_refused(tmp_path):
    """A well-formed header for a modest shape whose data is short: the read stops at the data's end."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (2, 2, 5, 5)})
    buf.write(b"\0" * 16)  # 400 bytes promised, 16 given
    p = tmp_path / "short.npz"
    with zipfile.ZipFile(p, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("attentions.npy", buf.getvalue())
        zf.writestr("tokens.npy", _npy(np.array(TOKENS)))
    refused(p, "short.npz is not a readable attention-maps file (attentions cannot be read")


def test_too_many_members(tmp_path):
    p = tmp_path / "many.npz"
    np.savez(p, attentions=maps(), tokens=np.array(TOKENS), **{f"x{i}": np.zeros(1) for i in range(70)})
    refused(p, "72 members (at most 64 are read)")


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def safetensors_bytes(header: dict, data: bytes) -> bytes:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def test_a_1e9_byte_header_is_refused(tmp_path):
    p = tmp_path / "hdr.safetensors"
    p.write_bytes(struct.pack("<Q", 10**9) + b"{}" + b" " * 64)
    refused(p, "header length 1,000,000,000 bytes does not fit")


@pytest.mark.parametrize(("header", "data", "fragments"), [
    ({"attentions": {"dtype": "I32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]},
      "__metadata__": {"tokens": '["a", "b"]'}}, b"\0" * 16, ["attentions must be F16, F32 or F64, got I32"]),
    ({"attentions": {"dtype": "F32", "shape": [1, 2, 2], "data_offsets": [0, 16]},
      "__metadata__": {"tokens": '["a", "b"]'}}, b"\0" * 16, ["must be (layers, heads, Tq, Tk), got shape (1, 2, 2)"]),
    ({"attentions": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]}},
     np.full(4, 0.5, np.float32).tobytes(), ["no 'tokens' in its metadata"]),
    ({"attentions": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]},
      "__metadata__": {"tokens": "[a, b"}}, np.full(4, 0.5, np.float32).tobytes(), ["'tokens' is not a JSON list"]),
    ({"attentions": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]},
      "__metadata__": {"tokens": '["a", "b", "c"]'}}, np.full(4, 0.5, np.float32).tobytes(),
     ["3 tokens for maps with 2 key positions"]),
    ({"attentions": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]},
      "__metadata__": {"tokens": '["a", 7]'}}, np.full(4, 0.5, np.float32).tobytes(), ["tokens[1] is a int"]),
    ({"attentions": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]},
      "__metadata__": {"tokens": '["a", "b"]', "version": "7"}}, np.full(4, 0.5, np.float32).tobytes(),
     ["format version '7'"]),
    ({"attentions": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 16]},
      "__metadata__": {"tokens": '["a", "b"]'}}, np.array([0.5, 0.5, np.nan, 0.5], np.float32).tobytes(),
     ["NaN or infinite"]),
    ({"attentions": {"dtype": "F32", "shape": [1, 1, 2, 2], "data_offsets": [0, 64]},
      "__metadata__": {"tokens": '["a", "b"]'}}, b"\0" * 64, ["does not fit its shape"]),
    ({"embeddings.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, b"\0" * 16,
     ["no 'attentions' tensor; the weights of a model?"]),
])
def test_bad_safetensors_contents(tmp_path, header, data, fragments):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(safetensors_bytes(header, data))
    refused(p, *fragments)


def test_a_missing_file_and_a_folder_with_a_maps_suffix(tmp_path):
    refused(tmp_path / "gone.npz", "not found")
    (tmp_path / "dir.npz").mkdir()
    refused(tmp_path / "dir.npz", "config.json")  # a folder is a checkpoint folder, not a maps file


def test_checks_and_summaries_in_row_blocks_equal_the_whole_map(monkeypatch):
    """Long maps are checked and summarised a few rows at a time (no float64 copy of a whole map): the blocks give
    the same numbers and name the same cell."""
    from attnviz import api

    a = maps(L=2, nh=2, Tq=9, Tk=9, seed=5)
    special = np.zeros(9, dtype=bool)
    special[[0, 8]] = True
    whole = map_summaries(a, special)
    monkeypatch.setattr(api, "ROWS_AT_ONCE", 18)  # two rows per block
    assert api.row_blocks(9, 9) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 9)]
    blocked = map_summaries(a, special)
    for field in ("entropy", "to_special", "to_first", "to_self", "to_previous", "distance"):
        np.testing.assert_allclose(getattr(blocked, field), getattr(whole, field), rtol=1e-12)
    bad = a.copy()
    bad[1, 1, 7, 4] = np.nan
    with pytest.raises(ValueError, match=r"the first at layer 1, head 1, query 7, key 4"):
        api.check_values(bad)
    bad = a.copy()
    bad[0, 1, 5] *= 1.5
    bad[0, 0, 8] *= 1.5
    with pytest.raises(ValueError, match=r"^2 row\(s\) of layer 0 do not sum to one \(the first at layer 0, head 0, "
                                         r"query 8 sums to 1.5\)"):
        api.check_values(bad)
