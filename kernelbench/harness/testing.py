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
    """Error statistics in float64 over the elements that are not matching specials (NaN where the
    reference has NaN, the same infinity): a NaN or inf the reference does not have propagates into
    max_abs / max_rel / rel_fro / cosine, so the numbers never look better than the verdict."""
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch: got {tuple(out.shape)}, reference {tuple(ref.shape)}")
    o = out.detach().cpu().to(torch.float64).flatten()
    r = ref.detach().cpu().to(torch.float64).flatten()
    o_nan, r_nan = torch.isnan(o), torch.isnan(r)
    nan_mismatch = int((o_nan != r_nan).sum())
    matching_special = (o_nan & r_nan) | (torch.isinf(o) & torch.isinf(r) & (o == r))
    cmp = ~matching_special
    diff_all = torch.where(cmp, (o - r).abs(), torch.zeros_like(o))     # NaN / inf where one side is special
    finite_pair = torch.isfinite(o) & torch.isfinite(r)
    if tol.exact:
        ok = diff_all == 0
    else:
        ok = finite_pair & (diff_all <= _elementwise_bound(r, tol))
    bad = cmp & ~ok
    first = [tuple(int(i) for i in idx) for idx in bad.view(out.shape).nonzero()[:5]]
    oc, rc, diff = o[cmp], r[cmp], diff_all[cmp]
    return ErrorStats(numel=o.numel(), mismatches=int(bad.sum()), max_abs=_nanmax(diff),
                      max_rel=_nanmax(diff / rc.abs().clamp_min(1e-30)), rel_fro=_rel_fro(oc, rc, diff),
                      cosine=_cosine(oc, rc, diff), nan_mismatch=nan_mismatch, first_bad=first)


def _elementwise_bound(r: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """atol + rtol * |ref|, plus `atol_rms` times the reference's RMS over its finite elements."""
    bound = tol.atol + tol.rtol * r.abs()
    if tol.atol_rms:
        fin = r[torch.isfinite(r)]
        bound = bound + tol.atol_rms * _rms(fin)
    return bound


def _rms(x: torch.Tensor) -> float:
    if not x.numel():
        return 0.0
    s = float(x.abs().max())
    return s * float((x / s).square().mean().sqrt()) if s > 0 else 0.0


def _nanmax(x: torch.Tensor) -> float:
    """max with NaN propagated (0 for an empty tensor)."""
    if not x.numel():
        return 0.0
    return float("nan") if bool(torch.isnan(x).any()) else float(x.max())


def _special(diff: torch.Tensor) -> float | None:
    """NaN if any difference is NaN, inf if any is infinite, else None (all finite)."""
    if bool(torch.isnan(diff).any()):
        return float("nan")
    if bool(torch.isinf(diff).any()):
        return float("inf")
    return None


def _scaled(o: torch.Tensor, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """o and r divided by their largest magnitude: norms and dot products cannot overflow."""
    s = float(torch.maximum(o.abs().max(), r.abs().max()))
    return (o / s, r / s) if s > 0 else (o, r)


def _rel_fro(o: torch.Tensor, r: torch.Tensor, diff: torch.Tensor) -> float:
    if not o.numel():
        return 0.0
    special = _special(diff)
    if special is not None:
        return special
    a, b = _scaled(o, r)
    ref_norm, err_norm = float(b.norm()), float((a - b).norm())
    return err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else float("inf"))


def _cosine(o: torch.Tensor, r: torch.Tensor, diff: torch.Tensor) -> float:
    if not o.numel():
        return 1.0
    if _special(diff) is not None:
        return float("nan")
    if not bool(diff.any()):
        return 1.0          # identical: exactly 1, not 1 - rounding
    a, b = _scaled(o, r)
    na, nb = float(a.norm()), float(b.norm())
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return max(-1.0, min(1.0, float(a @ b) / (na * nb)))


def passes(stats: ErrorStats, tol: Tolerance) -> bool:
    if stats.nan_mismatch:
        return False
    if tol.exact:
        return stats.mismatches == 0
    allowed = int(tol.max_mismatch_frac * stats.numel)
    return stats.mismatches <= allowed and stats.rel_fro <= tol.rel_fro


def explain(name: str, stats: ErrorStats, tol: Tolerance, out: torch.Tensor, ref: torch.Tensor) -> str:
    lines = [f"output {name!r}: {stats.mismatches}/{stats.numel} elements outside tolerance "
             f"(exact={tol.exact}, atol={tol.atol:g}{f' + {tol.atol_rms:g} x rms(ref)' if tol.atol_rms else ''}, "
             f"rtol={tol.rtol:g}, rel_fro<={tol.rel_fro:g}, "
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
