"""``model.safetensors`` (or its shards) -> checked numpy arrays under canonical tensor names.

:func:`expected_tensors` lists what each forward pass reads, in the Hugging Face layout;
:func:`load_weights` checks each one is present (a head-model prefix such as ``bert.`` stripped),
floating point, of the right shape and finite, and ignores the rest (poolers, LM heads, buffers).
Every problem, a corrupt or hostile file included, is a :class:`~attnviz.checkpoints.errors.CheckpointError`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from attnviz.checkpoints.model_config import CheckpointConfig
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.safetensors_file import StoredTensors, weight_files

# Prefixes a task model (BertForMaskedLM, GPT2LMHeadModel, ViTForImageClassification ...) puts in
# front of the base model's tensor names.
PREFIXES = ("", "bert.", "transformer.", "vit.", "deit.", "model.")
HEAD = "lm_head.weight"  # an untied language-model head, exposed when a checkpoint stores one
# ... and the encoder / vision families' (RobertaForMaskedLM, ElectraForPreTraining, a whole CLIPModel ...)
PREFIXES += ("roberta.", "electra.", "distilbert.", "dinov2.", "vision_model.")
# ... and the decoder families' own base-model names (GPTNeoXForCausalLM)
PREFIXES += ("gpt_neox.", "model.decoder.", "decoder.")
# ... and the later encoder / vision families' (AlbertForMaskedLM, MPNetForMaskedLM, DebertaV2ForMaskedLM,
# BeitForImageClassification, Dinov2WithRegistersForImageClassification)
PREFIXES += ("albert.", "mpnet.", "deberta.", "beit.", "dinov2_with_registers.")
# ... and SwinForImageClassification, as the published Swin checkpoints are
PREFIXES += ("swin.",)
# safetensors dtypes read as floating-point weights (BF16 and F16 are computed in float32).
FLOAT_DTYPES = {"BF16": np.float32, "F16": np.float16, "F32": np.float32, "F64": np.float64}


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


def expected_tensors(c: CheckpointConfig) -> dict[str, tuple[int, ...]]:
    """Canonical tensor name -> shape for every tensor the forward pass of ``c`` reads."""
    if c.kind == "decoder":
        from attnviz.checkpoints.decoder import decoder_tensors

        return decoder_tensors(c)
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


def _head_name(c: CheckpointConfig, keys: set[str]) -> str | None:
    """Where the file keeps the causal LM's head (GPT-NeoX files before transformers 5: embed_out), or None."""
    names = (HEAD,)
    if c.kind == "decoder":
        from attnviz.checkpoints.decoder import HEAD_NAMES

        names = HEAD_NAMES.get(c.model_type, names)
    return next((n for n in names if n in keys), None)


def implied_counts(c: CheckpointConfig) -> tuple[int, int]:
    """(tensors, elements) the config implies, computed from one layer's list: no list of n_layer entries
    is built, so a config claiming 10^7 layers is checked against the file in microseconds."""
    none, one = expected_tensors(replace(c, n_layer=0)), expected_tensors(replace(c, n_layer=1))
    per_t = len(one) - len(none)
    per_e = sum(math.prod(s) for s in one.values()) - sum(math.prod(s) for s in none.values())
    return len(none) + c.n_layer * per_t, sum(math.prod(s) for s in none.values()) + c.n_layer * per_e


LIST_SLACK = 10_000  # tensors beyond the file's count still listed, so the message can name the missing ones


def _check_sizes(store: StoredTensors, c: CheckpointConfig, where: str) -> None:
    """Refuse a config that implies far more tensors than the file(s) hold before listing them (the list
    of a config claiming 10^7 layers would take minutes and gigabytes); a near miss is left to the
    tensor-by-tensor check, whose message names what is missing."""
    n_t, n_e = implied_counts(c)
    have_t, have_e = len(store.stored_names()), store.n_stored_elements()
    if n_t > have_t + LIST_SLACK:
        raise CheckpointError(
            f"config.json ({c.n_layer:,} layers, d_model {c.d_model:,}) implies {n_t:,} tensors of {n_e:,} weights, "
            f"but {where} holds {have_t:,} tensors of {have_e:,}: config and weights do not match"
        )


def load_weights(path: Path, c: CheckpointConfig, *, lazy: bool = False):
    """Read, check and return every tensor :func:`expected_tensors` lists, as float32 (float64 if stored so).

    ``path`` is the folder's ``model.safetensors``; when it is absent, the folder's
    ``model.safetensors.index.json`` names the shards.  The file(s) are memory-mapped.  ``lazy``
    returns the :class:`StoredTensors` itself (F16/BF16 converted when a tensor is used, F32 read in
    place); otherwise a dict of arrays (F32 still in place, F16/BF16 converted once)."""
    path = Path(path)
    files = [path] if path.is_file() else weight_files(path.parent)
    where = files[0].name if len(files) == 1 else f"{len(files)} shards"
    store = StoredTensors(files)
    keys = store.stored_names()
    _check_sizes(store, c, where)
    expected = expected_tensors(c)
    if c.kind == "decoder":  # canonical (Llama-style) names -> the family's own
        from attnviz.checkpoints.decoder import stored_name

        def own(n):
            return stored_name(c, n)
    else:
        def own(n):
            return n
    probe = own(next(iter(expected)))
    prefix = next((p for p in PREFIXES if _stored_name(probe, keys, p)), None)
    if prefix is None:
        sample = ", ".join(sorted(keys)[:5]) or "no tensors at all"
        raise CheckpointError(
            f"{where} does not hold {c.model_type} weights in the Hugging Face layout: tensor "
            f"{probe!r} not found (the file has {sample}{' ...' if len(keys) > 5 else ''})"
        )
    missing = [own(n) for n in expected if _stored_name(own(n), keys, prefix) is None]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise CheckpointError(
            f"{where} lacks tensors the {c.model_type} config.json implies: {', '.join(missing[:3])}{more}"
        )
    alias = {}
    for name, shape in expected.items():
        stored = alias[name] = _stored_name(own(name), keys, prefix)
        dtype, got = store.stored_dtype(stored), store.stored_shape(stored)
        if dtype not in FLOAT_DTYPES:
            raise CheckpointError(
                f"tensor {stored!r} has dtype {dtype}; supported weight dtypes are {', '.join(FLOAT_DTYPES)}"
            )
        if got != shape:
            raise CheckpointError(
                f"tensor {stored!r} has shape {got}, but config.json implies {shape}: config and weights do not match"
            )
        if not store.check_finite(stored):
            raise CheckpointError(f"tensor {stored!r} contains NaN or infinite values")
    head = _head_name(c, keys)
    if head is not None and HEAD not in alias and store.stored_shape(head) == (c.vocab_size, c.d_model):
        alias[HEAD] = head  # a causal LM's own head: generation reads it (tied models use the embedding)
        bias = HEAD.replace(".weight", ".bias")
        if (c.kind == "decoder" and c.decoder.head_bias and bias in keys and store.stored_shape(bias) == (c.vocab_size,)
                and store.stored_dtype(bias) in FLOAT_DTYPES):
            if not store.check_finite(bias):
                raise CheckpointError(f"tensor {bias!r} contains NaN or infinite values")
            alias[bias] = bias  # Phi's head carries a bias
    store.select(alias)
    if lazy:
        return store
    # copies, not views into the memory map: a file shortened on disk later must not take the process down
    # with SIGBUS at the next pass (these families' weights are small; the lazy store re-checks its file instead)
    return {name: np.array(store[name], order="C", copy=True) for name in alias}
