"""A copy of the packaged tuned table with one op's entries replaced (for KERNELBENCH_TUNED in device calls):
python scripts/tuned_variant.py OP 'KEY_SUBSET_JSON' 'CONFIG_JSON' OUT.json -> every entry of OP whose key holds
KEY_SUBSET gets CONFIG, or is dropped when CONFIG is null (the kernel's default then runs there, or a borrowed entry);
count printed, none is an error."""
import json
import sys
from pathlib import Path


def main() -> None:
    op, subset, config, out = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
    table = json.loads((Path(__file__).resolve().parent.parent / "kernelbench/tuned/v1.json").read_text())
    hits = [e for e in table["entries"] if e["op"] == op and all(e["key"].get(k) == v for k, v in subset.items())]
    if not hits:
        sys.exit(f"tuned_variant: no {op} entry has key {subset}")
    for e in hits:
        e["config"] = config
    if config is None:
        table["entries"] = [e for e in table["entries"] if e not in hits]
    Path(out).write_text(json.dumps(table, indent=1))
    print(f"{len(hits)} {op} entries {'dropped' if config is None else 'replaced'} -> {out}")


if __name__ == "__main__":
    main()
