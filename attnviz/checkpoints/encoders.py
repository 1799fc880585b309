"""Numpy forward passes of RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT, ALBERT and MPNet, collecting every
attention map.

They reuse BERT's blocks (:func:`attnviz.checkpoints.forward.bert_blocks`) where they can and return the
same ``(attentions (L, nh, T, T), hidden (T, C))``; what differs is the embeddings and DistilBERT's names.
ALBERT's embeddings are narrower than the layers and projected up (``embedding_hidden_mapping_in``), and its
layers share weights: ``num_hidden_groups`` sets of one layer each, layer i running group
``int(i / (L / groups))`` (one group for every layer in the published models). MPNet adds one learned
relative position bias (T5-style buckets, 32 of them, up to distance 128; the same (nh, T, T) bias in
every layer) to the scaled scores. A ``terms`` dict passed to :func:`forward_encoder` receives the
score terms of such a model separately: ``"content"`` (q k^T / sqrt(hs), (L, nh, T, T)) and
``"position bias"`` (the bias, broadcast to (L, nh, T, T)); their sum is what the softmax takes.

DeBERTa v2 and v3 (model_type ``deberta-v2``, :func:`_deberta`) score each pair by three terms, each divided
by sqrt(hs * (1 + the number of position terms)): content to content ``q_i . k_j``, content to position
``q_i . pk[r(i, j)]`` and position to content ``k_j . pq[r(j, i)]``, where pk / pq are the (layer-normed)
relative-distance embeddings through the key / query projections (or their own ``pos_key_proj`` /
``pos_query_proj`` when ``share_att_key`` is false) and r the relative distance i - j, log-bucketed when
``position_buckets`` > 0, shifted by the span and clamped to the table. ``terms`` receives them as
``"content-to-content"``, ``"content-to-position"`` and ``"position-to-content"`` (L, nh, T, T), summing to the
scores. DeBERTa v2's convolution after the first layer (``conv_kernel_size``) is applied too. DeBERTa v1
(``deberta``) runs the same way with its own layout: one fused ``in_proj`` (q, k, v interleaved per head)
plus ``q_bias`` / ``v_bias``, ``pos_proj`` / ``pos_q_proj``, no buckets, and a span of min(T, max_relative)
rows either side of the table's centre.

:func:`parse_text_family` and :func:`text_family_tensors` read ALBERT's, MPNet's and DeBERTa v2's config.json
and list their tensors (``families`` dispatches to them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from attnviz.checkpoints.errors import CheckpointError
from attnviz.checkpoints.forward import _Cast, bert_blocks, biased_attention
from attnviz.checkpoints.layers import activation, layer_norm, linear, self_attention, split_heads
from attnviz.checkpoints.model_config import CheckpointConfig, act_field, bool_field, eps_field, int_field

TEXT_FAMILY_TYPES = ("albert", "mpnet", "deberta-v2", "deberta")  # parsed here, run by forward_encoder
MPNET_BUCKETS, MPNET_MAX_DISTANCE = 32, 128  # MPNetEncoder.compute_position_bias's fixed arguments
MPNET_PAD = 1  # MPNetEmbeddings.padding_idx: fixed at 1 whatever pad_token_id says


def position_ids(c: CheckpointConfig, ids: np.ndarray) -> np.ndarray:
    """(T,) rows of the position table: 0..T-1, or RoBERTa's count of non-padding tokens after the pad index."""
    if c.padding_idx < 0:
        return np.arange(ids.shape[0])
    real = ids != c.padding_idx  # (T,)
    return np.cumsum(real) * real + c.padding_idx  # (T,) pad + 1 + i as fairseq made them; padding gets row pad


