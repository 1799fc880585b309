"""``attnviz-cli demo``: list the bundled demos, print one as JSON, or save it as a session file.

* ``demo --list``: one line per demo, name and description;
* ``demo NAME --json``: the JSON report of ``attnviz.model.report.response_to_json`` (tokens,
  segments, mask, per-head scores / weights / output / lse with -inf as null, combined output);
  for sequences over 512 tokens a summary with a note;
* ``demo NAME --save PATH``: write the demo as a session file (needs ``attnviz.persist``);
* ``demo NAME``: a short human-readable summary.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="list, print or save the bundled demos",
                              description=__doc__.splitlines()[0])
    p.add_argument("name", nargs="?", help="demo name (see --list)")
    p.add_argument("--list", action="store_true", help="list the demos")
    p.add_argument("--json", action="store_true", help="print the computed attention as JSON")
    p.add_argument("--save", metavar="PATH", help="write the demo as a session file")
    p.set_defaults(func=run_demo)


def _compute(state):
    from attnviz.cli import CliError
    from attnviz.model.compute import ComputeRequest, run

    response = run(ComputeRequest(0, state))
    if not response.ok:
        raise CliError(response.error or "the computation failed")
    return response


def _save(state, path: str) -> None:
    from attnviz.cli import CliError

    from attnviz.persist import SessionError, save_session

    try:
        save_session(path, state)
    except SessionError as exc:  # its message already names the file and the problem
        raise CliError(str(exc)) from None


def _summary(name: str, r) -> str:
    lines = [f"demo {name}: {r.Tq} queries x {r.Tk} keys, {r.output.shape[0]} head(s), {r.path}"]
    for s in r.query_segments:
        lines.append(f"  {'query ' if r.cross else ''}segment {s.name!r}: tokens {s.start}..{s.stop - 1}")
    if r.cross:
        for s in r.key_segments:
            lines.append(f"  key segment {s.name!r}: tokens {s.start}..{s.stop - 1}")
    lines.append(f"  tiles: {r.tile_counts}, sparsity {r.sparsity:.1f} %")
    if r.weights is not None and r.Tk <= 16 and r.Tq <= 16:
        w = r.weights.mean(axis=0)  # (Tq, Tk) mean over heads
        width = max(len(t) for t in r.key_labels + r.query_labels) + 1
        lines.append("  weights (mean over heads), rows = queries:")
        lines.append(" " * (width + 2) + "".join(f"{t:>{max(6, width)}}" for t in r.key_labels))
        for i, t in enumerate(r.query_labels):
            lines.append(f"  {t:>{width}}" + "".join(f"{x:>{max(6, width)}.2f}" for x in w[i]))
    for m in r.messages:
        lines.append(f"  note: {m}")
    return "\n".join(lines)


def run_demo(args) -> int:
    from attnviz.cli import CliError
    from attnviz.model.demos import build_demo, list_demos

    if args.list:
        demos = list_demos()
        width = max(len(n) for n, _ in demos)
        for n, d in demos:
            print(f"{n:<{width}}  {d}")
        return 0
    if not args.name:
        raise CliError("give a demo name or --list")
    known = [n for n, _ in list_demos()]
    if args.name not in known:
        raise CliError(f"unknown demo {args.name!r}; the demos are: {', '.join(known)}")
    if args.save:  # a directory, device or FIFO is refused before the demo is built
        from attnviz.persist import SessionError, check_save_target

        try:
            check_save_target(args.save)
        except SessionError as exc:
            raise CliError(str(exc)) from None
    state = build_demo(args.name)
    if args.save:
        _save(state, args.save)
        if not args.json:
            print(f"saved demo {args.name} to {args.save}")
            return 0
    response = _compute(state)
    for m in response.messages:
        print(f"note: {m}", file=sys.stderr)
    if args.json:
        from attnviz.model.report import response_to_json

        json.dump(response_to_json(response), sys.stdout, allow_nan=False)
        sys.stdout.write("\n")
    else:
        with np.printoptions(precision=3, suppress=True):
            print(_summary(args.name, response))
    return 0
