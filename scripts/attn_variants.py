"""Config variants of the one-launch sparse_attention and indexer_topk (issue 17), registered as extra impls so
that one bench run times them beside impl "triton" (the default config) and the kept two-launch impls: a
measurement aid for choosing defaults, not part of the shipped registry.
Load with `kernelbench bench --module scripts/attn_variants.py`.
"""
from __future__ import annotations

from kernelbench.kernels import attention as A
from kernelbench.kernels import indexer as I
from kernelbench.registry import register_impl


def _variant(op: str, name: str, fn, default, overrides: dict, kernels):
    """default(inputs as keyword arguments) -> the config impl "triton" would run; the overrides go on top."""
    def run(config: dict | None = None, **kwargs):
        return fn(config={**(config or default(kwargs)), **overrides}, **kwargs)
    run.__name__ = f"{op}_{name}"
    register_impl(op, name, backend="triton", kernels=kernels)(run)


ATTN_FUSED = {"triton_fused_pf16": {"PREFETCH": 1, "BLOCK_N": 16}}
for _name, _over in ATTN_FUSED.items():
    _variant("sparse_attention", _name, A.sparse_attention_fused,
             lambda kw: A.fused_default({"Hl": kw["q"].shape[1]}), _over, lambda: [A._attn_fused])
ATTN = {"triton_pf16": {"PREFETCH": 1, "BLOCK_N": 16}, "triton_pf8w": {"PREFETCH": 1, "num_warps": 8},
        "triton_bn16": {"BLOCK_N": 16}, "triton_w8": {"num_warps": 8}, "triton_wv4": {"waves": 4}}
for _name, _over in ATTN.items():       # the two-launch impl "triton"
    _variant("sparse_attention", _name, A.sparse_attention, lambda kw: A.attention_default({"Hl": kw["q"].shape[1]}),
             _over, lambda: [A._attn_split, A._attn_combine])

INDEX = {"triton_w4": {"num_warps": 4}, "triton_w16": {"num_warps": 16}, "triton_bs64": {"BLOCK_S": 64},
         "triton_wv4": {"waves": 4}, "triton_sc4k": {"SCAN": 4096}}
for _name, _over in INDEX.items():
    _variant("indexer_topk", _name, I.indexer_topk_fused, lambda kw: I.fused_default({}), _over, lambda: [I._index_fused])

# the two-launch impl "triton" with the split top-k (`_index_topk_split`, session 8; "auto" is now the default),
# the one-program top-k (SEGMENTS 1, the default before), other segment sizes and two programs per token
def _two_launches():
    return [I._index_scores, I._index_topk, I._index_topk_split]


INDEX_SPLIT = {"triton_one": {"SEGMENTS": 1}, "triton_split2k": {"SEG_MIN": 2048},
               "triton_split8k": {"SEG_MIN": 8192}, "triton_split_s2": {"SEGMENTS": 2},
               "triton_radix": {"ROW_REGS": 0}}    # the radix select on every row (the default: session 26 calls 3-6)
for _name, _over in INDEX_SPLIT.items():
    _variant("indexer_topk", _name, I.indexer_topk, lambda kw: I.indexer_default({}), _over, _two_launches)

# csa_indices' top-k (session 26): the FAST select with the row held in registers (ROW_REGS, _select_held: one read
# of the row, a binary search on counts instead of two radix-histogram passes over it), other top-k program shapes,
# and the radix select on every row; session 27: fewer held block sizes (ROW_LEVELS), and where the cache holds no row
# longer than ROW_REGS (the bench's 64K cases: 16384 entries) a kernel without the radix passes
CSA = {"triton_held4k": {"ROW_REGS": 4096}, "triton_held16k": {"ROW_REGS": 16384},
       "triton_held16k_l1": {"ROW_REGS": 16384, "ROW_LEVELS": 1},
       "triton_held32k_l1": {"ROW_REGS": 32768, "ROW_LEVELS": 1},
       "triton_held32k_l2": {"ROW_REGS": 32768, "ROW_LEVELS": 2}, "triton_one": {"SEGMENTS": 1},
       "triton_held32k": {"ROW_REGS": 32768}, "triton_tw32": {"TOPK_WARPS": 32},
       "triton_held16k_tw32": {"ROW_REGS": 16384, "TOPK_WARPS": 32}, "triton_radix": {"ROW_REGS": 0},
       "triton_sc8k": {"SCAN": 8192}, "triton_tw8": {"TOPK_WARPS": 8, "SCAN": 2048}}
for _name, _over in CSA.items():
    _variant("csa_indices", _name, I.csa_indices, lambda kw: I.indexer_default({}), _over, _two_launches)
