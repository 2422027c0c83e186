"""What a plan's reference orbits cost, stated before any work starts.

The references of perturbed frames (farm/plan/references.py) are computed at the
deepest frame's precision, b bits (about 3.32 bits a decimal digit of depth, plus
80), one step z <- z^2 + c after another: two multiplications of b-bit numbers a step.
What bounds depth in practice is their time (a step costs about b^1.6: measured here
on the spot, since machines differ) and, far behind, their memory:

* the scan of the centre and, where no nucleus or Misiurewicz point serves a frame,
  the centre's orbit to the frames' iteration limit: at most ``steps`` steps (a
  Misiurewicz centre stops after its preperiod and one period, a nucleus centre
  after its period);
* nuclei: Newton's method, a few passes over each nucleus' period (with the
  derivative: about three steps' work a step), not counted in ``steps``;
* memory: 20 bytes a kept point (farm/numerics/orbit.py: a double mantissa pair and an
  int exponent), and while the scan runs, up to 256 full-precision points (32 MB at
  most: farm/numerics/scan.checkpoints).
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

from farm.numerics import period as per
from farm.numerics.orbit import Orbit
from farm.numerics.scan import checkpoints
from farm.runtime.byte_sizes import human

POINT_BYTES = 20  # a kept orbit point: two float64 and an int32


@dataclass(frozen=True)
class ReferenceCost:
    bits: int  # the deepest perturbed frame's precision
    steps: int  # full-precision steps at most, Newton's apart (module docstring)
    step_seconds: float  # one step at ``bits`` bits here, measured
    threads: int  # 2: the two-thread orbiter (farm/numerics/mpfr_threads.py); 1: gmpy2

    @property
    def seconds(self) -> float:
        return self.steps * self.step_seconds

    @property
    def point_bytes(self) -> int:
        """Memory of the kept points, at most."""
        return (self.steps + 1) * POINT_BYTES

    @property
    def working_bytes(self) -> int:
        """Full-precision numbers held while the scan runs."""
        return 2 * (checkpoints(self.bits) + 8) * (self.bits // 8 + 16)

    def text(self) -> str:
        return (f"reference orbit: at most {self.steps} steps at {self.bits} bits (a Misiurewicz "
                f"point or a nucleus at the centre: its preperiod and period), at most "
                f"{_duration(self.seconds)} here ({self.step_seconds * 1e3:.3g} ms a step, "
                f"{self.threads} thread{'s' if self.threads > 1 else ''}), plus Newton's method "
                f"for nuclei; {human(self.point_bytes)} to keep its points, "
                f"{human(self.working_bytes)} while it runs")


def estimate(plan) -> ReferenceCost | None:
    """The cost of ``plan``'s references (None when no frame is perturbed)."""
    from farm.plan.references import scan_steps

    needs = plan.reference_needs()
    if needs is None:
        return None
    bits, max_iter = needs
    steps, period_steps = scan_steps(max_iter, bits)
    seconds, threads = step_time(bits)
    return ReferenceCost(bits, max(steps, period_steps, max_iter), seconds, threads)


def step_time(bits: int, budget: float = 0.05) -> tuple[float, int]:
    """(seconds a step, threads) of an orbit at ``bits`` bits on this machine: the
    median step of a few (within about ``budget`` seconds) of a point with ``bits``
    bits of random digits (short numbers multiply faster than an orbit's)."""
    rnd = random.Random(bits)
    digits = int(bits * math.log10(2)) + 1
    tail = "".join(rnd.choice("0123456789") for _ in range(digits))
    c = per.parse(("-0.1" + tail, "0.1" + tail[::-1]), bits)  # inside: the orbit stays
    run = per.orbiter(c, bits)
    threads = 2 if isinstance(run, per.ThreadedOrbiter) else 1
    try:
        for _ in range(12):  # until the numbers fill their precision
            run.step()
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < 5 or (len(times) < 255 and time.perf_counter() - start < budget):
            t = time.perf_counter()
            run.step()
            times.append(time.perf_counter() - t)
        return sorted(times)[len(times) // 2], threads  # the median: others share the machine
    finally:
        run.close()


def orbit_bytes(points: Orbit) -> int:
    return len(points) * POINT_BYTES


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.2g} s"
    if seconds < 3600:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.3g} h"


