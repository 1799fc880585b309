"""Files a person hands the window, turned into token sources without Qt: which kind a file is (by its
extension), the open dialog's filters, a new source's unique name and palette colour, an image's default patch
grid, and the readers that refuse a folder, a FIFO or device, a file too large, or bytes that are not what they
claim, each with one :class:`~attnviz.sources.errors.SourceError` line. The File menu and the drop area
(:mod:`attnviz.ui.file_actions`) and the Inputs panel's editors call these."""

from __future__ import annotations

from pathlib import Path

from attnviz.model.state import PALETTE, CustomSource, ImageSource, SessionState, TextSource
from attnviz.sources.errors import SourceError

SESSION_SUFFIX = ".attnviz"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
TEXT_SUFFIXES = (".txt", ".md", ".text")
VALUES_SUFFIXES = (".npy", ".csv")
SESSION_FILTER = "attnviz sessions (*.attnviz)"
IMAGE_FILTER = "Images (" + " ".join(f"*{s}" for s in IMAGE_SUFFIXES) + ")"
TEXT_FILTER = "Text files (" + " ".join(f"*{s}" for s in TEXT_SUFFIXES) + ")"
VALUES_FILTER = "Token values (*.npy *.csv)"
OPEN_FILTER = ";;".join(["All supported (*.attnviz " + " ".join(f"*{s}" for s in
                                                                 IMAGE_SUFFIXES + TEXT_SUFFIXES + VALUES_SUFFIXES)
                         + ")", SESSION_FILTER, IMAGE_FILTER, TEXT_FILTER, VALUES_FILTER])
MAX_TEXT_BYTES = 2 * 2**20  # a text source beyond 2 MiB would exceed the token limit many times over
MAX_IMAGE_BYTES = 64 * 2**20  # larger files are not photos a person means to cut into patches
IMAGE_SIDE = 224  # a dropped image is resized so its longer side is about this (ViT's input size)



def classify(path) -> str | None:
    """"session", "image", "text", "values" or None, from the file's extension."""
    suffix = Path(path).suffix.lower()
    if suffix == SESSION_SUFFIX:
        return "session"
    if suffix in IMAGE_SUFFIXES:
        return "image"
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix in VALUES_SUFFIXES:
        return "values"
    return None


def unique_name(state: SessionState, base: str) -> str:
    """``base``, or ``base 2``, ``base 3`` ... whichever no source of ``state`` uses."""
    base = (base or "source").strip()[:60] or "source"
    names = {s.name for s in state.sources}
    if base not in names:
        return base
    i = 2
    while f"{base} {i}" in names:
        i += 1
    return f"{base} {i}"


def next_colour(state: SessionState) -> str:
    """The first palette colour no source uses (cycling when all are taken)."""
    used = {s.color.lower() for s in state.sources}
    for c in PALETTE:
        if c not in used:
            return c
    return PALETTE[len(state.sources) % len(PALETTE)]


def default_target(height: int, width: int, patch: int, side: int = IMAGE_SIDE) -> tuple[int, int]:
    """(H, W), multiples of ``patch``, keeping the aspect ratio with the longer side near ``side``
    (never upscaling beyond the image's own size rounded to a patch)."""
    s = min(1.0, side / max(height, width))
    H = max(patch, int(round(height * s / patch)) * patch)
    W = max(patch, int(round(width * s / patch)) * patch)
    return H, W


def _read(path, limit: int, what: str) -> bytes:
    p = Path(path)
    if p.is_dir():
        raise SourceError(f"{p} is a folder, not {what}")
    if p.exists() and not p.is_file():  # a FIFO, a device or a socket: reading it could block or never end
        raise SourceError(f"{p} is not a regular file, not {what}")
    try:
        size = p.stat().st_size
        if size > limit:
            raise SourceError(f"{p.name} is {size / 2**20:.0f} MiB; {what} may be at most {limit // 2**20} MiB")
        return p.read_bytes()
    except FileNotFoundError:
        raise SourceError(f"file not found: {p}") from None
    except OSError as exc:
        raise SourceError(f"cannot read {p}: {exc.strerror or exc}") from None


def image_source_from_bytes(state: SessionState, data: bytes, name: str, patch: int = 16) -> ImageSource:
    """A new image source for ``data`` (checked by decoding it), sized for a readable patch grid."""
    from attnviz.sources.image import load_image

    rgb = load_image(data)  # SourceError for anything that is not a readable image
    target = default_target(rgb.shape[0], rgb.shape[1], patch)
    return ImageSource(unique_name(state, name), next_colour(state), data, patch=patch, policy="resize",
                       target=target, class_token=True)


def image_source_from_file(state: SessionState, path) -> ImageSource:
    return image_source_from_bytes(state, _read(path, MAX_IMAGE_BYTES, "an image"), Path(path).stem)


def text_source_from_file(state: SessionState, path) -> TextSource:
    data = _read(path, MAX_TEXT_BYTES, "a text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SourceError(f"{Path(path).name} is not UTF-8 text") from None
    return TextSource(unique_name(state, Path(path).stem), next_colour(state), text)


def block_source_from_file(state: SessionState, path) -> CustomSource:
    from attnviz.sources.custom import load_block_values

    values = load_block_values(path, state.model.d_model)  # (count, d_model)
    return CustomSource(unique_name(state, Path(path).stem), next_colour(state), count=int(values.shape[0]),
                        generator="file", values=values)
