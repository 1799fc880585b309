"""The headless JSON report and ``attnviz-cli demo``."""

import json

import numpy as np

from attnviz.cli import main
from attnviz.model.compute import ComputeRequest, run
from attnviz.model.demos import build_demo
from attnviz.model.mask.presets import preset
from attnviz.model.report import response_to_json


def test_self_attention_report_shape_and_values():
    r = run(ComputeRequest(1, build_demo("river-bank")))
    d = response_to_json(r)
    assert set(d) == {"tokens", "segments", "mask", "heads", "output"}
    assert d["tokens"] == ["by", "the", "river", "bank"]
    assert d["segments"] == [{"name": "by the river bank", "start": 0, "stop": 4}]
    assert np.round(d["heads"][0]["weights"][3], 2).tolist() == [0.11, 0.07, 0.69, 0.14]
    assert set(d["heads"][0]) == {"scores", "weights", "output", "lse"}
    assert np.round(d["output"][3], 2).tolist() == [1.43, 0.06, 0.14, 0.0]


def test_masked_scores_are_null_and_json_is_strict():
    import dataclasses

    s = dataclasses.replace(build_demo("river-bank"), mask=preset("causal", []))
    d = response_to_json(run(ComputeRequest(1, s)))
    assert d["heads"][0]["scores"][0][1:] == [None, None, None]
    assert d["mask"][0] == [True, False, False, False]
    json.dumps(d, allow_nan=False)


def test_cross_report_uses_query_and_key_tokens():
    d = response_to_json(run(ComputeRequest(1, build_demo("translation"))))
    assert d["query_tokens"] == ["je", "t'", "aime"] and d["key_tokens"] == ["I", "love", "you"]
    assert "tokens" not in d and len(d["mask"]) == 3 and len(d["mask"][0]) == 3


def test_long_sequences_give_a_summary_with_a_note():
    r = run(ComputeRequest(1, build_demo("vit-image")))
    d = response_to_json(r, max_tokens=100)
    assert d["summary"] is True and "more than 100 tokens" in d["note"] and "heads" not in d
    assert d["Tq"] == 197 and d["tiles"]["block_m"] == 64


def test_cli_list_json_and_errors(capsys):
    assert main(["demo", "--list"]) == 0
    out = capsys.readouterr().out
    assert "river-bank" in out and "long-context" in out
    assert main(["demo", "translation", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert np.round(d["heads"][0]["weights"][1], 2).tolist() == [0.11, 0.01, 0.88]
    assert main(["demo", "nope"]) == 1
    err = capsys.readouterr().err
    assert "unknown demo 'nope'" in err and err.count("\n") == 1
    assert main(["demo"]) == 1


def test_cli_save_writes_a_session_file(tmp_path, capsys):
    from attnviz import persist

    path = tmp_path / "bank.attnviz"
    assert main(["demo", "river-bank", "--save", str(path)]) == 0
    assert persist.load_session(path) == build_demo("river-bank")
