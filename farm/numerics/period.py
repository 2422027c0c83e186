"""Reference points for perturbation, in arbitrary precision (gmpy2, MPFR): the view
centre's orbit scanned for periods, Newton's method to a nucleus, reference orbits,
attracting cycles, and distance estimates from a point to the Mandelbrot set.

This is the one module that imports gmpy2 (MPFR/MPC: about ten times faster than
mpmath for the long orbits here). Every function takes its points as decimal strings
or gmpy2 numbers and a precision in bits; it returns doubles, ints or decimal
strings, so no gmpy2 number leaves the module except through :class:`Point`.

Notation: f_c(z) = z^2 + c, z_0 = 0, z_n = f_c^n(0); ``dz_n`` = d z_n / d c.

* Period detection (the "ball method" taken to first order): the disc of radius r
  around c is mapped by f^n to about the disc of radius r |dz_n| around z_n; the
  lowest n at which that disc holds 0 is the period of the lowest-period atom (a
  hyperbolic component and its domain) that the disc meets.
* A nucleus of period p is a root of z_p(c) = 0: Newton's method c <- c - z_p / dz_p.
* A hyperbolic component of period p: the points c with an attracting cycle of period
  p; its multiplier lambda = (f^p)'(w) at a cycle point w has |lambda| < 1 inside.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gmpy2
import numpy as np
from gmpy2 import mpc, mpfr


@dataclass(frozen=True)
class Point:
    """A point c of the complex plane at ``bits`` bits; ``re``, ``im`` are decimal
    strings that parse back to exactly the same binary numbers at ``bits`` bits."""

    re: str
    im: str
    bits: int

    def value(self) -> mpc:
        with _prec(self.bits):
            return mpc(mpfr(self.re), mpfr(self.im))


def _prec(bits: int):
    """A context manager: gmpy2 arithmetic at ``bits`` bits inside it (numbers made
    outside any such context have 53 bits)."""
    return gmpy2.context(gmpy2.get_context(), precision=bits)


def _digits(bits: int) -> int:
    """Significant decimal digits that round-trip a ``bits``-bit binary number."""
    return int(math.ceil(bits * math.log10(2))) + 2


def point(c: mpc, bits: int) -> Point:
    """``c`` (rounded to ``bits`` bits) as a :class:`Point`."""
    with _prec(bits):
        re, im = +c.real, +c.imag
    d = _digits(bits)
    return Point(f"{re:.{d}g}", f"{im:.{d}g}", bits)


def parse(center: Sequence[str], bits: int) -> mpc:
    """The decimal strings (re, im) as a complex number rounded to ``bits`` bits."""
    with _prec(bits):
        return mpc(mpfr(center[0]), mpfr(center[1]))


def offset_in(center: Sequence[str], ref: Point, unit_mantissa: float, unit_exp: int,
              bits: int) -> tuple[float, float]:
    """(centre - ref) / u as two doubles, u = unit_mantissa * 2**unit_exp (the kernels'
    half pixel spacing), computed at ``bits`` bits and rounded once."""
    with _prec(bits + 64):
        diff = parse(center, bits + 64) - ref.value()
        u = mpfr(unit_mantissa) * mpfr(2) ** unit_exp
        return float(diff.real / u), float(diff.imag / u)


def log2_distance(a: Point, center: Sequence[str]) -> float:
    """log2 |a - centre| (-inf when they are equal), at any depth."""
    bits = a.bits + 64
    with _prec(bits):
        return log2_abs(a.value() - parse(center, bits))


def log2_abs(x: mpc | mpfr) -> float:
    """log2 |x|, -inf for 0; works far outside double's range."""
    if x == 0:
        return -math.inf
    e, m = gmpy2.frexp(abs(x))
    return math.log2(float(m)) + e


# ---------------------------------------------------------------------- orbits
def orbit(c: mpc, bits: int, steps: int, r2: float, progress: Callable[[int], None] | None = None
          ) -> np.ndarray:
    """Z(0) = 0 .. Z(L-1) of c at ``bits`` bits, each rounded to doubles: an (L, 2)
    float64 array, L - 1 = steps, or the last n before |Z(n)|^2 > r2 when c escapes
    sooner. ``progress(n)`` is called every 4096 steps."""
    out = np.zeros((steps + 1, 2), dtype=np.float64)
    with _prec(bits):
        cr, ci = +c.real, +c.imag
        x = y = xx = yy = mpfr(0)
        for n in range(1, steps + 1):
            y = 2 * x * y + ci
            x = xx - yy + cr
            xx, yy = x * x, y * y
            fx, fy = float(x), float(y)
            if fx * fx + fy * fy > r2:
                return out[:n]
            out[n] = fx, fy
            if progress and n % 4096 == 0:
                progress(n)
    return out


