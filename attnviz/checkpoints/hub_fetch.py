"""Downloading a checkpoint from the Hugging Face Hub into the local hub cache, only when a user asks.

Only the files attnviz's loaders read are fetched (:data:`ALLOW_PATTERNS`: configs, tokenizer and processor
files, chat templates, the safetensors weights and their index, MarianMT's SentencePiece models, a lerobot
policy's normaliser), never pickled ``pytorch_model.bin``, other frameworks' weights or repo extras. The
download, its progress bars (tqdm), the cache layout, ``HF_HUB_OFFLINE`` and the token (``HF_TOKEN`` or a
stored login) are huggingface_hub's own; :func:`fetch_model` only chooses the files and turns the
library's failures into one-line :class:`~attnviz.checkpoints.errors.CheckpointError` messages.
"""

from __future__ import annotations

from pathlib import Path

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.hub_cache import cache_dir
from attnviz.checkpoints.safetensors_file import INDEX

# File names in the repo's top folder (fnmatch patterns, as huggingface_hub matches them), each with the
# reader that opens it. tests/checkpoints/test_hub_fetch.py compares them with the names the loaders open.
ALLOW_PATTERNS = (
    "config.json",  # every loader (checkpoints/config.py, vla_config.py ...)
    "generation_config.json",  # generation defaults (decoder_config.py, seq2seq_generate.py)
    "tokenizer.json",  # the tokenizers library (sources/text.py, decoder_text.py ...)
    "spm.model",  # DeBERTa v2 / v3 without tokenizer.json (spm_text.py)
    "tokenizer_config.json",  # special tokens, BOS/EOS, chat_template (decoder_text.py, decoder_chat.py)
    "special_tokens_map.json",  # special tokens a tokenizer_config leaves out (decoder_text.py)
    "preprocessor_config.json",  # image and audio preprocessing (preprocess.py, whisper_features.py ...)
    "processor_config.json",  # multimodal processors (idefics3_processor.py, paligemma_processor.py)
    "chat_template.jinja",  # a decoder's chat template (decoder_chat.py)
    "additional_chat_templates/*.jinja",  # its named templates (decoder_chat.py)
    "vocab.json", "target_vocab.json", "source.spm", "target.spm",  # MarianMT (seq2seq_text.py)
    "policy_preprocessor.json", "policy_preprocessor_*.safetensors",  # a lerobot policy's normaliser (vla_config.py)
    "model.safetensors", INDEX, "model-*-of-*.safetensors",  # the weights, or their index and shards
)


class HubOffline(CheckpointError):
    """The Hub cannot be reached (HF_HUB_OFFLINE set, or no network) and the cache does not hold the files."""


def offline_mode() -> bool:
    """Whether huggingface_hub runs offline (``HF_HUB_OFFLINE=1``, read by the library when imported)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def fetch_model(repo_id: str, revision: str | None = None, *, cache: Path | None = None,
                tqdm_class=None) -> Path:
    """Download ``repo_id`` at ``revision`` (default: main) into the hub cache; returns its snapshot folder.

    ``tqdm_class`` replaces the library's progress bars (a window's own bar; raising in ``update`` stops
    the download, as Ctrl+C does: :class:`KeyboardInterrupt` is never caught). Files already in the cache
    are not downloaded again; an interrupted download resumes. When the index names shards the patterns
    do not match, those shards are fetched by name in a second pass. Raises :class:`HubOffline` when the
    Hub cannot be reached, :class:`CheckpointError` for an unknown, private or gated repo, an unknown
    revision, a bad name or a write error.
    """
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise CheckpointError(f"{repo_id!r} is not a Hugging Face repo id (ORG/NAME)") from None
    if repo_id.count("/") != 1:
        raise CheckpointError(f"{repo_id!r} is not a Hugging Face repo id (ORG/NAME)")
    cache = cache_dir() if cache is None else Path(cache)
    folder = _download(repo_id, revision, cache, list(ALLOW_PATTERNS), tqdm_class)
    missing = _missing_shards(folder)
    if missing:
        folder = _download(repo_id, revision, cache, missing, tqdm_class)
    if not (folder / "config.json").is_file():
        raise CheckpointError(f"{repo_id} has no config.json at its top: it is not a checkpoint attnviz reads "
                              f"(fetched into {folder})")
    return folder


def _missing_shards(folder: Path) -> list[str]:
    """Shard names the weight index lists that are not in the folder (plain names only)."""
    from attnviz.checkpoints.json_file import read_json

    index = folder / INDEX
    if (folder / "model.safetensors").is_file() or not index.is_file():
        return []
    try:
        wmap = read_json(index, "the weight index").get("weight_map")
    except CheckpointError:
        return []  # the loader says what is wrong with the index
    if not isinstance(wmap, dict):
        return []
    names = {v for v in wmap.values() if isinstance(v, str) and Path(v).name == v and v.endswith(".safetensors")}
    return sorted(n for n in names if not (folder / n).is_file())


def _download(repo_id: str, revision: str | None, cache: Path, patterns: list[str], tqdm_class) -> Path:
    """One ``snapshot_download`` of the files matching ``patterns``; the library's errors as one line."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    at = f" at revision {revision}" if revision else ""
    try:
        return Path(snapshot_download(repo_id, revision=revision, cache_dir=cache, allow_patterns=patterns,
                                      tqdm_class=tqdm_class))
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as exc:
        why = ("HF_HUB_OFFLINE is set" if offline_mode() else
               "the Hugging Face Hub cannot be reached (no network?)")
        kept = "incomplete in" if "incomplete" in str(exc).lower() else "not in"
        raise HubOffline(f"offline: {why}, and {repo_id}{at} is {kept} the local cache ({cache})") from None
    except GatedRepoError:
        raise CheckpointError(f"{repo_id} is gated: accept its terms on the Hub, then set HF_TOKEN (or log in "
                              "with `hf auth login`)") from None
    except RevisionNotFoundError:
        raise CheckpointError(f"{repo_id} has no revision {revision or 'main'}") from None
    except RepositoryNotFoundError:
        raise CheckpointError(f"{repo_id} was not found on the Hub (a private repo needs HF_TOKEN)") from None
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        raise CheckpointError(f"the Hub refused {repo_id}{at}" + (f" (HTTP {status})" if status else "")) from None
    except OSError as exc:  # disk full, a cache folder that cannot be written
        raise CheckpointError(f"cannot write {repo_id} into {cache}: {exc.strerror or exc}") from None
    except Exception as exc:  # the library's transport (httpx) failing mid-download: a lost connection
        if type(exc).__module__.split(".")[0].rstrip("0123456789") not in ("httpx", "httpcore"):
            raise
        raise HubOffline(f"offline: the connection to the Hugging Face Hub failed ({type(exc).__name__}) while "
                         f"fetching {repo_id}{at}; what arrived stays in {cache} and a new fetch resumes") from None
