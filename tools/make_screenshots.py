"""Make the documentation's screenshots (``docs/images/*.png``) from the real application.

``make screenshots`` runs ``QT_QPA_PLATFORM=offscreen .venv/bin/python tools/make_screenshots.py``.
Every picture is one run of ``attnviz [--demo NAME] --workspace NAME --size WxH --screenshot OUT.png``
in a process of its own: the window opens at that size on that workspace, a short preparation does
what a person would do first (pick a query, click a preset, paint cells, open a diagnostic tab, run
a study, load a checkpoint), and ``--screenshot`` writes the picture once every view shows its final
result. The preparations are the ``prepare_*`` functions below, given to the application as
``attnviz.ui.app.main(argv, on_shown=...)``. Settings and autosave go to a temporary folder, so the
person's own are never touched; compiled kernels stay in the usual user cache.

``python tools/make_screenshots.py [--out DIR] [--only NAME ...] [--size WxH]`` writes to
``docs/images`` by default; ``--only`` makes just the named pictures (file names without ``.png``);
``--size`` takes every picture at that window size instead of its own (to look at the same views on
another screen, e.g. ``--size 1920x1080 --out /tmp/shots``; the docs keep their own sizes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Shot:
    name: str  # file name without .png
    what: str  # what it shows
    demo: str  # the bundled demo it opens
    workspace: str  # the --workspace it is taken on
    size: str = "1280x800"  # the --size of the window (or of the dialog the preparation opens)


INLINE = "inline"  # the workspace of a picture the API draws without the window

SHOTS = (  # the list the docs refer to
    Shot("window", "the window on the vla-mask demo, mask workspace, a painted VLA mask", "vla-mask", "mask",
         "1600x1000"),
    Shot("tokens-text", "a text source: BPE pieces with their ids, the selected token's span lit", "vla-mask",
         "attention"),
    Shot("tokens-image", "an image source: patches over the picture, with the class token", "vit-image", "image"),
    Shot("tokens-block", "a custom block of tokens (FAST actions) and its generator", "vla-mask", "attention"),
    Shot("inspector-river-bank", "the Q/K/V workspace on bank -> river, seed 002's numbers", "river-bank", "qkv"),
    Shot("normalisation", "Diagnostics > Normalisation on the river bank", "river-bank", "diagnostics"),
    Shot("jacobian", "Diagnostics > Softmax Jacobian: the d_k study", "river-bank", "diagnostics"),
    Shot("heads", "the attention workspace: head 1 and every head as a small map", "vla-mask", "attention"),
    Shot("weights", "the Q/K/V workspace's W^Q, W^K, W^V, W^O tab", "vla-mask", "qkv"),
    Shot("positional-sinusoidal", "Diagnostics > Positional encodings, sinusoidal page", "vla-mask", "diagnostics",
         "1280x900"),
    Shot("positional-rope", "Diagnostics > Positional encodings, RoPE page", "vla-mask", "diagnostics", "1280x900"),
    Shot("alibi", "the heatmap of a short text under ALiBi", "long-context", "attention"),
    Shot("mask-designer", "the mask workspace after the VLA preset and a painted stroke", "vla-mask", "mask"),
    Shot("mask-code", "Mask as code: the FlexAttention mask_mod (the dialog, at this size)", "vla-mask", "mask",
         "900x620"),
    Shot("flash-tiles", "the mask workspace's flash tiles on the long-context demo", "long-context", "mask"),
    Shot("flash-check", "Diagnostics > Flash vs reference", "vla-mask", "diagnostics"),
    Shot("alignment", "Diagnostics > Alignment on the translation demo", "translation", "diagnostics"),
    Shot("pretrained", "the pretrained workspace on all-MiniLM-L6-v2", "river-bank", "pretrained"),
    Shot("generation", "the Generate tab: a tiny Llama writes 16 tokens; the sixth selected, its row in every head, "
                       "the next-token top ten and the logit lens", "river-bank", "pretrained", "1280x900"),
    Shot("whisper", "the Audio tab on a tiny Whisper: the demo clip's spectrogram, its encoder frames and one "
                    "written token's cross-attention over them", "river-bank", "pretrained", "1280x900"),
    Shot("translation-alignment", "Diagnostics > Alignment fed by tiny MarianMT's cross-attention, teacher-forced, "
                                  "the mean of every head and its argmax path", "translation", "pretrained"),
    Shot("intervention", "the Intervene tab on tiny_llama_lm: two heads zero-ablated, the next-token top five "
                         "before and after, KL, a head's maps before | after | difference", "river-bank", "pretrained",
         "1280x900"),
    Shot("importance", "the Intervene tab's head-importance sweep: each head ablated alone, KL as a layers x heads "
                       "grid, the heads ranked", "river-bank", "pretrained", "1280x900"),
    Shot("window-maps", "maps computed elsewhere: a tiny BART's cross-attention saved by attnviz.save, opened "
                        "read-only in the Pretrained workspace", "river-bank", "pretrained"),
    Shot("notebook-grid", "the inline picture attnviz.show returns in a notebook (drawn with Pillow, no window): "
                          "a tiny BERT's layers x heads", "river-bank", INLINE),
    Shot("vision-language", "the pretrained workspace on tiny LLaVA: a prompt's last token over the picture's "
                            "patches, the layers x heads grid and the share of attention per layer", "river-bank",
         "pretrained"),
    Shot("vlm-generation", "the vision-language page's Generate tab: tiny LLaVA writes 8 tokens about its picture; "
                           "the third selected, its attention over the patches, in every head, and the top ten",
         "river-bank", "pretrained"),
    Shot("target-option", "attnviz tiny_marian --text SOURCE --target TARGET at 1024 x 700: the translation model "
                          "teacher-forced on the target, its cross-attention", "river-bank", "pretrained", "1024x700"),
    Shot("intervention-seq2seq", "the Intervene tab on tiny BART: cross-attention heads 0.1, 0.2 zeroed, a head's "
                                 "cross-attention before | after | difference", "translation", "pretrained", "1024x700"),
    Shot("intervention-vlm", "the vision-language page's Intervene tab on tiny PaliGemma: heads 0.1, 0.3 zeroed, the "
                             "answering token over the picture before | after", "river-bank", "pretrained", "1024x700"),
    Shot("intervention-vla", "the Intervene tab on tiny SmolVLA: the action expert's heads 1.2, 3.0 zeroed, the action "
                             "chunk before and after, an expert head's action rows", "river-bank", "pretrained",
         "1024x700"),
    Shot("attention-maps-file", "a file's maps (attnviz.save, 3 layers x 6 heads, 40 causal tokens) read-only in the "
                                "Attention workspace: the banner, layer 0 head 0 and the layer's heads", "river-bank",
         "attention", "1024x700"),
    Shot("intervention-swin", "the Intervene tab on tiny Swin: heads of its last stages zeroed, every stage's heads in "
                              "one grid, the pooled output's cosine and the classes", "river-bank", "pretrained",
         "1024x700"),
)
TINY_MARIAN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data",
                           "tiny_marian")
TINY_LLAVA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "checkpoints",
                          "tiny_llava")


# ------------------------------------------------------------------------------------------------
# preparations: run in the application once its window is shown (window, ctx given); a returned
# widget (a dialog) is drawn instead of the window


def _diag(window, tab_class):
    return window.panel("diagnostics").show_tab(tab_class)


def prepare_window(window, ctx):
    prepare_mask_designer(window, ctx)
    ctx.set_view(query=17, head=1)


def prepare_tokens_text(window, ctx):
    ctx.set_view(query=17)
    window.panel("inputs").select_source("prompt")


def prepare_tokens_image(window, ctx):
    ctx.set_view(query=0)
    window.panel("inputs").select_source(ctx.session.state.sources[0].name)


def prepare_tokens_block(window, ctx):
    ctx.set_view(query=17)
    window.panel("inputs").select_source("fast actions")


def prepare_inspector_river_bank(window, ctx):
    ctx.set_view(query=3, key=2, head=0)
    window.panel("inspector").matrices.setCurrentIndex(0)


def prepare_normalisation(window, ctx):
    from attnviz.ui.diagnostics.normalisation import NormalisationTab

    ctx.set_view(query=3, normalisation="unscaled")
    _diag(window, NormalisationTab)


def prepare_jacobian(window, ctx):
    from attnviz.ui.diagnostics.jacobian import JacobianTab

    _diag(window, JacobianTab).run_study()


def prepare_heads(window, ctx):
    ctx.set_view(query=17, head=1)


def prepare_weights(window, ctx):
    ctx.set_view(query=17, head=1, key=19)
    window.panel("inspector").matrices.setCurrentIndex(1)


def _positional(window, page: int):
    from attnviz.ui.diagnostics.positional import PositionalTab

    tab = _diag(window, PositionalTab)
    tab.positions.setValue(96)
    tab.pages.setCurrentIndex(page)


def prepare_positional_sinusoidal(window, ctx):
    _positional(window, 0)


def prepare_positional_rope(window, ctx):
    _positional(window, 1)


def prepare_alibi(window, ctx):
    from attnviz.model.commands import SetPositional, SetText
    from attnviz.model.positional import PositionalConfig

    text = ctx.session.state.sources[0]
    ctx.execute(SetText(text.name, " ".join(text.text.split()[:48])))  # a short passage
    ctx.execute(SetPositional(PositionalConfig("alibi")))
    ctx.set_view(head=0, query=30)


def prepare_mask_designer(window, ctx):
    """The VLA preset, then one prompt token allowed to see the FAST action tokens (a painted stroke)."""
    from attnviz.model.commands import EditMask
    from attnviz.model.mask.commands import PaintCells

    window.panel("mask_designer").apply_preset("vla")

    def paint(resp):  # once the tokens are known: the segments give the rows and columns
        segs = {seg.name: seg for seg in resp.query_segments}
        row = segs["prompt"].start + 2
        actions = segs["fast actions"]
        return ctx.execute(EditMask(PaintCells(tuple((row, c) for c in range(actions.start, actions.stop)))))

    _when_computed(ctx, lambda: paint(ctx.response))


def prepare_mask_code(window, ctx):
    prepare_mask_designer(window, ctx)
    dialog = window.panel("mask_designer").open_code_dialog()
    _when_computed(ctx, dialog.refresh)  # after the painted stroke (connected first, so run first)
    return dialog


def prepare_flash_tiles(window, ctx):
    pass


def _when_computed(ctx, action) -> None:
    """``action()`` once, when the session has its first computed result (now if it has one)."""
    done = []

    def go(resp):
        if not done and resp is not None and resp.ok:
            done.append(action())

    ctx.response_changed.connect(go)
    go(ctx.response)


def prepare_flash_check(window, ctx):
    from attnviz.ui.diagnostics.flash_check import FlashCheckTab

    tab = _diag(window, FlashCheckTab)
    _when_computed(ctx, tab.run)  # "Run check" compares the kernels on the computed session


def prepare_alignment(window, ctx):
    from attnviz.ui.diagnostics.alignment import AlignmentTab

    ctx.set_view(query=2, head=0)
    _diag(window, AlignmentTab)


def prepare_pretrained(window, ctx):
    import numpy as np

    from attnviz.checkpoints import ready_models

    models = dict(ready_models())
    panel = window.panel("pretrained")
    panel.auto_load = False

    def show_best(*_args):  # the head that looks most at the previous token
        prev = panel.outcome.summaries.to_previous  # (layers, heads)
        layer, head = (int(i) for i in np.unravel_index(np.argmax(prev), prev.shape))
        panel.summary.set_metric("previous")
        panel.select_head(layer, head)

    panel.attention_ready.connect(show_best)
    panel.load_model(models["all-MiniLM-L6-v2"])


def prepare_vision_language(window, ctx):
    """tiny_llava on its own picture with the family's example prompt; layer 1, head 2 selected."""
    panel = window.panel("pretrained")
    panel.auto_load = False
    panel.attention_ready.connect(lambda *_a: panel.select_head(1, 2))
    panel.set_image_file(os.path.join(TINY_LLAVA, "image.png"))
    panel.load_model(TINY_LLAVA)


