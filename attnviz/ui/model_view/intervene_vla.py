"""The Intervene tab on a SmolVLA robot policy (in the panel's vision-language page): the parts of
:class:`~attnviz.ui.model_view.intervene_view.InterveneView` that differ from a vision-language model's -- the stack
whose heads are edited (the session's ``Interventions.stack``: ``vlm``, the VLM's layers over the prefix, or
``expert``, the action expert's), the policy's inputs (the page's pictures, instruction, state, noise seed and flow
time), the study and the sweep jobs (:mod:`attnviz.checkpoints.intervention_vla_study`), and the read-out: the
action chunk's velocity before and after (its largest change, the cosine, the change per action dimension) instead
of a next-token distribution.
"""

from __future__ import annotations

import html

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.intervention_vla import STACKS, stack_size, vla_input
from attnviz.checkpoints.intervention_vla_study import VLA_METRICS, vla_window_study, vla_window_sweep
from attnviz.checkpoints.study import parse_options, prompt_from_field

STACK_LABELS = {"vlm": "VLM (prefix layers)", "expert": "action expert"}
METRIC_TEXT = {"action_change": "largest change of the action chunk", "action_cosine": "1 − cosine of the action chunk"}
METRIC_NAMES = tuple((k, METRIC_TEXT[k]) for k in VLA_METRICS)  # the sweep's measures, as the metric menu lists them


def supported(ckpt) -> bool:
    return getattr(ckpt, "kind", None) == "vlm" and getattr(ckpt, "family", None) == "smolvla"


def stack(spec) -> str:
    """The policy stack the session's interventions name (an encoder-decoder's stack: the VLM's)."""
    return spec.stack if spec.stack in STACKS else "vlm"


def shape(ckpt, spec) -> tuple[int, int]:
    return stack_size(ckpt, stack(spec))


def result(panel):
    """The MultimodalAttention of the page's policy run, None without one."""
    r = getattr(panel.outcome, "result", None)
    return r if r is not None and getattr(r, "family", None) == "smolvla" else None


def inputs(ckpt, panel):
    """The VlaInput of the page's run: its pictures, the instruction field, the state, seed and t fields."""
    r = result(panel)
    try:
        opts = parse_options(getattr(ckpt, "options", ()), panel.vlm_inputs.option_texts())
    except ValueError as exc:
        raise CheckpointError(str(exc)) from None
    text = prompt_from_field(panel.vlm_inputs.prompt_edit.text())
    return vla_input(ckpt, list(r.images), text, state=opts.get("state"), noise_seed=opts.get("noise_seed", 0),
                     time=opts.get("time", 1.0))


def why_not_ready(ckpt) -> str:
    return "Run the policy on its pictures, an instruction and a state first."


def study_job(ckpt, panel, spec, allowed):
    inp = inputs(ckpt, panel)
    return lambda: vla_window_study(ckpt, inp, spec, stack(spec), allowed=allowed)


def sweep_job(ckpt, panel, spec, metric, stop, progress):
    inp = inputs(ckpt, panel)
    return lambda: vla_window_sweep(ckpt, inp, stack(spec), mode=spec.mode, factor=spec.factor, metric=metric,
                                    cancelled=stop.is_set, progress=progress)


def code(ckpt, panel, spec, allowed) -> dict:
    """The lerobot hook script of the session's interventions on the page's inputs
    (:func:`attnviz.checkpoints.intervention_vla_code.vla_script`; its pictures saved beside it)."""
    from attnviz.checkpoints.intervention_vla_code import vla_script

    return vla_script(ckpt, inputs(ckpt, panel), spec, stack(spec), allowed=allowed)


def results_html(eff) -> str:
    """The read-out beside the maps: the action chunk before and after."""
    change = eff.dimension_change()
    before, after = eff.actions_before, eff.actions_after
    rows = "".join(f"<tr><td>a{j}</td><td align='right'>{before[:, j].mean():+.4f}</td>"
                   f"<td align='right'>{after[:, j].mean():+.4f}</td><td align='right'>{change[j]:.3g}</td></tr>"
                   for j in range(min(len(change), 12)))
    more = f"<p>… {len(change) - 12} more dimensions</p>" if len(change) > 12 else ""
    applied = "; ".join(eff.applied) or "nothing changed (no intervention)"
    return (f"<p>the action chunk's velocity ({before.shape[0]} steps × {before.shape[1]} dimensions): largest "
            f"change <b>{eff.max_abs_change:.4g}</b>, cosine before / after <b>{eff.cosine:.6f}</b></p>"
            f"<table cellspacing='2'><tr><th align='left'>dim</th><th align='right'>mean before</th>"
            f"<th align='right'>mean after</th><th align='right'>max |Δ|</th></tr>{rows}</table>{more}"
            f"<p><i>{html.escape(applied)}</i></p>")


def labels(panel, stack_name: str, rows: int, cols: int):
    """(row labels, column labels) of the stack's maps: the prefix's tokens, or the action rows over every token."""
    r = result(panel)
    if r is None:
        return None, None
    names = list(r.labels)
    q = names[:rows] if stack_name == "vlm" else names[len(names) - rows:]
    k = names[:cols]
    return (q if len(q) == rows else None), (k if len(k) == cols else None)


def fingerprint(ckpt, panel) -> np.ndarray | None:
    r = result(panel)
    return None if r is None else np.asarray(r.ids, dtype=np.int64)
