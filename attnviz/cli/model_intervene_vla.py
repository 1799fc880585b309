"""``attnviz-cli model ablate`` and ``model patch`` on a SmolVLA robot policy: heads of the VLM prefix or of the
action expert edited, the expert's velocity (the action chunk) before and after.

``ablate POLICY --image CAM0 --image CAM1 --text INSTRUCTION --state x,y,... --heads L.H[,L.H...]
[--stack vlm|expert] [--mode zero|mean] [--noise-seed N] [--time T] --npz OUT`` writes ``velocity_before`` and
``velocity_after`` (Ta, max_action_dim; the first action_dim columns are the action chunk's),
``attentions_before`` / ``attentions_after`` (L, nh, T, T: the VLM's maps over the prefix, the expert's in the
action rows), ``action_attentions_before`` / ``_after`` (L_e, nh, Ta, T), ``max_abs_change`` and ``cosine`` (of
the action chunk before and after), ``map_change`` (L,) and ``expert_map_change`` (L_e,).

``patch POLICY --clean T1 --corrupted T2 --layer L --head H [--stack vlm|expert] [--clean-state x,y,...]`` runs the
corrupted instruction with head L.H's output taken from the clean one's pass (instructions of the same token
count; with ``--clean-state`` the clean pass reads that state instead) and writes ``velocity_clean``,
``velocity_corrupted``, ``velocity_patched`` and ``attentions_patched``.

The pictures, instruction, state, noise seed and flow time are read as ``model inspect`` reads a policy's:
:func:`add_vla_arguments` adds the flags the ablate / patch parsers lack.
"""

from __future__ import annotations

import numpy as np

from attnviz.cli import CliError

STACKS = ("vlm", "expert")


def add_vla_arguments(parser, *, patching: bool = False) -> None:
    """The robot-policy flags of ``model inspect`` on an ablate or patch parser (its ``--stack`` must also offer
    vlm and expert)."""
    parser.add_argument("--state", help="robot policies: the robot state as comma-separated numbers x,y,...")
    parser.add_argument("--noise-seed", type=int, default=0, help="robot policies: seed of the action noise (default 0)")
    parser.add_argument("--time", type=float, default=1.0,
                        help="robot policies: the flow-matching time t in [0, 1] the action expert runs at (default 1.0)")
    if patching:
        parser.add_argument("--clean-state", default=None, metavar="x,y,...",
                            help="robot policies: the state of the clean pass (default: --state)")


def _stack(args, ckpt) -> str:
    stack = getattr(args, "stack", None) or "vlm"
    if stack not in STACKS:
        raise CliError(f"--stack {stack}: {ckpt.name} is a SmolVLA policy, whose heads are in the stacks vlm (the "
                       "VLM's prefix layers) and expert (the action expert's)")
    return stack


def _inputs(args, ckpt):
    """(pictures, state, options) of a policy run, as ``model inspect`` reads them."""
    from attnviz.cli.model_generate import read_picture
    from attnviz.cli.model_vlm import parse_state

    if getattr(args, "target", None) is not None:
        raise CliError(f"--target is for encoder-decoders; {ckpt.name} is a SmolVLA policy")
    if getattr(args, "means", None) is not None:
        raise CliError("--means holds a language model's per-head means from 'model sweep'; a policy's heads are "
                       "not swept: use --mode mean (the mean over the stack's positions)")
    pictures = [read_picture(p) for p in (getattr(args, "image", None) or [])]
    state = parse_state(getattr(args, "state", None))
    opts = {"noise_seed": getattr(args, "noise_seed", 0), "time": getattr(args, "time", 1.0)}
    return pictures, state, opts


def cmd_vla(args, ckpt) -> int:
    """``model ablate`` / ``model patch`` on the SmolVLA policy ``ckpt`` (loaded by the dispatch)."""
    from attnviz.checkpoints import CheckpointError
    from attnviz.checkpoints.intervention_vla import (check_stack_head, check_vla, parse_stack_heads, vla_ablate,
                                                      vla_input, vla_patch)
    from attnviz.cli.npz_out import write_npz

    patching = hasattr(args, "clean")
    try:
        check_vla(ckpt)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    stack = _stack(args, ckpt)
    pictures, state, opts = _inputs(args, ckpt)
    if not patching and not getattr(args, "text", None):
        raise CliError(f"{ckpt.name} is a robot policy: give the task instruction with --text, a picture per camera "
                       f"with --image ({', '.join(ckpt.spec.cameras)}) and the state with --state")
    try:
        if patching:
            from attnviz.cli.model_vlm import parse_state

            layer, head = check_stack_head(ckpt, stack, args.layer, args.head)
            clean_state = parse_state(getattr(args, "clean_state", None))
            corrupted = vla_input(ckpt, pictures, args.corrupted, state=state, **opts)
            clean = vla_input(ckpt, pictures, args.clean, state=state if clean_state is None else clean_state, **opts)
            eff = vla_patch(ckpt, clean, corrupted, layer, head, stack=stack)
        else:
            heads = parse_stack_heads(ckpt, args.heads, stack)
            inp = vla_input(ckpt, pictures, args.text, state=state, **opts)
            eff = vla_ablate(ckpt, inp, heads, stack=stack, mode=args.mode)
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    print(ckpt.describe())
    res = eff.before.result
    seg = ", ".join(f"{s.name} {s.start}..{s.stop - 1}" for s in res.segments)
    if patching:
        write_npz(args.npz, {"velocity_clean": eff.clean.velocity, "velocity_corrupted": eff.before.velocity,
                             "velocity_patched": eff.after.velocity, "attentions_patched": eff.after.attentions,
                             "action_attentions_patched": eff.after.action_attentions,
                             "max_abs_change": np.float64(eff.max_abs_change), "cosine": np.float64(eff.cosine)})
        print(f"{stack} head {layer}.{head} patched from the clean input into the corrupted one over {eff.before.T} "
              f"tokens ({seg}) -> {args.npz}")
    else:
        write_npz(args.npz, {"heads": np.array(heads, dtype=np.int64), "stack": np.array(stack),
                             "velocity_before": eff.before.velocity, "velocity_after": eff.after.velocity,
                             "attentions_before": eff.before.attentions, "attentions_after": eff.after.attentions,
                             "action_attentions_before": eff.before.action_attentions,
                             "action_attentions_after": eff.after.action_attentions,
                             "max_abs_change": np.float64(eff.max_abs_change), "cosine": np.float64(eff.cosine),
                             "map_change": eff.map_change, "expert_map_change": eff.expert_map_change})
        print(f"{eff.applied} over {eff.before.T} tokens ({seg}) -> {args.npz}")
    print(f"action chunk ({eff.before.velocity.shape[0]} x {ckpt.spec.action_dim}): max |change| "
          f"{eff.max_abs_change:.4g}, cosine before / after {eff.cosine:.6f}")
    print("largest map change per layer (the VLM's prefix rows with the expert's action rows beside them): "
          + " ".join(f"{v:.3f}" for v in eff.map_change))
    print("largest map change per expert layer: " + " ".join(f"{v:.3f}" for v in eff.expert_map_change))
    return 0
