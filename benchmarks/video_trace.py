#!/usr/bin/env python3
"""When a render's video gets its frames, and when its encoders take and finish them.

    python3 benchmarks/video_trace.py render JOB.toml [farm render's options]
    python3 benchmarks/video_trace.py encode STORE [farm encode's options]

(a ``--`` before the farm command is allowed). Runs ``python3 -m farm ARGS`` with
benchmarks/video_trace/sitecustomize.py loaded in each of its Python processes (the
render's video process too), then prints, in seconds from the command's start: the
frames announced complete (first, last), when the video process got its job and made its
colourer, the first frames' colouring, and per encoder (one per segment) its start,
first and last frame written, close and end, and the join. FARM_ENCODE_SEGMENTS applies
as usual."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        raise SystemExit(__doc__)
    with tempfile.TemporaryDirectory(prefix="farm-trace-") as tmp:
        env = dict(os.environ, FARM_TRACE=str(Path(tmp) / "t"),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(HERE / "video_trace"), str(HERE.parent),
                                                            os.environ.get("PYTHONPATH", "")])))
        done = subprocess.run([sys.executable, "-m", "farm", *args], env=env, capture_output=True, text=True)
        for line in done.stderr.splitlines():
            if "timeline" in line or "error" in line.lower():
                print(line)
        traces = [json.loads(p.read_text()) for p in Path(tmp).glob("t.*.json")]
    t0 = min(t["start"] for t in traces)

    def at(value: float) -> float:
        return round(value - t0, 3)

    for t in sorted(traces, key=lambda t: t["start"]):
        stamps = {k: at(v) for k, v in t.items() if isinstance(v, float) and k != "start"}
        handed = sorted(t.get("segment_done", {}).values())
        if handed:
            stamps["segments handed to the join, first"] = at(handed[0])
            stamps["segments handed to the join, last"] = at(handed[-1])
        if not (t["enc"] or t["complete"] or stamps):
            continue
        print(f"process {t['pid']} {' '.join(t['argv'])}: started {at(t['start'])}", *(
            f"{k} {v}" for k, v in stamps.items()), sep="\n  ")
        complete = sorted(t["complete"].values())
        if complete:
            print(f"  frames announced: first {at(complete[0])}, last {at(complete[-1])} ({len(complete)})")
        coloured = sorted((int(k), at(a), at(b)) for k, (a, b) in t["frames"].items())
        if coloured:
            print("  first frames coloured (frame, began, ended):", *coloured[:3])
        for name, e in sorted(t["enc"].items()):
            print(f"  encoder {name}: " + ", ".join(f"{k} {at(v) if isinstance(v, float) else v}"
                                                    for k, v in e.items()))


if __name__ == "__main__":
    main()
