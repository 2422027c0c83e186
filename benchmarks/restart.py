#!/usr/bin/env python3
"""What a `--restart` over a finished store costs: the old file's removal and the whole command.

    python3 benchmarks/restart.py JOB.toml [--rounds 3] [--baseline DIR]

Each round renders JOB completely (`farm render JOB --restart --no-video`), then runs
`farm render JOB --restart --no-video` again with ``pathlib.Path.unlink`` wrapped to
print every removal over 10 ms (the file, its seconds, the thread that waited for it),
and prints that command's wall time and its store's timeline. With ``--baseline DIR``
(a checkout's ``farm`` and ``kernels`` folders, e.g. from ``git archive REV farm
kernels``) each round runs that version and this one, in alternating order.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = r"""
import pathlib, sys, threading, time
T0 = time.perf_counter()
real = pathlib.Path.unlink
def timed(self, missing_ok=False):
    t = time.perf_counter()
    try:
        return real(self, missing_ok=missing_ok)
    finally:
        if time.perf_counter() - t > 0.01:
            print(f"  unlink {self.name}: {time.perf_counter() - t:.3f} s, from {t - T0:.3f} s, "
                  f"on {threading.current_thread().name}", file=sys.stderr)
pathlib.Path.unlink = timed
from farm.cli import main
sys.exit(main(sys.argv[1:]))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("job", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="another version's checkout (farm/, kernels/)")
    args = ap.parse_args()
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    versions = {"this": os.pathsep.join([*rest, str(ROOT)])}
    if args.baseline:
        versions = {"baseline": os.pathsep.join([*rest, str(args.baseline.resolve())]), **versions}
    command = ["render", str(args.job), "--restart", "--no-video"]
    for r in range(args.rounds):
        names = list(versions) if r % 2 == 0 else list(reversed(versions))
        for name in names:
            subprocess.run([sys.executable, "-c", PROBE, *command, "--quiet"], check=True,
                           capture_output=True, env=dict(os.environ, PYTHONPATH=versions["this"]))
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", PROBE, *command], capture_output=True, text=True,
                                  env=dict(os.environ, PYTHONPATH=versions[name]))
            wall = time.perf_counter() - t0
            lines = [line for line in done.stderr.splitlines() if "unlink" in line or "timeline" in line]
            print(f"round {r + 1}, {name}: {wall:.2f} s (exit status {done.returncode})", *lines, sep="\n",
                  flush=True)


if __name__ == "__main__":
    main()
