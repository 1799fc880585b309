"""The schema chain: migrations run in order from a file's version up to the current one, gaps and
unknown versions are refused, newer files are refused with a message saying so."""

from __future__ import annotations

import copy

import pytest

import attnviz.persist.migrations as migrations
from attnviz.persist import SCHEMA_VERSION, SessionError, load_payload, save_payload
from attnviz.persist.migrations import MIGRATIONS, OLDEST_SCHEMA, migrate, register


def _manifest(version: int) -> dict:
    return {"format": "attnviz-session", "schema_version": version, "state": {"heads": 2}, "arrays": {}, "blobs": {}}


def test_released_chain_is_complete():
    assert SCHEMA_VERSION == 1 and OLDEST_SCHEMA == 1
    for v in range(OLDEST_SCHEMA, SCHEMA_VERSION):
        assert v in MIGRATIONS, f"no migration from schema {v}"
    assert all(OLDEST_SCHEMA <= v < SCHEMA_VERSION for v in MIGRATIONS)


def test_current_version_passes_through_unchanged():
    m = _manifest(SCHEMA_VERSION)
    out = migrate(m)
    assert out == m and out is not m


def test_chain_runs_every_step_in_order():
    registry: dict = {}
    order = []

    @register(1, registry)
    def one_to_two(m):
        order.append(1)
        m["state"]["n_heads"] = m["state"].pop("heads")  # a field renamed in schema 2
        return m

    @register(2, registry)
    def two_to_three(m):
        order.append(2)
        assert m["schema_version"] == 2  # each step sees the version it migrates from
        m["state"]["view"] = {"colormap": "viridis"}  # a field added in schema 3 with its default
        return m

    src = _manifest(1)
    kept = copy.deepcopy(src)
    out = migrate(src, current=3, registry=registry)
    assert order == [1, 2]
    assert out["schema_version"] == 3
    assert out["state"] == {"n_heads": 2, "view": {"colormap": "viridis"}}
    assert src == kept  # the input is not modified
    order.clear()
    assert migrate(_manifest(2), current=3, registry=registry)["state"] == {"heads": 2, "view": {"colormap": "viridis"}}
    assert order == [2]


def test_gap_in_chain():
    registry = {1: lambda m: m}
    with pytest.raises(SessionError, match="no migration from schema 2 to 3"):
        migrate(_manifest(1), current=3, registry=registry)


def test_failing_step_becomes_session_error():
    registry = {1: lambda m: m["state"]["missing"]}
    with pytest.raises(SessionError, match="cannot migrate the session from schema 1 to 2: KeyError"):
        migrate(_manifest(1), current=2, registry=registry)


def test_step_returning_garbage():
    with pytest.raises(SessionError, match="returned list"):
        migrate(_manifest(1), current=2, registry={1: lambda m: [m]})


def test_register_twice_is_an_error():
    registry: dict = {}
    register(1, registry)(lambda m: m)
    with pytest.raises(ValueError, match="already registered"):
        register(1, registry)(lambda m: m)


@pytest.mark.parametrize("version, match", [
    (7, r"^written by a newer attnviz \(schema 7\); this version reads up to 1\. Update attnviz"),
    (0, "unknown schema version 0; no attnviz ever wrote it"),
    ("2", "unknown schema version '2'"),
])
def test_refused_versions(version, match):
    with pytest.raises(SessionError, match=match):
        migrate(_manifest(version))


def test_loader_applies_the_chain(tmp_path, monkeypatch):
    """A schema-1 file opened by a build whose schema is 2: the loader migrates it."""
    path = save_payload(tmp_path / "v1.attnviz", {"heads": 2})

    def one_to_two(m):
        m["state"] = {"n_heads": m["state"]["heads"], "added_in_v2": True}
        return m

    monkeypatch.setattr(migrations, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(MIGRATIONS, 1, one_to_two)
    got = load_payload(path)
    assert got.tree == {"n_heads": 2, "added_in_v2": True}
    assert got.schema_version == 1  # what the file was written with


def test_loader_reports_a_broken_chain(tmp_path, monkeypatch):
    path = save_payload(tmp_path / "v1.attnviz", {"heads": 2})
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", 2)
    with pytest.raises(SessionError, match="v1.attnviz: no migration from schema 1 to 2"):
        load_payload(path)
