"""``model.safetensors`` -> a checked dict of numpy arrays under canonical tensor names.

:func:`expected_tensors` lists, for a :class:`~attnviz.checkpoints.config.ModelConfig`, every tensor
the forward pass reads and its shape, in the Hugging Face layout of ``BertModel``, ``GPT2Model`` and
``ViTModel``/``DeiTModel``.  :func:`load_weights` opens the file with the ``safetensors`` library
(numpy side), strips a head-model prefix (``bert.``, ``transformer.``, ``vit.`` ...), and checks each
expected tensor is present, floating point, of the right shape and finite.  Tensors the forward
pass does not use (poolers, LM heads, buffers) are ignored.  Every problem, including a corrupt or
hostile file, is a :class:`~attnviz.checkpoints.errors.CheckpointError`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from safetensors import safe_open

from attnviz.checkpoints.config import ModelConfig
from attnviz.checkpoints.errors import CheckpointError

# Prefixes a task model (BertForMaskedLM, GPT2LMHeadModel, ViTForImageClassification ...) puts in
# front of the base model's tensor names.
PREFIXES = ("", "bert.", "transformer.", "vit.", "deit.", "model.")
# ... and the encoder / vision families' (RobertaForMaskedLM, ElectraForPreTraining, a whole CLIPModel ...)
PREFIXES += ("roberta.", "electra.", "distilbert.", "dinov2.", "vision_model.")
# safetensors dtypes read as floating-point weights; bfloat16 has no numpy dtype.
FLOAT_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64}


def _ln(name: str, d: int) -> dict[str, tuple[int, ...]]:
    return {f"{name}.weight": (d,), f"{name}.bias": (d,)}


def _linear(name: str, n_out: int, n_in: int, bias: bool = True) -> dict[str, tuple[int, ...]]:
    """torch.nn.Linear layout: weight (out, in)."""
    out = {f"{name}.weight": (n_out, n_in)}
    if bias:
        out[f"{name}.bias"] = (n_out,)
    return out


def _conv1d(name: str, n_in: int, n_out: int) -> dict[str, tuple[int, ...]]:
    """GPT-2's Conv1D layout: weight (in, out)."""
    return {f"{name}.weight": (n_in, n_out), f"{name}.bias": (n_out,)}


