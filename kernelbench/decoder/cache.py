"""Per-sequence decode caches of every layer (SPEC 3.4, docs/OPS.md layouts).

Letters: B sequence slots, W window, Dh head dim, r compress ratio, c = 2 when r = 4 else 1,
Ncap = ceil(max_len / r) compressed entries, Di = 128 indexer head dim.

Per layer:
    kv        [B, W + Ncap, Dh] bf16   ring slots [0, W) (token p at p % W), compressed entry i at W + i
    comp_kv   [B, c*r, c*Dh]  fp32     attention-compressor state (layout: reference/compressor.py)
    comp_score                          same shape, -inf where empty
    idx_keys  [B, Ncap4, Di]  bf16     lightning-indexer keys (CSA layers), or with key form "fp4"
                                        (KERNELBENCH_KEY_CACHE=fp4; SPEC 2's FP4 keys, reference/indexer.py):
    idx_codes [B, Ncap4, Di/2] uint8   two e2m1 codes a byte
    idx_exp   [B, Ncap4, Di/32] uint8  a UE8M0 exponent byte per 32 dims (68 bytes a key instead of 256)
    idx_stage [B, Di]         bf16     the indexer compressor's scratch row for a step's entry (it writes the FP4 form)
    idx_kv / idx_score [B, 8, 2*Di]    indexer-compressor state
Caches are replicated across TP ranks (wkv, compressors and the indexer are replicated).
Sizes follow max_len; the WORK of a step follows each sequence's own length (the ops' contract).
"""
from __future__ import annotations

import math
import os
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
    idx_codes: torch.Tensor | None = None
    idx_exp: torch.Tensor | None = None
    idx_stage: torch.Tensor | None = None

    def window(self, w: int) -> torch.Tensor:
        return self.kv[:, :w]

    def compressed(self, w: int) -> torch.Tensor:
        return self.kv[:, w:]

    def idx_staging(self) -> torch.Tensor:
        """The FP4 key cache's staging row per sequence as the bf16 key cache compressor_step writes: [B, Ncap4, Di],
        every entry of a sequence at its one row (stride 0 over the entries)."""
        b, ncap = self.idx_codes.shape[:2]
        return self.idx_stage[:, None].expand(b, ncap, self.idx_stage.shape[1])

    def tensors(self) -> list[torch.Tensor]:
        return [t for t in (self.kv, self.comp_kv, self.comp_score, self.idx_keys, self.idx_kv, self.idx_score,
                            self.idx_codes, self.idx_exp, self.idx_stage) if t is not None]


KEY_FORMS = ("bf16", "fp4")


def key_cache_form() -> str:
    """KERNELBENCH_KEY_CACHE: the indexer key cache's form, "bf16" (the default) or "fp4" (SPEC 2's FP4 keys)."""
    form = os.environ.get("KERNELBENCH_KEY_CACHE", "bf16").strip().lower() or "bf16"
    if form not in KEY_FORMS:
        raise ValueError(f"KERNELBENCH_KEY_CACHE must be one of {', '.join(KEY_FORMS)}, got {form!r}")
    return form


class Cache:
    """Caches of the n_layers main layers then the MTP layers, for `batch` sequence slots of up to
    `max_len` tokens each."""

    def __init__(self, cfg: ModelConfig, batch: int, max_len: int, device="cpu", key_form: str = "bf16"):
        if batch < 1 or max_len < 1:
            raise ValueError(f"cache needs batch >= 1 and max_len >= 1, got {batch}, {max_len}")
        if key_form not in KEY_FORMS:
            raise ValueError(f"cache key_form must be one of {', '.join(KEY_FORMS)}, got {key_form!r}")
        self.cfg, self.batch, self.max_len, self.device = cfg, batch, max_len, torch.device(device)
        self.key_form = key_form
        W, Dh = cfg.window_size, cfg.head_dim
        self.layers: list[LayerCache] = []
        for r in cfg.compress_ratios:
            ncap = math.ceil(max_len / r) if r else 0
            lc = LayerCache(r, torch.zeros(batch, W + ncap, Dh, dtype=torch.bfloat16, device=device))
            if r:
                lc.comp_kv, lc.comp_score = init_state(batch, r, Dh, device)
            if r == 4:
                di = cfg.index_head_dim
                if key_form == "fp4":
                    lc.idx_codes = torch.zeros(batch, ncap, di // 2, dtype=torch.uint8, device=device)
                    lc.idx_exp = torch.full((batch, ncap, di // 32), 127, dtype=torch.uint8, device=device)
                    lc.idx_stage = torch.zeros(batch, di, dtype=torch.bfloat16, device=device)
                else:
                    lc.idx_keys = torch.zeros(batch, ncap, di, dtype=torch.bfloat16, device=device)
                lc.idx_kv, lc.idx_score = init_state(batch, r, di, device)
            self.layers.append(lc)

    def reset(self, seq: int) -> None:
        """Free slot `seq` for a new sequence (compressor states back to empty)."""
        for lc in self.layers:
            for kv, score in ((lc.comp_kv, lc.comp_score), (lc.idx_kv, lc.idx_score)):
                if kv is not None:
                    kv[seq].zero_()
                    score[seq].fill_(float("-inf"))

    def fill_random(self, gen: torch.Generator | None = None) -> None:
        """Random finite contents (benchmarks that start decoding at a given context without prefill); the FP4 key
        cache's codes random bytes and its exponents 126-128 (scales 2^-1 .. 2^1, as N(0, 1) keys take)."""
        for lc in self.layers:
            for t in lc.tensors():
                dev = t.device if gen is None else gen.device
                if t is lc.idx_exp:
                    t.copy_(torch.randint(126, 129, t.shape, generator=gen, device=dev, dtype=torch.uint8))
                elif t.dtype == torch.uint8:
                    t.copy_(torch.randint(0, 256, t.shape, generator=gen, device=dev, dtype=torch.uint8))
                else:
                    t.copy_(torch.randn(t.shape, generator=gen, device=dev).to(t.dtype)
                            * (0.1 if t.dtype == torch.float32 else 1.0))

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for lc in self.layers for t in lc.tensors())
