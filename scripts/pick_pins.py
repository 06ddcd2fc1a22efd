"""The fastest of several decode-bench runs at one C, as the pin it ran with (device-call helper).

    python3 scripts/pick_pins.py DIR C NAME=PIN ...   ->  prints the PIN of the NAME whose DIR/NAME.json is fastest

NAME.json files are `kernelbench decode-bench --json` results; a NAME without a file (a failed run) is skipped, and
the first NAME wins ties. Prints the chosen name and its step time on stderr."""
from __future__ import annotations

import json
import pathlib
import sys


def step_ms(path: pathlib.Path, c: int) -> float | None:
    if not path.exists():
        return None
    for q in json.loads(path.read_text())["points"]:
        if q["batch"] == c:
            return q["step_ms"]
    return None


def main() -> None:
    d, c, pairs = pathlib.Path(sys.argv[1]), int(sys.argv[2]), [a.partition("=") for a in sys.argv[3:]]
    timed = [(step_ms(d / f"{name}.json", c), name, pin) for name, _, pin in pairs]
    timed = [t for t in timed if t[0] is not None]
    if not timed:
        raise SystemExit("pick_pins: no run has a result")
    best = min(timed, key=lambda t: t[0])
    print(f"pick_pins C={c}: " + ", ".join(f"{n} {ms:.3f}" for ms, n, _ in timed) + f" -> {best[1]}", file=sys.stderr)
    print(best[2])


if __name__ == "__main__":
    main()
