"""attnviz-cli model inspect on encoder-decoders: --text the source, --target teacher-forced; the five
arrays written equal the library's pass; flags for other families refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnviz.checkpoints import load_checkpoint
from attnviz.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("name", ["tiny_marian", "tiny_bart", "tiny_t5"])
def test_inspect_writes_encoder_decoder_and_cross_maps(tmp_path, capsys, name):
    out = tmp_path / "s.npz"
    assert main(["model", "inspect", str(DATA / name), "--text", "I love you", "--target", "je t'aime",
                 "--npz", str(out)]) == 0
    want = load_checkpoint(DATA / name).run("I love you", "je t'aime")
    with np.load(out) as z:
        for key in ("encoder_ids", "decoder_ids", "encoder_attentions", "decoder_attentions", "cross_attentions"):
            np.testing.assert_array_equal(z[key], getattr(want, key))
        L, nh, Td, Te = z["cross_attentions"].shape
        assert (Td, Te) == (len(z["decoder_ids"]), len(z["encoder_ids"]))
        np.testing.assert_allclose(z["cross_attentions"].sum(-1), 1.0, atol=1e-5)
    assert "cross_attentions" in capsys.readouterr().out


def test_flags_of_other_families_are_refused(tmp_path, capsys):
    npz = str(tmp_path / "x.npz")
    for argv, message in (
        (["model", "inspect", str(DATA / "tiny_marian"), "--text", "hi", "--chat", "--npz", npz], "--chat is for decoder"),
        (["model", "inspect", str(DATA / "tiny_marian"), "--image", "x.png", "--npz", npz], "encoder-decoder"),
        (["model", "inspect", str(DATA / "checkpoints" / "tiny_llama"), "--text", "hi", "--target", "x", "--npz", npz],
         "--target is for encoder-decoders"),
    ):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


def test_model_list_names_the_encoder_decoders_as_supported(capsys):
    assert main(["model", "list", str(DATA / "tiny_marian"), str(DATA / "tiny_t5")]) == 0
    out = capsys.readouterr().out
    assert "tiny_marian\tMarianMT" in out and "tiny_t5\tT5" in out and "(not supported)" not in out
