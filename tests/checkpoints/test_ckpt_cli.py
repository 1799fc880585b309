"""attnviz-cli model list / model inspect: files written and errors reported without tracebacks."""

from __future__ import annotations

import numpy as np
import pytest
from ckpt_helpers import DATA, TINY, golden
from PIL import Image

from attnviz.checkpoints import run_text
from attnviz.cli import main


def test_list_names_minilm(minilm_folder, capsys):
    assert main(["model", "list"]) == 0
    assert f"all-MiniLM-L6-v2\tBERT\t22.7 M\tf32\t{minilm_folder}" in capsys.readouterr().out


def test_inspect_text_writes_tokens_and_attentions(tiny, tmp_path, capsys):
    out = tmp_path / "sub" / "att.npz"
    assert main(["model", "inspect", str(TINY["gpt2"]), "--text", "the river bank", "--npz", str(out)]) == 0
    want = run_text(tiny["gpt2"], "the river bank")
    with np.load(out) as z:
        assert list(z["tokens"]) == want.tokens
        assert z["attentions"].shape == (2, 2, len(want.tokens), len(want.tokens))
        np.testing.assert_array_equal(z["attentions"], want.attentions)
        np.testing.assert_array_equal(z["ids"], want.ids)
    assert "attentions (2, 2, 3, 3)" in capsys.readouterr().out


def test_inspect_ready_model_by_name_matches_golden(minilm, tmp_path):
    g = golden(DATA / "minilm_golden.npz")
    out = tmp_path / "minilm.npz"
    assert main(["model", "inspect", "all-MiniLM-L6-v2", "--text", str(g["text"]), "--npz", str(out)]) == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["attentions"], g["attentions"], atol=1e-5, rtol=0)
        assert list(z["tokens"]) == list(g["tokens"])


def test_inspect_image(tmp_path):
    g = golden(TINY["vit"] / "golden.npz")
    png = tmp_path / "img.png"
    Image.fromarray(g["image"]).save(png)
    out = tmp_path / "vit.npz"
    assert main(["model", "inspect", str(TINY["vit"]), "--image", str(png), "--npz", str(out), "--dtype", "float64"]) == 0
    with np.load(out) as z:
        np.testing.assert_allclose(z["attentions"], g["attentions"], atol=1e-5, rtol=0)
        assert tuple(z["grid"]) == (3, 5) and int(z["n_extra_tokens"]) == 1 and z["tokens"][0] == "[CLS]"


@pytest.mark.parametrize("argv, expected", [
    (["model", "inspect", "/no/such/folder", "--text", "x", "--npz", "{out}"], "checkpoint folder not found"),
    (["model", "inspect", str(TINY["vit"]), "--text", "x", "--npz", "{out}"], "give it an image"),
    (["model", "inspect", str(TINY["vit"]), "--image", "{tmp}/missing.png", "--npz", "{out}"], "image not found"),
    (["model", "inspect", str(TINY["vit"]), "--image", "{tmp}/bad.png", "--npz", "{out}"], "cannot read image"),
    (["model", "inspect", str(TINY["gpt2"]), "--text", "x", "--npz", "{tmp}/bad.png/out.npz"], "cannot write"),
])
def test_inspect_errors_are_one_line(tmp_path, capsys, argv, expected):
    (tmp_path / "bad.png").write_bytes(b"not a png at all")
    argv = [a.format(out=tmp_path / "o.npz", tmp=tmp_path) for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.npz").exists()


def test_text_and_image_together_only_for_vision_language_models(tmp_path, capsys):
    img = tmp_path / "y.png"
    Image.new("RGB", (8, 8)).save(img)
    code = main(["model", "inspect", str(TINY["vit"]), "--text", "x", "--image", str(img), "--npz", str(tmp_path / "o.npz")])
    assert code == 1
    assert "give --text or --image, not both" in capsys.readouterr().err
    assert not (tmp_path / "o.npz").exists()
