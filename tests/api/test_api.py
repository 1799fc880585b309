"""attnviz.save / attnviz.show: maps from numpy, from torch-like tensors and from real transformers outputs
(tests/data/maps, written by tools/make_maps_goldens.py), the checks on them, the process show starts and the
grid picture it draws without Qt."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import attnviz
from attnviz import api

DATA = Path(__file__).resolve().parents[1] / "data" / "maps"
REPO = Path(__file__).resolve().parents[2]


def softmax_maps(L=2, nh=3, Tq=5, Tk=5, batch=1, seed=0) -> np.ndarray:
    """(L, batch, nh, Tq, Tk) float64 softmax weights."""
    x = np.random.default_rng(seed).normal(size=(L, batch, nh, Tq, Tk)) * 2
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class FakeTensor:
    """What a torch tensor offers attnviz: .detach().cpu().numpy() (and a dtype); no __array__."""

    def __init__(self, a, dtype="torch.float32"):
        self._a = np.asarray(a)
        self.dtype = dtype
        self.calls = []

    def detach(self):
        self.calls.append("detach")
        return self

    def cpu(self):
        self.calls.append("cpu")
        return self

    def float(self):
        self.calls.append("float")
        return FakeTensor(self._a.astype(np.float32))

    def numpy(self):
        self.calls.append("numpy")
        return self._a


def load(path):
    from attnviz.checkpoints.maps_file import read_maps

    return read_maps(path)


TOK5 = ["[CLS]", "the", "river", " bank", "[SEP]"]


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_save_numpy_tuple_round_trip(tmp_path, suffix):
    a = softmax_maps()  # (L, 1, nh, T, T)
    img = np.random.default_rng(1).integers(0, 256, size=(8, 6, 3), dtype=np.uint8)
    out = attnviz.save(tmp_path / f"m{suffix}", tuple(a), TOK5, image=img, title="my maps")
    assert out == tmp_path / f"m{suffix}" and out.is_file()
    m = load(out)
    assert m.attentions.dtype == np.float32 and m.attentions.shape == (2, 3, 5, 5)
    np.testing.assert_allclose(m.attentions, a[:, 0], rtol=0, atol=6e-8)  # float32 rounding of the float64 maps
    assert m.tokens == TOK5 and m.target_tokens is None and m.title == "my maps"
    assert m.computed == "float64" and m.stored == "float32"
    np.testing.assert_array_equal(m.image, img)
    assert not list(tmp_path.glob("*.part"))  # nothing half-written left behind


def test_save_float16_on_request(tmp_path):
    a = softmax_maps()[:, 0]  # (L, nh, T, T) one array
    m = load(attnviz.save(tmp_path / "h.npz", a, TOK5, dtype="float16"))
    assert m.stored == "float16"
    np.testing.assert_allclose(m.attentions, a, atol=5e-4)
    with pytest.raises(ValueError, match="dtype must be one of float32, float16"):
        attnviz.save(tmp_path / "x.npz", a, TOK5, dtype="int8")


def test_duck_typed_tensors_are_converted_without_torch(tmp_path):
    a = softmax_maps(batch=2)  # (L, 2, nh, T, T)
    tensors = tuple(FakeTensor(layer) for layer in a)
    m = load(attnviz.save(tmp_path / "t.npz", tensors, TOK5, batch=1))
    np.testing.assert_allclose(m.attentions, a[:, 1], atol=6e-8)
    assert tensors[0].calls == ["detach", "cpu", "numpy"]
    bf16 = tuple(FakeTensor(layer, dtype="torch.bfloat16") for layer in a)
    m16 = load(attnviz.save(tmp_path / "b.npz", bf16, TOK5, batch=0))
    assert "float" in bf16[0].calls and m16.computed == "bfloat16"  # numpy has no bfloat16: widened first
    np.testing.assert_allclose(m16.attentions, a[:, 0], atol=6e-8)


def test_an_object_with_array_interface_is_read():
    class ArrayLike:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return self.a

    a = softmax_maps()
    np.testing.assert_array_equal(api.as_maps([ArrayLike(x) for x in a]), a[:, 0])


def test_a_stacked_five_axis_array_and_batches():
    a = softmax_maps(batch=3)
    np.testing.assert_array_equal(api.as_maps(a, batch=2), a[:, 2])
    with pytest.raises(ValueError, match=r"holds a batch of 3 sequences .* choose one with batch=0\.\.2"):
        api.as_maps(tuple(a))
    with pytest.raises(ValueError, match="batch=3 is out of range for attentions\\[0\\]'s batch of 3"):
        api.as_maps(tuple(a), batch=3)
    with pytest.raises(ValueError, match="batch must be a whole number"):
        api.as_maps(tuple(a), batch=1.0)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda a: a.__setitem__((1, 0, 2, 3), np.nan),
     r"^attentions hold 1 NaN or infinite value\(s\), the first at layer 1, head 0, query 2, key 3: not drawn$"),
    (lambda a: a.__setitem__((0, 1, 0, 0), np.inf), r"NaN or infinite value\(s\), the first at layer 0, head 1, query 0"),
    (lambda a: a.__setitem__((0, 2, 4, 1), -0.25), r"negative values \(the smallest -0.25, the first at layer 0, "
                                                   r"head 2, query 4, key 1\)"),
    (lambda a: a.__setitem__((1, 1, 3), a[1, 1, 3] * 1.01),
     r"^1 row\(s\) of layer 1 do not sum to one \(the first at layer 1, head 1, query 3 sums to 1.01\)"),
])
def test_values_that_are_not_weights_are_named(tmp_path, edit, message):
    a = softmax_maps()[:, 0].copy()
    edit(a)
    with pytest.raises(ValueError, match=message) as info:
        attnviz.save(tmp_path / "bad.npz", a, TOK5)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "bad.npz").exists()


def test_fully_masked_rows_and_small_rounding_pass(tmp_path):
    a = softmax_maps()[:, 0].copy()
    a[:, :, 2] = 0.0  # a fully masked query row
    a[0, 0, 0] *= 1 + 5e-4  # within 1e-3
    m = load(attnviz.save(tmp_path / "ok.npz", a, TOK5))
    assert (m.attentions[:, :, 2] == 0).all()


def test_bfloat16_rows_get_the_looser_tolerance():
    a = softmax_maps()[:, 0].copy()
    a[0, 0, 0] *= 1.004  # beyond 1e-3, within 1e-2
    with pytest.raises(ValueError, match="do not sum to one"):
        api.prepare(a, TOK5)
    fields = api.prepare(tuple(FakeTensor(x[None], dtype="torch.bfloat16") for x in a), TOK5)
    assert fields["computed"] == "bfloat16"


@pytest.mark.parametrize(("call", "message"), [
    (lambda a, p: attnviz.save(p, a, TOK5[:4]), r"^4 tokens for maps with 5 key positions: they must match$"),
    (lambda a, p: attnviz.save(p, a, "the river bank"), "must be a list of strings, one per token"),
    (lambda a, p: attnviz.save(p, a, [1, 2, 3, 4, 5]), r"tokens\[0\] is a int, not a string \(decode ids first"),
    (lambda a, p: attnviz.save(p, a, None), "tokens is missing: give the 5 key tokens"),
    (lambda a, p: attnviz.save(p.with_suffix(".pt"), a, TOK5), r"save maps as \.npz or \.safetensors \(got '\.pt'\)"),
    (lambda a, p: attnviz.save(p, a[:, :, :3], TOK5), "the maps are 3 queries x 5 keys: cross-attention needs "
                                                     "target_tokens"),
    (lambda a, p: attnviz.save(p, a[:, :, :3], TOK5, target_tokens=["a", "b"]),
     r"^2 target_tokens for maps with 3 query positions: they must match$"),
    (lambda a, p: attnviz.save(p, (None, None), TOK5), "output_attentions=True"),
    (lambda a, p: attnviz.save(p, (), TOK5), "attentions is empty"),
    (lambda a, p: attnviz.save(p, a[0], TOK5), r"must be a tuple of \(batch, heads, T, T\) tensors"),
    (lambda a, p: attnviz.save(p, [a[0, None], a[1, None, :2]], TOK5), r"attentions\[1\] has shape \(2, 5, 5\)"),
    (lambda a, p: attnviz.save(p, (a > 0.2), TOK5), "must be floating-point weights"),
    (lambda a, p: attnviz.save(p, a, TOK5, image=np.zeros((4, 4), np.uint8)), r"image must be \(H, W, 3\) uint8"),
    (lambda a, p: attnviz.save(p, a, TOK5, title=3), "title must be a string"),
])
def test_bad_input_is_one_line(tmp_path, call, message):
    a = softmax_maps()[:, 0]
    with pytest.raises(ValueError, match=message) as info:
        call(a, tmp_path / "x.npz")
    assert "\n" not in str(info.value)


def test_cross_attention_round_trip(tmp_path):
    a = softmax_maps(Tq=3, Tk=5)[:, 0]  # (L, nh, 3, 5)
    m = load(attnviz.save(tmp_path / "c.safetensors", a, TOK5, target_tokens=["je", "t'", "aime"]))
    assert m.cross and m.target_tokens == ["je", "t'", "aime"] and m.tokens == TOK5
    np.testing.assert_allclose(m.attentions, a, atol=6e-8)


# ------------------------------------------------------------------ transformers' own outputs

def test_transformers_bert_batch_goldens():
    """attnviz.save(outputs.attentions, batch=1) of a real BertModel (torch tensors) holds transformers' maps."""
    ref = np.load(DATA / "reference.npz")
    m = load(DATA / "bert_batch1.npz")
    assert m.tokens == ["[CLS]", "the", "river", "bank", "[SEP]", "[PAD]", "[PAD]"]
    assert m.computed == "float64" and m.title == "tiny BERT, sequence 1"
    np.testing.assert_allclose(m.attentions, ref["bert"], rtol=0, atol=1e-7)
    np.testing.assert_array_equal(m.attentions[..., 5:], 0)  # the padded keys get nothing
    m16 = load(DATA / "bert_bf16.safetensors")
    assert m16.computed == "bfloat16"
    np.testing.assert_array_equal(m16.attentions, ref["bert_bf16"])


