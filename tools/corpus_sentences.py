"""Write a corpus of English sentences, one per line, taken from the Python standard library's docstrings.

    python tools/corpus_sentences.py OUT.txt [--count 2000] [--min-words 6] [--max-words 40]

Deterministic for a given Python version (modules in sorted order, sentences in the order they are
found, duplicates dropped), and nothing is downloaded: the benchmark corpus of ``attnviz-cli corpus``
(benchmarks/README.md) is made on any machine with this one command.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
import warnings
from pathlib import Path

SKIP = ("antigravity", "this", "idlelib", "tkinter", "turtle", "test", "lib2to3", "ensurepip", "venv", "pydoc_data")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _docstrings():
    for info in sorted(pkgutil.iter_modules(), key=lambda m: m.name):
        name = info.name
        if name.startswith("_") or name in SKIP or name not in sys.stdlib_module_names:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = importlib.import_module(name)
        except Exception:  # a module this platform cannot import
            continue
        yield inspect.getdoc(mod) or ""
        for _n, obj in sorted(vars(mod).items()):
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", None) == name:
                yield inspect.getdoc(obj) or ""


def sentences(count: int, min_words: int, max_words: int) -> list[str]:
    seen, out = set(), []
    for doc in _docstrings():
        for para in re.split(r"\n\s*\n", doc):
            text = " ".join(para.split())
            for s in _SENTENCE.split(text):
                words = s.split()
                if not (min_words <= len(words) <= max_words) or not s[0].isupper() or s[-1] not in ".!?":
                    continue
                if any(ch in s for ch in "{}[]<>|=\\`") or s in seen:
                    continue
                seen.add(s)
                out.append(s)
                if len(out) == count:
                    return out
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--min-words", type=int, default=6)
    ap.add_argument("--max-words", type=int, default=40)
    args = ap.parse_args()
    got = sentences(args.count, args.min_words, args.max_words)
    if len(got) < args.count:
        print(f"only {len(got)} sentences found, fewer than {args.count}", file=sys.stderr)
        return 1
    args.out.write_text("".join(s + "\n" for s in got), encoding="utf-8")
    print(f"{len(got)} sentences -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
