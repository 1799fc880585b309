"""Loading checkpoint folders: what is accepted, and a clear CheckpointError for everything that is not
(missing files, unsupported architectures, mismatched or missing tensors, corrupt or hostile files)."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from ckpt_helpers import TINY, golden
from safetensors import safe_open
from safetensors.numpy import save_file

from attnviz.checkpoints import CheckpointError, load_checkpoint, ready_models, run_image, run_text


def _tensors(path):
    with safe_open(str(path), framework="numpy") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def _edit_json(path, **changes):
    cfg = json.loads(path.read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    path.write_text(json.dumps(cfg))


def _raw_safetensors(path, header: dict, data: bytes = b""):
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def test_tiny_checkpoints_load_with_their_kind(tiny):
    assert {k: c.kind for k, c in tiny.items()} == {"gpt2": "gpt2", "vit": "vit", "deit": "vit"}
    assert tiny["gpt2"].tokenizer is not None and tiny["gpt2"].image is None
    assert tiny["vit"].image.size == (24, 40) and tiny["vit"].tokenizer is None
    assert tiny["deit"].config.n_extra == 2
    assert "3x5" in tiny["vit"].describe()


def test_ready_models_lists_installed_minilm(minilm_folder, minilm):
    assert ("all-MiniLM-L6-v2", minilm_folder) in ready_models()
    c = minilm.config
    assert (c.kind, c.n_layer, c.n_head, c.d_model, c.ln_eps) == ("bert", 6, 12, 384, 1e-12)


def test_prefixed_tensor_names_and_extra_tensors_are_accepted(tiny, tiny_copy):
    d = tiny_copy("gpt2")
    t = {f"transformer.{k}": v for k, v in _tensors(d / "model.safetensors").items()}
    t["lm_head.weight"] = np.zeros((3, 3), np.float32)  # unused by the forward pass
    save_file(t, str(d / "model.safetensors"))
    text = str(golden(TINY["gpt2"] / "golden.npz")["text"])
    np.testing.assert_array_equal(run_text(load_checkpoint(d), text).attentions, run_text(tiny["gpt2"], text).attentions)


@pytest.mark.parametrize("setup, expected", [
    (lambda d: d / "nothing-here", "not found"),
    (lambda d: (d / "file.txt").write_text("x") and d / "file.txt", "not a folder"),
])
def test_bad_folder(tmp_path, setup, expected):
    with pytest.raises(CheckpointError, match=expected):
        load_checkpoint(setup(tmp_path))


@pytest.mark.parametrize("missing, expected", [
    ("config.json", "model config is missing"),
    ("model.safetensors", "weights file is missing"),
    ("tokenizer.json", "tokenizer is missing"),
])
def test_missing_file_is_named(tiny_copy, missing, expected):
    d = tiny_copy("gpt2")
    (d / missing).unlink()
    with pytest.raises(CheckpointError, match=expected) as exc:
        load_checkpoint(d)
    assert missing in str(exc.value)


@pytest.mark.parametrize("other, expected", [
    ("pytorch_model.bin", "pickle files can run code"),
    ("model.safetensors.index.json", "index.json is not readable JSON"),
])
def test_missing_safetensors_with_other_weight_files(tiny_copy, other, expected):
    d = tiny_copy("gpt2")
    (d / "model.safetensors").rename(d / other)
    with pytest.raises(CheckpointError, match=expected):
        load_checkpoint(d)


def test_missing_preprocessor_config(tiny_copy):
    d = tiny_copy("vit")
    (d / "preprocessor_config.json").unlink()
    with pytest.raises(CheckpointError, match="preprocessor_config.json"):
        load_checkpoint(d)


@pytest.mark.parametrize("changes, expected", [
    ({"model_type": "swinv2", "architectures": ["Swinv2Model"]}, r"'swinv2'.*Swinv2Model.*not supported: it needs scaled cosine"),
    ({"model_type": "no_such_model"}, r"'no_such_model'.* is not supported: attnviz has no forward pass for it$"),
    ({"model_type": None}, "has no 'model_type', so the architecture is unknown$"),
    ({"n_head": 3}, "not divisible by 3 heads"),
    ({"n_embd": 32}, r"has shape \(300, 16\), but config.json implies \(300, 32\)"),
    ({"n_layer": 3}, r"lacks tensors .*h\.2\."),
    ({"activation_function": "swiglu"}, "'swiglu' is not supported"),
    ({"layer_norm_epsilon": "small"}, "must be a number"),
    ({"n_layer": 0}, "must be >= 1"),
    ({"scale_attn_weights": False}, "scale_attn_weights=false is not supported"),
])
def test_config_problems(tiny_copy, changes, expected):
    d = tiny_copy("gpt2")
    _edit_json(d / "config.json", **changes)
    with pytest.raises(CheckpointError, match=expected):
        load_checkpoint(d)


def test_config_not_json(tiny_copy):
    d = tiny_copy("vit")
    (d / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not readable JSON"):
        load_checkpoint(d)
    (d / "config.json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="JSON object"):
        load_checkpoint(d)


def test_bert_relative_positions_unsupported(minilm_folder, tmp_path):
    cfg = json.loads((minilm_folder / "config.json").read_text())
    cfg["position_embedding_type"] = "relative_key"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="relative_key"):
        load_checkpoint(tmp_path)


@pytest.mark.parametrize("changes, expected", [
    ({"size": {"height": 32, "width": 40}}, r"resizes images to 32x40.*24x40 \(3x5 patches\).*not supported"),
    ({"size": {"shortest_edge": 24}}, "shortest-edge resizing is not supported"),
    ({"image_std": [0.2, 0.0, 0.3]}, "must not contain 0"),
    ({"image_mean": [0.5, 0.5]}, "must list 3 numbers"),
    ({"resample": 9}, "not a PIL resampling code"),
])
def test_preprocessor_problems(tiny_copy, changes, expected):
    d = tiny_copy("vit")
    _edit_json(d / "preprocessor_config.json", **changes)
    with pytest.raises(CheckpointError, match=expected):
        load_checkpoint(d)


def test_image_size_not_multiple_of_patch(tiny_copy):
    d = tiny_copy("vit")
    _edit_json(d / "config.json", image_size=[24, 36])
    with pytest.raises(CheckpointError, match="not a multiple of patch_size"):
        load_checkpoint(d)


def test_missing_tensor_is_named(tiny_copy):
    d = tiny_copy("vit")
    t = _tensors(d / "model.safetensors")
    del t["encoder.layer.1.attention.attention.key.weight"]
    save_file(t, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"lacks tensors .*encoder\.layer\.1\.attention\.attention\.key\.weight"):
        load_checkpoint(d)


def test_weights_of_another_architecture(tiny_copy):
    d = tiny_copy("gpt2")
    (d / "model.safetensors").write_bytes((TINY["vit"] / "model.safetensors").read_bytes())
    with pytest.raises(CheckpointError, match=r"does not hold gpt2 weights.*'wte.weight' not found"):
        load_checkpoint(d)


def test_non_finite_weights(tiny_copy):
    d = tiny_copy("gpt2")
    t = _tensors(d / "model.safetensors")
    t["h.0.ln_1.weight"][3] = np.nan
    save_file(t, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError, match="h.0.ln_1.weight.*NaN"):
        load_checkpoint(d)


def test_integer_weights(tiny_copy):
    d = tiny_copy("gpt2")
    t = _tensors(d / "model.safetensors")
    t["ln_f.bias"] = np.zeros(16, np.int32)
    save_file(t, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError, match="ln_f.bias.*dtype I32.*F16, F32, F64"):
        load_checkpoint(d)


def test_float16_weights_are_upcast(tiny_copy, tiny):
    d = tiny_copy("vit")
    t = {k: v.astype(np.float16) for k, v in _tensors(d / "model.safetensors").items()}
    save_file(t, str(d / "model.safetensors"))
    ck = load_checkpoint(d)
    assert all(w.dtype == np.float32 for w in ck.weights.values())
    img = golden(TINY["vit"] / "golden.npz")["image"]
    a, b = run_image(ck, img).attentions, run_image(tiny["vit"], img).attentions
    assert np.abs(a - b).max() < 0.05 and not np.array_equal(a, b)  # half precision weights, same model


def test_bfloat16_weights_are_computed_in_float32(tiny_copy, tiny):
    d = tiny_copy("gpt2")
    t = _tensors(d / "model.safetensors")
    header, blobs, off = {}, [], 0
    for k, v in t.items():
        raw = v.astype(np.float32).tobytes() if k != "wte.weight" else (v.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        header[k] = {"dtype": "BF16" if k == "wte.weight" else "F32", "shape": list(v.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    _raw_safetensors(d / "model.safetensors", header, b"".join(blobs))
    ck = load_checkpoint(d)
    wte = t["wte.weight"]
    np.testing.assert_array_equal(ck.weights["wte.weight"], ((wte.view(np.uint32) >> 16) << 16).view(np.float32))
    text = str(golden(TINY["gpt2"] / "golden.npz")["text"])
    a, b = run_text(ck, text).attentions, run_text(tiny["gpt2"], text).attentions
    assert np.abs(a - b).max() < 0.05 and not np.array_equal(a, b)  # bfloat16 embeddings, same model


def test_config_implying_ten_million_layers_is_refused_from_the_header(tiny_copy):
    d = tiny_copy("gpt2")
    _edit_json(d / "config.json", n_layer=10**7)
    with pytest.raises(CheckpointError, match=r"10,000,000 layers.*implies 120,000,004 tensors.*holds 28 tensors"):
        load_checkpoint(d)


@pytest.mark.parametrize("content", [
    b"",  # empty file
    b"\x00" * 4,  # shorter than the header length field
    struct.pack("<Q", 2**62) + b"{}",  # header length far beyond the file
    struct.pack("<Q", 5) + b"nope!",  # header is not JSON
    np.random.default_rng(0).bytes(4096),  # noise
], ids=["empty", "short", "huge-header", "not-json", "noise"])
def test_corrupt_safetensors(tiny_copy, content):
    d = tiny_copy("gpt2")
    (d / "model.safetensors").write_bytes(content)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load_checkpoint(d)


def test_truncated_safetensors(tiny_copy):
    d = tiny_copy("vit")
    raw = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load_checkpoint(d)


def test_hostile_offsets_outside_the_file(tiny_copy):
    d = tiny_copy("gpt2")
    _raw_safetensors(d / "model.safetensors", {"wte.weight": {"dtype": "F32", "shape": [300, 16], "data_offsets": [0, 19200]}}, b"\0" * 64)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load_checkpoint(d)


def test_tokenizer_bigger_than_embedding_table(tiny_copy):
    d = tiny_copy("gpt2")
    t = _tensors(d / "model.safetensors")
    t["wte.weight"] = t["wte.weight"][:200]
    save_file(t, str(d / "model.safetensors"))
    _edit_json(d / "config.json", vocab_size=200)
    with pytest.raises(CheckpointError, match="tokenizer.json has 300 tokens but the model's embedding table only 200 rows"):
        load_checkpoint(d)


def test_corrupt_tokenizer(tiny_copy):
    d = tiny_copy("gpt2")
    (d / "tokenizer.json").write_text('{"version": "1.0"}')
    with pytest.raises(CheckpointError, match="tokenizer"):
        load_checkpoint(d)