def test_transformers_bart_cross_attention_golden():
    ref = np.load(DATA / "reference.npz")
    m = load(DATA / "bart_cross.npz")
    assert m.target_tokens == ["</s>", "<s>", "I", "love", "you"] and len(m.tokens) == 6
    assert m.attentions.shape == (2, 2, 5, 6)
    np.testing.assert_allclose(m.attentions, ref["bart_cross"], rtol=0, atol=1e-7)


# ------------------------------------------------------------------ show

def test_show_starts_the_app_on_the_file_and_returns_at_once(tmp_path, monkeypatch):
    started = []

    class FakePopen:
        def __init__(self, cmd, **kwargs):
            started.append((cmd, kwargs))

    monkeypatch.setattr(api.subprocess, "Popen", FakePopen)
    a = softmax_maps()
    shown = attnviz.show(tuple(a), TOK5, title="river bank", folder=tmp_path)
    assert len(started) == 1
    cmd, kwargs = started[0]
    assert cmd == [sys.executable, "-m", "attnviz", str(shown.path)]
    assert shown.path.parent == tmp_path and shown.path.suffix == ".npz"
    assert isinstance(shown.process, FakePopen) and kwargs["stdin"] == subprocess.DEVNULL
    from attnviz.checkpoints import load_checkpoint

    ckpt = load_checkpoint(shown.path)  # what the window opens
    assert ckpt.kind == "maps" and ckpt.name == "river bank"
    np.testing.assert_allclose(ckpt.run().attentions, a[:, 0], atol=6e-8)


