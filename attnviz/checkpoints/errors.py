"""The one error type of the checkpoints layer.

Every problem with a checkpoint folder (missing or unreadable file, unsupported architecture, a
tensor that is missing, mis-shaped or not finite, a corrupt or hostile ``model.safetensors``) and
every bad input to a forward pass raises :class:`CheckpointError`, whose message names what is
wrong and, where it helps, what is supported.
"""

from __future__ import annotations


class CheckpointError(ValueError):
    """A checkpoint could not be loaded or run; the message says why and what would work."""