def forward_encoder(c: CheckpointConfig, weights, ids: np.ndarray, *, dtype=np.float32, kernel: str = "auto", edit=None,
                    terms: dict | None = None):
    """RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT, ALBERT or MPNet on token ids (T,), no padding; ``edit``: an
    intervention, applied as in :func:`attnviz.checkpoints.forward.bert_blocks`;
    ``terms``: a dict that receives MPNet's score terms (module docstring), left empty by the others."""
    W = _Cast(weights, dtype)
    if c.model_type == "distilbert":
        return _distilbert(c, W, ids, dtype, kernel, edit)
    if c.model_type == "albert":
        return _albert(c, W, ids, dtype, kernel, edit)
    if c.model_type == "mpnet":
        return _mpnet(c, W, ids, dtype, kernel, edit, terms)
    if c.model_type in ("deberta-v2", "deberta"):
        return _deberta(c, W, ids, dtype, kernel, edit, terms)
    T = ids.shape[0]
    x = W.rows("embeddings.word_embeddings.weight", ids)  # (T, E)
    if c.type_vocab_size:
        x = x + W.rows("embeddings.token_type_embeddings.weight", np.zeros(T, dtype=np.int64))  # (T, E)
    x = x + W.rows("embeddings.position_embeddings.weight", position_ids(c, ids))  # (T, E)
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)  # (T, E)
    if W.get("embeddings_project.weight") is not None:  # ELECTRA: narrower embeddings projected up
        x = linear(x, W["embeddings_project.weight"], W["embeddings_project.bias"])  # (T, C)
    return bert_blocks(c, W, x, None, dtype, kernel, edit)


def _distilbert(c: CheckpointConfig, W: _Cast, ids: np.ndarray, dtype, kernel: str, edit=None):
    T = ids.shape[0]
    x = W.rows("embeddings.word_embeddings.weight", ids) + W.rows("embeddings.position_embeddings.weight", slice(0, T))
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)  # (T, C)
    scale = 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"transformer.layer.{i}."
        q, k, v = (linear(x, W[p + f"attention.{n}.weight"], W[p + f"attention.{n}.bias"])
                   for n in ("q_lin", "k_lin", "v_lin"))  # 3 x (T, C)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, None if edit is None else edit.mask(i, None), scale,
                                      kernel)  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        a = linear(ctx, W[p + "attention.out_lin.weight"], W[p + "attention.out_lin.bias"])  # (T, C)
        x = layer_norm(a + x, W[p + "sa_layer_norm.weight"], W[p + "sa_layer_norm.bias"], c.ln_eps)
        h = activation(c.act, linear(x, W[p + "ffn.lin1.weight"], W[p + "ffn.lin1.bias"]))  # (T, ff)
        h = linear(h, W[p + "ffn.lin2.weight"], W[p + "ffn.lin2.bias"])  # (T, C)
        x = layer_norm(h + x, W[p + "output_layer_norm.weight"], W[p + "output_layer_norm.bias"], c.ln_eps)
    return atts, x


# ---- ALBERT ---------------------------------------------------------------------------------------------


def albert_group(c: CheckpointConfig, i: int) -> int:
    """The weight group layer i runs, as AlbertTransformer computes it (a float division, truncated)."""
    return int(i / (c.n_layer / c.n_groups))


def _albert(c: CheckpointConfig, W: _Cast, ids: np.ndarray, dtype, kernel: str, edit):
    T = ids.shape[0]
    x = W.rows("embeddings.word_embeddings.weight", ids)  # (T, E)
    if c.type_vocab_size:
        x = x + W.rows("embeddings.token_type_embeddings.weight", np.zeros(T, dtype=np.int64))  # (T, E)
    x = x + W.rows("embeddings.position_embeddings.weight", slice(0, T))  # (T, E)
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)  # (T, E)
    x = linear(x, W["encoder.embedding_hidden_mapping_in.weight"], W["encoder.embedding_hidden_mapping_in.bias"])  # (T, C)
    scale = 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.albert_layer_groups.{albert_group(c, i)}.albert_layers.0."
        q, k, v = (linear(x, W[p + f"attention.{n}.weight"], W[p + f"attention.{n}.bias"])
                   for n in ("query", "key", "value"))  # 3 x (T, C)
        ctx, atts[i] = self_attention(q, k, v, c.n_head, None if edit is None else edit.mask(i, None), scale,
                                      kernel)  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        a = linear(ctx, W[p + "attention.dense.weight"], W[p + "attention.dense.bias"])  # (T, C)
        x = layer_norm(x + a, W[p + "attention.LayerNorm.weight"], W[p + "attention.LayerNorm.bias"], c.ln_eps)
        h = activation(c.act, linear(x, W[p + "ffn.weight"], W[p + "ffn.bias"]))  # (T, ff)
        h = linear(h, W[p + "ffn_output.weight"], W[p + "ffn_output.bias"])  # (T, C)
        x = layer_norm(h + x, W[p + "full_layer_layer_norm.weight"], W[p + "full_layer_layer_norm.bias"], c.ln_eps)
    return atts, x


