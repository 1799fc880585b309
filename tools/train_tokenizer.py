"""Train attnviz's bundled byte-level BPE vocabulary from the project's own corpus.

    .venv/bin/python tools/train_tokenizer.py            # rewrites resources/tokenizer/tokenizer.json
    .venv/bin/python tools/train_tokenizer.py --check    # exits 1 if the shipped file differs

The corpus (``resources/tokenizer/corpus.txt``) is original prose written for the project.  The
tokenizer is GPT-2 style: bytes mapped to printable characters, the GPT-2 split pattern, no
normaliser (lossless: every text round-trips) and a space kept at the start of the next word.
Training is deterministic, so the script reproduces the shipped file exactly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "resources" / "tokenizer" / "corpus.txt"
OUTPUT = ROOT / "resources" / "tokenizer" / "tokenizer.json"

VOCAB_SIZE = 4096  # small enough to ship, large enough that common corpus words are one token
MIN_FREQUENCY = 1  # the corpus is small: keep merges that occur once so its words become whole
SPECIAL_TOKENS = [  # ids 0.. in this order; markers a sequence builder may need
    "<|endoftext|>",
    "[CLS]",
    "[SEP]",
    "[PAD]",
    "[MASK]",
    "<|image|>",
    "<|state|>",
    "<|action|>",
]


def train(corpus: Path = CORPUS) -> Tokenizer:
    """Return a freshly trained byte-level BPE tokenizer for ``corpus``."""
    tok = Tokenizer(models.BPE())  # byte-level: every byte is in the alphabet, so no unknown token
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=MIN_FREQUENCY,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    text = corpus.read_text(encoding="utf-8")
    paragraphs = [p for p in text.split("\n") if p.strip()]
    tok.train_from_iterator(paragraphs, trainer=trainer)
    return tok


def to_json(tok: Tokenizer) -> str:
    """The canonical text written to disk (pretty-printed so diffs of the vocabulary are readable)."""
    return json.dumps(json.loads(tok.to_str()), ensure_ascii=False, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--check", action="store_true", help="compare with the existing file instead of writing")
    args = parser.parse_args(argv)
    text = to_json(train(args.corpus))
    if args.check:
        same = args.output.is_file() and args.output.read_text(encoding="utf-8") == text
        print(f"{args.output}: {'up to date' if same else 'DIFFERS from a fresh training run'}")
        return 0 if same else 1
    args.output.write_text(text, encoding="utf-8")
    vocab = json.loads(text)["model"]["vocab"]
    print(f"wrote {args.output} ({len(vocab)} entries incl. {len(SPECIAL_TOKENS)} special tokens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
