#!/usr/bin/env python3
"""How many of the machine's cores were busy while a command ran, over time.

    python3 benchmarks/busy.py [--bin S] -- COMMAND [ARGS...]

Runs COMMAND and reads /proc/stat every 20 ms meanwhile; prints, per bin of S seconds
(0.25 by default), the mean number of busy cores (user, nice, system, irq and softirq
time over all cores), then the command's wall time, the busy core-seconds and the idle
core-seconds: what a schedule that kept every core busy from the first moment to the
last would have had left to give. Linux only. Also usable as ``with Busy() as b: ...``
from another benchmark, then ``b.report()``."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def _busy_ticks() -> float:
    """Busy core-seconds since boot, all cores together."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / TICK


class Busy:
    """Samples busy cores on a thread while the ``with`` block runs."""

    def __init__(self, period: float = 0.02):
        self.period = period
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), _busy_ticks()))
            self._stop.wait(self.period)

    def __enter__(self) -> Busy:
        self.t0 = time.perf_counter()
        self.samples.append((self.t0, _busy_ticks()))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.t1 = time.perf_counter()
        self.samples.append((self.t1, _busy_ticks()))

    def report(self, width: float = 0.25, label: str = "") -> str:
        cores = os.cpu_count() or 1
        lines = [f"{label}busy cores of {cores}, per {width} s:"]
        edges = [self.t0 + width * i for i in range(int((self.t1 - self.t0) / width) + 2)]
        row = []
        for a, b in zip(edges, edges[1:], strict=False):
            inside = [(t, v) for t, v in self.samples if a <= t <= b]
            if len(inside) >= 2:
                row.append(f"{(inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]):4.1f}")
        for i in range(0, len(row), 10):
            lines.append(f"  {i * width:6.2f} s: " + " ".join(row[i:i + 10]))
        wall = self.t1 - self.t0
        busy = self.samples[-1][1] - self.samples[0][1]
        lines.append(f"  wall {wall:.2f} s, busy {busy:.1f} core-s, idle {cores * wall - busy:.1f} core-s")
        return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", type=float, default=0.25, help="seconds a line's bin (default 0.25)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command (after --)")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command given")
    with Busy() as b:
        rc = subprocess.call(command)
    print(b.report(args.bin, label=f"{' '.join(command[:4])}: "), flush=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
