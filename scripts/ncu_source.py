"""Where a kernel's warps spend their time, per SASS instruction, from Nsight Compute's source page.

    ncu ... --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \\
        python3 scripts/profile_op.py OP --batch 1 > src.log
    python3 scripts/ncu_source.py src.log[.gz] [--top 12]

For each profiled kernel: SASS instructions executed (warp level) and stall samples in all, the stall reasons
that hold most samples, and the hottest instructions (samples, executions, the leading stall reason), with the
instruction's position in the listing so a hot stretch can be read in the log."""
from __future__ import annotations

import argparse
import csv
import gzip
import io
from collections import Counter


def _kernels(text: str):
    """(kernel name, header, rows) per "Kernel Name" block of the CSV source page."""
    name, header, rows = None, None, []
    for line in text.splitlines():
        if not line.startswith('"'):
            continue
        cells = next(csv.reader(io.StringIO(line)))
        if cells[0] == "Kernel Name":
            if name is not None:
                yield name, header, rows
            name, header, rows = cells[1], None, []
        elif cells[0] == "Address":
            header = cells
        elif header is not None:
            rows.append(cells)
    if name is not None:
        yield name, header, rows


def _num(cell: str) -> float:
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return 0.0


def summarise(text: str, top: int) -> list[str]:
    out = []
    for name, header, rows in _kernels(text):
        col = {h: i for i, h in enumerate(header or [])}
        stalls = [h for h in col if h.startswith("stall_") and "(Not Issued)" not in h]
        samples = [_num(r[col["Warp Stall Sampling (All Samples)"]]) for r in rows]
        execs = [_num(r[col["Instructions Executed"]]) for r in rows]
        reasons = Counter()
        for r in rows:
            for s in stalls:
                reasons[s[6:]] += _num(r[col[s]])
        total = sum(samples) or 1.0
        out.append(f"# {name}: {len(rows)} SASS lines, {sum(execs):,.0f} warp instructions executed, "
                   f"{sum(samples):,.0f} stall samples")
        out.append("  stall reasons: " + ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in reasons.most_common(6)))
        for i in sorted(range(len(rows)), key=lambda i: -samples[i])[:top]:
            r = rows[i]
            lead = max(stalls, key=lambda s: _num(r[col[s]])) if stalls else ""
            out.append(f"  #{i:5d} {samples[i] / total * 100:5.1f}% exec {execs[i]:7.0f} {lead[6:]:14s} "
                       f"{r[col['Source']].strip()}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--top", type=int, default=12, help="hottest instructions listed per kernel")
    a = ap.parse_args()
    for path in a.logs:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            print("\n".join(summarise(f.read(), a.top)))


if __name__ == "__main__":
    main()
