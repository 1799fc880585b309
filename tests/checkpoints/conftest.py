"""Shared fixtures of the checkpoint tests: the committed tiny checkpoints and golden outputs, and the
installed all-MiniLM-L6-v2 loaded (its folder: ``minilm_folder`` in tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ckpt_helpers import TINY

from attnviz.checkpoints import load_checkpoint


@pytest.fixture(scope="session")
def minilm(minilm_folder):
    return load_checkpoint(minilm_folder, name="all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def tiny():
    """kind -> loaded tiny checkpoint."""
    return {k: load_checkpoint(p) for k, p in TINY.items()}


@pytest.fixture
def tiny_copy(tmp_path):
    """Copy a committed tiny checkpoint into tmp_path so a test can damage it."""

    def make(kind: str) -> Path:
        dst = tmp_path / f"tiny_{kind}"
        shutil.copytree(TINY[kind], dst)
        return dst

    return make
