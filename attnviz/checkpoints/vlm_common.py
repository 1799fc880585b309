"""What every vision-language family reads the same way: its processor's settings (``processor_config.json``
with the image processor inside it, as transformers 5 saves them, or the older ``preprocessor_config.json``
beside it), its language model's tokenizer with BOS/EOS, and a sub-config of ``config.json``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnviz.checkpoints.config import read_json
from attnviz.checkpoints.decoder_text import SpecialTokens, read_special
from attnviz.checkpoints.errors import CheckpointError
from attnviz.sources.errors import SourceError
from attnviz.sources.text import BpeTokenizer


def sub_config(cfg: dict, key: str, what: str) -> dict:
    """``cfg[key]``, which must be a JSON object (``vision_config``, ``text_config``)."""
    sub = cfg.get(key)
    if not isinstance(sub, dict):
        raise CheckpointError(f"config.json: {key!r} must be a JSON object describing the {what} "
                              f"(got {type(sub).__name__})")
    return sub


def read_processor(folder: Path) -> tuple[dict, dict]:
    """(processor settings, image processor settings) of a multimodal folder.

    transformers 5 writes one ``processor_config.json`` holding ``image_processor``; older folders keep
    the image processor in ``preprocessor_config.json`` and the processor's own keys (patch size, image
    token) in ``processor_config.json`` (which may be absent)."""
    proc: dict = {}
    if (folder / "processor_config.json").is_file():
        proc = read_json(folder / "processor_config.json", "the processor config")
    image = proc.get("image_processor")
    if image is None and (folder / "preprocessor_config.json").is_file():
        image = read_json(folder / "preprocessor_config.json", "the image processor config")
    if image is None:
        raise CheckpointError(f"{folder}: no image processor settings (neither 'image_processor' in "
                              "processor_config.json nor preprocessor_config.json)")
    if not isinstance(image, dict):
        raise CheckpointError("processor_config.json: 'image_processor' must be a JSON object")
    return proc, image


def read_bpe(folder: Path, name: str, what: str = "a vision-language model") -> BpeTokenizer:
    """The folder's tokenizer.json; ``what`` names the model in the message when it is missing."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise CheckpointError(f"the tokenizer is missing: {path} not found ({what} needs tokenizer.json)")
    try:
        return BpeTokenizer.from_file(path, name=name)
    except SourceError as exc:
        raise CheckpointError(str(exc)) from None


def read_tokenizer(folder: Path, name: str, text_model_type: str) -> tuple[BpeTokenizer, SpecialTokens]:
    """The language model's tokenizer.json and its BOS/EOS settings."""
    tok = read_bpe(folder, name)
    return tok, read_special(folder, tok, text_model_type)


def token_id(tok: BpeTokenizer, text: str, what: str) -> int:
    """The id of a special token the processor writes (``<image>``); refused when the tokenizer lacks it."""
    tid = tok.token_to_id(text)
    if tid is None:
        raise CheckpointError(f"tokenizer.json has no {what} token {text!r}, which the processor writes")
    return int(tid)


def check_ids(ids: np.ndarray, vocab_size: int) -> None:
    if ids.size and int(ids.max()) >= vocab_size:
        raise CheckpointError(f"token id {int(ids.max())} is outside the language model's {vocab_size}-row "
                              "embedding table: tokenizer and weights do not belong together")


def image_labels(grid: tuple[int, int], prefix: str = "img") -> list[str]:
    """'img r,c' for a row-major (gh, gw) grid of image tokens."""
    gh, gw = grid
    return [f"{prefix} {r},{c}" for r in range(gh) for c in range(gw)]


def text_segment_names(is_image: np.ndarray, image_name: str = "image") -> list[str]:
    """(T,) segment name per token: image tokens ``image_name``; the runs of text between them "text" when
    there is one run, else "text 1", "text 2" ... in order."""
    names: list[str] = []
    runs = 0
    prev = None
    for flag in np.asarray(is_image, dtype=bool):
        if not flag and prev is not False:
            runs += 1
        names.append(image_name if flag else f"text {runs}")
        prev = bool(flag)
    if runs == 1:
        names = [n if n == image_name else "text" for n in names]
    return names