def prepare_target_option(window, ctx):
    """The options `attnviz tests/data/tiny_marian --text SOURCE --target TARGET` gives, applied as the app does."""
    import numpy as np

    from attnviz.app_start import build_parser, check_model_options as check
    from attnviz.ui.model_view.cli_options import apply

    with np.load(os.path.join(TINY_MARIAN, "golden.npz"), allow_pickle=False) as g:
        source, target = str(g["source"]), str(g["target"])
    args = build_parser().parse_args([TINY_MARIAN, "--text", source, "--target", target, "--workspace", "pretrained"])
    problem = check(args)
    if problem is not None:
        raise SystemExit(problem)
    apply(window, args)


def prepare_vlm_generation(window, ctx):
    """tiny_llava on its own picture, then its Generate tab: 8 greedy tokens, the third selected, layer 1 head 2."""
    panel = window.panel("pretrained")
    panel.auto_load = False
    view = panel.vlm_generation

    def on_ready(*_args) -> None:
        panel.attention_ready.disconnect(on_ready)
        panel.vlm.tabs.setCurrentWidget(view)
        view.max_new.setValue(8)
        view.generate()

    def on_finished(_how: str) -> None:
        panel.select_head(1, 2)
        view.show_step(2)

    panel.attention_ready.connect(on_ready)
    view.finished.connect(on_finished)
    panel.set_image_file(os.path.join(TINY_LLAVA, "image.png"))
    panel.load_model(TINY_LLAVA)


