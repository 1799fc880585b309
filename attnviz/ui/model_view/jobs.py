"""How the model view's worker jobs (checkpoint loads, forward passes, long-map overviews) report
problems: one a person can cause passes on as its message (``LatestJob(expected=EXPECTED, ...)``)."""

from __future__ import annotations

from attnviz.checkpoints import CheckpointError
from attnviz.sources.errors import SourceError

# problems a person can cause with a checkpoint or an input: passed on as their message
EXPECTED = (CheckpointError, SourceError, ValueError, OSError)
MEMORY_MESSAGE = "not enough memory for this model and input"
