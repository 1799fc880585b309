"""``attnviz-cli mask-export``: a session file's attention mask written for other code bases.

``mask-export PATH --format npy|json|flex|ar-mask|seqlens --out FILE`` loads the session, builds its
query and key segments, and writes the mask design as a dense ``.npy`` bool array, the design's JSON
(rules, sub-blocks, preset terms, painted cells), a FlexAttention ``mask_mod`` Python source,
openpi's ``ar_mask`` + ``valid`` (JSON, or ``.npz`` when FILE ends so), or xformers block-diagonal
sequence lengths (JSON). A mask that the chosen format cannot express is an error saying why.
"""

from __future__ import annotations

from attnviz.model.mask.export import EXPORT_FORMATS


def register(subparsers) -> None:
    """Add ``mask-export`` to the attnviz-cli parser."""
    p = subparsers.add_parser("mask-export", help="write a session's attention mask as npy, JSON, FlexAttention "
                                                  "mask_mod, openpi ar_mask or xformers seqlens",
                              description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("path", metavar="PATH", help="an .attnviz session file")
    p.add_argument("--format", required=True, choices=EXPORT_FORMATS, dest="format", help="what to write")
    p.add_argument("--out", required=True, metavar="FILE", help="the file to write")
    p.set_defaults(func=run_mask_export)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def run_mask_export(args) -> int:
    from attnviz.cli import CliError
    from attnviz.model.mask.export import export_mask
    from attnviz.model.sequence import assemble
    from attnviz.persist import SessionError, load_session

    try:
        state = load_session(args.path)
    except SessionError as exc:
        raise CliError(_one_line(exc)) from None
    except OSError as exc:
        raise CliError(_one_line(f"{args.path}: {exc.strerror or exc}")) from None
    try:
        qseq, kseq = assemble(state)
    except ValueError as exc:
        raise CliError(_one_line(f"{args.path}: the session's tokens cannot be built: {exc}")) from None
    k_segments = None if kseq is qseq else list(kseq.segments)
    try:
        export_mask(state.mask, args.format, args.out, list(qseq.segments), k_segments, qseq.T, kseq.T,
                    nh=state.model.nh)
    except ValueError as exc:
        raise CliError(_one_line(f"cannot export the mask as {args.format}: {exc}")) from None
    except OSError as exc:
        raise CliError(_one_line(f"cannot write {args.out}: {exc.strerror or exc}")) from None
    print(f"wrote {args.out} ({args.format}, {qseq.T} x {kseq.T} mask)")
    return 0
