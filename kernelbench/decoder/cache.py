"""Per-sequence decode caches of every layer (SPEC 3.4, docs/OPS.md layouts).

Letters: B sequence slots, W window, Dh head dim, r compress ratio, c = 2 when r = 4 else 1,
Ncap = ceil(max_len / r) compressed entries, Di = 128 indexer head dim.

Per layer:
    kv        [B, W + Ncap, Dh] bf16   ring slots [0, W) (token p at p % W), compressed entry i at W + i
    comp_kv   [B, c*r, c*Dh]  fp32     attention-compressor state (layout: reference/compressor.py)
    comp_score                          same shape, -inf where empty
    idx_keys  [B, Ncap4, Di]  bf16     lightning-indexer keys (CSA layers)
    idx_kv / idx_score [B, 8, 2*Di]    indexer-compressor state
Caches are replicated across TP ranks (wkv, compressors and the indexer are replicated).
Sizes follow max_len; the WORK of a step follows each sequence's own length (the ops' contract).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernelbench.config import ModelConfig
from kernelbench.reference.compressor import init_state


@dataclass
class LayerCache:
    ratio: int
    kv: torch.Tensor
    comp_kv: torch.Tensor | None = None
    comp_score: torch.Tensor | None = None
    idx_keys: torch.Tensor | None = None
    idx_kv: torch.Tensor | None = None
    idx_score: torch.Tensor | None = None

    def window(self, w: int) -> torch.Tensor:
        return self.kv[:, :w]

    def compressed(self, w: int) -> torch.Tensor:
        return self.kv[:, w:]

    def tensors(self) -> list[torch.Tensor]:
        return [t for t in (self.kv, self.comp_kv, self.comp_score, self.idx_keys, self.idx_kv, self.idx_score)
                if t is not None]


class Cache:
    """Caches of the n_layers main layers then the MTP layers, for `batch` sequence slots of up to
    `max_len` tokens each."""

    def __init__(self, cfg: ModelConfig, batch: int, max_len: int, device="cpu"):
        if batch < 1 or max_len < 1:
            raise ValueError(f"cache needs batch >= 1 and max_len >= 1, got {batch}, {max_len}")
        self.cfg, self.batch, self.max_len, self.device = cfg, batch, max_len, torch.device(device)
        W, Dh = cfg.window_size, cfg.head_dim
        self.layers: list[LayerCache] = []
        for r in cfg.compress_ratios:
            ncap = math.ceil(max_len / r) if r else 0
            lc = LayerCache(r, torch.zeros(batch, W + ncap, Dh, dtype=torch.bfloat16, device=device))
            if r:
                lc.comp_kv, lc.comp_score = init_state(batch, r, Dh, device)
            if r == 4:
                lc.idx_keys = torch.zeros(batch, ncap, cfg.index_head_dim, dtype=torch.bfloat16, device=device)
                lc.idx_kv, lc.idx_score = init_state(batch, r, cfg.index_head_dim, device)
            self.layers.append(lc)

    def reset(self, seq: int) -> None:
        """Free slot `seq` for a new sequence (compressor states back to empty)."""
        for lc in self.layers:
            for kv, score in ((lc.comp_kv, lc.comp_score), (lc.idx_kv, lc.idx_score)):
                if kv is not None:
                    kv[seq].zero_()
                    score[seq].fill_(float("-inf"))

    def fill_random(self, gen: torch.Generator | None = None) -> None:
        """Random finite contents (benchmarks that start decoding at a given context without prefill)."""
        for lc in self.layers:
            for t in lc.tensors():
                t.copy_(torch.randn(t.shape, generator=gen, device=t.device if gen is None else gen.device)
                        .to(t.dtype) * (0.1 if t.dtype == torch.float32 else 1.0))

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for lc in self.layers for t in lc.tensors())
