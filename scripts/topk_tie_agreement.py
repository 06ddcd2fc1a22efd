"""How often torch.topk selects a different SET of indexer entries than the lower-index-first tie rule
(the indexer_topk contract, docs/OPS.md), at DeepSeek-V4-Flash shapes.

Scores come from DeepSeek's own arithmetic on bf16 tensors, computed once on the CPU:
`(einsum(q, keys).relu() * w).sum(heads)` with 64 heads of FP4-simulated queries, FP4-simulated keys
(Hadamard + e2m1, as the model stores them) and bf16 weights N(0, 1) * 128^-0.5 * 64^-0.5. Then, on each
device, torch.topk(scores, 512) (as the official code calls it) against the rule's set (stable
descending sort: among equal bf16 scores the lower index first). Per context: rows whose k-th score
ties across the boundary (the only rows where a tie rule matters), rows where torch picked another set,
and the fraction of selected entries that differ.

    python scripts/topk_tie_agreement.py --out /tmp/ties.json                   # CPU, and CUDA if present
    python scripts/topk_tie_agreement.py --devices cpu --rows 16 --contexts 2048 --out /tmp/t.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from kernelbench.config import FLASH
from kernelbench.ops.indexer import fp4_rows


def official_scores(qi: torch.Tensor, w: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """qi [R, H, 128] bf16, w [R, H] bf16, keys [N, 128] bf16 -> [R, N] bf16, DeepSeek's expression."""
    return torch.stack([(torch.einsum("hd,nd->hn", qi[r], keys).relu() * w[r][:, None]).sum(dim=0)
                        for r in range(qi.shape[0])])


def rule_mask(scores: torch.Tensor, k: int) -> torch.Tensor:
    """[R, N] -> bool mask of the k best, ties to the lower index."""
    order = torch.sort(scores.float(), dim=1, descending=True, stable=True).indices[:, :k]
    return torch.zeros_like(scores, dtype=torch.bool).scatter_(1, order, True)


def boundary_tied(scores: torch.Tensor, k: int) -> torch.Tensor:
    """[R] bool: the k-th best score also occurs outside the best k (a tie rule decides the set)."""
    s = scores.float()
    vk = torch.topk(s, k, dim=1).values[:, -1:]
    inside = (torch.topk(s, k, dim=1).values == vk).sum(1)
    return (s == vk).sum(1) > inside


def compare(scores: torch.Tensor, k: int, device: str) -> dict:
    want = rule_mask(scores, k)
    got_idx = torch.topk(scores.to(device), k, dim=1).indices.cpu()
    got = torch.zeros_like(want).scatter_(1, got_idx, True)
    diff = (want & ~got).sum(1)
    tied = boundary_tied(scores, k)
    return {"device": device, "rows": scores.shape[0], "tied_rows": int(tied.sum()),
            "differing_rows": int((diff > 0).sum()), "differing_in_tied_rows": int(((diff > 0) & tied).sum()),
            "differing_entries_frac": float(diff.sum()) / (scores.shape[0] * k),
            "differing_entries_max": int(diff.max())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", type=int, nargs="+", default=[2048, 8192, 32768, 65536],
                    help="compressed entries per row (a 4x longer token context)")
    ap.add_argument("--rows", type=int, default=16, help="query rows per context")
    ap.add_argument("--topk", type=int, default=FLASH.index_topk)
    ap.add_argument("--heads", type=int, default=FLASH.index_n_heads)
    ap.add_argument("--devices", nargs="+", default=None, help="default: cpu, and cuda when available")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="JSON file to write")
    a = ap.parse_args(argv)
    devices = a.devices or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    if "cuda" in devices and not torch.cuda.is_available():
        print("topk_tie_agreement: --devices cuda needs a CUDA GPU", file=sys.stderr)
        return 2
    gen = torch.Generator().manual_seed(a.seed)
    results, t0 = [], time.time()
    for n in a.contexts:
        keys = fp4_rows((n, 128), gen)
        qi = fp4_rows((a.rows, a.heads, 128), gen)
        w = (torch.randn(a.rows, a.heads, generator=gen) * (128 ** -0.5 * a.heads ** -0.5)).bfloat16()
        scores = official_scores(qi, w, keys)
        for dev in devices:
            results.append({"entries": n, "topk": a.topk, **compare(scores, a.topk, dev)})
    print(f"{'device':6} {'entries':>8} {'rows':>5} {'tied@k':>7} {'set differs':>11} {'entries differ':>15}")
    for r in results:
        print(f"{r['device']:6} {r['entries']:>8} {r['rows']:>5} {r['tied_rows']:>7} {r['differing_rows']:>11} "
              f"{100 * r['differing_entries_frac']:>14.3f}%")
    doc = {"command": " ".join(["python", "scripts/topk_tie_agreement.py"] + (argv or sys.argv[1:])),
           "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "torch": torch.__version__,
           "cuda_device": torch.cuda.get_device_name() if "cuda" in devices else None,
           "cpu_threads": torch.get_num_threads(), "seconds": round(time.time() - t0, 1),
           "heads": a.heads, "seed": a.seed, "results": results}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