def expected_tensors(c: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Canonical tensor name -> shape for every tensor the forward pass of ``c`` reads."""
    from attnviz.checkpoints.families import FAMILY_KIND, family_tensors

    if c.model_type in FAMILY_KIND:
        return family_tensors(c)
    d, ff = c.d_model, c.d_ff
    shapes: dict[str, tuple[int, ...]] = {}
    if c.kind == "bert":
        shapes["embeddings.word_embeddings.weight"] = (c.vocab_size, d)
        shapes["embeddings.position_embeddings.weight"] = (c.max_positions, d)
        if c.type_vocab_size:
            shapes["embeddings.token_type_embeddings.weight"] = (c.type_vocab_size, d)
        shapes |= _ln("embeddings.LayerNorm", d)
        for i in range(c.n_layer):
            p = f"encoder.layer.{i}."
            for qkv in ("query", "key", "value"):
                shapes |= _linear(p + f"attention.self.{qkv}", d, d)
            shapes |= _linear(p + "attention.output.dense", d, d) | _ln(p + "attention.output.LayerNorm", d)
            shapes |= _linear(p + "intermediate.dense", ff, d) | _linear(p + "output.dense", d, ff)
            shapes |= _ln(p + "output.LayerNorm", d)
    elif c.kind == "gpt2":
        shapes["wte.weight"] = (c.vocab_size, d)
        shapes["wpe.weight"] = (c.max_positions, d)
        for i in range(c.n_layer):
            p = f"h.{i}."
            shapes |= _ln(p + "ln_1", d) | _conv1d(p + "attn.c_attn", d, 3 * d) | _conv1d(p + "attn.c_proj", d, d)
            shapes |= _ln(p + "ln_2", d) | _conv1d(p + "mlp.c_fc", d, ff) | _conv1d(p + "mlp.c_proj", ff, d)
        shapes |= _ln("ln_f", d)
    else:
        gh, gw = c.grid
        shapes["embeddings.cls_token"] = (1, 1, d)
        if c.n_extra == 2:
            shapes["embeddings.distillation_token"] = (1, 1, d)
        shapes["embeddings.position_embeddings"] = (1, gh * gw + c.n_extra, d)
        shapes["embeddings.patch_embeddings.projection.weight"] = (d, c.num_channels, *c.patch_size)
        shapes["embeddings.patch_embeddings.projection.bias"] = (d,)
        for i in range(c.n_layer):
            p = f"encoder.layer.{i}."
            shapes |= _ln(p + "layernorm_before", d)
            for qkv in ("query", "key", "value"):
                shapes |= _linear(p + f"attention.attention.{qkv}", d, d, bias=c.qkv_bias)
            shapes |= _linear(p + "attention.output.dense", d, d) | _ln(p + "layernorm_after", d)
            shapes |= _linear(p + "intermediate.dense", ff, d) | _linear(p + "output.dense", d, ff)
        shapes |= _ln("layernorm", d)
    return shapes


def _stored_name(name: str, keys: set[str], prefix: str) -> str | None:
    """The name ``name`` has in the file, allowing old LayerNorm gamma/beta spellings."""
    for cand in (name, name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")):
        if prefix + cand in keys:
            return prefix + cand
    return None


def load_weights(path: Path, c: ModelConfig) -> dict[str, np.ndarray]:
    """Read, check and return every tensor :func:`expected_tensors` lists, as float32 (float64 if stored so)."""
    path = Path(path)
    if not path.is_file():
        hint = "a checkpoint folder needs model.safetensors"
        if (path.parent / "model.safetensors.index.json").is_file():
            hint = "sharded checkpoints (model.safetensors.index.json) are not supported; save the model as one file"
        elif (path.parent / "pytorch_model.bin").is_file():
            hint = "pytorch_model.bin is not read (pickle files can run code); convert it to model.safetensors"
        raise CheckpointError(f"the weights file is missing: {path} not found ({hint})")
    expected = expected_tensors(c)
    try:
        with safe_open(str(path), framework="numpy") as f:
            keys = set(f.keys())
            probe = next(iter(expected))
            prefix = next((p for p in PREFIXES if _stored_name(probe, keys, p)), None)
            if prefix is None:
                sample = ", ".join(sorted(keys)[:5]) or "no tensors at all"
                raise CheckpointError(
                    f"{path.name} does not hold {c.model_type} weights in the Hugging Face layout: tensor "
                    f"{probe!r} not found (the file has {sample}{' ...' if len(keys) > 5 else ''})"
                )
            missing = [n for n in expected if _stored_name(n, keys, prefix) is None]
            if missing:
                more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
                raise CheckpointError(
                    f"{path.name} lacks tensors the {c.model_type} config.json implies: {', '.join(missing[:3])}{more}"
                )
            weights = {}
            for name, shape in expected.items():
                stored = _stored_name(name, keys, prefix)
                sl = f.get_slice(stored)
                dtype, got = sl.get_dtype(), tuple(sl.get_shape())
                if dtype not in FLOAT_DTYPES:
                    raise CheckpointError(
                        f"tensor {stored!r} has dtype {dtype}; supported weight dtypes are {', '.join(FLOAT_DTYPES)}"
                    )
                if got != shape:
                    raise CheckpointError(
                        f"tensor {stored!r} has shape {got}, but config.json implies {shape}: config and weights do not match"
                    )
                arr = f.get_tensor(stored)
                if not np.isfinite(arr).all():
                    raise CheckpointError(f"tensor {stored!r} contains NaN or infinite values")
                weights[name] = np.ascontiguousarray(arr, dtype=np.float64 if dtype == "F64" else np.float32)
    except CheckpointError:
        raise
    except Exception as exc:  # safetensors raises its own SafetensorError, OSError, or others on hostile files
        raise CheckpointError(f"{path} is not a readable safetensors file ({type(exc).__name__}: {exc})") from None
    return weights