# ------------------------------------------------------------------------------------------------


def prepare_intervention_seq2seq(window, ctx):
    """tiny BART's Intervene tab on the cross-attention (tools/screenshot_intervene_more.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from screenshot_intervene_more import prepare_intervention_seq2seq as prepare

    prepare(window, ctx)


def prepare_intervention_vlm(window, ctx):
    """tiny PaliGemma's Intervene tab, the answering token over the picture (tools/screenshot_intervene_more.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from screenshot_intervene_more import prepare_intervention_vlm as prepare

    prepare(window, ctx)


def prepare_intervention_vla(window, ctx):
    """tiny SmolVLA's Intervene tab on the action expert (tools/screenshot_intervene_policies.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from screenshot_intervene_policies import prepare_intervention_vla as prepare

    prepare(window, ctx)


def prepare_intervention_swin(window, ctx):
    """tiny Swin's Intervene tab, heads of its last stages zeroed (tools/screenshot_intervene_policies.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from screenshot_intervene_policies import prepare_intervention_swin as prepare

    prepare(window, ctx)


def prepare_generation(window, ctx):
    """tiny_llama_lm writes 16 greedy tokens after the panel's sentence (tools/screenshot_generation.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from screenshot_generation import prepare_generation as prepare

    prepare(window)


def prepare_whisper(window, ctx):
    """tiny_whisper aligns the bundled clip to a target; its fourth written token selected."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from screenshot_whisper import TARGET, TINY_WHISPER

    panel = window.panel("pretrained")
    panel.auto_load = False
    view = panel.audio
    panel.side_splitter.set_shares([0.86, 0.14])
    view.target_edit.setText(TARGET)
    view.outcome_ready.connect(lambda out: view.select_token(min(3, len(out.pieces) - 1)))
    panel.load_model(str(TINY_WHISPER))


