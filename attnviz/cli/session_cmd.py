"""``attnviz-cli inspect`` and ``attnviz-cli check``: session files without the window.

* ``inspect PATH --json``: load the session, compute it, and print the same JSON report as
  ``demo NAME --json`` (``attnviz.model.report.response_to_json``); without ``--json`` a short
  human-readable description of the file;
* ``check PATH``: exit 0 and one line (``ok: river-bank.attnviz, schema 1, 4 tokens, 1 head,
  3 arrays``) when the file loads and its attention computes; otherwise exit 1 and the problem on
  one line (``error: ...``), never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def register(subparsers) -> None:
    """Add ``inspect`` and ``check`` to the attnviz-cli parser."""
    p = subparsers.add_parser("inspect", help="print a session file's attention (as JSON with --json)",
                              description="Load a session file, compute its attention and print it.")
    p.add_argument("path", metavar="PATH", help="an .attnviz session file")
    p.add_argument("--json", action="store_true",
                   help="print the JSON report of 'demo NAME --json' for this session")
    p.set_defaults(func=run_inspect)
    c = subparsers.add_parser("check", help="check that a session file opens; one line, exit 0 or 1",
                              description="Check that a session file loads and its attention computes.")
    c.add_argument("path", metavar="PATH", help="an .attnviz session file")
    c.set_defaults(func=run_check)


def _fail(message: str) -> int:
    print("error: " + " ".join(message.split()), file=sys.stderr)  # one line, whatever the message
    return 1


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _load_and_compute(path: str, want: str):
    """(state, payload, response) or an error message."""
    from attnviz.model.compute import ComputeRequest, run
    from attnviz.persist import SessionError, read_session

    try:
        state, payload = read_session(path)
    except SessionError as exc:
        return None, str(exc)
    response = run(ComputeRequest(0, state, want=want))
    if not response.ok:
        return None, f"{path}: the session loads but its attention cannot be computed: {response.error}"
    return (state, payload, response), None


def _tokens(response) -> str:
    if response.cross:
        return f"{response.Tq} query x {response.Tk} key tokens"
    return _plural(response.Tq, "token")


def run_check(args) -> int:
    loaded, error = _load_and_compute(args.path, "summary")
    if error:
        return _fail(error)
    state, payload, response = loaded
    print(f"ok: {Path(args.path).name}, schema {payload.schema_version}, {_tokens(response)}, "
          f"{_plural(int(response.output.shape[0]), 'head')}, {_plural(len(payload.arrays), 'array')}")
    return 0


def run_inspect(args) -> int:
    loaded, error = _load_and_compute(args.path, "full" if args.json else "summary")
    if error:
        return _fail(error)
    state, payload, response = loaded
    for m in response.messages:
        print(f"note: {m}", file=sys.stderr)
    if args.json:
        from attnviz.model.report import response_to_json

        try:
            report = response_to_json(response)
        except ValueError as exc:
            return _fail(f"{args.path}: {exc}")
        json.dump(report, sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    lines = [
        f"{args.path}: attnviz session, schema {payload.schema_version}, written by attnviz "
        f"{payload.app_version} at {payload.created or 'an unknown time'}",
        f"  {_tokens(response)}, {_plural(int(response.output.shape[0]), 'head')}, d_model {state.model.d_model}, "
        f"score rule {state.score_rule.name}, kernel {state.kernel.name}, ran on {response.path}",
        f"  {_plural(len(state.sources), 'source')}: " + ", ".join(f"{s.name} ({s.kind})" for s in state.sources),
        f"  {_plural(len(payload.arrays), 'array')}, {_plural(len(payload.blobs), 'blob')}",
        f"  tiles: {response.tile_counts}, sparsity {response.sparsity:.1f} %",
    ]
    print("\n".join(lines))
    return 0