@dataclass(frozen=True)
class Scan:
    """What the orbit of the view centre tells (see :func:`scan`).

    periods[k]   lowest n with |z_n| < radii[k] |dz_n| (0: none within the steps run)
    escaped      the n with |z_n| > 2 where the orbit escaped (0: it did not)
    log2_de      log2 of the exterior distance estimate 2 |z| ln|z| / |dz| at a large
                 |z| (when escaped; the distance to the set is between a quarter of it
                 and it), else None
    returns      q > 0: the orbit came back to within 2^-48 of where it was q steps
                 before, and c has an attracting q-cycle (attracting_cycle); else 0
    steps        iterations run
    cycle        that attracting cycle when returns > 0 (its multiplier and interior
                 distance estimate), else None
    """

    periods: tuple[int, ...]
    escaped: int
    log2_de: float | None
    returns: int
    steps: int
    cycle: Cycle | None = None


RETURN_LOG2 = -48  # a return closer than 2^-48 (relative) hints at an attracting cycle


def scan(center: Sequence[str], bits: int, log2_radii: Sequence[float], max_iter: int,
         period_steps: int | None = None) -> Scan:
    """Iterate the centre c with its derivative, finding for each disc radius r (given
    as log2 r, so that depths beyond double's range work) the lowest period n with
    |z_n| < r |dz_n|, and watching for an escape or a return (Brent's cycle finding:
    z is compared with its value at the last power of two, in doubles). Stops at an
    escape (its distance estimate from a second pass with the derivative), at a return,
    or after ``max_iter`` steps, or ``period_steps`` (default the same) while some radius
    has no period yet (callers cap both to bound the cost). A radius whose period is not
    found by then gets 0 (an attracted orbit never comes near 0 again)."""
    radii = list(log2_radii)
    order = sorted(range(len(radii)), key=lambda k: -radii[k])  # widest disc first
    periods = [0] * len(radii)
    steps = max(max_iter, period_steps or 0)
    tiny = 2.0 ** RETURN_LOG2
    nxt, n = 0, 0
    with _prec(bits):
        c = parse(center, bits)
        # |z| < r |dz| as |z|^2 < r^2 |dz|^2 (mpfr: any depth)
        r2 = [gmpy2.mul_2exp(mpfr(2.0 ** (2 * radii[k] - math.floor(2 * radii[k]))),
                             math.floor(2 * radii[k])) for k in order]
        z = dz = saved_z = mpc(0)
        saved, saved_at, watch = 0j, 0, True
        pending: tuple[int, int, mpc, mpfr] | None = None  # (q, when, z then, |move|)
        for n in range(1, steps + 1):
            if nxt < len(order):  # the derivative, while periods are looked for
                dz = 2 * z * dz + 1
            z = z * z + c
            zf = complex(z)
            if zf.real * zf.real + zf.imag * zf.imag > 4:
                return Scan(tuple(periods), n, _exterior_de(c, n), 0, n)
            if nxt < len(order):
                az2, adz2 = gmpy2.norm(z), gmpy2.norm(dz)
                while nxt < len(order) and az2 < r2[nxt] * adz2:
                    periods[order[nxt]] = n
                    nxt += 1
            elif n > max_iter:
                break
            if pending is not None and n == pending[1]:
                # a return: attracted when the next period moves z less than the last
                # (at full precision: the moves can be far below a double's resolution)
                q, _, then, moved = pending
                cycle = attracting_cycle(c, q, bits, z) if abs(z - then) <= moved else None
                if cycle is not None:
                    return Scan(tuple(periods), 0, None, q, n, cycle)
                pending, watch = None, False  # repelling (a Misiurewicz point): scan on
            elif watch and pending is None and abs(zf - saved) < tiny * max(abs(zf), 1.0):
                pending = (n - saved_at, 2 * n - saved_at, z, abs(z - saved_z))
            if n & (n - 1) == 0:  # a power of two: the next comparisons are with z_n
                saved, saved_z, saved_at = zf, z, n
    return Scan(tuple(periods), 0, None, 0, min(n, steps))


