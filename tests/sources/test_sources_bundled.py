"""The bundled resources are reproducible: the vocabulary from tools/train_tokenizer.py and its
corpus, the demo images from tools/make_demo_images.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from attnviz.resources_path import resource_path
from attnviz.sources.errors import SourceError
from attnviz.sources.image import BUNDLED_IMAGES, bundled_image, load_image, patchify

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(f"attnviz_tool_{name}", TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_training_reproduces_the_shipped_vocabulary():
    train = _tool("train_tokenizer")
    fresh = train.to_json(train.train())
    shipped = resource_path("tokenizer", "tokenizer.json").read_text(encoding="utf-8")
    assert json.loads(fresh)["model"]["vocab"] == json.loads(shipped)["model"]["vocab"]
    assert json.loads(fresh)["model"]["merges"] == json.loads(shipped)["model"]["merges"]
    assert fresh == shipped


@pytest.mark.slow
def test_training_check_mode_reports_a_difference(tmp_path):
    train = _tool("train_tokenizer")
    other = tmp_path / "tokenizer.json"
    other.write_text("{}", encoding="utf-8")
    assert train.main(["--output", str(other), "--check"]) == 1
    assert train.main(["--output", str(other)]) == 0
    assert train.main(["--output", str(other), "--check"]) == 0


def test_special_tokens_come_first():
    train = _tool("train_tokenizer")
    vocab = json.loads(resource_path("tokenizer", "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    assert [vocab[s] for s in train.SPECIAL_TOKENS] == list(range(len(train.SPECIAL_TOKENS)))


def test_corpus_holds_the_demo_phrases():
    corpus = resource_path("tokenizer", "corpus.txt").read_text(encoding="utf-8")
    for phrase in ("by the river bank", "at the savings bank", "I love you", "je t' aime"):
        assert phrase in corpus
    assert len(corpus.encode("utf-8")) > 30_000


@pytest.mark.parametrize("name", BUNDLED_IMAGES)
def test_demo_images_are_reproduced_exactly(name):
    make = _tool("make_demo_images")
    assert make.png_bytes(make.IMAGES[name]()) == bundled_image(name).read_bytes()


def test_demo_images_cut_into_patches():
    river = load_image(bundled_image("river-scene.png"))
    harbour = load_image(bundled_image("harbour-wide.png"))
    assert river.shape == (224, 224, 3) and harbour.shape == (192, 320, 3)
    assert patchify(river, 16).grid == (14, 14)
    assert patchify(harbour, 16).grid == (12, 20)
    assert len(np.unique(river.reshape(-1, 3), axis=0)) > 20  # a picture, not a flat colour


def test_unknown_bundled_image():
    with pytest.raises(SourceError, match="river-scene.png"):
        bundled_image("cat.png")
