"""Write the session fixture files of the current schema version, with the attention they compute.

    python tools/make_session_fixtures.py [--force]

For schema version N this writes ``tests/data/sessions/vN/NAME.attnviz`` and, beside each,
``NAME.expected.json``: the token labels, the compiled mask, and per head the weights and lse of a
few query rows and the combined output of those rows, computed when the file was made.
``tests/persist/test_persist_fixtures.py`` reopens every fixture of every released version and
checks that it still computes these numbers: a session saved by any released attnviz must reopen
identically.

Fixtures of a released version are never rewritten (the tool refuses unless ``--force``, which is
only for a version that has not been released). The sessions cover every kind of stored content:

* ``river-bank``: seed 002's demo (toy embeddings and hand-set weights as arrays);
* ``translation``: seed 001's cross-attention demo;
* ``vla-edited``: the vision-language-action demo (image bytes, text, custom blocks, block rules)
  plus painted cells, a per-head design, custom values loaded from a file, and a changed view.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attnviz.model.compute import ComputeRequest, run  # noqa: E402
from attnviz.model.demos import build_demo  # noqa: E402
from attnviz.model.frozen import FrozenArray  # noqa: E402
from attnviz.model.mask.design import MaskDesign  # noqa: E402
from attnviz.model.mask.paint import CellOverrides  # noqa: E402
from attnviz.model.mask.rules import Rule  # noqa: E402
from attnviz.model.state import CustomSource, SessionState, ViewState  # noqa: E402
from attnviz.persist import SCHEMA_VERSION, save_session  # noqa: E402

FIXTURE_DIR = ROOT / "tests" / "data" / "sessions"
CREATED = "2026-01-01T00:00:00Z"  # fixed, so a regenerated unreleased fixture is byte-stable
MAX_ROWS = 6  # query rows whose numbers are stored per fixture


def _vla_edited() -> SessionState:
    state = build_demo("vla-mask")
    mask = state.mask
    painted = CellOverrides().set([0, 5, 30, 43], [43, 5, 2, 0], ["allow", "deny", "deny", "allow"])
    mask = MaskDesign(mask.default_rule, mask.rules, mask.splits, mask.presets, painted, mask.heads)
    mask = mask.with_head(3, MaskDesign(default_rule=Rule.causal()))
    sources = list(state.sources)
    rng = np.random.default_rng(2026)
    i = next(j for j, s in enumerate(sources) if s.name == "state")
    sources[i] = CustomSource("state", sources[i].color, count=1, generator="file",
                              values=FrozenArray(rng.standard_normal((1, state.model.d_model))))  # (1, d_model)
    view = ViewState(head=2, query=20, key=3, colormap="magma", log_scale=True, normalisation="scaled",
                     matrix="scores", overlay_opacity=0.35, layout="mask-designer")
    return dataclasses.replace(state, sources=tuple(sources), mask=mask, view=view)


FIXTURES = {
    "river-bank": lambda: build_demo("river-bank"),
    "translation": lambda: build_demo("translation"),
    "vla-edited": _vla_edited,
}


def _num(x: float):
    return None if x == -np.inf else float(x)


def rows_of(Tq: int) -> list[int]:
    """The query rows a fixture stores: all of a short sequence, else spread over it."""
    if Tq <= MAX_ROWS:
        return list(range(Tq))
    return sorted({int(r) for r in np.linspace(0, Tq - 1, MAX_ROWS)})


def expected_numbers(state: SessionState) -> dict:
    """What a fixture's session computes, as JSON (the same function the test compares with)."""
    r = run(ComputeRequest(0, state))
    if not r.ok:
        raise ValueError(f"fixture session does not compute: {r.error}")
    rows = rows_of(r.Tq)
    mask = np.asarray(r.mask)
    masks = mask[None] if mask.ndim == 2 else mask  # (1 or nh, Tq, Tk)
    return {
        "query_labels": list(r.query_labels),
        "key_labels": list(r.key_labels),
        "mask": [["".join("1" if c else "0" for c in row) for row in m] for m in masks],
        "rows": rows,
        "heads": [{"weights": [[float(x) for x in r.weights[h, i]] for i in rows],
                   "lse": [_num(r.lse[h, i]) for i in rows]} for h in range(r.output.shape[0])],
        "combined": [[float(x) for x in r.combined[i]] for i in rows],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true",
                        help="overwrite fixtures of the current version (only before it is released)")
    args = parser.parse_args(argv)
    out = FIXTURE_DIR / f"v{SCHEMA_VERSION}"
    out.mkdir(parents=True, exist_ok=True)
    for name, build in FIXTURES.items():
        path = out / f"{name}.attnviz"
        if path.exists() and not args.force:
            print(f"{path} exists; fixtures of a released schema are never rewritten (use --force only "
                  f"before release)", file=sys.stderr)
            return 1
        state = build()
        save_session(path, state, created=CREATED)
        expected = expected_numbers(state)
        (out / f"{name}.expected.json").write_text(json.dumps(expected, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size:,} bytes) and its expected numbers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
