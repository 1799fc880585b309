"""Real pretrained checkpoints from local Hugging Face-format folders, run in numpy, every layer and head.

Qt-free; imports only :mod:`attnviz.engine` (attention) and :mod:`attnviz.sources` (tokenizers).
Nothing is downloaded: a checkpoint is a folder with ``config.json``, ``model.safetensors`` and
``tokenizer.json`` (BERT family, RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT, GPT-2) or
``preprocessor_config.json`` (ViT, DeiT, CLIP vision, DINOv2; see :mod:`.families`, :mod:`.encoders`,
:mod:`.vision`, :mod:`.interpolate`).

Public API::

    load_checkpoint(folder, name=None) -> Checkpoint        # .config, .weights, .tokenizer / .image, .kind
    ready_models() -> list[(name, folder)]                  # installed ready checkpoints (all-MiniLM-L6-v2)
    run_text(ckpt, text, *, dtype=np.float32, kernel="reference") -> ModelAttention
    run_image(ckpt, rgb_uint8, *, dtype=np.float32, kernel="reference") -> ModelAttention
        ModelAttention: tokens, labels, special (T,), attentions (L, nh, T, T), hidden (T, d),
                        ids, spans (text); grid (gh, gw), n_extra_tokens, pixels (ViT)
    head_summaries(attentions, tokens=None, special=None) -> HeadSummaries   # each field (L, nh)
    attention_rollout(attentions, head_fusion="mean", discard_ratio=0.0, grid=None, n_extra=1) -> Rollout
        Rollout: matrix (T, T), cls_map (gh, gw) divided by its max
    cls_attention_maps(attentions, layer, grid, n_extra=1) -> (nh, gh, gw)
    CheckpointError(ValueError)                              # every load / run problem, message says what
    run_decoder(ckpt, text, *, mode="auto") -> DecoderAttention   # decoder LLMs, any length up to the context:
        head_map / cells / overview (layer, head), summaries() (+ to_first, distance), kv_head(head)
    find_checkpoints(folders) / resolve(text)                # ready models, folders, the local Hugging Face cache

Decoder LLMs (Llama, Mistral, Qwen2, Qwen3) keep their weights memory-mapped (BF16 and F16
converted to float32 per tensor when used, sharded files through model.safetensors.index.json) and
match transformers' eager attention to 1e-5 (tests/checkpoints/test_ckpt_decoder_golden.py).

Precision: the forward pass runs in float32 by default (the stored precision, and what transformers
computes in), float64 on request; attention weights come from the engine's float64 reference kernel
unless another kernel that returns weights is chosen.  Weights stay as stored (float32) and are
converted one tensor at a time in a float64 pass, so it never holds a float64 copy of the model.
Against transformers (torch CPU, eager
attention) every layer and head of all-MiniLM-L6-v2 and of a tiny checkpoint of every family
matches to 1e-5 (tests/checkpoints).
"""

from attnviz.checkpoints.analysis import (
    HeadSummaries,
    Rollout,
    attention_rollout,
    cls_attention_maps,
    head_summaries,
)
from attnviz.checkpoints.config import ImageConfig, ModelConfig
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.loader import Checkpoint, load_checkpoint, ready_models
from attnviz.checkpoints.run import ModelAttention, run_image, run_text
from attnviz.checkpoints.decoder_run import DecoderAttention, run_decoder  # noqa: E402  (after run: it imports loader)
from attnviz.checkpoints.hub_cache import find_checkpoints, resolve  # noqa: E402

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "DecoderAttention",
    "HeadSummaries",
    "ImageConfig",
    "ModelAttention",
    "ModelConfig",
    "Rollout",
    "attention_rollout",
    "cls_attention_maps",
    "find_checkpoints",
    "head_summaries",
    "load_checkpoint",
    "ready_models",
    "resolve",
    "run_decoder",
    "run_image",
    "run_text",
]
