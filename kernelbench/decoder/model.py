"""The DeepSeek-V4 decoder, written once over the ops of docs/OPS.md (SPEC section 3).

`Ops("reference")` makes this the reference model; `Ops("triton")` makes it the decoder that runs
our kernels. Nothing here computes an op itself: every number goes through `self.ops.<op>(...)`
with the OPS.md keyword signature. What is here is glue: reshapes, cache bookkeeping, index lists
for prefill, residual adds, and the TP collectives of SPEC section 4.

Letters: T tokens of a step, L prompt length, D hidden, H / Hl heads (per rank), Dh head dim, R rope
dims, Qr q_lora_rank, G / Gl output groups, O o_lora_rank, Hg = H/G, E / El experts, F expert
width, V / Vl vocab, W window, r compress ratio, Hi indexer heads, K index top-k.

Tensor parallelism (SPEC 4), in the layers: column-parallel wq_b / attn_sink / wo_a (heads and
groups), row-parallel wo_b + all-reduce, experts by index + all-reduce, vocab-parallel embedding
(+ all-reduce) and head (+ all-gather). The lightning indexer is REPLICATED (as production engines
do): `indexer_topk` takes the top-k inside the op, so a head-sharded indexer would need the full
score vector all-reduced before the top-k, which the op contract does not expose. Caches are
replicated. The loader (kernelbench.decoder.checkpoint) owns the sharding; layers take rank-local tensors.

Decode takes a ragged batch: token t belongs to sequence slot seq_ids[t] at position positions[t].
Prefill runs one sequence from position 0 (L tokens at once, causal index lists into a local
[L tokens | compressed entries] buffer) and leaves that slot's caches as L decode steps would.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from kernelbench import registry
from kernelbench.decoder import checkpoint
from kernelbench.decoder.backend import Ops
from kernelbench.decoder.cache import Cache, LayerCache, key_cache_form
from kernelbench.decoder.lanes import Lanes
from kernelbench.config import ModelConfig
from kernelbench.reference.indexer import fp4_key_rows
from kernelbench.reference.mhc import sublayer_output
from kernelbench.reference.quant import dequant_fp8_weight
from kernelbench.reference.rope import rope_freqs
from kernelbench.usage import env_choice
from kernelbench.decoder.tp import TPContext

BF16 = torch.bfloat16


@dataclass
class Step:
    """The tokens of one forward: ids [T], positions [T], seq_ids [T]; `prefill` = one sequence's
    prompt from position 0 (then seq_ids are all that slot)."""
    ids: torch.Tensor
    positions: torch.Tensor
    seq_ids: torch.Tensor
    prefill: bool = False
    # attention_indices' lists that depend only on the positions (swa, hca: no top-k), made by the step's first layer
    # of each (kind, window, ratio, n_max) and read by every later one: one launch per step, not per layer
    index_lists: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def T(self) -> int:
        return self.ids.shape[0]

    def fixed_index_lists(self, ops, **index_args) -> tuple[torch.Tensor, torch.Tensor]:
        """attention_indices(topk_indices=None, **index_args) -> (indices, lengths), made once per step per
        (kind, window, ratio, n_max): the lists of a layer without an indexer depend on nothing else."""
        key = tuple(index_args[k] for k in ("kind", "window", "ratio", "n_max"))
        if key not in self.index_lists:
            self.index_lists[key] = ops.attention_indices(topk_indices=None, **index_args)
        return self.index_lists[key]


SHARED_SPLIT_ENV = "KERNELBENCH_SHARED_SPLIT"
# H200, 43-layer Flash TP8 step (rank-0 shapes, data/h200-2026-12-03-session15/call2, A B A B against the whole expert):
# at C = 1 the slices inside the routed launches gave 3.823 / 3.828 vs 4.093 / 4.094 ms (-6.6%: rank 0's routed
# launches no longer carry 25 MB of shared weights). At C = 16 / 64 the slice inside the routed launches lost to the
# whole expert on the side lane (+0.7% / +3.6%; moe_routed's bench: the slice adds 12 / 29 us there), so from
# SHARED_SIDE_MIN_T tokens moe_routed runs the slice on a side stream of its own instead (kernels/moe.py config
# SHARED "side"), added in its combine before the all-reduce: C = 16 6.934 / 6.951 vs 7.123 / 7.156 ms, C = 64
# 10.880 / 10.899 vs 11.249 / 11.242 against the whole expert on the side lane (data/h200-2026-12-03-session16/call1).
def shared_split_from_env() -> bool:
    """KERNELBENCH_SHARED_SPLIT: "1" (the default) or "0"."""
    return env_choice(SHARED_SPLIT_ENV, "1", ("1", "0")) == "1"


def shared_split(cfg: ModelConfig, tp: TPContext, ops: Ops, want: bool | None = None) -> bool:
    """Whether each TP rank runs its 1/TP slice of the replicated shared expert's inner dimension as moe_routed's
    shared_* inputs (inside its routed launches at a few tokens, beside them on a side stream from
    SHARED_SIDE_MIN_T: the op's config SHARED), so that the all-reduce of the routed experts also sums the shared
    expert: F / TP rows of W1 / W3 and columns of W2 per rank, instead of the whole expert on rank 0 or on every rank
    (25 MB of FP8 per layer at Flash sizes). The serving engines shard it the same way.
    `want` None: ${KERNELBENCH_SHARED_SPLIT} ("1", the default, or "0"). Needs TP > 1, F a multiple of 128 * TP
    (whole FP8 scale blocks per slice) and an implementation of moe_routed that takes the shared weights."""
    if want is None:
        want = shared_split_from_env()
    return (bool(want) and tp.world > 1 and cfg.moe_inter_dim % (128 * tp.world) == 0
            and ops.accepts("moe_routed", "shared_w1"))


class Env:
    """What every layer shares: config, ops, TP context, rope frequency tables, the step's two lanes of work
    (kernelbench.decoder.lanes; `overlap`: True for every site, False for none, or site names) and whether the
    shared expert is split over the TP ranks (`shared_split`)."""

    def __init__(self, cfg: ModelConfig, ops: Ops, tp: TPContext, device, overlap=True):
        self.cfg, self.tp = cfg, tp
        self.ops = ops
        self.key_form = key_cache_form()     # the indexer key cache: bf16, or fp4 (read by the fp4keys impls)
        if self.key_form == "fp4":
            fp4_key_readers(ops)
        self.lanes = Lanes(device, overlap)
        self.shared_split = shared_split(cfg, tp, ops)
        self.freqs = {False: rope_freqs(cfg, compressed=False).to(device),
                      True: rope_freqs(cfg, compressed=True).to(device)}


FP4_KEY_READERS = ("indexer_topk", "csa_indices")


def fp4_key_readers(ops: Ops) -> None:
    """With the FP4 key cache the ops that read the keys must take its exponents (k_exp): an implementation named
    `<impl>_fp4keys` (the triton one) unless --use chose one, else the chosen one (the reference takes them). An
    implementation that does not take them is refused by name."""
    for op in FP4_KEY_READERS:
        if op not in ops.overrides and f"{ops.impl}_fp4keys" in registry.impls(op):
            ops.use(op, f"{ops.impl}_fp4keys")
        if not ops.accepts(op, "k_exp"):
            raise ValueError(f"KERNELBENCH_KEY_CACHE=fp4: {op} impl {ops.resolve(op).name!r} does not read the FP4 "
                             f"key cache (k_exp); use impl triton_fp4keys or the reference")


class Part(nn.Module):
    """A module whose tensors are rank-local checkpoint tensors (buffers, no gradients)."""

    def take(self, sd: dict, name: str, attr: str | None = None, value: torch.Tensor | None = None):
        t = sd[name] if value is None else value
        self.register_buffer(attr or name.rsplit(".", 1)[-1], t, persistent=False)
        return t


# ------------------------------------------------------------------------------------------------
# Attention: q path, window KV, compressor, lightning indexer, sparse attention, grouped output
# ------------------------------------------------------------------------------------------------
class Compressor(Part):
    def __init__(self, sd: dict, p: str, ratio: int, rotate: bool):
        super().__init__()
        self.ratio, self.rotate = ratio, rotate
        for n in ("ape", "wkv.weight", "wgate.weight", "norm.weight"):
            self.take(sd, f"{p}.{n}", n.split(".")[0])

    def args(self, env: Env) -> dict:
        return dict(wkv=self.wkv, wgate=self.wgate, ape=self.ape, norm_weight=self.norm, eps=env.cfg.norm_eps,
                    freqs=env.freqs[True], ratio=self.ratio, rotate=self.rotate)

    def step(self, env: Env, x, step: Step, state_kv, state_score, cache, **keys) -> None:
        """keys: compressor_step's FP4 key outputs (key_codes, key_exps; the indexer's FP4 key cache)."""
        env.ops.compressor_step(x=x, positions=step.positions, seq_ids=step.seq_ids, state_kv=state_kv,
                                state_score=state_score, cache=cache, **self.args(env), **keys)

    def prefill(self, env: Env, x, seq: int, state_kv, state_score, cache) -> torch.Tensor:
        """cache None: the entries are the caller's to store (the FP4 key cache)."""
        entries, sk, ss = env.ops.compressor_prefill(x=x, **self.args(env))
        if cache is not None:
            cache[seq, :entries.shape[0]] = entries
        state_kv[seq], state_score[seq] = sk, ss
        return entries


