"""The ``attnviz`` options that open a checkpoint in the Pretrained workspace at start-up: ``--model DIR``
(a checkpoint folder, or an installed ready model's name), ``--image PATH`` (repeatable: a vision-language
model's pictures, or an image model's), ``--prompt TEXT`` (a text model's sentence or a vision-language
model's prompt; ``\\n`` writes a line break) and ``--option NAME=VALUE`` (repeatable: ``suffix=...``,
``state=0,0,0,0``, ``noise_seed=1``, ``time=0.5``). With ``--screenshot`` the picture waits for the load
and the forward pass like for any other view; a problem is the panel's message line.
"""

from __future__ import annotations

import os


def add_arguments(parser) -> None:
    g = parser.add_argument_group("Pretrained workspace")
    g.add_argument("--model", metavar="DIR", help="load this checkpoint folder (or ready model) in the Pretrained "
                                                  "workspace and run it (the workspace is shown unless --workspace "
                                                  "names another)")
    g.add_argument("--image", metavar="PATH", action="append", default=None,
                   help="with --model: an image it sees (repeat for a model that reads several)")
    g.add_argument("--prompt", metavar="TEXT", help="with --model: the text it reads, or a vision-language model's "
                                                    "prompt (\\n writes a line break)")
    g.add_argument("--option", metavar="NAME=VALUE", action="append", default=None,
                   help="with --model: an option of a vision-language model's run (suffix=..., state=x,y,..., "
                        "noise_seed=N, time=t)")


def check(args) -> str | None:
    """The message of the first bad option, else None."""
    if args.model is None:
        if args.image or args.prompt is not None or args.option:
            return "--image, --prompt and --option go with --model"
        return None
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
    from attnviz.checkpoints import ready_models

    panel = window.panel("pretrained")
    if panel is None or not hasattr(panel, "load_model"):
        window.ctx.report("there is no Pretrained workspace to open --model in", "error")
        return
    panel.auto_load = False
    if args.workspace is None:
        window.show_workspace("pretrained")
    folder = args.model
    if not os.path.isdir(folder):
        folder = str(dict(ready_models()).get(folder, folder))  # a ready model by name
    images = list(args.image or ())
    if len(images) > 1:
        from attnviz.sources.image import load_image
        from attnviz.sources.errors import SourceError

        try:
            panel.set_images([(os.path.basename(p), load_image(p, alpha="drop")) for p in images])
        except (SourceError, ValueError) as exc:
            window.ctx.report(f"cannot read the images: {exc}", "error")
    elif images:
        panel.set_image_file(os.path.abspath(images[0]))
    options = dict(opt.partition("=")[::2] for opt in args.option or ())
    prompt = None if args.prompt is None else args.prompt.replace("\\n", "\n")
    panel.load_model(folder, prompt=prompt, options=options)