def prepare_translation_alignment(window, ctx):
    """tiny_marian on a sentence and its translation, then Show alignment in Diagnostics
    (tools/screenshot_translation.py)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from screenshot_translation import prepare_translation

    prepare_translation(window, ctx)


def _intervene(window, then=None):
    """tiny_llama_lm in the Intervene tab with heads 0.1 and 0.3 zero-ablated (as clicks in its grid do),
    layer 1 head 0 selected; ``then(view)`` once the ablation's effects are drawn."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from screenshot_interventions import TEXT, TINY

    from attnviz.model.state import Interventions

    panel = window.panel("pretrained")
    panel.auto_load = False
    view = panel.intervention
    panel.side_splitter.set_shares([0.9, 0.1])
    panel.body.set_shares([0.7, 0.3])
    steps = []

    def on_effects(_effects):
        steps.append(1)
        if len(steps) == 1:  # the model's own pass: ablate
            panel.tabs.setCurrentWidget(view)
            view.token_a.setText("#5")
            view.token_b.setText("#9")
            view.set_interventions(Interventions(heads=((0, 1), (0, 3))), "Ablate heads")
        elif len(steps) == 2:
            view.effects_ready.disconnect(on_effects)
            panel.select_head(1, 0)
            if then is not None:
                then(view)

    view.effects_ready.connect(on_effects)
    panel.set_text(TEXT)
    panel.load_model(str(TINY))


def prepare_intervention(window, ctx):
    _intervene(window)


def prepare_importance(window, ctx):
    def sweep(view):
        view.metric_combo.setCurrentIndex(view.metric_combo.findData("kl"))
        view.sweep_ready.connect(lambda _s: view.scroll.ensureWidgetVisible(view.ranking, 0, 0))
        view.run_sweep()

    _intervene(window, sweep)


MAPS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "maps"))


def prepare_window_maps(window, ctx):
    """tests/data/maps/bart_cross.npz (tools/make_maps_goldens.py) opened as `attnviz FILE` opens it."""
    panel = window.panel("pretrained")
    panel.auto_load = False
    panel.load_model(os.path.join(MAPS, "bart_cross.npz"))


