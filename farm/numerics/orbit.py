"""Reference orbits as the kernels need them: a double mantissa and an int exponent per
point, at any depth; and what the host derives from the orbit in doubles.

A reference orbit is computed at the depth's precision (thousands of bits, farm/numerics/
orbiters.py) but the kernels read it rounded: the deltas they add to it are tiny, so 53
bits of each Z are enough. Most points are of order 1 and are the doubles themselves;
a point that comes close to 0 (the orbit of a point near a deep minibrot passes within
1e-5000 of 0 at the minibrot's period) would underflow, and there the floatexp kernel
needs its exponent (kernels/perturb.cl: a step d <- (2 Z + d) d + dc with Z and d far
below 1e-308, their product still far above a pixel's dc at 1e-10000). So
:class:`Orbit` keeps

    mant  (L, 2) float64   Z(n) itself where max(|Re Z|, |Im Z|) >= 2^TINY_LOG2, else
                           its mantissa pair, max |component| in [0.5, 1) (or 0)
    exps  (L,)  int32      0, or the exponent e of that mantissa: Z(n) = mant[n] 2^e

16 + 4 bytes a point (the full-precision orbit at 1e-100000 would take 83 kB a point).
``values`` rounds the tiny points to doubles (subnormal or 0), as the skip tables and
the double-delta kernel take them (there a term of 2^-960 or less is below any
pixel's dc: farm/numerics/bla.py invalidates the maps across such steps).

Also here, in doubles (exponents apart) and so cheap next to the orbit itself: the
derivative dz/dc along the orbit (``Derivative``) for period detection and distance
estimates, and the search for an orbit that repeats (``Repeats``: a Misiurewicz point,
preperiodic, whose reference is its preperiod and one period).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

TINY_LOG2 = -960  # below 2^-960 a double keeps fewer than 53 bits (2^-1022 - 53 - margin)


@dataclass(frozen=True)
class Orbit:
    """Z(0) .. Z(L-1) at any depth (see the module docstring)."""

    mant: np.ndarray = field(repr=False)
    exps: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return len(self.mant)

    @cached_property
    def values(self) -> np.ndarray:
        """(L, 2) float64: every Z rounded to doubles (the tiny ones underflow)."""
        if not self.exps.any():
            return self.mant
        return np.ldexp(self.mant, self.exps[:, None].astype(np.int64))

    @cached_property
    def log2_abs(self) -> np.ndarray:
        """(L,) float64: log2 |Z(n)| (-inf for 0), at any depth."""
        with np.errstate(divide="ignore"):
            return np.log2(np.hypot(self.mant[:, 0], self.mant[:, 1])) + self.exps

    @property
    def nbytes(self) -> int:
        return self.mant.nbytes + self.exps.nbytes

    def head(self, length: int) -> Orbit:
        return Orbit(self.mant[:length], self.exps[:length])

    @staticmethod
    def from_values(values: np.ndarray) -> Orbit:
        """An orbit whose points are all the given doubles (tests; old stores)."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        return Orbit(values, np.zeros(len(values), np.int32))

    @staticmethod
    def concat(orbits: list[Orbit]) -> Orbit:
        if not orbits:
            return Orbit(np.zeros((0, 2)), np.zeros(0, np.int32))
        return Orbit(np.concatenate([o.mant for o in orbits]), np.concatenate([o.exps for o in orbits]))


def pair(mx: float, ex: int, my: float, ey: int) -> tuple[float, float, int]:
    """(zr, zi, e) of z = mx 2^ex + i my 2^ey (mantissas in [0.5, 1) or 0): the doubles
    themselves and e = 0 where z is in range, else a mantissa pair and its exponent."""
    top = max(ex if mx else -(1 << 62), ey if my else -(1 << 62))
    if top >= TINY_LOG2 or (not mx and not my):
        return math.ldexp(mx, ex), math.ldexp(my, ey), 0
    return math.ldexp(mx, ex - top), math.ldexp(my, ey - top), top


class Recorder:
    """Collects (zr, zi, e) points into an :class:`Orbit` (lists while it grows)."""

    def __init__(self) -> None:
        self.re: list[float] = [0.0]
        self.im: list[float] = [0.0]
        self.ex: list[int] = [0]

    def add(self, zr: float, zi: float, e: int) -> None:
        self.re.append(zr)
        self.im.append(zi)
        self.ex.append(e)

    def __len__(self) -> int:
        return len(self.re)

    def log2_abs(self, n: int) -> float:
        return _log2_abs(self.re[n], self.im[n], self.ex[n])

    def orbit(self, length: int | None = None) -> Orbit:
        n = len(self.re) if length is None else length
        mant = np.empty((n, 2))
        mant[:, 0], mant[:, 1] = self.re[:n], self.im[:n]
        return Orbit(mant, np.array(self.ex[:n], np.int32))


def _log2_abs(zr: float, zi: float, e: int) -> float:
    a = math.hypot(zr, zi)
    return math.log2(a) + e if a else -math.inf


