"""A checkpoint file shortened on disk after it was loaded (copied over, truncated) must not kill the process
with SIGBUS at the next pass: the families loaded whole (GPT-2, BERT, ViT) hold copies of their weights, so the
pass still runs on what was loaded. Run in a child process, where a SIGBUS would show as the exit status."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "checkpoints"

SCRIPT = """
import os, sys
import numpy as np
from attnviz.checkpoints import load_checkpoint, run_text
folder = sys.argv[1]
ckpt = load_checkpoint(folder)
first = run_text(ckpt, "the river bank")
os.truncate(os.path.join(folder, "model.safetensors"), 200)
again = run_text(ckpt, "the river bank")
assert np.array_equal(first.attentions, again.attentions)
print("ok")
"""


@pytest.mark.parametrize("name", ["tiny_gpt2", "tiny_roberta"])
def test_a_file_truncated_after_loading_is_no_signal(tmp_path, name):
    folder = tmp_path / name
    shutil.copytree(DATA / name, folder)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(folder)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip().endswith("ok")
