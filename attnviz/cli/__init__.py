"""attnviz-cli: the headless entry point (demos, sessions, masks, checkpoints, corpora, benchmarks, warm-up).

Each sub-command lives in its own module exposing ``register(subparsers)``; the module's handler is
stored with ``parser.set_defaults(func=...)`` and returns a process exit code. No Qt is imported here.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Sub-command modules, in the order their commands appear in --help.
_COMMAND_MODULES = (
    "attnviz.cli.demo_cmd",
    "attnviz.cli.session_cmd",
    "attnviz.cli.mask_cmd",
    "attnviz.cli.model_cmd",
    "attnviz.cli.maps_cmd",
    "attnviz.cli.corpus_cmd",
    "attnviz.cli.bench_cmd",
    "attnviz.cli.warmup_cmd",
)


class CliError(Exception):
    """A problem the user can act on; printed on one line, exit code 1, never a traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnviz-cli", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # that command is not part of this build
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