def prepare_attention_maps_file(window, ctx):
    """demo_maps.npz (written here by attnviz.save: random causal rows, seed 0) opened as `attnviz FILE` opens
    it, then shown in the Attention workspace once it is the session's maps."""
    import tempfile

    import numpy as np

    import attnviz
    from attnviz.ui.app import open_maps_file

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 6, 40, 40)) * 2.5
    x[..., np.triu_indices(40, 1)[0], np.triu_indices(40, 1)[1]] = -np.inf  # causal: no weight on later keys
    w = np.exp(x - x.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    path = os.path.join(tempfile.mkdtemp(prefix="attnviz-shot-"), "demo_maps.npz")
    attnviz.save(path, w.astype(np.float32), [f"tok{i}" for i in range(40)])
    ctx.maps_changed.connect(lambda maps: window.show_workspace("attention") if maps is not None else None)
    open_maps_file(window, path)


def inline_notebook_grid(out: str) -> int:
    """attnviz.show's inline picture of tests/data/maps/bert_batch1.npz, as a notebook shows it."""
    import numpy as np

    from attnviz.api import grid_png

    with np.load(os.path.join(MAPS, "bert_batch1.npz"), allow_pickle=False) as z:
        png = grid_png(z["attentions"])
    with open(out, "wb") as f:
        f.write(png)
    return 0


def shoot(shot: Shot, out: str) -> int:
    """Inside a child process: run the application on this picture's demo, workspace and size."""
    if shot.workspace == INLINE:
        return inline_notebook_grid(out)
    from attnviz.ui.app import main

    prepare = globals()[f"prepare_{shot.name.replace('-', '_')}"]

    def on_shown(app, window):
        window.files.prompts.save_changes = lambda *_a: "discard"
        return prepare(window, window.ctx)

    return main(["--demo", shot.demo, "--workspace", shot.workspace, "--size", shot.size, "--screenshot", out,
                 "--theme", "light"], on_shown=on_shown)


def launch(argv: list[str]) -> int:
    import argparse
    import tempfile
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=repo / "docs" / "images", help="folder for the PNG files")
    ap.add_argument("--only", nargs="*", default=None, help="make only these pictures (names without .png)")
    ap.add_argument("--size", default=None, metavar="WxH", help="take every picture at this window size")
    ap.add_argument("--shoot", nargs=2, metavar=("NAME", "OUT"), help=argparse.SUPPRESS)  # one picture, here
    args = ap.parse_args(argv)
    by_name = {s.name: s for s in SHOTS}
    if args.size is not None:
        w, _, h = args.size.lower().partition("x")
        if not (w.isdigit() and h.isdigit() and int(w) >= 640 and int(h) >= 480):
            ap.error(f"--size {args.size!r}: give the window size as WxH, at least 640x480")
        by_name = {n: replace(s, size=f"{int(w)}x{int(h)}") for n, s in by_name.items()}
    if args.shoot:
        return shoot(by_name[args.shoot[0]], args.shoot[1])
    unknown = sorted(set(args.only or ()) - set(by_name))
    if unknown:
        ap.error(f"no such screenshot: {', '.join(unknown)}; choose from {', '.join(sorted(by_name))}")
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory(prefix="attnviz-shots-") as home:
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(home, "config"), XDG_DATA_HOME=os.path.join(home, "data"),
                   PYTHONPATH=os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p))
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
        for shot in by_name.values():
            if args.only and shot.name not in args.only:
                continue
            if shot.name == "pretrained" and not _minilm():
                print("skipped pretrained: all-MiniLM-L6-v2 is not installed (make setup installs it)", flush=True)
                continue
            if shot.name in ("vision-language", "vlm-generation") and not _tiny_llava_runs():
                print(f"skipped {shot.name}: tests/data/checkpoints/tiny_llava does not run here", flush=True)
                continue
            out = str((args.out / f"{shot.name}.png").resolve())
            size = ["--size", args.size] if args.size is not None else []
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), *size, "--shoot", shot.name, out], env=env,
                                  capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                failed.append(shot.name)
                sys.stderr.write(f"{shot.name}: exit {proc.returncode}\n{proc.stderr[-2000:]}\n")
            else:
                print(f"wrote {out} ({shot.size}, {shot.workspace})", flush=True)
    if failed:
        sys.stderr.write(f"failed: {', '.join(failed)}\n")
        return 1
    return 0


def _minilm() -> bool:
    from attnviz.checkpoints import ready_models

    return "all-MiniLM-L6-v2" in dict(ready_models())


def _tiny_llava_runs() -> bool:
    from attnviz.checkpoints import CheckpointError, load_checkpoint
    from attnviz.sources.image import load_image

    try:
        ckpt = load_checkpoint(TINY_LLAVA)
        ckpt.run([load_image(os.path.join(TINY_LLAVA, "image.png"), alpha="drop")], "USER: <image>\nHi ASSISTANT:")
    except (CheckpointError, OSError, AttributeError, ImportError):
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(launch(sys.argv[1:]))
