"""The ``attnviz`` options that open a checkpoint in the Pretrained workspace at start-up: ``--model DIR``
(a checkpoint folder, or an installed ready model's name; ``attnviz DIR`` with a checkpoint folder is the
same), ``--image PATH`` (repeatable: a vision-language model's pictures, or an image model's), ``--prompt
TEXT`` or ``--text TEXT`` (a text model's sentence, an encoder-decoder's source or a vision-language model's
prompt; ``\\n`` writes a line break), ``--target TEXT`` (an encoder-decoder teacher-forced on this target, or
Whisper on this transcript) and ``--option NAME=VALUE`` (repeatable: ``suffix=...``, ``state=0,0,0,0``,
``noise_seed=1``, ``time=0.5``). A model that takes no target given ``--target`` is one line before the
window opens. With ``--screenshot`` the picture waits for the load and the forward pass like for any other
view; a problem is the panel's message line.
"""

from __future__ import annotations

import os
from pathlib import Path

from attnviz.ui.messages import Level

TARGET_FAMILIES = "encoder-decoders (MarianMT, BART, mBART, T5) and Whisper"


def add_arguments(parser) -> None:
    g = parser.add_argument_group("Pretrained workspace")
    g.add_argument("--model", metavar="DIR", help="load this checkpoint folder (or ready model) in the Pretrained "
                                                  "workspace and run it (the workspace is shown unless --workspace "
                                                  "names another); a checkpoint folder given as FILE is the same")
    g.add_argument("--image", metavar="PATH", action="append", default=None,
                   help="with --model: an image it sees (repeat for a model that reads several)")
    g.add_argument("--prompt", "--text", dest="prompt", metavar="TEXT",
                   help="with --model: the text it reads (an encoder-decoder's source), or a vision-language model's "
                        "prompt (\\n writes a line break)")
    g.add_argument("--target", metavar="TEXT", help="with --model: the target an encoder-decoder is teacher-forced on "
                                                    "(Whisper: the transcript), instead of its own greedy output")
    g.add_argument("--option", metavar="NAME=VALUE", action="append", default=None,
                   help="with --model: an option of a vision-language model's run (suffix=..., state=x,y,..., "
                        "noise_seed=N, time=t)")


def model_folder(name: str) -> str:
    """The folder of ``--model NAME``: a folder as given, else the installed ready model of that name."""
    if os.path.isdir(name):
        return name
    from attnviz.checkpoints import ready_models

    return str(dict(ready_models()).get(name, name))


def is_checkpoint_folder(path: str) -> bool:
    """True for a folder holding a config.json (what ``attnviz DIR`` opens in the Pretrained workspace)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json"))


def model_type(folder: str) -> str | None:
    """config.json's model_type (a policy's type) of a checkpoint folder; None when it cannot be read."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.config import read_json

    try:
        raw = read_json(Path(folder) / "config.json", "the model config")
    except CheckpointError:
        return None
    kind = raw.get("model_type", raw.get("type"))
    return kind if isinstance(kind, str) else None


def takes_target(kind: str) -> bool:
    from attnviz.checkpoints.seq2seq_config import SEQ2SEQ_TYPES

    return kind in SEQ2SEQ_TYPES or kind == "whisper"


def check(args) -> str | None:
    """The message of the first bad option, else None. ``attnviz DIR`` with a checkpoint folder becomes
    ``--model DIR`` here."""
    if getattr(args, "file", None) and is_checkpoint_folder(args.file):
        if args.model is not None:
            return f"{args.file} is a checkpoint folder and --model {args.model} names another: give one model"
        args.model, args.file = args.file, None
    if args.model is None:
        if args.image or args.prompt is not None or args.option or getattr(args, "target", None) is not None:
            return "--image, --prompt (--text), --target and --option go with --model (or a checkpoint folder)"
        return None
    if getattr(args, "target", None) is not None:
        folder = model_folder(args.model)
        kind = model_type(folder) if os.path.isdir(folder) else None
        if kind is not None and not takes_target(kind):
            return (f"--target: {os.path.basename(os.path.normpath(folder))} is a {kind} model, which reads no "
                    f"target; --target is for {TARGET_FAMILIES}")
    for opt in args.option or ():
        name, eq, _value = opt.partition("=")
        if not eq or not name.strip():
            return f"--option {opt!r}: write it NAME=VALUE, e.g. suffix=a cup or state=0,0,0,0"
    for path in args.image or ():
        if not os.path.isfile(path):
            return f"--image {path}: no such file"
    return None


def apply(window, args) -> None:
    """Load ``args.model`` in the window's Pretrained panel with the images, prompt and options given."""
    if args.model is None:
        return
    panel = window.panel("pretrained")
    if panel is None or not hasattr(panel, "load_model"):
        window.ctx.report(Level.ERROR, "there is no Pretrained workspace to open --model in")
        return
    panel.auto_load = False
    if args.workspace is None:
        window.show_workspace("pretrained")
    folder = model_folder(args.model)
    images = list(args.image or ())
    if len(images) > 1:
        from attnviz.sources.image import load_image
        from attnviz.sources.errors import SourceError

        try:
            panel.set_images([(os.path.basename(p), load_image(p, alpha="drop")) for p in images])
        except (SourceError, ValueError) as exc:
            window.ctx.report(Level.ERROR, f"cannot read the images: {exc}")
    elif images:
        panel.set_image_file(os.path.abspath(images[0]))
    options = dict(opt.partition("=")[::2] for opt in args.option or ())
    prompt = None if args.prompt is None else args.prompt.replace("\\n", "\n")
    if getattr(args, "target", None) is not None:  # read by the run that follows the load
        target = args.target.replace("\\n", "\n")
        panel.set_target(target)
        panel.seq2seq.target_edit.setCursorPosition(0)  # its beginning in view, as the source's
        audio = getattr(panel, "audio", None)
        if audio is not None and hasattr(audio, "target_edit") and model_type(folder) == "whisper":
            audio.target_edit.setText(target)
    panel.load_model(folder, prompt=prompt, options=options)
