"""One line per kernel launch from Nsight Compute's `--csv --page details` output (scripts/profile_op.py runs).

    python3 scripts/ncu_summary.py moe_c64.log [more.log ...]

Columns: duration, DRAM throughput (% of peak), achieved / theoretical occupancy, registers, dynamic shared
memory, waves, the share of cycles with no eligible warp, warp cycles per issued instruction, L2 hit rate."""
from __future__ import annotations

import csv
import io
import sys

METRICS = {"Duration": "dur", "DRAM Throughput": "dram%", "Achieved Occupancy": "occ%",
           "Theoretical Occupancy": "theo%", "Registers Per Thread": "regs",
           "Dynamic Shared Memory Per Block": "dsmem", "Waves Per SM": "waves", "No Eligible": "noelig%",
           "Warp Cycles Per Issued Instruction": "cpi", "L2 Hit Rate": "l2hit%"}


def summarise(text: str) -> list[str]:
    rows = list(csv.reader(io.StringIO("\n".join(line for line in text.splitlines() if line.startswith('"')))))
    if not rows:
        return ["(no ncu rows: was the run made with --csv --page details?)"]
    col = {name: i for i, name in enumerate(rows[0])}
    kernels: dict[tuple, dict] = {}
    for r in rows[1:]:
        if len(r) <= col["Metric Value"] or r[0] == "ID":
            continue
        key = (r[col["ID"]], r[col["Kernel Name"]][:40], r[col["Grid Size"]], r[col["Block Size"]])
        short = METRICS.get(r[col["Metric Name"]])
        if short:
            unit = r[col["Metric Unit"]] if short == "dur" else ""
            kernels.setdefault(key, {})[short] = r[col["Metric Value"]] + unit
    out = []
    for (kid, name, grid, block), m in kernels.items():
        out.append(f"{kid:>3} {name:40s} grid {grid:14s} block {block:12s} "
                   + " ".join(f"{s}={m.get(s, '-')}" for s in METRICS.values()))
    return out


def main() -> None:
    for path in sys.argv[1:]:
        text = open(path).read()
        print(f"# {path}")
        for line in text.splitlines():
            if line.startswith("profiled:"):
                print("  " + line)
        print("\n".join(summarise(text)))


if __name__ == "__main__":
    main()
