"""Every released schema version has fixture files, and each still reopens and computes the
attention recorded beside it when it was written (tools/make_session_fixtures.py)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attnviz.model.compute import ComputeRequest, run
from attnviz.persist import SCHEMA_VERSION, load_session, read_session
from attnviz.persist.migrations import OLDEST_SCHEMA

DATA = Path(__file__).resolve().parents[1] / "data" / "sessions"
FIXTURES = sorted(DATA.glob("v*/*.attnviz"))


def test_a_fixture_per_released_version():
    versions = sorted(int(p.name[1:]) for p in DATA.glob("v*") if p.is_dir())
    assert versions == list(range(OLDEST_SCHEMA, SCHEMA_VERSION + 1))
    for v in versions:
        assert list((DATA / f"v{v}").glob("*.attnviz")), f"no fixture for schema {v}"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_reopens_with_its_numbers(path):
    with zipfile.ZipFile(path) as zf:
        written = json.loads(zf.read("manifest.json"))["schema_version"]
    assert f"v{written}" == path.parent.name
    state, payload = read_session(path)
    assert payload.schema_version == written
    expected = json.loads(path.with_suffix(".expected.json").read_text(encoding="utf-8"))
    r = run(ComputeRequest(0, state))
    assert r.ok, r.error
    assert list(r.query_labels) == expected["query_labels"]
    assert list(r.key_labels) == expected["key_labels"]
    mask = np.asarray(r.mask)
    masks = mask[None] if mask.ndim == 2 else mask  # (1 or nh, Tq, Tk)
    assert [["".join("1" if c else "0" for c in row) for row in m] for m in masks] == expected["mask"]
    rows = expected["rows"]
    assert len(expected["heads"]) == r.output.shape[0]
    for h, head in enumerate(expected["heads"]):
        np.testing.assert_allclose(r.weights[h, rows], np.array(head["weights"]), rtol=1e-9, atol=1e-12)
        lse = np.array([-np.inf if x is None else x for x in head["lse"]])
        np.testing.assert_allclose(r.lse[h, rows], lse, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r.combined[rows], np.array(expected["combined"]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("path", sorted(DATA.glob("v*/river-bank.attnviz")), ids=lambda p: p.parent.name)
def test_river_bank_fixture_has_the_seed_numbers(path):
    r = run(ComputeRequest(0, load_session(path)))
    bank = r.query_labels.index("bank")
    np.testing.assert_allclose(r.weights[0, bank], [0.11, 0.07, 0.69, 0.14], atol=0.005)
    np.testing.assert_allclose(r.combined[bank], [1.43, 0.06, 0.14, 0.0], atol=0.005)


def test_edited_fixture_keeps_its_edits():
    state = load_session(DATA / f"v{SCHEMA_VERSION}" / "vla-edited.attnviz")
    assert len(state.mask.overrides) == 4 and [h for h, _ in state.mask.heads] == [3]
    assert state.view.colormap == "magma" and state.view.layout == "mask-designer"
    assert state.source("state").generator == "file"
