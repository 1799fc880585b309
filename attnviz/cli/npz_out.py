"""Writing a command's arrays to a .npz file, with a clear message when the path cannot be written."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnviz.cli import CliError


def write_npz(path: Path, out: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            np.savez(fh, **out)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc}") from None
