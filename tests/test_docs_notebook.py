"""The user guide's "From a notebook" section runs as written: its Python blocks and the calls it names inline
are executed with numpy arrays where a transformers model would give torch tensors (the window's process is
recorded, not started), the files it saves read back to the maps given, and its picture exists."""

from __future__ import annotations

import re
import types
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz import api

ROOT = Path(__file__).resolve().parents[1]
L, H, T = 2, 3, 6


def section() -> str:
    text = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    return text.split("## From a notebook", 1)[1].split("\n## ", 1)[0]


def softmax(rng, shape):
    x = rng.normal(size=shape)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


class Tokenizer:
    def convert_ids_to_tokens(self, ids):
        return [f"t{int(i)}" for i in ids]


class Model:
    """What a transformers model returns with output_attentions=True: a tuple of (batch, heads, T, T) per layer."""

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def __call__(self, input_ids=None, output_attentions=False, **_):
        assert output_attentions
        b = input_ids.shape[0]
        return types.SimpleNamespace(attentions=tuple(softmax(self.rng, (b, H, T, T)) for _ in range(L)),
                                     cross_attentions=tuple(softmax(self.rng, (b, H, 4, T)) for _ in range(L)))


@pytest.fixture
def launched(monkeypatch):
    started = []

    class Process:
        def __init__(self, cmd, **kwargs):
            started.append(cmd)

    monkeypatch.setattr(api.subprocess, "Popen", Process)
    return started


def test_the_notebook_section_runs_as_written(tmp_path, monkeypatch, launched):
    monkeypatch.chdir(tmp_path)
    text = section()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 2 and blocks[0].startswith("import attnviz\n")
    ns = {"model": Model(), "tokenizer": Tokenizer(), "inputs": {"input_ids": np.arange(T)[None]}}
    for i, code in enumerate(blocks):
        exec(compile(code, f"user-guide notebook block {i}", "exec"), ns)  # noqa: S102 - the guide's own code
    assert len(launched) == 1 and launched[0][1:3] == ["-m", "attnviz"]
    maps = np.stack([a[0] for a in ns["outputs"].attentions])
    shown = np.load(launched[0][3])["attentions"]
    np.testing.assert_allclose(shown, maps, atol=1e-7)
    with np.load(tmp_path / "bank.npz") as z:
        np.testing.assert_allclose(z["attentions"], maps, atol=1e-7)
        assert list(z["tokens"]) == ns["tokens"] and str(z["title"]) == "bank, layer by layer"
    with np.load(tmp_path / "long.npz") as z:
        assert z["attentions"].dtype == np.float16
    assert (tmp_path / "bank.safetensors").stat().st_size > 0

    inline = re.findall(r"`(attnviz\.show\(.*?\))`", text)
    assert len(inline) == 2
    ns["outputs"] = ns["model"](input_ids=np.arange(2 * T).reshape(2, T), output_attentions=True)
    r = eval(inline[0], ns)  # noqa: S307 - batch=1
    np.testing.assert_allclose(np.load(r.path)["attentions"], np.stack([a[1] for a in ns["outputs"].attentions]),
                               atol=1e-7)
    ns["outputs"] = ns["model"](input_ids=np.arange(T)[None], output_attentions=True)
    ns |= {"source_tokens": ns["tokens"], "target_tokens": ["s0", "s1", "s2", "s3"]}
    r = eval(inline[1], ns)  # noqa: S307 - cross-attention
    assert np.load(r.path)["attentions"].shape == (L, H, 4, T) and len(launched) == 3
    assert r.png().startswith(b"\x89PNG")


def test_the_section_has_its_pictures():
    for name in re.findall(r"\]\((images/[^)]+\.png)\)", section()):
        assert (ROOT / "docs" / name).is_file(), name
    assert "images/notebook-grid.png" in section()


def test_the_first_block_is_three_lines_after_the_import():
    block = re.findall(r"```python\n(.*?)```", section(), re.S)[0]
    lines = [ln for ln in block.splitlines() if ln.strip()]
    assert lines[0] == "import attnviz" and len(lines) == 4