def test_show_without_folder_writes_a_temporary_file(monkeypatch):
    monkeypatch.setattr(api.subprocess, "Popen", lambda cmd, **kw: cmd)
    shown = attnviz.show(softmax_maps()[:, 0], TOK5)
    try:
        assert shown.process[-1] == str(shown.path) and shown.path.is_file()
    finally:
        shown.path.unlink()
        shown.path.parent.rmdir()


def test_show_refuses_bad_maps_before_starting_anything(tmp_path, monkeypatch):
    monkeypatch.setattr(api.subprocess, "Popen", lambda *a, **k: pytest.fail("a process was started"))
    a = softmax_maps()[:, 0].copy()
    a[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        attnviz.show(a, TOK5, folder=tmp_path)
    assert not list(tmp_path.iterdir())


def test_the_inline_png_is_the_grid(tmp_path, monkeypatch):
    monkeypatch.setattr(api.subprocess, "Popen", lambda cmd, **kw: None)
    a = np.zeros((2, 3, 4, 4))
    a[..., 0] = 1.0  # every query looks at the first key
    a[1, 2] = np.eye(4)  # one head looks at itself
    shown = attnviz.show(a, ["a", "b", "c", "d"], folder=tmp_path)
    png = shown._repr_png_()
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    cell, gap, left, top = 96, 3, 30, 16  # 960 // 3 heads, clipped to 96
    assert img.shape == (top + 2 * (cell + gap), left + 3 * (cell + gap), 3)
    table = api.viridis()

    def pixel(layer, head, i, j):  # centre of map cell (query i, key j)
        y = top + layer * (cell + gap) + i * cell // 4 + cell // 8
        x = left + head * (cell + gap) + j * cell // 4 + cell // 8
        return tuple(img[y, x])

    assert pixel(0, 0, 2, 0) == tuple(table[255]) and pixel(0, 0, 2, 1) == tuple(table[0])
    assert pixel(1, 2, 3, 3) == tuple(table[255]) and pixel(1, 2, 3, 0) == tuple(table[0])
    assert tuple(img[top + cell + 1, 5]) == api._BACKGROUND  # the dark background around the labels


def test_long_maps_keep_their_peaks_in_the_picture():
    a = np.zeros((1, 1, 500, 500))
    a[0, 0, :, 0] = 1.0
    a[0, 0, 250] = 0.0
    a[0, 0, 250, 377] = 1.0  # one query's single key, far smaller than one pixel
    img = np.asarray(api.grid_image(a, cell=50))
    block = img[16 + 25, 30:80]  # the pixel row holding query 250
    assert (block == api.viridis()[255]).all(axis=1).sum() >= 2  # key 0 (of the others pooled in) and key 377


def test_viridis_is_the_windows_table():
    pytest.importorskip("pyqtgraph")
    from attnviz.ui.colormaps import lut

    np.testing.assert_array_equal(api.viridis(), lut("viridis")[:, :3])


def test_import_and_save_load_neither_torch_nor_qt_nor_numba(tmp_path):
    code = ("import sys, numpy as np, attnviz\n"
            "assert not [m for m in ('torch', 'PySide6', 'numba') if m in sys.modules], 'at import'\n"
            "a = np.full((1, 2, 3, 3), 1 / 3)\n"
            f"attnviz.save({str(tmp_path / 'x.npz')!r}, a, ['a', 'b', 'c'])\n"
            "print(sorted(m for m in ('torch', 'PySide6', 'numba', 'pyqtgraph') if m in sys.modules))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
    assert (tmp_path / "x.npz").is_file()