def _exterior_de(c: mpc, escaped: int) -> float:
    """log2 of 2 |z| ln|z| / |dz| of c's orbit once |z| > 2^16, past its escape at
    ``escaped`` (iterated again from 0, with the derivative)."""
    z = dz = mpc(0)
    for n in range(escaped + 64):
        if n >= escaped and log2_abs(z) > 16:
            break
        dz = 2 * z * dz + 1
        z = z * z + c
    lz = log2_abs(z)
    return 1 + math.log2(lz) + math.log2(math.log(2)) + lz - log2_abs(dz)


# ---------------------------------------------------------------------- nuclei
def nucleus(guess: mpc, period: int, bits: int, max_steps: int = 64) -> mpc | None:
    """A nucleus of exact period ``period`` (z_p(c) = 0, z_k(c) != 0 for k < p) that
    Newton's method reaches from ``guess``, to ``bits`` bits, or None when it does not
    converge. Roots of lower periods k | p are divided out (Newton runs on
    z_p / prod z_k), so that a satellite of period p next to a nucleus of period k
    is found, not that nucleus."""
    divisors = {k for k in range(1, period) if period % k == 0}
    with _prec(bits):
        c = +guess
        tol = mpfr(2) ** (-bits + 8)
        for _ in range(max_steps):
            z = dz = mpc(0)
            lower = mpc(0)  # sum of dz_k / z_k over the divisors k
            for k in range(1, period + 1):
                dz = 2 * z * dz + 1
                z = z * z + c
                if k in divisors:
                    if z == 0:
                        return None
                    lower += dz / z
            if z == 0:
                return c
            slope = dz / z - lower  # (log h)' for h = z_p / prod z_k
            if slope == 0 or not gmpy2.is_finite(slope.real) or not gmpy2.is_finite(slope.imag):
                return None
            step = 1 / slope
            c = c - step
            if abs(step) <= tol * max(abs(c), mpfr(1)):
                return c
    return None


def lowest_return(c: mpc, period: int, bits: int) -> int:
    """The first k <= period with |z_k(c)| < 2^(-bits/2) (for a nucleus of period p:
    p itself, unless it is also the nucleus of a lower period k dividing p)."""
    with _prec(bits):
        z = mpc(0)
        small = mpfr(2) ** (-bits // 2)
        for k in range(1, period + 1):
            z = z * z + c
            if abs(z) < small:
                return k
    return period


# ---------------------------------------------------------------------- interior
@dataclass(frozen=True)
class Cycle:
    """The attracting cycle of c, period p: its multiplier and the interior distance
    estimate (log2; the distance from c to the component's boundary is between a
    quarter of it and it)."""

    multiplier: float  # |lambda|
    log2_de: float


def attracting_cycle(c: mpc, period: int, bits: int, start: mpc | None = None,
                     max_steps: int = 24) -> Cycle | None:
    """The cycle of period ``period`` of c found by Newton's method on f^p(w) = w from
    ``start`` (default z_p(c)), with |lambda| < 1, or None (no such cycle: c is not
    inside a component of that period; Newton gives up early where the multiplier at
    its iterate is far above 1)."""
    with _prec(bits):
        w = start
        if w is None:
            w = mpc(0)
            for _ in range(period):
                w = w * w + c
        tol = mpfr(2) ** (-bits + 8)
        for step_count in range(max_steps):
            z, dz = w, mpc(1)
            for _ in range(period):
                dz = 2 * z * dz
                z = z * z + c
            if dz == 1 or (step_count >= 2 and abs(dz) > 2):
                return None
            step = (z - w) / (dz - 1)
            w = w - step
            if abs(step) <= tol * max(abs(w), mpfr(1)):
                break
        else:
            return None
        # derivatives of F = f^p at (w, c): dz = F_z, dc = F_c, dzz = F_zz, dcz = F_cz
        z, dz, dc, dzz, dcz = w, mpc(1), mpc(0), mpc(0), mpc(0)
        for _ in range(period):
            dcz = 2 * (z * dcz + dc * dz)
            dzz = 2 * (z * dzz + dz * dz)
            dc = 2 * z * dc + 1
            dz = 2 * z * dz
            z = z * z + c
        lam = abs(dz)
        if lam >= 1:
            return None
        denom = abs(dcz + dzz * dc / (1 - dz))
        if denom == 0:
            return Cycle(float(lam), math.inf)
        de = (1 - lam * lam) / denom
        return Cycle(float(lam), log2_abs(de))
