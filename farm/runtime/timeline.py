"""Where a job's wall time goes: the timeline ``farm render`` prints and stores.

Every render or resume keeps one row in the store's ``runs`` table
(farm/store/layout.py). Besides when it started and ended, the row holds the moments
that cut a run into phases and the time spent in each kind of work:

* phases, one after the other: start-up (from the process's start: imports, device,
  store, kernel builds on the master's side), the reference orbit, the render (first
  assignment to last tile stored), the video's tail (last tile stored to video
  written);
* work inside the render phase, summed over workers: GPU busy (the kernels' device
  time), kernel builds and device set-up, waiting for per-frame host preparation
  (coordinates, skip tables: built ahead of need, so only a wait is on the critical
  path), sending results, idle waiting for work; on the master: its loop (receiving,
  deciding), the writer thread; the video: colouring and encoding (in the sink's own
  process).

Workers count their own seconds and send the running totals with every result
(``WORKER_COUNTERS``); the master keeps each worker's latest.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

WORKER_COUNTERS = ("setup", "build", "prep", "send", "idle")


def process_start() -> float:
    """Unix time at which this process started (Linux: from /proc), else now."""
    try:
        with open("/proc/self/stat") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.time()


@dataclass
class MasterTiming:
    """What the master measures before the render starts."""

    process_started: float = field(default_factory=lambda: process_start())  # unix time
    reference_s: float = 0.0  # computing the reference orbit


class Counters:
    """Named running totals of seconds: ``with counters.timing("prep"): ...``."""

    def __init__(self, names: tuple[str, ...] = WORKER_COUNTERS):
        self.seconds = dict.fromkeys(names, 0.0)

    @contextmanager
    def timing(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - t0

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += seconds

    def values(self) -> tuple[float, ...]:
        return tuple(self.seconds.values())
