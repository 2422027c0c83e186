"""A small progress bar on stderr: redrawn in place on a terminal, a line every few
seconds otherwise (logs, Slurm output files)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    """``eta(elapsed_s)``, when given, says how many seconds are left (or None); without
    it the time left assumes every unit costs the same."""

    def __init__(self, total: int, label: str, unit: str = "tiles", done: int = 0,
                 stream: TextIO | None = None, every: float = 5.0,
                 eta: Callable[[float], float | None] | None = None):
        self.eta = eta
        self.total, self.label, self.unit = total, label, unit
        self.done = done
        self.start_done = done
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = every if not self.tty else 0.1
        self.t0 = time.monotonic()
        self._last = 0.0
        self.enabled = True

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._last >= self.every or self.done >= self.total:
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        if not self.enabled:
            return
        frac = self.done / self.total if self.total else 1.0
        rate = (self.done - self.start_done) / max(now - self.t0, 1e-9)
        left: float | None = (self.total - self.done) / rate if rate > 0 else None
        if self.eta is not None:
            left = self.eta(now - self.t0)
        bar = "#" * int(frac * 30)
        eta_text = f"{left:6.0f}s left" if left is not None else "   ?s left"
        text = (f"{self.label} [{bar:<30}] {self.done}/{self.total} {self.unit} "
                f"{100 * frac:5.1f}%  {rate:7.2f} {self.unit}/s  {eta_text}")
        if self.tty:
            self.stream.write("\r" + text)
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.done < self.total and self.enabled:
            self.stream.write("\n")
            self.stream.flush()
