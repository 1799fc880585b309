"""The ``attnviz`` options that open a checkpoint in the Pretrained workspace at start-up: ``--model DIR``
(a checkpoint folder, or an installed ready model's name; ``attnviz DIR`` with a checkpoint folder is the
same), ``--image PATH`` (repeatable: a vision-language model's pictures, or an image model's), ``--prompt
TEXT`` or ``--text TEXT`` (a text model's sentence, an encoder-decoder's source or a vision-language model's
prompt; ``\\n`` writes a line break), ``--target TEXT`` (an encoder-decoder teacher-forced on this target, or
Whisper on this transcript) and ``--option NAME=VALUE`` (repeatable: ``suffix=...``, ``state=0,0,0,0``,
``noise_seed=1``, ``time=0.5``). A model that takes no target given ``--target`` is one line before the
window opens. The options and their checks need no Qt and live in :mod:`attnviz.app_start`; here they are
applied to the window. With ``--screenshot`` the picture waits for the load and the forward pass like for
any other view; a problem is the panel's message line.
"""

from __future__ import annotations

import os

from attnviz.app_start import model_folder, model_type
from attnviz.ui.messages import Level


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
