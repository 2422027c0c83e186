#!/usr/bin/env python3
"""`farm encode` of two versions against plain ffmpeg, alternated on the same frames.

    python3 benchmarks/encode_versions.py STORE --baseline DIR [--rounds 3] [--k 16]
    python3 benchmarks/encode_versions.py STORE --variant NAME:VAR=VALUE[,VAR=VALUE] ... [--rounds 3]

Each round: K plain ffmpeg processes on the store's frames as raw RGB in /dev/shm
(benchmarks/datapath.py's baseline), with their pipes as Linux gives them and widened
to 1 MB (farm/runtime/pipes.py); then `farm encode STORE` of the baseline (``DIR``: a checkout's
``farm`` and ``kernels`` folders, e.g. from ``git archive REV farm kernels``) and of this
checkout, in alternating order, each through benchmarks/own_cpu.py (its own CPU and
ffmpeg's), with the busy and idle core-seconds of each (benchmarks/busy.py). Each
``--variant`` adds this checkout run with those environment variables set (e.g.
``k8:FARM_ENCODE_SEGMENTS=8``); with several versions the order rotates each round.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from busy import Busy  # noqa: E402
from datapath import plain_ffmpeg, raw_frames  # noqa: E402


def version_paths(baseline: Path) -> dict[str, str]:
    """PYTHONPATH for ``baseline`` (a folder holding ``farm`` and ``kernels``) and for
    this checkout: each version's folder first, and no other copy of the farm on the
    path (the GPU machine's prelude puts this checkout there: before 2026-11-26's
    nineteenth session that made the "baseline" this checkout too)."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and not (Path(p) / "farm").is_dir()]
    return {"baseline": os.pathsep.join([str(baseline.resolve()), *rest]),
            "this": os.pathsep.join([str(ROOT), *rest])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--baseline", type=Path, help="a folder holding another version's farm and kernels")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:VAR=VALUE[,VAR=VALUE]",
                    help="this checkout with these environment variables (repeatable)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--k", type=int, default=16, help="plain ffmpeg processes")
    args = ap.parse_args()
    paths = version_paths(args.baseline or ROOT)
    versions = {"this": (paths["this"], {})}
    if args.baseline:
        versions = {"baseline": (paths["baseline"], {}), **versions}
    for spec in args.variant:
        name, _, assignments = spec.partition(":")
        env = dict(a.split("=", 1) for a in assignments.split(",") if a)
        if not name or not env:
            ap.error(f"--variant {spec!r}: give NAME:VAR=VALUE[,VAR=VALUE]")
        versions[name] = (paths["this"], env)
    raw, frames, w, h, settings = raw_frames(args.store, Path("/dev/shm"))
    work = Path("/tmp/farm-encode-versions")
    work.mkdir(exist_ok=True)

    def cores(b: Busy) -> str:
        return b.report().splitlines()[-1].strip()

    try:
        for r in range(args.rounds):
            for wide in (False, True):
                with Busy() as b:
                    t = plain_ffmpeg(raw, frames, w, h, settings, args.k, work, wide=wide)
                print(f"round {r + 1}, plain ffmpeg K={args.k}{', pipes widened' if wide else ''}: "
                      f"{t:.2f} s; {cores(b)}", flush=True)
            names = list(versions)  # rotated each round (two versions: alternated)
            for name in names[r % len(names):] + names[:r % len(names)]:
                path, extra = versions[name]
                video = work / f"{name}.mp4"
                video.unlink(missing_ok=True)
                with Busy() as b:
                    t0 = time.perf_counter()
                    done = subprocess.run([sys.executable, str(ROOT / "benchmarks/own_cpu.py"), "encode",
                                           str(args.store), "--video", str(video)], capture_output=True,
                                          text=True, env=dict(os.environ, PYTHONPATH=path, **extra))
                    t = time.perf_counter() - t0
                cpu = re.search(r"own CPU ([\d.]+) s, its children's \(ffmpeg\) ([\d.]+)", done.stderr)
                if cpu is None:
                    raise SystemExit(f"farm encode ({name}) failed:\n{done.stderr[-2000:]}")
                print(f"round {r + 1}, farm encode ({name}): {t:.2f} s, own CPU {cpu.group(1)} s, ffmpeg's "
                      f"{cpu.group(2)} s; {cores(b)}", flush=True)
    finally:
        raw.unlink()


if __name__ == "__main__":
    main()
