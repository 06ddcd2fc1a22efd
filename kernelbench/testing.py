"""Comparison helpers shared by verify, tests and bench: error statistics, poisoning, and failures
that explain themselves (how many elements mismatch, NaN/inf patterns, first bad indices)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from kernelbench.registry import Tolerance

# dtype -> unit roundoff (half an ulp at 1.0)
UNIT_ROUNDOFF = {
    torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11,
    torch.float8_e4m3fn: 2.0 ** -4,
}


def unit_roundoff(dtype: torch.dtype) -> float:
    return UNIT_ROUNDOFF[dtype]


@dataclass
class ErrorStats:
    numel: int
    mismatches: int
    max_abs: float
    max_rel: float
    rel_fro: float
    cosine: float
    nan_mismatch: int
    first_bad: list

    def as_dict(self) -> dict:
        return asdict(self)




def error_stats(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> ErrorStats:
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch: got {tuple(out.shape)}, reference {tuple(ref.shape)}")
    o = out.detach().cpu().to(torch.float64)
    r = ref.detach().cpu().to(torch.float64)
    o_nan, r_nan = torch.isnan(o), torch.isnan(r)
    nan_mismatch = int((o_nan != r_nan).sum())
    both = ~(o_nan | r_nan)
    diff = torch.where(both, (o - r).abs(), torch.zeros_like(o))
    # infinities: equal infinities are a match
    inf_eq = torch.isinf(o) & torch.isinf(r) & (o == r)
    diff = torch.where(inf_eq, torch.zeros_like(diff), diff)
    diff = torch.nan_to_num(diff, nan=float("inf"))
    if tol.exact:
        bad = (diff != 0) | (o_nan != r_nan)
    else:
        bad = (diff > tol.atol + tol.rtol * r.abs().nan_to_num(0.0)) | (o_nan != r_nan)
    rf = r[both & ~torch.isinf(r)]
    of = o[both & ~torch.isinf(r)]
    ref_norm = float(rf.norm()) if rf.numel() else 0.0
    err_norm = float((of - rf).norm()) if rf.numel() else 0.0
    rel_fro = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))
    cos = float(torch.nn.functional.cosine_similarity(of.flatten(), rf.flatten(), dim=0)) if rf.numel() and ref_norm > 0 and float(of.norm()) > 0 else (1.0 if err_norm == 0 else 0.0)
    rel = diff / r.abs().clamp_min(1e-30)
    first = [tuple(int(i) for i in idx) for idx in bad.nonzero()[:5]] if bad.any() else []
    return ErrorStats(numel=o.numel(), mismatches=int(bad.sum()), max_abs=float(diff.max()) if diff.numel() else 0.0,
                      max_rel=float(rel[both].max()) if both.any() else 0.0, rel_fro=rel_fro, cosine=cos,
                      nan_mismatch=nan_mismatch, first_bad=first)


def passes(stats: ErrorStats, tol: Tolerance) -> bool:
    if stats.nan_mismatch:
        return False
    if tol.exact:
        return stats.mismatches == 0
    allowed = int(tol.max_mismatch_frac * stats.numel)
    return stats.mismatches <= allowed and stats.rel_fro <= tol.rel_fro


def explain(name: str, stats: ErrorStats, tol: Tolerance, out: torch.Tensor, ref: torch.Tensor) -> str:
    lines = [f"output {name!r}: {stats.mismatches}/{stats.numel} elements outside tolerance "
             f"(exact={tol.exact}, atol={tol.atol:g}, rtol={tol.rtol:g}, rel_fro<={tol.rel_fro:g}, "
             f"allowed mismatch frac {tol.max_mismatch_frac:g})",
             f"  max_abs={stats.max_abs:.4g} max_rel={stats.max_rel:.4g} rel_fro={stats.rel_fro:.4g} "
             f"cosine={stats.cosine:.6f} nan_pattern_diff={stats.nan_mismatch}"]
    for idx in stats.first_bad:
        lines.append(f"  at {idx}: got {out[idx].item()!r}, expected {ref[idx].item()!r}")
    return "\n".join(lines)


def assert_close(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, name: str = "out") -> ErrorStats:
    stats = error_stats(out, ref, tol)
    if not passes(stats, tol):
        raise AssertionError(explain(name, stats, tol, out.detach().cpu(), ref.detach().cpu()))
    return stats


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill a buffer with a value no correct kernel writes: NaN for floats, a sentinel for others."""
    if t.is_floating_point():
        if t.dtype in (torch.float8_e4m3fn,):
            t.view(torch.uint8).fill_(0x7F)  # e4m3fn NaN
        elif t.dtype == getattr(torch, "float8_e8m0fnu", None):
            t.view(torch.uint8).fill_(0xFF)  # e8m0 NaN
        else:
            t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).min if t.dtype != torch.uint8 else 0xA5)
    return t


def randn(shape, gen: torch.Generator, device="cpu", dtype=torch.bfloat16, scale: float = 1.0) -> torch.Tensor:
    """Fresh non-zero normal data (drawn on the CPU for reproducibility across devices)."""
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * scale).to(device=device, dtype=dtype)
