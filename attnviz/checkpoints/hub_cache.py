"""Checkpoints already on this machine: the ready models, folders given, and the local Hugging Face cache.

The hub cache is scanned by huggingface_hub (``scan_cache_dir``), which reads every file under a repo's
``refs/`` whole and blocking; so those are looked at first (:func:`_refs_safe`), and a cache holding a ref
that is not a small regular file (a FIFO, a link to ``/dev/zero``, a huge file) is scanned here instead,
folder by folder, with each ``refs/main`` read bounded. Only files already present are read, and
of the weights only the safetensors headers (:func:`describe_folder` gives family, size and dtype without
loading anything); nothing is downloaded here (:mod:`attnviz.checkpoints.hub_fetch` does, when asked).
:func:`resolve` turns a folder, a ready model's name or a cached repo id ``ORG/NAME`` into a folder.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from attnviz.checkpoints.config import read_json
from attnviz.checkpoints.decoder_config import FAMILY as DECODER_FAMILY
from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.loader import ready_models
from attnviz.checkpoints.safetensors_file import read_header, weight_files

FAMILIES = {"bert": "BERT", "gpt2": "GPT-2", "vit": "ViT", "deit": "DeiT", "llama": "Llama", "mistral": "Mistral",
            "qwen2": "Qwen2", "qwen3": "Qwen3", "roberta": "RoBERTa", "xlm-roberta": "XLM-RoBERTa",
            "electra": "ELECTRA", "distilbert": "DistilBERT", "clip": "CLIP", "clip_vision_model": "CLIP vision",
            "dinov2": "DINOv2", "gemma": "Gemma", "gemma2": "Gemma 2", "gemma3_text": "Gemma 3"}
FAMILIES |= {"albert": "ALBERT", "mpnet": "MPNet", "deberta": "DeBERTa", "deberta-v2": "DeBERTa v2 / v3",
             "dinov2_with_registers": "DINOv2 with registers", "beit": "BEiT", "swin": "Swin"}
FAMILIES |= {t: name for t, name in DECODER_FAMILY.items() if t not in FAMILIES}  # GPT-NeoX, Phi, OLMo, ...


def cache_dir() -> Path:
    """The Hugging Face hub cache folder this machine's settings name (it may not exist).

    huggingface_hub's rule (its ``constants.HF_HUB_CACHE``): ``HF_HUB_CACHE`` (or the older
    ``HUGGINGFACE_HUB_CACHE``), else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub`` or
    ``~/.cache/huggingface/hub``, with ``~`` and ``$VARS`` expanded. The library reads the environment once,
    when it is imported; this reads it at each call, so a setting made later counts too (the tests check
    both give the same folder).
    """
    env = os.environ

    def expand(v: str) -> Path:
        return Path(os.path.expandvars(os.path.expanduser(v)))

    hub = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if hub:
        return expand(hub)
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    return expand(home) / "hub"


@dataclass(frozen=True)
class FoundCheckpoint:
    """One checkpoint found on disk, described from its config and weight headers only."""

    name: str  # ready model name, repo id ORG/NAME, or the folder's name
    folder: Path
    origin: str  # "ready" | "cache" | "folder"
    family: str  # "Llama", "BERT", ... or the config's model_type when attnviz does not run it
    supported: bool  # whether load_checkpoint accepts this model_type
    n_params: int  # weights in the safetensors file(s), 0 when unknown
    dtype: str  # "bf16", "f32", "bf16+f32", "" when unknown
    note: str = ""  # what is missing or unreadable, "" when none

    def line(self) -> str:
        """One tab-separated line for ``model list``."""
        size = f"{self.n_params / 1e9:.2f} B" if self.n_params >= 1e9 else (
            f"{self.n_params / 1e6:.1f} M" if self.n_params >= 1e6 else f"{self.n_params:,}")
        state = "" if self.supported and not self.note else f"\t({self.note or 'not supported'})"
        return f"{self.name}\t{self.family}\t{size}\t{self.dtype or '?'}\t{self.folder}{state}"


def describe_folder(folder, name: str | None = None, origin: str = "folder") -> FoundCheckpoint:
    """Family, size and dtype of a checkpoint folder from config.json and the safetensors headers."""
    from attnviz.checkpoints.config import KIND_OF_MODEL_TYPE
    from attnviz.checkpoints.decoder_config import DECODER_TYPES
    from attnviz.checkpoints.seq2seq_config import NAMES as SEQ2SEQ_NAMES
    from attnviz.checkpoints.seq2seq_config import SEQ2SEQ_TYPES
    from attnviz.checkpoints.vlm_registry import FAMILIES as MULTIMODAL
    from attnviz.checkpoints.vlm_registry import NAMES as MULTIMODAL_NAMES

    folder = Path(folder)
    name = name or folder.name
    family, note, supported = "?", "", False
    try:  # read_json: a regular file of bounded size only (never /dev/zero, a FIFO or a huge file)
        cfg = read_json(folder / "config.json", "config.json")
        mt = cfg.get("model_type") or cfg.get("type")  # "type": lerobot policies
        if isinstance(mt, str):
            supported = (mt in KIND_OF_MODEL_TYPE or mt in DECODER_TYPES or mt in MULTIMODAL or mt in SEQ2SEQ_TYPES
                         or mt == "whisper")
            family = FAMILIES.get(mt) or MULTIMODAL_NAMES.get(mt) or SEQ2SEQ_NAMES.get(mt, mt)
        else:
            note = "config.json has no model_type"
    except (CheckpointError, OSError):
        note = "no readable config.json"
    n, count = 0, {}
    try:
        for f in weight_files(folder):
            entries, _ = read_header(f)
            for e in entries.values():
                k = math.prod(e.shape)
                n += k
                count[e.dtype] = count.get(e.dtype, 0) + k
    except CheckpointError as exc:
        note = note or ("no model.safetensors" if "missing" in str(exc) else "unreadable weights")
    except OSError:  # a folder that cannot be read (permissions) is listed as such, not a failure of the list
        note = note or "unreadable folder"
    dtype = "+".join(d.lower() for d in sorted(count, key=lambda d: -count[d]) if count[d] * 100 >= n)
    return FoundCheckpoint(name=name, folder=folder, origin=origin, family=family, supported=supported,
                           n_params=n, dtype=dtype, note=note)


def _usable(snaps: Path, snap: Path) -> bool:
    """A readable snapshot folder directly inside ``snaps`` (after links) with a config.json file."""
    try:
        inside = snap.resolve().parent == snaps.resolve()
        return inside and snap.is_dir() and (snap / "config.json").is_file()
    except (OSError, RuntimeError):  # unreadable, or a link loop
        return False


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


MAX_REF_BYTES = 1024  # a ref holds a 40-character commit hash; anything longer is not one
MAX_REF_ENTRIES = 10_000  # files and folders under one repo's refs/ looked at before giving up on it


def _refs_safe(repo: Path) -> bool:
    """True when everything under ``repo/refs`` is a folder or a regular file of at most
    :data:`MAX_REF_BYTES`, none a link: what huggingface_hub's scan may read whole. False for a FIFO
    (it would block), a device or a link to one (``/dev/zero`` never ends), a huge file, an unreadable
    folder or more than :data:`MAX_REF_ENTRIES` entries."""
    refs = repo / "refs"
    try:
        st = os.lstat(refs)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if stat.S_ISREG(st.st_mode):
        return True  # the library rejects the repo as corrupted without reading it
    if not stat.S_ISDIR(st.st_mode):
        return False
    seen = 0
    pending = [refs]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            return False
        for entry in entries:
            seen += 1
            if seen > MAX_REF_ENTRIES:
                return False
            try:
                est = entry.stat(follow_symlinks=False)
            except OSError:
                return False
            if stat.S_ISDIR(est.st_mode):
                pending.append(Path(entry.path))
            elif not stat.S_ISREG(est.st_mode) or est.st_size > MAX_REF_BYTES:
                return False
    return True


def read_ref(repo: Path, ref: str = "main") -> str | None:
    """The revision ``repo/refs/REF`` names, read without blocking and at most :data:`MAX_REF_BYTES`;
    None when it is missing, not a regular file (or a link), too long, or not a plain folder name."""
    try:
        fd = os.open(repo / "refs" / ref, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_REF_BYTES:
            return None
        raw = os.read(fd, MAX_REF_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        rev = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    if len(raw) > MAX_REF_BYTES or not rev or rev in (".", "..") or "/" in rev or "\\" in rev or "\0" in rev:
        return None
    return rev


def _scanned(cache: Path) -> dict[str, tuple[str, list[tuple[str, bool, float]]]] | None:
    """huggingface_hub's scan of the cache: {folder name: (repo id, [(revision, is main, last modified)])} of
    the model repos it accepts; None when the library cannot scan it (an unreadable folder) or is absent."""
    try:
        from huggingface_hub import scan_cache_dir
        from huggingface_hub.errors import CacheNotFound
    except ImportError:
        return None
    try:
        repos = [d for d in cache.iterdir() if d.name.startswith("models--")]
    except FileNotFoundError:
        return {}
    except OSError:
        return None
    if not all(_refs_safe(d) for d in repos):
        return None  # the library would block on a FIFO or read a device or a huge file whole
    try:
        info = scan_cache_dir(cache)
    except CacheNotFound:
        return {}
    except (OSError, ValueError, UnicodeDecodeError):  # unreadable entries, a file where the folder should be
        return None
    return {repo.repo_path.name: (repo.repo_id, [(r.commit_hash, "main" in r.refs, r.last_modified)
                                                 for r in repo.revisions])
            for repo in info.repos if repo.repo_type == "model"}


def _newest(snaps: Path) -> Path | None:
    """The snapshot ``refs/main`` names (read bounded) when it is usable, else the most recently modified
    usable snapshot in ``snaps``; None when there is none."""
    main = read_ref(snaps.parent)
    if main is not None and _usable(snaps, snaps / main):
        return snaps / main
    try:
        cands = [p for p in snaps.iterdir() if _usable(snaps, p)]
    except OSError:
        return None
    return max(cands, key=_mtime) if cands else None


def cached_models(cache: Path | None = None) -> list[tuple[str, Path]]:
    """(repo id, snapshot folder) of every model in the hub cache that has a config.json, by repo id.

    The repos and revisions are huggingface_hub's ``scan_cache_dir``'s; of a repo's revisions the one
    ``refs/main`` names, else the newest. Only a folder inside the repo's ``snapshots/`` counts (a snapshot
    linked elsewhere is skipped). A repo the library rejects as corrupted (a ref naming a missing revision,
    a broken blob link) or a cache it cannot read (or should not: a ref that is a FIFO, a device or huge) is
    still looked at folder by folder: the usable snapshot its ``refs/main`` names, read bounded, else its newest.
    """
    cache = cache_dir() if cache is None else Path(cache)
    scanned = _scanned(cache)
    try:
        names = sorted(d.name for d in cache.iterdir())
    except OSError:
        return []
    found = []
    for name in names:
        parts = name.split("--")
        if len(parts) < 3 or parts[0] != "models":
            continue
        snaps = cache / name / "snapshots"
        snap = None
        if scanned is not None and name in scanned:
            rid, revs = scanned[name]
            usable = [(main, modified, snaps / rev) for rev, main, modified in revs if _usable(snaps, snaps / rev)]
            snap = max(usable, key=lambda u: (u[0], u[1]))[2] if usable else None
        else:  # rejected by the library as corrupted, or not scanned at all
            rid, snap = "/".join(parts[1:]), _newest(snaps)
        if snap is not None:
            found.append((rid, snap))
    return sorted(found, key=lambda f: f[0])


def find_checkpoints(folders=(), cache: Path | None = None) -> list[FoundCheckpoint]:
    """The ready models, the folders given, then the hub cache's models, each described."""
    out = [describe_folder(f, n, "ready") for n, f in ready_models()]
    out += [describe_folder(f) for f in folders]
    out += [describe_folder(f, rid, "cache") for rid, f in cached_models(cache)]
    return out


def resolve(text: str, cache: Path | None = None) -> tuple[Path, str | None]:
    """(folder, display name) of a ready model's name, a cached repo id ORG/NAME, or a folder path."""
    for name, folder in ready_models():
        if text == name:
            return folder, name
    p = Path(text).expanduser()
    if p.exists():
        return p, None
    if text.count("/") == 1 and not text.startswith(("/", ".", "~")):
        for rid, folder in cached_models(cache):
            if rid == text:
                return folder, rid
        raise CheckpointError(
            f"{text} is neither a folder nor a model in the local Hugging Face cache ({cache or cache_dir()}); "
            f"nothing is downloaded without asking: fetch it with `attnviz-cli model fetch {text}`, or give its folder"
        )
    return p, None
