"""Write the SmolVLA intervention golden of tests/checkpoints/test_intervention_vla.py.

Runs in the lerobot venv that tools/make_vla_goldens.py describes (lerobot 0.4.4, torch on CPU); attnviz itself
never imports torch:

    cd /work/main && /tmp/lerobot/bin/python tools/make_vla_intervention_goldens.py

It loads tests/data/checkpoints/tiny_smolvla as lerobot reads it back (``SmolVLAPolicy.from_pretrained``, float32),
feeds it the golden's inputs (the two camera PNGs, the instruction, the state, through the policy's own
preprocessor), runs the VLM prefix pass and one ``denoise_step`` at the golden's noise seed and flow time, and
writes ``golden_interventions.npz`` with the expert's velocity v_t (Ta, max_action_dim) of each case below.

Heads are edited by PyTorch forward pre-hooks on the attention output projections, where lerobot's
``SmolVLMWithExpertModel.forward`` hands each stack its slice of the merged heads (B, L, nh * hd): the VLM text
layers' ``self_attn.o_proj`` (called over the prefix during the prefix pass) and the expert layers'
``self_attn.o_proj`` (called over the action tokens during the denoising step). A knockout sets the removed edges
to float32's minimum in the mask inside the policy's attention function, which is replaced, as
make_vla_goldens.py does, by the same arithmetic as lerobot's ``eager_attention_forward`` (a per-head mask
allowed, the weights kept for the maps): the VLM's calls read the knockout's [:Tp, :Tp] block, the expert's its
action rows [Tp:, :Tk].

Cases (``velocity_<case>``; ``prefix_attentions_<case>`` (L, nh, Tp, Tp) and ``expert_attentions_<case>``
(L_e, nh, Ta, Tp + Ta) for those in MAPS; the plain pass's maps are golden.npz's):

* ``plain``; ``vlm_zero`` / ``vlm_mean`` (VLM heads ABLATE_VLM zeroed or set to their mean over the prefix
  positions); ``expert_zero`` / ``expert_mean`` (expert heads ABLATE_EXPERT, the mean over the action positions);
  ``vlm_scale`` / ``expert_scale`` (SCALE_VLM / SCALE_EXPERT times their factors);
* ``patch_vlm_state`` (VLM head PATCH_VLM from the pass over CLEAN_STATE), ``patch_expert_state`` (expert head
  PATCH_EXPERT from the same), ``patch_vlm_picture`` (VLM head PATCH_VLM from the pass with camera 0 flipped left
  to right, kept as ``clean_picture0``);
* ``knockout_actions_state`` (no action token sees the state, in every expert layer), ``knockout_language_wrist``
  (the instruction does not see the wrist camera, VLM layers KO_VLM_LAYERS), ``knockout_expert_head`` (the
  actions do not see the images, expert layer KO_HEAD[0], head KO_HEAD[1] only); their removed edges are kept as
  ``removed_<case>`` (T, T) over the whole sequence (prefix then actions). Every row keeps a key;
* ``markers_<case>`` on tiny_smolvla_markers (image markers, a padded empty camera, the instruction padded to
  max_length, two expert layers beside VLM layers 0 and 2): ``markers_velocity_plain``, ``_vlm_zero``,
  ``_vlm_mean``, ``_expert_zero``, ``_expert_mean`` (MARKER_ABLATE_VLM / MARKER_ABLATE_EXPERT) and
  ``_knockout_actions_state``. lerobot's sequence holds the pad tokens it masks for every query, attnviz's leaves
  them out: a mean is taken over the valid (unpadded) positions, and the knockout's edges (``markers_removed``)
  are over attnviz's tokens, mapped to lerobot's.

The maps are kept over attnviz's tokens (lerobot's pads left out).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "tests" / "data" / "checkpoints" / "tiny_smolvla"
sys.path.insert(0, str(ROOT / "tools"))
from make_vla_goldens import CAMERAS, INSTRUCTION, NOISE_SEED, STATE, STATE_MEAN, STATE_STD, TIME, noise  # noqa: E402

ABLATE_VLM = [(0, 1), (2, 3)]
ABLATE_EXPERT = [(1, 1), (3, 0)]
SCALE_VLM, FACTOR_VLM = [(1, 0), (3, 2)], 2.5
SCALE_EXPERT, FACTOR_EXPERT = [(0, 2), (2, 1)], -1.5
PATCH_VLM, PATCH_EXPERT = (1, 2), (2, 3)
CLEAN_STATE = [-0.5, 0.25, 0.0, 1.0]
KO_VLM_LAYERS = (0, 2)
KO_HEAD = (2, 1)
MARKER_CAMERAS, MARKER_INSTRUCTION = {"observation.images.front": (24, 24)}, "open the drawer"  # make_vla_goldens.main
MARKER_ABLATE_VLM, MARKER_ABLATE_EXPERT = [(1, 2), (2, 0)], [(0, 3), (1, 1)]
MAPS = ("vlm_zero", "expert_mean", "knockout_actions_state", "knockout_language_wrist",
        "knockout_expert_head")


class Attention:
    """lerobot's eager attention arithmetic (q and k in float32, masked cells at float32's minimum, softmax,
    weights times values), with a knockout per call and the weights recorded."""

    def __init__(self, model):
        self.model, self.calls, self.knock = model, [], None

    def __call__(self, attention_mask, batch_size, head_dim, query_states, key_states, value_states):
        m = self.model
        nh, nkv = m.num_attention_heads, m.num_key_value_heads
        g = nh // nkv
        k = key_states[:, :, :, None, :].expand(*key_states.shape[:3], g, head_dim).reshape(
            batch_size, key_states.shape[1], nh, head_dim)
        v = value_states[:, :, :, None, :].expand(*value_states.shape[:3], g, head_dim).reshape(
            batch_size, value_states.shape[1], nh, head_dim)
        q = query_states.to(torch.float32).transpose(1, 2)
        k = k.to(torch.float32).transpose(1, 2)
        w = torch.matmul(q, k.transpose(2, 3)) * head_dim**-0.5  # (B, nh, Tq, Tk)
        allowed = attention_mask[:, None, :, :]  # (B, 1, Tq, Tk)
        if self.knock is not None:
            removed = self.knock(len(self.calls), tuple(attention_mask.shape[-2:]))
            if removed is not None:
                allowed = allowed & ~removed
        w = torch.where(allowed, w, torch.finfo(w.dtype).min)
        probs = torch.nn.functional.softmax(w, dim=-1).to(v.dtype)
        self.calls.append(probs[0].numpy().copy())
        out = torch.matmul(probs, v.permute(0, 2, 1, 3)).permute(0, 2, 1, 3)
        return out.reshape(batch_size, -1, nh * head_dim)


def head_hook(proj, head_dim: int, fn):
    """A forward pre-hook on an o_proj: ``fn`` edits its input viewed as (B, L, nh, hd)."""
    def pre(module, args):
        x = args[0].clone()
        b, t, _ = x.shape
        fn(x.view(b, t, -1, head_dim))
        return (x,) + tuple(args[1:])

    return proj.register_forward_pre_hook(pre)


class Policy:
    """One policy folder as lerobot reads it back, its inputs, and its pass under hooks and knockouts."""

    def __init__(self, folder: Path, cameras: dict, state: list, instruction: str):
        from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy
        from lerobot.policies.smolvla.processor_smolvla import make_smolvla_pre_post_processors

        os.chdir(folder)  # the policy names its SmolVLM folder relative to itself (vlm_model_name)
        self.folder, self.cameras, self.state, self.instruction = folder, cameras, state, instruction
        self.policy = SmolVLAPolicy.from_pretrained(folder)
        self.policy.eval()
        n = len(state)  # the statistics make_vla_goldens.py saved with the policy
        stats = {"observation.state": {"mean": torch.tensor(STATE_MEAN[:n]), "std": torch.tensor(STATE_STD[:n])},
                 "action": {"mean": torch.zeros(3), "std": torch.ones(3)}}
        self.pre, _post = make_smolvla_pre_post_processors(self.policy.config, dataset_stats=stats)
        vw = self.vw = self.policy.model.vlm_with_expert
        self.att = Attention(vw)
        vw.eager_attention_forward = self.att
        self.hd = vw.vlm.config.text_config.head_dim
        self.nh = vw.num_attention_heads
        self.proj = {"vlm": [layer.self_attn.o_proj for layer in vw.get_vlm_model().text_model.layers],
                     "expert": [layer.self_attn.o_proj for layer in vw.lm_expert.layers]}
        self.chunk, adim = self.policy.config.chunk_size, self.policy.config.max_action_dim
        # the expert layer each denoising-step attention call belongs to (VLM layers without one make no call)
        beside = [j for j in vw.get_model_layers([vw.get_vlm_model().text_model, vw.lm_expert])[1] if j is not None]
        self.call_expert = [list(vw.lm_expert.layers).index(layer) for layer in beside]
        self.pictures = [np.array(Image.open(folder / f"camera{i}.png").convert("RGB")) for i in range(len(cameras))]
        self.x_t = torch.from_numpy(noise(NOISE_SEED, (self.chunk, adim)))[None]
        self.t = torch.tensor([TIME], dtype=torch.float32)
        self.valid = None  # (Tp,) lerobot's prefix pad mask: the tokens attnviz keeps

    def run(self, pics=None, state=None, hooks=(), knock=None, record=None):
        """One prefix pass and one denoising step -> (velocity (Ta, A), prefix maps (L, nh, Tp, Tp) and expert
        maps (L_e, nh, Ta, Tp + Ta) over attnviz's tokens); ``hooks`` removed after; ``record`` collects every
        o_proj input; ``knock`` (T, T) removed edges per stack and layer, see :meth:`knockout`."""
        from lerobot.policies.smolvla.modeling_smolvla import make_att_2d_masks

        pol, m, vw, att = self.policy, self.policy.model, self.vw, self.att
        obs = {key: torch.from_numpy(p).permute(2, 0, 1).float() / 255.0
               for key, p in zip(self.cameras, pics or self.pictures)}
        obs["observation.state"] = torch.tensor(self.state if state is None else state)
        batch = self.pre({**obs, "task": self.instruction})
        images, img_masks = pol.prepare_images(batch)
        lang, lang_mask = batch["observation.language.tokens"], batch["observation.language.attention_mask"]
        recs = []
        if record is not None:
            for name, projs in self.proj.items():
                for i, p in enumerate(projs):
                    recs.append(p.register_forward_pre_hook(
                        lambda mod, a, name=name, i=i: record.__setitem__((name, i), a[0].clone())))
        try:
            with torch.no_grad():
                embs, pad, ar = m.embed_prefix(images, img_masks, lang, lang_mask, state=pol.prepare_state(batch))
                self.valid = pad[0].numpy().astype(bool)
                Tp = embs.shape[1]
                att.calls, att.knock = [], None if knock is None else (lambda n, s: knock("vlm", n, s, Tp))
                _, kv = vw.forward(attention_mask=make_att_2d_masks(pad, ar), position_ids=torch.cumsum(pad, dim=1) - 1,
                                   past_key_values=None, inputs_embeds=[embs, None], use_cache=True, fill_kv_cache=True)
                prefix_maps = np.stack(att.calls)  # (L, nh, Tp, Tp)
                att.calls, att.knock = [], None if knock is None else (lambda n, s: knock("expert", n, s, Tp))
                v = m.denoise_step(pad, kv, self.x_t, self.t)
                expert_maps = np.zeros((len(self.proj["expert"]), self.nh, self.chunk, Tp + self.chunk), np.float32)
                for j, pr in enumerate(att.calls):
                    expert_maps[self.call_expert[j], :, :, :pr.shape[-1]] = pr
                att.knock = None
        finally:
            for h in list(hooks) + recs:
                h.remove()
        keep = np.flatnonzero(self.valid)
        kx = np.concatenate([keep, Tp + np.arange(self.chunk)])
        return v[0].numpy(), prefix_maps[:, :, keep][:, :, :, keep], expert_maps[..., kx]

    def _kx(self) -> np.ndarray:
        """attnviz's token i is lerobot's token kx[i] (lerobot's pads, masked for every query, left out)."""
        keep = np.flatnonzero(self.valid)
        return np.concatenate([keep, self.valid.size + np.arange(self.chunk)])

    def ablation(self, stack, heads, how):
        """Heads set to 0 or to their mean over the stack's valid positions (the prefix's unpadded tokens)."""
        rows = torch.from_numpy(self.valid) if stack == "vlm" else torch.ones(self.chunk, dtype=torch.bool)

        def fn(h, head):
            h[:, :, head] = 0 if how == "zero" else h[:, rows, head].mean(dim=1, keepdim=True)
        return [head_hook(self.proj[stack][layer], self.hd, lambda h, head=head: fn(h, head)) for layer, head in heads]

    def scaling(self, stack, heads, factor):
        def fn(h, head):
            h[:, :, head] *= factor
        return [head_hook(self.proj[stack][layer], self.hd, lambda h, head=head: fn(h, head)) for layer, head in heads]

    def patching(self, stack, lh, clean):
        layer, head = lh

        def fn(h):
            h[:, :, head] = clean.view(*clean.shape[:2], -1, self.hd)[:, :, head]
        return [head_hook(self.proj[stack][layer], self.hd, fn)]

    def knockout(self, removed: np.ndarray, stack: str, layers, head=None):
        """The knock function of :meth:`run`: ``removed`` (T, T) over attnviz's tokens, in ``layers`` of ``stack``
        (every head, or ``head`` only)."""
        kx = self._kx()
        full = np.zeros((self.valid.size + self.chunk,) * 2, dtype=bool)  # lerobot's (T, T)
        full[np.ix_(kx, kx)] = removed
        per = torch.zeros(1, self.nh, *full.shape, dtype=torch.bool)
        if head is None:
            per[0, :] = torch.from_numpy(full)
        else:
            per[0, head] = torch.from_numpy(full)

        def knock(which, n, qk, tp):
            if which != stack:
                return None
            layer = n if which == "vlm" else self.call_expert[n]
            if layer not in layers:
                return None
            rows = slice(0, tp) if which == "vlm" else slice(tp, tp + self.chunk)
            return per[:, :, rows, : qk[1]]

        return knock


def main_policy() -> dict:
    """The cases of the module doc on tiny_smolvla."""
    P = Policy(FOLDER, CAMERAS, STATE, INSTRUCTION)
    out: dict[str, np.ndarray] = {}

    def keep(name, res):
        v, pm, em = res
        out[f"velocity_{name}"] = v
        if name in MAPS:
            out[f"prefix_attentions_{name}"] = pm
            out[f"expert_attentions_{name}"] = em

    keep("plain", P.run())
    g = np.load(FOLDER / "golden.npz")
    case = [i for i, (seed, tt) in enumerate(g["velocity_cases"]) if seed == NOISE_SEED and np.isclose(tt, TIME)][0]
    print(f"tiny_smolvla plain pass against golden.npz: {np.abs(out['velocity_plain'] - g['velocities'][case]).max():.2e}")
    heads = {"vlm": ABLATE_VLM, "expert": ABLATE_EXPERT}
    for how in ("zero", "mean"):
        for stack in ("vlm", "expert"):
            keep(f"{stack}_{how}", P.run(hooks=P.ablation(stack, heads[stack], how)))
    keep("vlm_scale", P.run(hooks=P.scaling("vlm", SCALE_VLM, FACTOR_VLM)))
    keep("expert_scale", P.run(hooks=P.scaling("expert", SCALE_EXPERT, FACTOR_EXPERT)))
    clean_picture0 = np.ascontiguousarray(P.pictures[0][:, ::-1])  # (H, W, 3)
    rec_state, rec_pic = {}, {}
    P.run(state=CLEAN_STATE, record=rec_state)
    P.run(pics=[clean_picture0] + P.pictures[1:], record=rec_pic)
    keep("patch_vlm_state", P.run(hooks=P.patching("vlm", PATCH_VLM, rec_state[("vlm", PATCH_VLM[0])])))
    keep("patch_expert_state", P.run(hooks=P.patching("expert", PATCH_EXPERT, rec_state[("expert", PATCH_EXPERT[0])])))
    keep("patch_vlm_picture", P.run(hooks=P.patching("vlm", PATCH_VLM, rec_pic[("vlm", PATCH_VLM[0])])))

    Tp = int(P.valid.sum())
    T = Tp + P.chunk
    n_img = Tp - 1 - int(g["lang_ids"].size)  # images, then the instruction, then the state
    per_cam = n_img // len(CAMERAS)
    actions, language = slice(Tp, T), slice(n_img, Tp - 1)
    n_e = len(P.proj["expert"])
    removed = np.zeros((T, T), dtype=bool)
    removed[actions, Tp - 1] = True
    out["removed_knockout_actions_state"] = removed
    keep("knockout_actions_state", P.run(knock=P.knockout(removed, "expert", range(n_e))))
    removed = np.zeros((T, T), dtype=bool)
    removed[language, per_cam:2 * per_cam] = True
    out["removed_knockout_language_wrist"] = removed
    keep("knockout_language_wrist", P.run(knock=P.knockout(removed, "vlm", KO_VLM_LAYERS)))
    removed = np.zeros((T, T), dtype=bool)
    removed[actions, :n_img] = True
    out["removed_knockout_expert_head"] = removed
    keep("knockout_expert_head", P.run(knock=P.knockout(removed, "expert", (KO_HEAD[0],), KO_HEAD[1])))
    out.update(
        instruction=np.array(INSTRUCTION), state=np.array(STATE, np.float32), clean_state=np.array(CLEAN_STATE, np.float32),
        clean_picture0=clean_picture0, noise_seed=np.int64(NOISE_SEED), time=np.float32(TIME),
        ablate_vlm=np.array(ABLATE_VLM), ablate_expert=np.array(ABLATE_EXPERT), scale_vlm=np.array(SCALE_VLM),
        factor_vlm=np.float64(FACTOR_VLM), scale_expert=np.array(SCALE_EXPERT), factor_expert=np.float64(FACTOR_EXPERT),
        patch_vlm=np.array(PATCH_VLM), patch_expert=np.array(PATCH_EXPERT), ko_vlm_layers=np.array(KO_VLM_LAYERS),
        ko_head=np.array(KO_HEAD))
    return out


def markers_policy() -> dict:
    """The ``markers_<case>`` cases of the module doc on tiny_smolvla_markers."""
    folder = FOLDER.parent / "tiny_smolvla_markers"
    P = Policy(folder, MARKER_CAMERAS, STATE[:3], MARKER_INSTRUCTION)
    out = {"markers_velocity_plain": P.run()[0]}
    heads = {"vlm": MARKER_ABLATE_VLM, "expert": MARKER_ABLATE_EXPERT}
    for stack in ("vlm", "expert"):
        for how in ("zero", "mean"):
            out[f"markers_velocity_{stack}_{how}"] = P.run(hooks=P.ablation(stack, heads[stack], how))[0]
    Tp = int(P.valid.sum())
    T = Tp + P.chunk
    removed = np.zeros((T, T), dtype=bool)
    removed[Tp:, Tp - 1] = True  # the actions do not see the state
    out["markers_removed"] = removed
    out["markers_velocity_knockout_actions_state"] = P.run(knock=P.knockout(removed, "expert", range(2)))[0]
    out.update(markers_instruction=np.array(MARKER_INSTRUCTION), markers_state=np.array(STATE[:3], np.float32),
               markers_ablate_vlm=np.array(MARKER_ABLATE_VLM), markers_ablate_expert=np.array(MARKER_ABLATE_EXPERT))
    return out


def main() -> None:
    out = {**main_policy(), **markers_policy()}
    path = FOLDER / "golden_interventions.npz"
    np.savez_compressed(path, **out)
    for prefix in ("velocity_", "markers_velocity_"):
        plain = out[prefix + "plain"]
        for k in sorted(out):
            if k.startswith(prefix) and k != prefix + "plain":
                print(f"  {k:40} max |dv| {np.abs(out[k] - plain).max():.4f}")
    print(f"wrote {path} ({path.stat().st_size:,} B)")


if __name__ == "__main__":
    main()
