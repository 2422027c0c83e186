"""Attracting cycles: whether c lies inside a hyperbolic component of period p (an
attracting p-cycle, found by Newton's method on f^p(w) = w at the depth's
precision), its multiplier, and the interior distance estimate to the component's
boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gmpy2 import mpc, mpfr

from farm.numerics.mpfr_points import log2_abs, precision


@dataclass(frozen=True)
class Cycle:
    """The attracting cycle of c, period p: its multiplier and the interior distance
    estimate (log2; the distance from c to the component's boundary is between a
    quarter of it and it)."""

    multiplier: float  # |lambda|
    log2_de: float


STALLED = 2.0**-20  # attracting_cycle: a residual this far below the first that no longer halves


def attracting_cycle(c: mpc, period: int, bits: int, start: mpc | None = None,
                     max_steps: int = 24) -> Cycle | None:
    """The cycle of period ``period`` of c found by Newton's method on f^p(w) = w from
    ``start`` (default z_p(c)), with |lambda| < 1, or None (no such cycle: c is not
    inside a component of that period; Newton gives up early where the multiplier at
    its iterate is far above 1). Newton's method stops when its step is below
    2^-(bits-8), or when the residual |f^p(w) - w| has fallen below STALLED times the
    first and no longer halves, where |lambda| < 1: a long cycle at a modest precision
    cannot do better (at 128 bits, period 8007, near the Seahorse centre, the orbit
    amplifies each rounding about 2^52 and the residual stalls near 1e-23)."""
    with precision(bits):
        w = start
        if w is None:
            w = mpc(0)
            for _ in range(period):
                w = w * w + c
        tol = mpfr(2) ** (-bits + 8)
        first = last = None  # |f^p(w) - w| at the first and the latest iterate
        for step_count in range(max_steps):
            z, dz = w, mpc(1)
            for _ in range(period):
                dz = 2 * z * dz
                z = z * z + c
            if dz == 1 or (step_count >= 2 and abs(dz) > 2):
                return None
            residual = abs(z - w)
            if (first is not None and last is not None and step_count >= 2 and residual >= last / 2
                    and residual <= first * STALLED and abs(dz) < 1):
                break  # at the precision's floor (see STALLED): w is the cycle's point there
            first = residual if first is None else first
            last = residual
            step = (z - w) / (dz - 1)
            w = w - step
            if abs(step) <= tol * max(abs(w), mpfr(1)):
                break
        else:
            return None
        # derivatives of F = f^p at (w, c): dz = F_z, dc = F_c, dzz = F_zz, dcz = F_cz;
        # a cycle of a lower period (a divisor's: f^p fixes it too) is not this period's
        near = max(tol * max(abs(w), mpfr(1)), (last or 0) * 1024)
        z, dz, dc, dzz, dcz = w, mpc(1), mpc(0), mpc(0), mpc(0)
        for k in range(1, period + 1):
            dcz = 2 * (z * dcz + dc * dz)
            dzz = 2 * (z * dzz + dz * dz)
            dc = 2 * z * dc + 1
            dz = 2 * z * dz
            z = z * z + c
            if k < period and period % k == 0 and abs(z - w) <= near:
                return None
        lam = abs(dz)
        if lam >= 1:
            return None
        denom = abs(dcz + dzz * dc / (1 - dz))
        if denom == 0:
            return Cycle(float(lam), math.inf)
        de = (1 - lam * lam) / denom
        return Cycle(float(lam), log2_abs(de))


NUCLEUS_SLACK = 32  # a centre this many bits closer to its nucleus than the component is wide


def nucleus_cycle(log2_lap: float, log2_z: float, log2_dz: float) -> Cycle | None:
    """The cycle of c at (or next to) the nucleus of period p, in closed form, from the
    rounded orbit's magnitudes: log2_lap = log2 |prod_{j=1..p} 2 z_j|, log2_z = log2
    |z_p|, log2_dz = log2 |dz_p/dc|. At the nucleus the cycle passes through 0, so
    attracting_cycle's derivatives reduce to dz = 0, dcz = 0, dzz = 2 prod_{j<p} 2 z_j
    and dc = dz_p/dc: the multiplier is |prod 2 z_j| (about 0) and the interior
    distance estimate 1 / (|dzz| |dc|). None unless Newton's step to the nucleus,
    |z_p / dz_p|, is below 2^-NUCLEUS_SLACK of that estimate (then attracting_cycle's
    Newton at full precision, a pass and more over the period, would find the same
    cycle: at 1e-100000 and a period of 10^5 the host took it for half an hour)."""
    log2_dzz = 1 + float(log2_lap) - (1 + float(log2_z))
    log2_de = -(log2_dzz + float(log2_dz))
    if not math.isfinite(log2_de) or log2_z - log2_dz > log2_de - NUCLEUS_SLACK:
        return None
    return Cycle(2.0 ** float(log2_lap) if log2_lap > -1000 else 0.0, log2_de)
