"""``attnviz --model DIR --image PATH --prompt TEXT --option NAME=VALUE``: a checkpoint opened in the Pretrained
workspace at start-up with its input (what the documentation's screenshot of a vision-language model uses)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

pytest.importorskip("PySide6")

from PIL import Image  # noqa: E402

from attnviz.app_start import build_parser, check_model_options as check  # noqa: E402
from attnviz.ui.model_view.cli_options import apply  # noqa: E402
from vlm_samples import fake_checkpoint, picture  # noqa: E402


def test_the_options_parse_and_are_checked(tmp_path):
    png = tmp_path / "cup.png"
    Image.fromarray(picture()).save(png)
    args = build_parser().parse_args(["--model", "some/folder", "--image", str(png), "--image", str(png),
                                      "--prompt", "USER: <image>\\nWhat? ASSISTANT:", "--option", "suffix=a cup"])
    assert args.model == "some/folder" and args.image == [str(png)] * 2 and args.option == ["suffix=a cup"]
    assert check(args) is None
    assert "go with --model" in check(build_parser().parse_args(["--prompt", "hi"]))
    bad = build_parser().parse_args(["--model", "m", "--option", "suffix"])
    assert "NAME=VALUE" in check(bad)
    assert "no such file" in check(build_parser().parse_args(["--model", "m", "--image", str(tmp_path / "nope.png")]))


def test_the_model_opens_with_its_image_prompt_and_options(make_window, qtbot, tmp_path):
    png = tmp_path / "cup.png"
    Image.fromarray(picture(40, 40)).save(png)
    w = make_window("river-bank", all_panels=True)
    panel = w.panel("pretrained")
    calls = []
    ckpt = fake_checkpoint("paligemma", calls=calls)
    panel.study.load_job = lambda folder, name: (lambda: ckpt)
    args = argparse.Namespace(model="/nonexistent/tiny_paligemma", image=[str(png)], prompt="answer en\\nwhat is it?",
                              option=["suffix=a red cup"], workspace=None)
    with qtbot.waitSignal(panel.attention_ready, timeout=30000):
        apply(w, args)
    assert w.workspace == "pretrained" and not panel.auto_load
    images, text, options = calls[-1]
    assert text == "answer en\nwhat is it?" and options == {"suffix": "a red cup"}
    np.testing.assert_array_equal(images[0], picture(40, 40))
    assert panel.vlm_inputs.image_combo.currentText() == "file: cup.png"
    assert panel.vlm_inputs.fields["suffix"].text() == "a red cup"


def test_an_option_the_model_does_not_take_is_said(make_window, qtbot):
    w = make_window("river-bank", all_panels=True)
    panel = w.panel("pretrained")
    ckpt = fake_checkpoint("llava")
    panel.study.load_job = lambda folder, name: (lambda: ckpt)
    args = argparse.Namespace(model="/nonexistent/tiny_llava", image=None, prompt=None, option=["suffix=x"],
                              workspace="pretrained")
    with qtbot.waitSignal(panel.attention_ready, timeout=30000):
        apply(w, args)
    assert "takes no 'suffix'" in panel.message_text()