# ---- MPNet ----------------------------------------------------------------------------------------------


def mpnet_bias(c: CheckpointConfig, table: np.ndarray, T: int) -> np.ndarray:
    """(nh, T, T) relative position bias of MPNet's scores from the (buckets, nh) table."""
    from attnviz.checkpoints.seq2seq_t5 import relative_buckets  # T5's bucketing: the same rule, bidirectional

    b = relative_buckets(T, T, True, MPNET_BUCKETS, MPNET_MAX_DISTANCE)  # (T, T)
    return np.ascontiguousarray(table[b].transpose(2, 0, 1))  # (nh, T, T)


def _mpnet(c: CheckpointConfig, W: _Cast, ids: np.ndarray, dtype, kernel: str, edit, terms: dict | None):
    T = ids.shape[0]
    x = W.rows("embeddings.word_embeddings.weight", ids) + W.rows("embeddings.position_embeddings.weight",
                                                                   position_ids(c, ids))  # (T, C)
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)  # (T, C)
    bias = mpnet_bias(c, W["encoder.relative_attention_bias.weight"], T)  # (nh, T, T)
    scale = 1.0 / math.sqrt(c.head_size)
    atts = np.empty((c.n_layer, c.n_head, T, T), dtype=dtype)  # (L, nh, T, T)
    content = np.empty_like(atts) if terms is not None else None  # (L, nh, T, T)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.layer.{i}."
        q, k, v = (linear(x, W[p + f"attention.attn.{n}.weight"], W[p + f"attention.attn.{n}.bias"])
                   for n in ("q", "k", "v"))  # 3 x (T, C)
        ctx, atts[i] = biased_attention(q, k, v, c.n_head, bias, scale, kernel,
                                        mask=None if edit is None else edit.mask(i, None),
                                        content=None if content is None else content[i])  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, c.n_head)
        a = linear(ctx, W[p + "attention.attn.o.weight"], W[p + "attention.attn.o.bias"])  # (T, C)
        x = layer_norm(a + x, W[p + "attention.LayerNorm.weight"], W[p + "attention.LayerNorm.bias"], c.ln_eps)
        h = activation(c.act, linear(x, W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"]))
        h = linear(h, W[p + "output.dense.weight"], W[p + "output.dense.bias"])  # (T, C)
        x = layer_norm(h + x, W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], c.ln_eps)
    if terms is not None:
        terms["content"] = content
        terms["position bias"] = np.broadcast_to(bias[None], atts.shape)  # (L, nh, T, T) one bias for every layer
    return atts, x


# ---- DeBERTa v2 / v3 -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DebertaSpec:
    """What DeBERTa v2's disentangled attention needs beyond a BERT config."""

    relative: bool  # relative_attention: the position terms exist at all
    c2p: bool  # "c2p" in pos_att_type: content-to-position term
    p2c: bool  # "p2c" in pos_att_type: position-to-content term
    share_att_key: bool  # positions through the content query / key projections (v3) or their own
    buckets: int  # position_buckets (> 0: log buckets, the table's half-size); <= 0: none
    max_relative: int  # max_relative_positions (the table's half-size without buckets)
    norm_rel: bool  # "layer_norm" in norm_rel_ebd: the relative embeddings pass encoder.LayerNorm
    abs_positions: bool  # position_biased_input: an absolute position table is added to the embeddings
    conv_kernel: int  # conv_kernel_size (0: no convolution after layer 0)
    conv_groups: int
    conv_act: str
    v1: bool = False  # DeBERTa v1's layout (fused in_proj, q_bias / v_bias, pos_proj / pos_q_proj)

    @property
    def span(self) -> int:
        """Half the rows of the relative embedding table (v2's att_span; v1 uses min(T, this) of them)."""
        return self.buckets if self.buckets > 0 else self.max_relative

    @property
    def scale_factor(self) -> int:
        return 1 + int(self.relative and self.c2p) + int(self.relative and self.p2c)


def log_bucket_position(rel: np.ndarray, bucket_size: int, max_position: int) -> np.ndarray:
    """DeBERTa's make_log_bucket_position in float32, as torch computes it: distances within bucket_size // 2 kept,
    farther ones mapped logarithmically (ceil) up to max_position, with their sign."""
    sign = np.sign(rel)
    mid = bucket_size // 2
    abs_pos = np.where((rel < mid) & (rel > -mid), mid - 1, np.abs(rel))
    ratio = abs_pos.astype(np.float32) / np.float32(mid)
    denom = np.log(np.float32((max_position - 1) / mid))
    log_pos = np.ceil(np.log(ratio) / denom * np.float32(mid - 1)) + np.float32(mid)
    return np.where(abs_pos <= mid, rel.astype(np.float32), log_pos * sign).astype(np.int64)


def deberta_relative_positions(s: DebertaSpec, T: int) -> np.ndarray:
    """(T, T) int64 relative position i - j of query i to key j (log-bucketed when the model buckets)."""
    rel = np.arange(T, dtype=np.int64)[:, None] - np.arange(T, dtype=np.int64)[None, :]  # (T, T)
    if s.buckets > 0 and s.max_relative > 0:
        rel = log_bucket_position(rel, s.buckets, s.max_relative)
    return rel


def _conv_act(name: str, x: np.ndarray) -> np.ndarray:
    return np.tanh(x) if name == "tanh" else activation(name, x)


def _deberta_conv(c: CheckpointConfig, W: _Cast, emb: np.ndarray, out: np.ndarray) -> np.ndarray:
    """DeBERTa v2's ConvLayer after layer 0: LN(out + act(conv1d(emb))) over the tokens, zero-padded."""
    s = c.spec
    k, g = s.conv_kernel, s.conv_groups
    w, b = W["encoder.conv.conv.weight"], W["encoder.conv.conv.bias"]  # (d, d / g, k), (d,)
    T, d = emb.shape
    pad = (k - 1) // 2
    xp = np.concatenate([np.zeros((pad, d), emb.dtype), emb, np.zeros((k - 1 - pad, d), emb.dtype)])  # (T + k - 1, d)
    cin = d // g
    y = np.empty((T, d), dtype=emb.dtype)  # (T, d)
    for gi in range(g):
        cols = slice(gi * cin, (gi + 1) * cin)
        win = np.stack([xp[t: t + T, cols] for t in range(k)], axis=2)  # (T, cin, k)
        wg = w[gi * (d // g): (gi + 1) * (d // g)]  # (d / g, cin, k)
        y[:, gi * (d // g): (gi + 1) * (d // g)] = np.einsum("tck,ock->to", win, wg)
    y = _conv_act(s.conv_act, y + b)
    return layer_norm(out + y, W["encoder.conv.LayerNorm.weight"], W["encoder.conv.LayerNorm.bias"], c.ln_eps)


def _deberta(c: CheckpointConfig, W: _Cast, ids: np.ndarray, dtype, kernel: str, edit, terms: dict | None):
    s: DebertaSpec = c.spec
    T, nh = ids.shape[0], c.n_head
    x = W.rows("embeddings.word_embeddings.weight", ids)  # (T, E)
    if s.abs_positions:
        x = x + W.rows("embeddings.position_embeddings.weight", slice(0, T))
    if c.type_vocab_size:
        x = x + W.rows("embeddings.token_type_embeddings.weight", np.zeros(T, dtype=np.int64))
    if c.embedding_size != c.d_model:
        x = linear(x, W["embeddings.embed_proj.weight"], None)  # (T, C)
    x = layer_norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"], c.ln_eps)  # (T, C)
    emb = x
    span = min(T, s.max_relative) if s.v1 else s.span
    scale = float(np.sqrt(np.float32(c.head_size) * np.float32(s.scale_factor)))  # torch.sqrt of a float32 tensor
    if s.relative:
        first = s.max_relative - span if s.v1 else 0  # v1 reads the rows around the table's centre
        rel = W["encoder.rel_embeddings.weight"][first: first + 2 * span]  # (2 span, C)
        if s.norm_rel:
            rel = layer_norm(rel, W["encoder.LayerNorm.weight"], W["encoder.LayerNorm.bias"], c.ln_eps)
        r = deberta_relative_positions(s, T)  # (T, T)
        c2p_idx = np.clip(r + span, 0, 2 * span - 1)  # (T, T) row of pk for query i, key j
        p2c_idx = np.clip(-r + span, 0, 2 * span - 1)  # (T, T) row of pq for key a, query b (read transposed)
    atts = np.empty((c.n_layer, nh, T, T), dtype=dtype)  # (L, nh, T, T)
    names = ("content-to-content", "content-to-position", "position-to-content")
    kept = {n: np.zeros_like(atts) for n in names} if terms is not None else None  # (L, nh, T, T) each
    zero = np.zeros((nh, T, T), dtype=dtype)
    for i in range(c.n_layer):
        if edit is not None:
            x = edit.residual(i, x)
        p = f"encoder.layer.{i}.attention.self."
        if s.v1:  # in_proj's rows: per head, q, k and v of hs rows each
            qkv = linear(x, W[p + "in_proj.weight"], None).reshape(T, nh, 3, c.head_size)  # (T, nh, 3, hs)
            q, k, v = (qkv[:, :, j].reshape(T, -1) for j in range(3))  # 3 x (T, C)
            q, v = q + W[p + "q_bias"], v + W[p + "v_bias"]
        else:
            q, k, v = (linear(x, W[p + f"{n}_proj.weight"], W[p + f"{n}_proj.bias"]) for n in ("query", "key", "value"))
        bias = zero.copy()  # (nh, T, T)
        if s.relative:
            qh, kh = split_heads(q, nh), split_heads(k, nh)  # (nh, T, hs) x 2
            own = "" if s.share_att_key else "pos_"
            if s.c2p:
                if s.v1:
                    pk = split_heads(linear(rel, W[p + "pos_proj.weight"], None), nh)  # (nh, 2 span, hs)
                else:
                    pk = split_heads(linear(rel, W[p + f"{own}key_proj.weight"], W[p + f"{own}key_proj.bias"]), nh)
                att = qh @ pk.transpose(0, 2, 1)  # (nh, T, 2 span)
                c2p = np.take_along_axis(att, np.broadcast_to(c2p_idx, (nh, T, T)), axis=2) / dtype(scale)
                bias += c2p
                if kept is not None:
                    kept[names[1]][i] = c2p
            if s.p2c:
                if s.v1:
                    pq = split_heads(linear(rel, W[p + "pos_q_proj.weight"], W[p + "pos_q_proj.bias"]), nh)
                else:
                    pq = split_heads(linear(rel, W[p + f"{own}query_proj.weight"], W[p + f"{own}query_proj.bias"]), nh)
                att = kh @ pq.transpose(0, 2, 1)  # (nh, T keys, 2 span)
                p2c = np.take_along_axis(att, np.broadcast_to(p2c_idx, (nh, T, T)), axis=2).transpose(0, 2, 1)
                p2c = p2c / dtype(scale)  # (nh, T queries, T keys)
                bias += p2c
                if kept is not None:
                    kept[names[2]][i] = p2c
        ctx, atts[i] = biased_attention(q, k, v, nh, bias, 1.0 / scale, kernel,
                                        mask=None if edit is None else edit.mask(i, None),
                                        content=None if kept is None else kept[names[0]][i])  # (T, C), (nh, T, T)
        if edit is not None:
            ctx = edit.merged(i, ctx, nh)
        p = f"encoder.layer.{i}."
        a = linear(ctx, W[p + "attention.output.dense.weight"], W[p + "attention.output.dense.bias"])  # (T, C)
        x1 = layer_norm(a + x, W[p + "attention.output.LayerNorm.weight"], W[p + "attention.output.LayerNorm.bias"],
                        c.ln_eps)
        h = activation(c.act, linear(x1, W[p + "intermediate.dense.weight"], W[p + "intermediate.dense.bias"]))
        h = linear(h, W[p + "output.dense.weight"], W[p + "output.dense.bias"])  # (T, C)
        x = layer_norm(h + x1, W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], c.ln_eps)
        if i == 0 and s.conv_kernel > 0:
            x = _deberta_conv(c, W, emb, x)
    if terms is not None:
        terms.update(kept)
    return atts, x


def _parse_deberta(cfg: dict, v1: bool = False) -> CheckpointConfig:
    if v1 and bool_field(cfg, "talking_head", False):
        raise CheckpointError("config.json: talking_head=true (DeBERTa v1's head-mixing projections) is not supported")
    pat = cfg.get("pos_att_type") or []
    if isinstance(pat, str):
        pat = [t.strip() for t in pat.lower().split("|") if t.strip()]
    if not isinstance(pat, list) or not all(isinstance(t, str) for t in pat):
        raise CheckpointError(f"config.json: pos_att_type must be a list such as [\"p2c\", \"c2p\"] (got {pat!r})")
    odd = [t for t in pat if t not in ("c2p", "p2c")]
    if odd:
        raise CheckpointError(f"config.json: pos_att_type {odd[0]!r} is not supported (supported: 'c2p', 'p2c')")
    norm = cfg.get("norm_rel_ebd", "none")
    if not isinstance(norm, str):
        raise CheckpointError(f"config.json: norm_rel_ebd must be a string such as \"layer_norm\" (got {norm!r})")
    d = int_field(cfg, "hidden_size", 768 if v1 else 1536)
    n_head = int_field(cfg, "num_attention_heads", 12 if v1 else 24)
    if "attention_head_size" in cfg and cfg["attention_head_size"] != (d // n_head if n_head else None):
        raise CheckpointError("config.json: an attention_head_size other than hidden_size / heads is not supported")
    max_pos = int_field(cfg, "max_position_embeddings", 512)
    max_rel = cfg.get("max_relative_positions", -1)
    if isinstance(max_rel, bool) or not isinstance(max_rel, int):
        raise CheckpointError(f"config.json: 'max_relative_positions' must be a whole number (got {max_rel!r})")
    buckets = cfg.get("position_buckets", -1)
    if isinstance(buckets, bool) or not isinstance(buckets, int):
        raise CheckpointError(f"config.json: 'position_buckets' must be a whole number (got {buckets!r})")
    conv = 0 if v1 else int_field(cfg, "conv_kernel_size", 0, minimum=0)
    conv_act = cfg.get("conv_act", "tanh")
    if conv and conv_act != "tanh":
        act_field(cfg, "conv_act", "tanh")
    relative = bool_field(cfg, "relative_attention", False)
    spec = DebertaSpec(
        relative=relative, c2p="c2p" in pat, p2c="p2c" in pat,
        share_att_key=not v1 and bool_field(cfg, "share_att_key", False), buckets=-1 if v1 else buckets,
        max_relative=max_rel if max_rel >= 1 else max_pos,
        norm_rel=not v1 and "layer_norm" in [t.strip() for t in norm.lower().split("|")], v1=v1,
        abs_positions=bool_field(cfg, "position_biased_input", True), conv_kernel=conv,
        conv_groups=int_field(cfg, "conv_groups", 1), conv_act=conv_act)
    if spec.buckets > 0 and buckets // 2 < 2:
        raise CheckpointError(f"config.json: position_buckets {buckets} is too few for DeBERTa's log buckets (at least 4)")
    if spec.buckets > 0 and spec.max_relative - 1 <= buckets // 2:
        raise CheckpointError(f"config.json: max_relative_positions {spec.max_relative} must exceed half the "
                              f"{buckets} position buckets + 1")
    c = CheckpointConfig(
        kind="bert", model_type="deberta" if v1 else "deberta-v2", d_model=d,
        n_layer=int_field(cfg, "num_hidden_layers", 12 if v1 else 24), n_head=n_head,
        d_ff=int_field(cfg, "intermediate_size", 3072 if v1 else 6144), act=act_field(cfg, "hidden_act", "gelu"),
        ln_eps=eps_field(cfg, "layer_norm_eps", 1e-7), vocab_size=int_field(cfg, "vocab_size", 50265 if v1 else 128100),
        max_positions=max_pos, type_vocab_size=int_field(cfg, "type_vocab_size", 0, minimum=0),
        embedding_size=int_field(cfg, "embedding_size", d), spec=spec)
    if conv and d % spec.conv_groups:
        raise CheckpointError(f"config.json: conv_groups {spec.conv_groups} does not divide hidden_size {d}")
    return c


def _deberta_tensors(c: CheckpointConfig) -> dict[str, tuple[int, ...]]:
    s: DebertaSpec = c.spec
    d, ff, e = c.d_model, c.d_ff, c.embedding_size
    shapes = {"embeddings.word_embeddings.weight": (c.vocab_size, e)}
    if s.abs_positions:
        shapes["embeddings.position_embeddings.weight"] = (c.max_positions, e)
    if c.type_vocab_size:
        shapes["embeddings.token_type_embeddings.weight"] = (c.type_vocab_size, e)
    if e != d:
        shapes["embeddings.embed_proj.weight"] = (d, e)
    shapes |= _ln("embeddings.LayerNorm", d)
    if s.relative:
        shapes["encoder.rel_embeddings.weight"] = (2 * s.span, d)
        if s.norm_rel:
            shapes |= _ln("encoder.LayerNorm", d)
    if s.conv_kernel:
        shapes["encoder.conv.conv.weight"] = (d, d // s.conv_groups, s.conv_kernel)
        shapes["encoder.conv.conv.bias"] = (d,)
        shapes |= _ln("encoder.conv.LayerNorm", d)
    for i in range(c.n_layer):
        p = f"encoder.layer.{i}."
        if s.v1:
            shapes[p + "attention.self.in_proj.weight"] = (3 * d, d)
            shapes[p + "attention.self.q_bias"] = shapes[p + "attention.self.v_bias"] = (d,)
            if s.relative and s.c2p:
                shapes[p + "attention.self.pos_proj.weight"] = (d, d)
            if s.relative and s.p2c:
                shapes |= _lin(p + "attention.self.pos_q_proj", d, d)
        else:
            for n in ("query", "key", "value"):
                shapes |= _lin(p + f"attention.self.{n}_proj", d, d)
        if s.relative and not s.share_att_key and not s.v1:
            if s.c2p:
                shapes |= _lin(p + "attention.self.pos_key_proj", d, d)
            if s.p2c:
                shapes |= _lin(p + "attention.self.pos_query_proj", d, d)
        shapes |= _lin(p + "attention.output.dense", d, d) | _ln(p + "attention.output.LayerNorm", d)
        shapes |= _lin(p + "intermediate.dense", ff, d) | _lin(p + "output.dense", d, ff) | _ln(p + "output.LayerNorm", d)
    return shapes


# ---- config.json and tensor lists ----------------------------------------------------------------------


def parse_text_family(cfg: dict, model_type: str) -> CheckpointConfig:
    """The CheckpointConfig of an ALBERT or MPNet config.json (defaults: the transformers config class's)."""
    if model_type == "albert":
        if int_field(cfg, "inner_group_num", 1) != 1:
            raise CheckpointError(f"config.json: inner_group_num {cfg['inner_group_num']} is not supported (only 1 "
                                  "layer per ALBERT group, as in the published models)")
        pet = cfg.get("position_embedding_type", "absolute")
        if pet != "absolute":
            raise CheckpointError(f"config.json: position_embedding_type {pet!r} is not supported; only 'absolute' tables are")
        c = CheckpointConfig(
            kind="bert", model_type=model_type, d_model=int_field(cfg, "hidden_size", 4096),
            n_layer=int_field(cfg, "num_hidden_layers", 12), n_head=int_field(cfg, "num_attention_heads", 64),
            d_ff=int_field(cfg, "intermediate_size", 16384), act=act_field(cfg, "hidden_act", "gelu_new"),
            ln_eps=eps_field(cfg, "layer_norm_eps", 1e-12), vocab_size=int_field(cfg, "vocab_size", 30000),
            max_positions=int_field(cfg, "max_position_embeddings", 512),
            type_vocab_size=int_field(cfg, "type_vocab_size", 2, minimum=0),
            embedding_size=int_field(cfg, "embedding_size", 128), n_groups=int_field(cfg, "num_hidden_groups", 1))
        if c.n_groups > c.n_layer:
            raise CheckpointError(f"config.json: num_hidden_groups {c.n_groups} is more than the {c.n_layer} layers")
        return c
    if model_type == "mpnet":
        c = CheckpointConfig(
            kind="bert", model_type=model_type, d_model=int_field(cfg, "hidden_size", 768),
            n_layer=int_field(cfg, "num_hidden_layers", 12), n_head=int_field(cfg, "num_attention_heads", 12),
            d_ff=int_field(cfg, "intermediate_size", 3072), act=act_field(cfg, "hidden_act", "gelu"),
            ln_eps=eps_field(cfg, "layer_norm_eps", 1e-12), vocab_size=int_field(cfg, "vocab_size", 30527),
            max_positions=int_field(cfg, "max_position_embeddings", 514), padding_idx=MPNET_PAD, rel_bias="mpnet")
        buckets = int_field(cfg, "relative_attention_num_buckets", 32)
        if buckets < MPNET_BUCKETS:
            raise CheckpointError(f"config.json: relative_attention_num_buckets {buckets} is fewer than the "
                                  f"{MPNET_BUCKETS} buckets MPNet's position bias indexes")
        if c.max_positions <= MPNET_PAD + 1:
            raise CheckpointError(f"config.json: max_position_embeddings {c.max_positions} leaves no positions after "
                                  f"the padding row {MPNET_PAD}")
        return replace(c, rel_buckets=buckets)
    if model_type in ("deberta-v2", "deberta"):
        return _parse_deberta(cfg, v1=model_type == "deberta")
    raise CheckpointError(f"config.json: model_type {model_type!r} is not one of {', '.join(TEXT_FAMILY_TYPES)}")


def _ln(name: str, d: int) -> dict:
    return {f"{name}.weight": (d,), f"{name}.bias": (d,)}


def _lin(name: str, n_out: int, n_in: int) -> dict:
    return {f"{name}.weight": (n_out, n_in), f"{name}.bias": (n_out,)}


def text_family_tensors(c: CheckpointConfig) -> dict[str, tuple[int, ...]]:
    """Canonical tensor name -> shape of every tensor ALBERT's or MPNet's forward pass reads."""
    d, ff = c.d_model, c.d_ff
    if c.model_type == "albert":
        e = c.embedding_size
        shapes = {"embeddings.word_embeddings.weight": (c.vocab_size, e),
                  "embeddings.position_embeddings.weight": (c.max_positions, e)}
        if c.type_vocab_size:
            shapes["embeddings.token_type_embeddings.weight"] = (c.type_vocab_size, e)
        shapes |= _ln("embeddings.LayerNorm", e) | _lin("encoder.embedding_hidden_mapping_in", d, e)
        for g in range(min(c.n_groups, c.n_layer)):  # (min: weights.implied_counts counts per layer)
            p = f"encoder.albert_layer_groups.{g}.albert_layers.0."
            for n in ("query", "key", "value", "dense"):
                shapes |= _lin(p + f"attention.{n}", d, d)
            shapes |= _ln(p + "attention.LayerNorm", d) | _lin(p + "ffn", ff, d) | _lin(p + "ffn_output", d, ff)
            shapes |= _ln(p + "full_layer_layer_norm", d)
        return shapes
    if c.model_type == "mpnet":
        shapes = {"embeddings.word_embeddings.weight": (c.vocab_size, d),
                  "embeddings.position_embeddings.weight": (c.max_positions, d)} | _ln("embeddings.LayerNorm", d)
        shapes["encoder.relative_attention_bias.weight"] = (c.rel_buckets, c.n_head)
        for i in range(c.n_layer):
            p = f"encoder.layer.{i}."
            for n in ("q", "k", "v", "o"):
                shapes |= _lin(p + f"attention.attn.{n}", d, d)
            shapes |= _ln(p + "attention.LayerNorm", d) | _lin(p + "intermediate.dense", ff, d)
            shapes |= _lin(p + "output.dense", d, ff) | _ln(p + "output.LayerNorm", d)
        return shapes
    if c.model_type in ("deberta-v2", "deberta"):
        return _deberta_tensors(c)
    raise CheckpointError(f"no tensor list for model_type {c.model_type!r}")
