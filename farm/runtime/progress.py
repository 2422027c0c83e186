"""A small progress bar on stderr: redrawn in place on a terminal, a line every few
seconds otherwise (logs, Slurm output files).

Two kinds of bar. Without ``work`` every unit is taken to cost the same: the rate is
units a second and the time left the units left at that rate. With ``work`` (a render:
tiles cost anything from milliseconds to minutes) the bar shows the share of the
predicted work done, the rate as that share a second (the whole render's predicted
work, at this run's pace) and the time left as the work left at that rate, so the
three agree: ``left = (100% - done) / rate``. ``work(now)`` gives them
(farm/store/estimate.py ``RunClock.reading``); the bar is redrawn every ``every``
seconds also while no unit finishes, so that the time left counts down through a
long tile instead of standing still.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO


def duration(seconds: float) -> str:
    """'42s', '7m05s', '3h12m'."""
    s = max(0, int(round(seconds)))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """``work(now)``, when given, reads the work done and the time left at monotonic time
    ``now``: an object with ``done`` (share of the work, 0..1), ``rate`` (share a second)
    and ``left_s``, or None while nothing is known."""

    def __init__(self, total: int, label: str, unit: str = "tiles", done: int = 0,
                 stream: TextIO | None = None, every: float = 5.0,
                 work: Callable[[float], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic, ticking: bool = True):
        self.work = work
        self.total, self.label, self.unit = total, label, unit
        self.done = done
        self.start_done = done
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every = every if not self.tty else 0.1
        self.clock = clock
        self.t0 = clock()
        self._last = 0.0
        self.enabled = True
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self.ticking = ticking and work is not None  # False: the caller calls tick()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            now = self.clock()
            if now - self._last >= self.every or self.done >= self.total:
                self._draw(now)
        if self.ticking and self._ticker is None and self.enabled:
            self._ticker = threading.Thread(target=self._tick_loop, name="progress", daemon=True)
            self._ticker.start()

    def tick(self) -> None:
        """Redraw if the bar is due (the ticker's call; tests call it with their clock)."""
        with self._lock:
            now = self.clock()
            if now - self._last >= self._tick_every and self.done < self.total:
                self._draw(now)

    @property
    def _tick_every(self) -> float:
        return max(self.every, 1.0)  # the time left is shown in whole seconds

    def _tick_loop(self) -> None:
        while not self._stop.wait(self._tick_every):
            self.tick()

    def line(self, now: float) -> str:
        """The bar's text at monotonic time ``now``."""
        frac = self.done / self.total if self.total else 1.0
        count = f"{self.done}/{self.total} {self.unit}"
        if self.work is None:
            rate = (self.done - self.start_done) / max(now - self.t0, 1e-9)
            left = f"{duration((self.total - self.done) / rate)} left" if rate > 0 else "? left"
            return (f"{self.label} [{'#' * int(frac * 30):<30}] {count} {100 * frac:5.1f}%  "
                    f"{rate:7.2f} {self.unit}/s  {left}")
        reading = self.work(now) if self.done < self.total else None
        if self.done >= self.total:
            return f"{self.label} [{'#' * 30}] {count}  work 100%  0s left"
        if reading is None:
            return f"{self.label} [{'':<30}] {count}  work ?  ? left"
        share = min(max(reading.done, 0.0), 1.0)
        pace = (f"{100 * reading.rate:.3g}%/s" if 100 * reading.rate >= 0.1 else
                f"{6000 * reading.rate:.3g}%/min")
        return (f"{self.label} [{'#' * int(share * 30):<30}] {count}  work {100 * share:.1f}% "
                f"at {pace}: {duration(reading.left_s)} left")

    def _draw(self, now: float) -> None:
        if not self.enabled:
            return
        self._last = now
        text = self.line(now)
        if self.tty:
            self.stream.write("\r" + text + "\x1b[K")
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self.tty and self.done < self.total and self.enabled:
                self.stream.write("\n")
                self.stream.flush()