class Indexer(Part):
    """Lightning indexer of a ratio-4 layer (replicated over TP ranks)."""

    def __init__(self, env: Env, sd: dict, p: str):
        super().__init__()
        cfg = env.cfg
        self.take(sd, f"{p}.wq_b.weight", "wq_b")
        self.take(sd, f"{p}.wq_b.scale", "wq_b_scale")
        self.take(sd, f"{p}.weights_proj.weight", "weights_proj")
        self.n_heads = self.wq_b.shape[0] // cfg.index_head_dim
        self.w_scale = cfg.index_head_dim ** -0.5 * self.n_heads ** -0.5
        self.compressor = Compressor(sd, f"{p}.compressor", 4, rotate=True)

    def forward(self, env: Env, x, qr, step: Step, lc: LayerCache) -> torch.Tensor:
        """-> top-k compressed entry ids [T, K] (-1 padded), for entries < (p+1)//4 of each token."""
        w = self.keys(env, x, step, lc)
        return self.select(env, self.query(env, qr, step), w, step, lc)

    def keys(self, env: Env, x, step: Step, lc: LayerCache) -> torch.Tensor:
        """What reads only x: the head weights (bf16 [T, Hi]) and the compressed index keys (this step's entries
        written into lc.idx_keys)."""
        w = env.ops.bf16_linear(x=x, weight=self.weights_proj, out_dtype=torch.bfloat16)   # * w_scale in the top-k
        if lc.idx_codes is not None:
            self.fp4_keys(env, x, step, lc)
        elif step.prefill:
            self.compressor.prefill(env, x, int(step.seq_ids[0]), lc.idx_kv, lc.idx_score, lc.idx_keys)
        else:
            self.compressor.step(env, x, step, lc.idx_kv, lc.idx_score, lc.idx_keys)
        return w

    def fp4_keys(self, env: Env, x, step: Step, lc: LayerCache) -> None:
        """The FP4 key cache's write (reference/indexer.py fp4_key_rows): a decode step's entries by compressor_step's
        emit, which finishes each entry in the staging row of its sequence (its scratch) and writes the FP4 form
        (key_codes / key_exps: no separate pack launch); a prefill's entries packed by the same rule (torch ops: once
        a sequence)."""
        if step.prefill:
            seq = int(step.seq_ids[0])
            entries = self.compressor.prefill(env, x, seq, lc.idx_kv, lc.idx_score, None)
            codes, exps = fp4_key_rows(entries)
            lc.idx_codes[seq, :entries.shape[0]] = codes
            lc.idx_exp[seq, :entries.shape[0]] = exps
            return
        self.compressor.step(env, x, step, lc.idx_kv, lc.idx_score, lc.idx_staging(), key_codes=lc.idx_codes,
                             key_exps=lc.idx_exp)

    def query(self, env: Env, qr, step: Step) -> torch.Tensor:
        return env.ops.indexer_q(qr=qr, weight=self.wq_b, weight_scale=self.wq_b_scale, positions=step.positions,
                                 freqs=env.freqs[True])

    @staticmethod
    def key_args(lc: LayerCache) -> dict:
        """The key cache as the readers take it: k_cache, and with the FP4 form its codes and k_exp."""
        return {"k_cache": lc.idx_keys} if lc.idx_codes is None else {"k_cache": lc.idx_codes, "k_exp": lc.idx_exp}

    def select(self, env: Env, qi, w, step: Step, lc: LayerCache) -> torch.Tensor:
        idx, _ = env.ops.indexer_topk(qi=qi, w=w, seq_ids=step.seq_ids, positions=step.positions,
                                      topk=env.cfg.index_topk, ratio=4, w_scale=self.w_scale, **self.key_args(lc))
        return idx

    def select_lists(self, env: Env, qi, w, step: Step, lc: LayerCache) -> tuple[torch.Tensor, torch.Tensor]:
        """A decode step's csa attention index lists straight from the top-k (csa_indices: no attention_indices
        launch after it)."""
        return env.ops.csa_indices(qi=qi, w=w, seq_ids=step.seq_ids, positions=step.positions,
                                   topk=env.cfg.index_topk, window=env.cfg.window_size, ratio=4,
                                   w_scale=self.w_scale, **self.key_args(lc))


