"""``model ablate`` on Swin (attnviz.cli.model_intervene_swin.cmd_swin): the .npz holds the library's passes (the
pooled output, the class logits of a classifier, every stage's maps), and bad requests are one line each."""

from __future__ import annotations

from argparse import Namespace

import numpy as np
import pytest
from ckpt_helpers import DATA, golden
from PIL import Image

from attnviz.checkpoints import load_checkpoint
from attnviz.checkpoints.intervention_swin import swin_classifier, swin_run
from attnviz.checkpoints.interventions import Edit
from attnviz.checkpoints.preprocess import preprocess_image
from attnviz.cli import CliError
from attnviz.cli.model_intervene_swin import cmd_swin


def _args(tmp_path, **kw):
    g = golden(DATA / "tiny_swin" / "golden.npz")
    png = tmp_path / "picture.png"
    Image.fromarray(g["image"]).save(png)
    base = dict(model_dir="", image=[png], text=None, heads="1.1,5.3", mode="zero", means=None,
                npz=tmp_path / "out.npz")
    base.update(kw)
    return Namespace(**base), g


@pytest.mark.parametrize("name", ["tiny_swin", "tiny_swin_cls"])
def test_ablate_writes_the_librarys_passes(tmp_path, capsys, name):
    ck = load_checkpoint(DATA / name)
    args, g = _args(tmp_path, mode="mean")
    assert cmd_swin(args, ck) == 0
    x = preprocess_image(g["image"], ck.image)
    np.testing.assert_allclose(x, g["pixel_values"], atol=1e-6, rtol=0)
    cls = swin_classifier(ck.folder)
    before = swin_run(ck.config, ck.weights, x, classifier=cls)
    after = swin_run(ck.config, ck.weights, x, Edit(ablate={(1, 1): "mean", (5, 3): "mean"}), cls)
    with np.load(args.npz) as z:
        assert z["heads"].tolist() == [[1, 1], [5, 3]] and z["layer_stage"].tolist() == [0, 0, 1, 1, 2, 2]
        np.testing.assert_array_equal(z["pooled_after"], after.pooled)
        np.testing.assert_array_equal(z["pooled_before"], before.pooled)
        assert z["attentions_after_stage0"].shape == (2, 2, 288, 288)
        assert z["attentions_before_stage2"].shape == (2, 4, 18, 18)
        assert 0 < float(z["cosine"]) < 0.99999
        if cls is None:
            assert "logits_after" not in z.files
        else:
            np.testing.assert_array_equal(z["logits_after"], after.logits)
            assert float(z["kl"]) > 0
    out = capsys.readouterr().out
    assert "mean-ablated 1.1 (stage 0), 5.3 (stage 2)" in out
    assert ("before: LABEL_" in out) == (cls is not None)


@pytest.mark.parametrize("kw, message", [
    ({"heads": "1.2"}, r"head 2 is out of range for layer 1: its stage \(0\) has 2 heads"),
    ({"heads": "6.0"}, "layer 6 is out of range"),
    ({"heads": "one"}, "not a head"),
    ({"text": "a cat"}, "give --image, not --text"),
    ({"image": None}, "give --image"),
    ({"means": "sweep.parquet", "mode": "mean"}, "not swept"),
])
def test_bad_requests_are_one_line(tmp_path, kw, message):
    ck = load_checkpoint(DATA / "tiny_swin")
    args, _g = _args(tmp_path, **kw)
    with pytest.raises(CliError, match=message) as err:
        cmd_swin(args, ck)
    assert "\n" not in str(err.value) and not args.npz.exists()


def test_a_missing_or_second_picture_is_refused(tmp_path):
    ck = load_checkpoint(DATA / "tiny_swin")
    args, _g = _args(tmp_path)
    with pytest.raises(CliError, match="reads one image"):
        cmd_swin(Namespace(**{**vars(args), "image": args.image * 2}), ck)
    with pytest.raises(CliError, match="image not found"):
        cmd_swin(Namespace(**{**vars(args), "image": [tmp_path / "none.png"]}), ck)