class Derivative:
    """dz/dc along an orbit, dz(n+1) = 2 z(n) dz(n) + 1 from dz(0) = 0, as a complex
    mantissa and an exponent (dz grows past any double at depth), from the rounded
    orbit: enough for the magnitudes that period detection and distance estimates
    compare (a relative error of a few n 2^-53)."""

    def __init__(self) -> None:
        self.m = 0j
        self.e = 0

    def step(self, zr: float, zi: float, ze: int) -> None:
        """One step with z(n) = (zr + i zi) 2^ze."""
        m, e = 2.0 * complex(zr, zi) * self.m, self.e + ze
        if m == 0 or e < -1000:  # 2 z dz vanishes next to 1
            m, e = 1 + 0j, 0
        elif e <= 1000:  # + 1, in units of 2^e (beyond, far below 2 z dz)
            m += math.ldexp(1.0, -e)
        a = abs(m)
        if a > 2.0**64 or a < 2.0**-64:
            k = math.frexp(a)[1] if a else -e
            m, e = m * 2.0**-k, e + k
        self.m, self.e = m, e

    @property
    def log2_abs(self) -> float:
        a = abs(self.m)
        return math.log2(a) + self.e if a else -math.inf

    def value(self) -> tuple[complex, int]:
        return self.m, self.e


UNROLL_POINTS = 1 << 18  # a Misiurewicz orbit's laps on the device: at most this many points


def laps(points: Orbit, wrap: int, iterations: int) -> Orbit:
    """The orbit of a Misiurewicz point, Z(0) .. Z(k + q) with Z(k + q) = Z(k) (k =
    ``wrap``, period q), as the kernels get it: Z(0) .. Z(k - 1), then the cycle Z(k)
    .. Z(k + q - 1) over and over, to cover ``iterations`` (at most UNROLL_POINTS
    points; pixels that need more wrap back to Z(k)), and Z(k) last. The point is
    periodic after k to its precision (farm/plan/reference_orbits.py), so the laps are its
    orbit; over them the skip tables take whole laps at once, where a pixel spirals
    out from the point's neighbourhood."""
    q = len(points) - 1 - wrap
    count = max(1, min((iterations - wrap) // q + 1, (UNROLL_POINTS - wrap - 1) // q))
    index = np.concatenate([np.arange(wrap), wrap + np.tile(np.arange(q), count), [wrap]])
    return Orbit(points.mant[index], points.exps[index])


REPEAT_LOG2 = -40  # an orbit point within 2^-40 (relative) of an earlier one repeats it


CELL_LOG2 = -20  # grid cells of 2^-20 in which orbit points are filed
WALK_BACK = 16  # steps a repeat seen late is moved back at most


class Repeats:
    """Watches an orbit for its first return to an earlier point: z(n) within
    2^REPEAT_LOG2 max(|z|, 1) of z(m), m >= 2, on a cycle that repels (its multiplier
    prod 2 z(j) over the q = n - m points has modulus above 1): the orbit of a
    Misiurewicz point (or of a point near one), which lands on a repelling cycle after
    its preperiod m. An orbit attracted to a cycle returns too; then the watch stops
    (farm/numerics/scan.py finds such cycles its own way). Points are filed in a
    dictionary by their cell of 2^CELL_LOG2; a return straddling a cell border goes
    unseen at that step and is seen a step later, and ``see`` then walks back to the
    first point that repeats."""

    def __init__(self, recorder: Recorder) -> None:
        self.rec = recorder
        self.cells: dict[tuple[int, int], int] = {}
        self.scale = 2.0 ** -CELL_LOG2
        self.on = True
        self.logs = [0.0]  # sum of log2 |2 z(j)| over j < n: multipliers in O(1)

    def see(self, n: int, look: bool = True) -> tuple[int, int] | None:
        """Point n (already recorded, and n - 1 seen); returns (preperiod m, period q)
        at a repeat. ``look`` False files the point only (the caller knows the orbit
        shadows a cycle it has seen)."""
        rec = self.rec
        self.logs.append(self.logs[-1] + 1 + rec.log2_abs(n - 1) if n > 1 else 0.0)
        if not self.on or rec.ex[n]:  # below double's range: not filed (no cycle passes there)
            return None
        key = (math.floor(rec.re[n] * self.scale), math.floor(rec.im[n] * self.scale))
        m = self.cells.get(key)
        self.cells[key] = n
        if not look or m is None or m < 2 or not self._near(m, n):
            return None
        q = n - m
        if not self.logs[n] - self.logs[m] > 0:  # log2 of the cycle's multiplier
            self.on = False  # an attracting cycle
            return None
        for _ in range(WALK_BACK):  # a return that straddled a cell border, seen late
            if m <= 2 or not self._near(m - 1, m - 1 + q):
                break
            m -= 1
        return m, q

    def _near(self, a: int, b: int) -> bool:
        rec = self.rec
        if rec.ex[a] or rec.ex[b]:
            return False
        d = math.hypot(rec.re[a] - rec.re[b], rec.im[a] - rec.im[b])
        return d <= 2.0**REPEAT_LOG2 * max(math.hypot(rec.re[b], rec.im[b]), 1.0)