class Attention(Part):
    def __init__(self, env: Env, sd: dict, p: str, layer: int):
        super().__init__()
        cfg, tp = env.cfg, env.tp
        self.ratio = cfg.compress_ratios[layer]
        self.kind = cfg.layer_kind(layer)
        self.n_local_heads = tp.part(cfg.n_heads, "n_heads")
        self.n_local_groups = tp.part(cfg.o_groups, "o_groups")
        for n in ("attn_sink", "q_norm.weight", "kv_norm.weight"):
            self.take(sd, f"{p}.{n}", n.split(".")[0])
        for n in ("wq_a", "wq_b", "wkv", "wo_b"):
            self.take(sd, f"{p}.{n}.weight", n)
            self.take(sd, f"{p}.{n}.scale", f"{n}_scale")
        # wo_a: FP8 in the checkpoint, bf16 [Gl, O, Hg*Dh] for the grouped product (as DeepSeek's reference), then
        # in the layout each op that applies it runs on (the kernels: the FP8 codes and their scales, exact)
        wo_a = dequant_fp8_weight(sd[f"{p}.wo_a.weight"], sd[f"{p}.wo_a.scale"], cfg.fp8_block).to(BF16)
        self.wo_a_args = self._wo_a_forms(env, wo_a.view(self.n_local_groups, cfg.o_lora_rank, -1).contiguous())
        self.compressor = Compressor(sd, f"{p}.compressor", self.ratio, rotate=False) if self.ratio else None
        self.indexer = Indexer(env, sd, f"{p}.indexer") if self.ratio == 4 else None

    # the ops that apply wo_a, with the names of the weight and of the scales a prepared form adds
    WO_A_OPS = {"sparse_attention_wo_a": ("wo_a", "wo_a_scale"), "grouped_wo_a": ("weight", "weight_scale")}

    def _wo_a_forms(self, env: Env, wo_a: torch.Tensor) -> dict:
        """op -> its wo_a keywords in the layout its implementation runs on (Ops.prepare, once at load), held as
        buffers; two ops whose forms agree share the tensors (one copy when both read the FP8 codes)."""
        forms, kept = {}, []
        for op, (name, scale_name) in self.WO_A_OPS.items():
            got = env.ops.prepare(op, {name: wo_a})
            form = (got[name], got.get(scale_name))
            for have in kept:
                if all(a is None and b is None or a is not None and b is not None and a.dtype == b.dtype
                       and torch.equal(a, b) for a, b in zip(have, form)):
                    form = have
                    break
            else:
                kept.append(form)
                self.register_buffer(f"wo_a_{len(kept) - 1}", form[0], persistent=False)
                self.register_buffer(f"wo_a_{len(kept) - 1}_scale", form[1], persistent=False)
            forms[op] = {name: form[0], **({scale_name: form[1]} if form[1] is not None else {})}
        return forms

    def forward(self, env: Env, x: torch.Tensor, step: Step, lc: LayerCache) -> torch.Tensor:
        ops, cfg, tp = env.ops, env.cfg, env.tp
        T, Dh, eps = step.T, cfg.head_dim, cfg.norm_eps
        freqs = env.freqs[self.ratio > 0]
        lengths = None
        if step.prefill:
            qr = ops.rms_norm(x=ops.fp8_linear(x=x, weight=self.wq_a, weight_scale=self.wq_a_scale),
                              weight=self.q_norm, eps=eps)
            q = self._q(env, qr, step)
            kv = ops.fp8_linear(x=x, weight=self.wkv, weight_scale=self.wkv_scale)
            kv_all, seq_ids, indices = self._prefill_kv(env, x, qr, kv, step, lc)
        else:
            q, indices, lengths = self._decode_q_indices(env, x, step, lc)
            kv_all, seq_ids = lc.kv, step.seq_ids
        args = dict(q=q, kv=kv_all, seq_ids=seq_ids, indices=indices, sink=self.attn_sink, scale=Dh ** -0.5,
                    positions=step.positions, freqs=freqs, lengths=lengths)
        if not step.prefill and ops.fuses("sparse_attention_wo_a", ("sparse_attention", "grouped_wo_a")):
            z = ops.sparse_attention_wo_a(**args, **self.wo_a_args["sparse_attention_wo_a"])   # [T, Gl, O]
        else:
            o = ops.sparse_attention(**args)
            z = ops.grouped_wo_a(o=o.reshape(T, self.n_local_groups, -1), **self.wo_a_args["grouped_wo_a"])
        out = ops.fp8_linear(x=z.reshape(T, -1), weight=self.wo_b, weight_scale=self.wo_b_scale)
        if tp.active:             # the fp32 sum is rounded to bf16 by its consumer (sublayer_kwargs)
            return tp.all_reduce(out.float()), None
        return out, None

    def _q(self, env: Env, qr, step: Step) -> torch.Tensor:
        """wq_b + head RMS norm + RoPE."""
        return env.ops.attention_q(x=qr, weight=self.wq_b, weight_scale=self.wq_b_scale, head_dim=env.cfg.head_dim,
                                   positions=step.positions, freqs=env.freqs[self.ratio > 0], eps=env.cfg.norm_eps)

    def _decode_q_indices(self, env: Env, x, step: Step, lc: LayerCache):
        """A decode step's q and attention index lists, in two lanes (kernelbench.decoder.lanes). Main: the
        attention front (wq_a -> q_norm and wkv -> kv_write into the window ring, one op), the indexer query, the
        q path. Side, forked before the front: the compressor steps and the indexer's head weights (they read only
        x; with KERNELBENCH_KV_LANE_FORK "after" the KV compressor's lane forks after the front instead), then,
        after the indexer query, the top-k writing the index lists (csa_indices). Main joins the side
        before the caller's sparse attention reads the caches and the lists."""
        ops, cfg, lanes = env.ops, env.cfg, env.lanes
        W = cfg.window_size
        w = None
        kv_late = lanes.kv_after_front(step.T)    # KERNELBENCH_KV_LANE_FORK "after": the KV lane forks after the front
        if self.compressor is not None:
            if not kv_late:
                self._kv_compress(env, x, step, lc)
            if self.indexer is not None:
                with lanes.side("attention"):
                    w = self.indexer.keys(env, x, step, lc)
        qr, _ = ops.attention_front(x=x, wq_a=self.wq_a, wq_a_scale=self.wq_a_scale, q_norm=self.q_norm,
                                    wkv=self.wkv, wkv_scale=self.wkv_scale, kv_norm=self.kv_norm, eps=cfg.norm_eps,
                                    positions=step.positions, seq_ids=step.seq_ids, freqs=env.freqs[self.ratio > 0],
                                    window_cache=lc.window(W))
        if self.compressor is not None and kv_late:
            self._kv_compress(env, x, step, lc)
        # fixed width from the layer kind (graph-capturable); lengths bound the attention work per token
        index_args = dict(positions=step.positions, kind=self.kind, window=W, ratio=self.ratio,
                          n_max=self.index_width(cfg, lc))
        if self.indexer is not None:
            qi = self.indexer.query(env, qr, step)
            with lanes.side("attention"):
                indices, lengths = self.indexer.select_lists(env, qi, w, step, lc)
        else:
            indices, lengths = step.fixed_index_lists(ops, **index_args)
        q = self._q(env, qr, step)
        lanes.join()
        return q, indices, lengths

    def _kv_compress(self, env: Env, x, step: Step, lc: LayerCache) -> None:
        """The KV compressor's step on the side (its own lane when the KV lane applies): it reads only x and writes
        only the compressor's state and entries, which the sparse attention reads after the lanes join."""
        with env.lanes.side("attention", kv=True, tokens=step.T):
            self.compressor.step(env, x, step, lc.comp_kv, lc.comp_score, lc.compressed(env.cfg.window_size))

    def index_width(self, cfg: ModelConfig, lc: LayerCache) -> int:
        """attention_indices' n_max: swa W, csa W + index_topk, hca W + the cache's compressed capacity."""
        W = cfg.window_size
        if self.kind == "swa":
            return W
        return W + (cfg.index_topk if self.kind == "csa" else lc.compressed(W).shape[1])

    def _prefill_kv(self, env: Env, x, qr, kv, step: Step, lc: LayerCache):
        """One sequence from position 0: the local buffer [L token entries | compressed entries], the
        causal index lists into it, and the slot's caches left as L decode steps would leave them."""
        ops, cfg = env.ops, env.cfg
        L, W, dev = step.T, cfg.window_size, kv.device
        seq = int(step.seq_ids[0])
        freqs = env.freqs[self.ratio > 0]
        # kv_write with a [L, 1, Dh] scratch "ring": one slot per token, so no token overwrites another
        scratch = torch.empty(L, 1, cfg.head_dim, dtype=BF16, device=dev)
        kv = ops.kv_write(kv=kv, weight=self.kv_norm, eps=cfg.norm_eps, positions=step.positions,
                          seq_ids=torch.arange(L, device=dev), freqs=freqs, window_cache=scratch)
        last = step.positions[-min(L, W):]
        lc.kv[seq, last % W] = kv[-min(L, W):]                                    # the ring after L tokens
        tok = torch.arange(L, device=dev)[:, None]
        j = (tok - W + 1).clamp(min=0) + torch.arange(W, device=dev)[None, :]
        indices = [torch.where(j <= tok, j, -1)]                  # window: tokens max(p-W+1, 0) .. p, then -1
        parts = [kv]
        if self.compressor is not None:
            entries = self.compressor.prefill(env, x, seq, lc.comp_kv, lc.comp_score, lc.compressed(W))
            parts.append(entries)
            if self.indexer is not None:
                topk = self.indexer(env, x, qr, step, lc).long()
                indices.append(torch.where(topk >= 0, topk + L, -1))
            else:                                                                 # HCA: every entry < (p+1)//r
                i = torch.arange(entries.shape[0], device=dev)[None, :]
                indices.append(torch.where(i < (tok + 1) // self.ratio, i + L, -1))
        return torch.cat(parts)[None], torch.zeros(L, dtype=torch.long, device=dev), \
            torch.cat(indices, dim=1).to(torch.int32)


# ------------------------------------------------------------------------------------------------
# MoE: gate (hash or score routing), FP4 routed experts split by index, FP8 shared expert
# ------------------------------------------------------------------------------------------------
class MoE(Part):
    def __init__(self, env: Env, sd: dict, p: str, layer: int):
        super().__init__()
        cfg, tp = env.cfg, env.tp
        self.n_local = tp.part(cfg.n_routed_experts, "n_routed_experts")
        self.offset = tp.rank * self.n_local
        self.take(sd, f"{p}.gate.weight", "gate")
        hashed = layer < cfg.n_hash_layers                  # hash routing: tid2eid, no bias
        self.register_buffer("bias", None if hashed else sd[f"{p}.gate.bias"], persistent=False)
        self.register_buffer("tid2eid", sd[f"{p}.gate.tid2eid"] if hashed else None, persistent=False)
        experts = range(self.offset, self.offset + self.n_local)
        for w in ("w1", "w2", "w3"):
            for kind, sfx in (("weight", ""), ("scale", "_scale")):
                t = torch.stack([sd[f"{p}.experts.{e}.{w}.{kind}"] for e in experts])
                self.take(sd, "", w + sfx, t.view(torch.uint8) if kind == "weight" else t)
            for kind, sfx in (("weight", ""), ("scale", "_scale")):
                name = f"{p}.shared_experts.{w}.{kind}"
                if env.shared_split:        # only this rank's slice: no step runs the whole expert then
                    self.take(sd, "", f"shared_part_{w}{sfx}", self._shared_part(env, sd[name], w))
                else:
                    self.take(sd, name, f"shared_{w}{sfx}")
        # the routed experts' codes in the layout the MoE implementation decodes fastest, once at load
        prep = env.ops.prepare("moe_layer" if tp.world == 1 else "moe_routed",
                               {"w1": self.w1, "w3": self.w3, "w2": self.w2})
        self.w1, self.w3, self.w2 = prep["w1"], prep["w3"], prep["w2"]

    @staticmethod
    def _shared_part(env: Env, t: torch.Tensor, w: str) -> torch.Tensor:
        """This rank's slice of a shared expert tensor (weight or its 128 x 128 block scales) along the inner
        dimension (W1 / W3 rows, W2 columns), contiguous (env.shared_split)."""
        tp = env.tp
        n = t.shape[0 if w != "w2" else 1] // tp.world
        part = t.narrow(0 if w != "w2" else 1, tp.rank * n, n)
        return part.contiguous()

    def _shared_weights(self, prefix: str) -> dict:
        """The shared expert's weights by the ops' names (w1, s1, w3, s3, w2, s2) from the buffers `prefix`w1 ..
        (`shared_`: the whole expert, `shared_part_`: this rank's slice)."""
        return {k: getattr(self, prefix + n) for k, n in (("w1", "w1"), ("s1", "w1_scale"), ("w3", "w3"),
                                                          ("s3", "w3_scale"), ("w2", "w2"), ("s2", "w2_scale"))}

    def forward(self, env: Env, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """-> (y, y_add): the sublayer output as mHC post takes it (sublayer_kwargs): bf16 y and None (TP 1), or the
        fp32 all-reduced routed sum and the bf16 shared expert's output (None where the routed op added it)."""
        ops, cfg, tp = env.ops, env.cfg, env.tp
        gate = dict(x=x, weight=self.gate, bias=self.bias, tid2eid=self.tid2eid, token_ids=ids,
                    topk=cfg.n_activated_experts, route_scale=cfg.route_scale)
        experts = dict(w1=self.w1, s1=self.w1_scale, w3=self.w3, s3=self.w3_scale, w2=self.w2, s2=self.w2_scale,
                       expert_offset=self.offset, swiglu_limit=cfg.swiglu_limit)
        if tp.world == 1:                      # all experts local: the one fused op
            whole = self._shared_weights("shared_")
            return ops.moe_layer(**gate, **experts, **{f"shared_{k}": v for k, v in whole.items()}), None
        # TP > 1: the gate and this rank's routed experts as one op (moe_routed: the gate's launch also groups the
        # slots), its fp32 partial all-reduced
        if env.shared_split:
            # every rank's slice of the shared expert with its routed experts (inside their launches, or beside them
            # on the op's own side stream from SHARED_SIDE_MIN_T tokens): the all-reduce sums the slices
            part = self._shared_weights("shared_part_")
            return tp.all_reduce(ops.moe_routed(**gate, **experts, **{f"shared_{k}": v for k, v in part.items()})), None
        shared = self._shared_weights("shared_")
        lanes = env.lanes
        if lanes.on("shared_expert", x.shape[0]):
            # the replicated shared expert beside the gate and the routed experts (kernelbench.decoder.lanes), added
            # by every rank after the all-reduce
            with lanes.side("shared_expert"):
                s = ops.shared_expert(x=x, swiglu_limit=cfg.swiglu_limit, **shared)
            y = tp.all_reduce(ops.moe_routed(**gate, **experts))
            lanes.join()
            return y, s           # bf16(fp32 y + s), in the consumer (sublayer_kwargs)
        # the replicated shared expert is added once: inside rank 0's routed experts when the implementation takes
        # it (one set of launches: the grouped kernels' config SHARED "fused"), else by every rank after the
        # all-reduce
        fused = ops.accepts("moe_routed", "shared_w1")
        mine = {f"shared_{k}": v for k, v in shared.items()} if fused and tp.rank == 0 else {}
        y = tp.all_reduce(ops.moe_routed(**gate, **experts, **mine))                          # fp32
        return y, (None if fused else ops.shared_expert(x=x, swiglu_limit=cfg.swiglu_limit, **shared))


# ------------------------------------------------------------------------------------------------
# Blocks with mHC residual streams
# ------------------------------------------------------------------------------------------------
class Block(Part):
    def __init__(self, env: Env, sd: dict, p: str, layer: int):
        super().__init__()
        self.layer = layer
        for n in ("attn_norm.weight", "ffn_norm.weight"):
            self.take(sd, f"{p}.{n}", n.split(".")[0])
        for sub in ("attn", "ffn"):
            for n in ("fn", "base", "scale"):
                self.take(sd, f"{p}.hc_{sub}_{n}")
        self.attn = Attention(env, sd, f"{p}.attn", layer)
        self.ffn = MoE(env, sd, f"{p}.ffn", layer)

    def hc(self, env: Env, sub: str) -> dict:
        cfg = env.cfg
        return dict(fn=getattr(self, f"hc_{sub}_fn"), base=getattr(self, f"hc_{sub}_base"),
                    scale=getattr(self, f"hc_{sub}_scale"), iters=cfg.hc_sinkhorn_iters, eps=cfg.hc_eps,
                    norm_eps=cfg.norm_eps)


def sublayer_value(out: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
    """A sublayer's output (x, x_add) as the bf16 tensor mHC post reads (reference/mhc.py sublayer_output): for
    callers that inspect a sublayer on its own (tests, fidelity, the TP check)."""
    return sublayer_output(*out)


def sublayer_kwargs(env: Env, op: str, out: tuple[torch.Tensor, torch.Tensor | None]) -> dict:
    """A sublayer's output (x, x_add) as the mHC post op's x (and x_add). An implementation that takes x_add takes the
    fp32 x too (docs/OPS.md, reference/mhc.py sublayer_output): both go in as they are and the sum and its bf16
    rounding cost no launch of their own. Else they are summed and rounded here (one elementwise launch)."""
    x, x_add = out
    if env.ops.accepts(op, "x_add"):
        return {"x": x} if x_add is None else {"x": x, "x_add": x_add}
    if x_add is not None:               # fp32 + bf16 computed in fp32, one rounding into the bf16 output
        return {"x": torch.add(x, x_add, out=torch.empty_like(x_add))}
    return {"x": x.to(BF16)}


def run_blocks(env: Env, blocks: list[Block], h: torch.Tensor, step: Step, caches: list[LayerCache]) -> torch.Tensor:
    """h [T, 4, D] through the blocks; mHC post of one sublayer is fused with the next one's pre and that
    sublayer's input RMSNorm (mhc_post_pre_norm: xn is the normalized sublayer input), and takes the sublayer's
    output as it comes (sublayer_kwargs: a TP rank's fp32 sum and the shared expert's output)."""
    ops, eps = env.ops, env.cfg.norm_eps
    x, post, comb = ops.mhc_pre(h=h, **blocks[0].hc(env, "attn"))
    xn = ops.rms_norm(x=x, weight=blocks[0].attn_norm, eps=eps)
    for i, (blk, lc) in enumerate(zip(blocks, caches)):
        a = sublayer_kwargs(env, "mhc_post_pre_norm", blk.attn(env, xn, step, lc))
        h, xn, post, comb = ops.mhc_post_pre_norm(**a, h=h, post=post, comb=comb, **blk.hc(env, "ffn"),
                                                  weight=blk.ffn_norm, rms_eps=eps)
        f = blk.ffn(env, xn, step.ids)
        if i + 1 < len(blocks):
            nxt = blocks[i + 1]
            h, xn, post, comb = ops.mhc_post_pre_norm(**sublayer_kwargs(env, "mhc_post_pre_norm", f), h=h, post=post,
                                                      comb=comb, **nxt.hc(env, "attn"), weight=nxt.attn_norm,
                                                      rms_eps=eps)
        else:
            h = ops.mhc_post(**sublayer_kwargs(env, "mhc_post", f), h=h, post=post, comb=comb)
    return h


class Head(Part):
    """mHC head, final norm, vocab-parallel lm_head + all-gather. The MTP block has its own mHC head and
    norm and shares the main head's weight."""

    def __init__(self, sd: dict, p: str, weight: torch.Tensor):
        super().__init__()
        pre = f"{p}." if p else ""
        for n in ("fn", "base", "scale"):
            self.take(sd, f"{pre}hc_head_{n}", n)
        self.take(sd, f"{pre}norm.weight", "norm")
        self.weight = weight

    def forward(self, env: Env, h: torch.Tensor) -> torch.Tensor:
        ops, cfg = env.ops, env.cfg
        x = ops.mhc_head(h=h, fn=self.fn, base=self.base, scale=self.scale, eps=cfg.hc_eps, norm_eps=cfg.norm_eps)
        x = ops.rms_norm(x=x, weight=self.norm, eps=cfg.norm_eps)
        return env.tp.all_gather(ops.lm_head(x=x, weight=self.weight), dim=-1)       # [T, V] fp32


class MTP(Part):
    """The speculative draft block: e = enorm(embed(next ids)), streams hnorm'd, e_proj(e) + h_proj(h),
    one block with its own caches, its own mHC head and norm, the shared embedding and head."""

    def __init__(self, env: Env, sd: dict, p: str, layer: int, head_weight: torch.Tensor):
        super().__init__()
        for n in ("e_proj", "h_proj"):
            self.take(sd, f"{p}.{n}.weight", n)
            self.take(sd, f"{p}.{n}.scale", f"{n}_scale")
        for n in ("enorm", "hnorm"):
            self.take(sd, f"{p}.{n}.weight", n)
        self.block = Block(env, sd, p, layer)
        self.head = Head(sd, p, head_weight)


# ------------------------------------------------------------------------------------------------
# The model
# ------------------------------------------------------------------------------------------------
class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig, sd: dict[str, torch.Tensor], ops: Ops | str = "reference",
                 tp: TPContext | None = None, device="cpu", overlap=True):
        super().__init__()
        tp = tp or TPContext()
        cfg.check_tp(tp.world)
        self.cfg, self.tp = cfg, tp
        self.env = Env(cfg, Ops(ops) if isinstance(ops, str) else ops, tp, device, overlap)
        self.embed = sd["embed.weight"]
        self.vocab_start = tp.start(cfg.vocab_size)
        self.layers = nn.ModuleList(Block(self.env, sd, f"layers.{i}", i) for i in range(cfg.n_layers))
        self.head = Head(sd, "", sd["head.weight"])
        self.mtp = nn.ModuleList(MTP(self.env, sd, f"mtp.{i}", cfg.n_layers + i, sd["head.weight"])
                                 for i in range(cfg.n_mtp_layers))

    @classmethod
    def from_checkpoint(cls, path: str | Path, ops: Ops | str = "reference", tp: TPContext | None = None,
                        device="cpu", overlap=True) -> "Transformer":
        tp = tp or TPContext()
        cfg, sd = checkpoint.load(path, rank=tp.rank, world=tp.world, device=device, shard_indexer=False)
        return cls(cfg, sd, ops, tp, device, overlap)

    @property
    def ops(self) -> Ops:
        return self.env.ops

    def new_cache(self, batch: int, max_len: int) -> Cache:
        return Cache(self.cfg, batch, max_len, self.embed.device, key_form=self.env.key_form)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.ops.embedding(ids=ids, weight=self.embed, vocab_start=self.vocab_start)
        if self.tp.active:
            x = self.tp.all_reduce(x.float()).to(BF16)
        return x

    def _check(self, step: Step, cache: Cache) -> None:
        if step.positions.shape != step.ids.shape or step.seq_ids.shape != step.ids.shape or step.ids.dim() != 1:
            raise ValueError(f"ids, positions and seq_ids must be 1-D of one length, got {tuple(step.ids.shape)}, "
                             f"{tuple(step.positions.shape)}, {tuple(step.seq_ids.shape)}")
        if step.T and int(step.positions.max()) >= cache.max_len:
            raise ValueError(f"position {int(step.positions.max())} exceeds the cache's max_len {cache.max_len}")
        if step.T and (int(step.ids.min()) < 0 or int(step.ids.max()) >= self.cfg.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.cfg.vocab_size})")

    @torch.inference_mode()
    def forward(self, step: Step, cache: Cache, check: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """-> logits [T, V] fp32 (every rank holds all of V), final streams h [T, 4, D] (for MTP).
        check=False skips the input checks that read tensors on the host (CUDA-graph capture)."""
        if check:
            self._check(step, cache)
        h = self._embed(step.ids)[:, None, :].expand(-1, self.cfg.hc_mult, -1).contiguous()
        h = run_blocks(self.env, list(self.layers), h, step, cache.layers[:self.cfg.n_layers])
        return self.head(self.env, h), h

    def prefill(self, ids: torch.Tensor, seq: int, cache: Cache) -> tuple[torch.Tensor, torch.Tensor]:
        """A prompt ids [L] into slot `seq` from position 0 -> logits [L, V], streams [L, 4, D]."""
        if ids.dim() != 1 or not 0 < ids.shape[0] <= cache.max_len:
            raise ValueError(f"prefill needs 1 <= L <= max_len={cache.max_len} ids, got shape {tuple(ids.shape)}")
        if not 0 <= seq < cache.batch:
            raise ValueError(f"sequence slot {seq} outside [0, {cache.batch})")
        dev = ids.device
        cache.reset(seq)
        step = Step(ids, torch.arange(ids.shape[0], device=dev), torch.full_like(ids, seq), prefill=True)
        return self(step, cache)

    def decode(self, ids: torch.Tensor, positions: torch.Tensor, seq_ids: torch.Tensor,
               cache: Cache, check: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """One token per sequence (a ragged batch) -> logits [T, V], streams [T, 4, D]."""
        return self(Step(ids, positions, seq_ids), cache, check)

    @torch.inference_mode()
    def mtp_forward(self, h: torch.Tensor, next_ids: torch.Tensor, step: Step, cache: Cache) -> torch.Tensor:
        """Draft logits [T, V] of the token after next_ids, from the main model's streams h [T, 4, D] at
        the same positions (step.positions) and next_ids [T] (the tokens that follow them)."""
        if not len(self.mtp):
            raise ValueError(f"{self.cfg.name} has no MTP layer")
        ops, eps, m = self.ops, self.cfg.norm_eps, self.mtp[0]
        T, D = h.shape[0], self.cfg.dim
        mstep = Step(next_ids, step.positions, step.seq_ids, step.prefill)
        e = ops.rms_norm(x=self._embed(next_ids), weight=m.enorm, eps=eps)
        hh = ops.rms_norm(x=h.reshape(-1, D), weight=m.hnorm, eps=eps)
        x = (ops.fp8_linear(x=e, weight=m.e_proj, weight_scale=m.e_proj_scale)[:, None]
             + ops.fp8_linear(x=hh, weight=m.h_proj, weight_scale=m.h_proj_scale).view(T, -1, D))
        x = run_blocks(self.env, [m.block], x, mstep, cache.layers[self.cfg.n_layers:self.cfg.n_layers + 1])
        return m.head(self.env, x)
