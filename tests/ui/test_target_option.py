"""``attnviz MODEL --text SOURCE --target TARGET``: the window's option parsing (a checkpoint folder given as the
file is the model, --text is --prompt, a model that reads no target is one line before any window), and the
window it opens: the encoder-decoder teacher-forced on that target, as run_seq2seq runs it, also through
``--workspace pretrained --screenshot`` at 1024 x 700."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")

from attnviz.checkpoints import load_checkpoint, run_seq2seq  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.session import Session  # noqa: E402
from attnviz.ui.app import _check_window_options, build_parser, main  # noqa: E402
from attnviz.ui.context import AppContext  # noqa: E402
from attnviz.ui.model_view.cli_options import apply  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
MARIAN, LLAMA, WHISPER = DATA / "tiny_marian", DATA / "checkpoints" / "tiny_llama_lm", DATA / "checkpoints" / "tiny_whisper"
WAIT_MS = 60000


def parsed(*argv):
    args = build_parser().parse_args([str(a) for a in argv])
    return args, _check_window_options(args)


def marian_texts():
    with np.load(MARIAN / "golden.npz") as g:
        return str(g["source"]), str(g["target"]), g["decoder_input_ids"]


def test_a_checkpoint_folder_with_text_and_target_is_the_model_its_source_and_target():
    args, problem = parsed(MARIAN, "--text", "I love you", "--target", "je t' aime")
    assert problem is None
    assert args.model == str(MARIAN) and args.file is None
    assert args.prompt == "I love you" and args.target == "je t' aime"
    args, problem = parsed("--model", MARIAN, "--prompt", "I love you", "--target", "")
    assert problem is None and args.target == "" and args.prompt == "I love you"


@pytest.mark.parametrize("argv, words", [
    ((LLAMA, "--text", "hello", "--target", "bonjour"), ("--target", "tiny_llama_lm", "llama", "encoder-decoders")),
    (("--target", "bonjour"), ("--target", "--model")),
    ((MARIAN, "--model", LLAMA, "--target", "x"), ("checkpoint folder", "give one model")),
])
def test_bad_target_options_are_one_line(argv, words):
    _args, problem = parsed(*argv)
    assert problem is not None and "\n" not in problem
    for word in words:
        assert word in problem


def test_a_decoder_given_a_target_exits_with_one_line_before_any_window(capsys):
    code = main([str(LLAMA), "--text", "hello", "--target", "bonjour", "--screenshot", "never.png"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("attnviz: --target: tiny_llama_lm is a llama model, which reads no target")
    assert not os.path.exists("never.png")


def test_whisper_takes_a_target():
    _args, problem = parsed(WHISPER, "--target", "hello")
    assert problem is None


def test_the_window_opens_the_encoder_decoder_teacher_forced_on_the_target(qtbot, tmp_path):
    from attnviz.ui.main_window import MainWindow
    from attnviz.ui.settings import AppSettings

    source, target, decoder_ids = marian_texts()
    args, problem = parsed(MARIAN, "--text", source, "--target", target)
    assert problem is None
    ctx = AppContext(Session(build_demo("river-bank")))
    window = MainWindow(ctx, settings=AppSettings(tmp_path / "settings.ini"), autosave=None)
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    try:
        panel = window.panel("pretrained")
        with qtbot.waitSignal(panel.seq2seq_ready, timeout=WAIT_MS) as blocker:
            apply(window, args)
        out = blocker.args[0]
        assert window.workspace == "pretrained"
        assert not out.generated and out.text == target
        np.testing.assert_array_equal(out.result.decoder_ids, decoder_ids)  # the start token, then the target's
        ref = run_seq2seq(load_checkpoint(MARIAN), source, target)
        np.testing.assert_array_equal(out.result.cross_attentions, ref.cross_attentions)
        assert panel.text_edit.text() == source and panel.seq2seq.target_edit.text() == target
        assert "teacher-forced on the target" in panel.describe.text()
    finally:
        window.stop_workers()
        ctx.compute.shutdown(timeout=5)


def test_the_screenshot_of_a_teacher_forced_run_is_written_at_1024x700(tmp_path):
    from PIL import Image

    source, target, _ids = marian_texts()
    out = tmp_path / "marian.png"
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    code = ("import sys\nfrom attnviz.ui.app import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(MARIAN), "--text", source, "--target", target,
                           "--workspace", "pretrained", "--size", "1024x700", "--screenshot", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with Image.open(out) as im:
        assert im.size == (1024, 700)


def test_whisper_in_the_window_aligns_the_given_transcript(qtbot, tmp_path):
    from attnviz.ui.main_window import MainWindow
    from attnviz.ui.settings import AppSettings

    args, problem = parsed(WHISPER, "--target", "hello world")
    assert problem is None
    ctx = AppContext(Session(build_demo("river-bank")))
    window = MainWindow(ctx, settings=AppSettings(tmp_path / "settings.ini"), autosave=None)
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    try:
        panel = window.panel("pretrained")
        with qtbot.waitSignal(panel.audio.outcome_ready, timeout=WAIT_MS) as blocker:
            apply(window, args)
        assert blocker.args[0].text == "hello world" and panel.audio.target_edit.text() == "hello world"
    finally:
        window.stop_workers()
        ctx.compute.shutdown(timeout=5)
