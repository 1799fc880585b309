"""Real pretrained checkpoints from local Hugging Face-format folders, run in numpy, every layer and head.

Nothing is downloaded. Matches transformers' eager attention to 1e-5 for every family
(tests/checkpoints); precision rules in :mod:`.forward`. Public API::

    load_checkpoint(folder, name=None) -> Checkpoint; CheckpointError(ValueError) for every problem
    run_text / run_image(ckpt, input, *, dtype=np.float32, kernel="auto") -> ModelAttention
    run_decoder(ckpt, text, *, mode="auto") -> DecoderAttention   # Llama/Mistral/Qwen, memory-mapped
    run_seq2seq(ckpt, source, target) -> Seq2SeqAttention         # MarianMT, BART, mBART, T5, teacher-forced
    generate_seq2seq(ckpt, source) -> Seq2SeqGeneration           # their greedy translation and its maps
    head_summaries / attention_rollout / cls_attention_maps      # see :mod:`.analysis`
    ready_models() / find_checkpoints(folders) / resolve(text)   # ready models, folders, HF cache
"""

from attnviz.checkpoints.analysis import (
    HeadSummaries,
    Rollout,
    attention_rollout,
    cls_attention_maps,
    head_summaries,
)
from attnviz.checkpoints.config import ImageConfig
from attnviz.checkpoints.model_config import CheckpointConfig
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.loader import Checkpoint, load_checkpoint, ready_models
from attnviz.checkpoints.run import ModelAttention, run_image, run_text
from attnviz.checkpoints.decoder_run import DecoderAttention, run_decoder  # noqa: E402  (after run: it imports loader)
from attnviz.checkpoints.hub_cache import find_checkpoints, resolve  # noqa: E402
from attnviz.checkpoints.seq2seq_run import Seq2SeqAttention, Seq2SeqCheckpoint, run_seq2seq  # noqa: E402
from attnviz.checkpoints.seq2seq_generate import Seq2SeqGeneration, generate_seq2seq  # noqa: E402

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "DecoderAttention",
    "HeadSummaries",
    "ImageConfig",
    "ModelAttention",
    "CheckpointConfig",
    "Rollout",
    "Seq2SeqAttention",
    "Seq2SeqCheckpoint",
    "Seq2SeqGeneration",
    "attention_rollout",
    "cls_attention_maps",
    "find_checkpoints",
    "generate_seq2seq",
    "head_summaries",
    "load_checkpoint",
    "ready_models",
    "resolve",
    "run_decoder",
    "run_image",
    "run_seq2seq",
    "run_text",
]
