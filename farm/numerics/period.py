"""Reference points for perturbation, in arbitrary precision (gmpy2, MPFR): orbits at
the depth's precision (on two threads at great depths), Newton's method to nuclei and
Misiurewicz points, attracting cycles, and distance estimates from a point to the
Mandelbrot set. The scan of the view centre's orbit, which uses these, is
farm/numerics/scan.py (``scan`` here calls it).

This is the one module that imports gmpy2 (MPFR/MPC: about ten times faster than
mpmath for the long orbits here; farm/numerics/mpfr_threads.py calls the same MPFR
through ctypes, on two threads). Every function takes its points as decimal strings
or gmpy2 numbers and a precision in bits; it returns doubles, ints or decimal
strings, so no gmpy2 number leaves the module except through :class:`Point`.

Notation: f_c(z) = z^2 + c, z_0 = 0, z_n = f_c^n(0); ``dz_n`` = d z_n / d c.

* Period detection (the "ball method" taken to first order): the disc of radius r
  around c is mapped by f^n to about the disc of radius r |dz_n| around z_n; the
  lowest n at which that disc holds 0 is the period of the lowest-period atom (a
  hyperbolic component and its domain) that the disc meets.
* A nucleus of period p is a root of z_p(c) = 0: Newton's method c <- c - z_p / dz_p.
* A Misiurewicz point of preperiod k and period q is a root of z_{k+q}(c) - z_k(c)
  whose orbit lands on its (repelling) q-cycle exactly at step k.
* A hyperbolic component of period p: the points c with an attracting cycle of period
  p; its multiplier lambda = (f^p)'(w) at a cycle point w has |lambda| < 1 inside.
* Orbits: below COMPLEX_BITS one step is one complex operation (ComplexOrbiter: the
  interpreter's cost per operation dominates there); at depth it is two
  multiplications of b-bit numbers (about b^1.6 each; GmpyOrbiter), and from
  mpfr_threads.THREAD_BITS up they run at once on two threads (ThreadedOrbiter;
  Newton's method: six products a step, three a thread).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gmpy2
from gmpy2 import mpc, mpfr

from farm.numerics import mpfr_threads
from farm.numerics.orbit import TINY_LOG2, Derivative, Orbit, Recorder, pair


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


def moved(center: Sequence[str], dx: float, dy: float, exp: int, bits: int) -> tuple[str, str]:
    """centre + (dx + i dy) 2^exp at ``bits`` bits, as decimal strings (any depth)."""
    with _prec(bits):
        step = mpc(gmpy2.mul_2exp(mpfr(dx), exp), gmpy2.mul_2exp(mpfr(dy), exp))
        p = point(parse(center, bits) + step, bits)
    return p.re, p.im


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
class GmpyOrbiter:
    """z <- z^2 + c at ``bits`` bits with gmpy2 on this thread, one step at a time, as

        x' = (x + y)(x - y) + cr        y' = 2 x y + ci

    (two multiplications a step; x^2 - y^2 and 2 x y took three, 20-25% slower at 30k
    to 100k digits, and cancel where x ~ y). ``z`` starts at 0 unless given."""

    def __init__(self, c: mpc, bits: int, z: mpc | None = None):
        self.bits = bits
        with _prec(bits):
            self._cr, self._ci = +c.real, +c.imag
            self._x, self._y = (mpfr(0), mpfr(0)) if z is None else (+z.real, +z.imag)
        self._ctx = gmpy2.context(gmpy2.get_context(), precision=bits)

    def step(self) -> None:
        x, y = self._x, self._y
        with self._ctx:
            self._x = (x + y) * (x - y) + self._cr
            self._y = gmpy2.mul_2exp(x * y, 1) + self._ci

    def point(self) -> tuple[float, float, int]:
        """z as (zr, zi, e): farm/numerics/orbit.py's pair (any depth)."""
        fx, fy = float(self._x), float(self._y)
        if max(abs(fx), abs(fy)) >= TINY:
            return fx, fy, 0
        return _tiny_pair(self._x, self._y)

    def value(self) -> mpc:
        with _prec(self.bits):
            return mpc(self._x, self._y)

    def save(self) -> object:
        return self._x, self._y

    def close(self) -> None:
        pass


TINY = 2.0**TINY_LOG2


def _tiny_pair(x: mpfr, y: mpfr) -> tuple[float, float, int]:
    """z = x + i y, too small for doubles as they are, as orbit.py's pair."""
    (ex, mx), (ey, my) = gmpy2.frexp(x), gmpy2.frexp(y)
    return pair(float(mx), ex, float(my), ey)


COMPLEX_BITS = 4096  # below this, orbits step as one complex number (ComplexOrbiter)


class ComplexOrbiter:
    """z <- z * z + c at ``bits`` bits as one gmpy2 complex number (MPC rounds each
    part correctly), for precisions below COMPLEX_BITS: there a step costs the
    interpreter more than the arithmetic, and one complex operation is fewer Python
    operations than GmpyOrbiter's five (1.1-1.7 us a step against 2.7 at 128 bits,
    against 5.0 at 1024, on the 2-core machine; at 8192 bits GmpyOrbiter's two
    products win: 15 us against 19). The rounded points differ from GmpyOrbiter's in
    an orbit point's last bit now and then (3 of 24,206 doubles at 128 bits)."""

    def __init__(self, c: mpc, bits: int, z: mpc | None = None):
        self.bits = bits
        self._ctx = gmpy2.context(gmpy2.get_context(), precision=bits)
        with self._ctx:
            self._c = +c
            self._z = mpc(0) if z is None else +z

    def step(self) -> None:
        with self._ctx:
            self._z = self._z * self._z + self._c

    def point(self) -> tuple[float, float, int]:
        """z as (zr, zi, e): farm/numerics/orbit.py's pair (any depth)."""
        w = complex(self._z)
        if max(abs(w.real), abs(w.imag)) >= TINY:
            return w.real, w.imag, 0
        return _tiny_pair(self._z.real, self._z.imag)

    def value(self) -> mpc:
        return self._z

    def save(self) -> object:
        return self._z

    def close(self) -> None:
        pass


class ThreadedOrbiter:
    """:class:`GmpyOrbiter` on two threads (farm/numerics/mpfr_threads.py); numbers
    cross as exact base-16 texts."""

    def __init__(self, c: mpc, bits: int, z: mpc | None = None):
        self.bits = bits
        start = ("0", "0") if z is None else (_hex(z.real, bits), _hex(z.imag, bits))
        self._run = mpfr_threads.Orbiter((_hex(c.real, bits), _hex(c.imag, bits)), bits, start, 16)

    def step(self) -> None:
        self._run.step()

    def point(self) -> tuple[float, float, int]:
        return pair(*self._run.parts())

    def value(self) -> mpc:
        x, y = self._run.hex()
        with _prec(self.bits):
            return mpc(mpfr(x, self.bits, 16), mpfr(y, self.bits, 16))

    def save(self) -> object:
        return self.value()

    def close(self) -> None:
        self._run.close()


def _hex(x: mpfr, bits: int) -> str:
    """x exactly in base 16, as MPFR reads it back ("-0.1a2b@3" = -0.1a2b x 16^3)."""
    with _prec(bits):
        digits, exp, _ = (+x).digits(16)
    if not digits.strip("-0"):
        return "0"
    sign = "-" if digits.startswith("-") else ""
    return f"{sign}0.{digits.lstrip('-')}@{exp}"


Orbiter = ComplexOrbiter | GmpyOrbiter | ThreadedOrbiter


def orbiter(c: mpc, bits: int, z: mpc | None = None) -> Orbiter:
    """The fastest orbit stepper for ``bits`` here: one complex number below
    COMPLEX_BITS, two threads from mpfr_threads.THREAD_BITS up where MPFR loads and two
    cores are free to run them, else gmpy2's two products (close() it after use)."""
    if bits < COMPLEX_BITS:
        return ComplexOrbiter(c, bits, z)
    if bits >= mpfr_threads.THREAD_BITS and mpfr_threads.available():
        return ThreadedOrbiter(c, bits, z)
    return GmpyOrbiter(c, bits, z)


def restart(c: mpc, bits: int, saved: object) -> Orbiter:
    """An orbiter going on from a point that ``save()`` returned."""
    if isinstance(saved, tuple):
        with _prec(bits):
            return orbiter(c, bits, mpc(*saved))
    return orbiter(c, bits, saved)


def orbit(c: mpc, bits: int, steps: int, r2: float, progress: Callable[[int], None] | None = None
          ) -> Orbit:
    """Z(0) = 0 .. Z(L-1) of c at ``bits`` bits, rounded as farm/numerics/orbit.py keeps
    them: L - 1 = steps, or the last n before |Z(n)|^2 > r2 when c escapes sooner.
    ``progress(n)`` is called every 4096 steps."""
    rec = Recorder()
    run = orbiter(c, bits)
    try:
        for n in range(1, steps + 1):
            run.step()
            zr, zi, e = run.point()
            if not e and zr * zr + zi * zi > r2:
                break
            rec.add(zr, zi, e)
            if progress and n % 4096 == 0:
                progress(n)
    finally:
        run.close()
    return rec.orbit()


def preperiodic_orbit(c: mpc, period: int, bits: int, steps: int) -> tuple[Orbit, int] | None:
    """(Z(0) .. Z(k + q), k) for a Misiurewicz point c whose cycle has period q =
    ``period``: k is its preperiod, the least k with z_{k+q} = z_k to c's precision
    (|z_{k+q} - z_k| <= 2^(24 - bits) |dz_{k+q}|: a Newton root at ``bits`` bits is
    that close, a point of lower preperiod 2^(-view) |dz| away, 2^70 farther); at full
    precision, since a point near one of lower preperiod shadows its cycle for long
    within a double's resolution. None when the orbit escapes or does not repeat
    within ``steps``."""
    run, rec, dz = orbiter(c, bits), Recorder(), Derivative()
    ring: collections.deque = collections.deque(maxlen=period + 1)
    ring.append(mpc(0))
    try:
        for n in range(1, steps + 1):
            dz.step(rec.re[n - 1], rec.im[n - 1], rec.ex[n - 1])
            run.step()
            zr, zi, e = run.point()
            if not e and zr * zr + zi * zi > 4:
                return None
            rec.add(zr, zi, e)
            ring.append(run.value())
            if n >= period and log2_abs(ring[-1] - ring[0]) <= 24 - bits + dz.log2_abs:
                return rec.orbit(), n - period
    finally:
        run.close()
    return None


# ---------------------------------------------------------------------- nuclei
class _GmpyNewton:
    """z and dz = d z / dc together, z <- z^2 + c, dz <- 2 z dz + 1, with gmpy2's
    complex numbers (one thread)."""

    def __init__(self, c: mpc, bits: int):
        self.c, self.z, self.dz = c, mpc(0), mpc(0)

    def step(self) -> None:
        self.dz = 2 * self.z * self.dz + 1
        self.z = self.z * self.z + self.c

    def value(self) -> mpc:
        return self.z

    def derivative(self) -> mpc:
        return self.dz

    def close(self) -> None:
        pass


class _ThreadedNewton:
    """_GmpyNewton on two threads (mpfr_threads.NewtonOrbiter)."""

    def __init__(self, c: mpc, bits: int):
        self.bits = bits
        self._run = mpfr_threads.NewtonOrbiter((_hex(c.real, bits), _hex(c.imag, bits)), bits, 16)

    def step(self) -> None:
        self._run.step()

    def _mpc(self, parts: tuple[str, str]) -> mpc:
        with _prec(self.bits):
            return mpc(mpfr(parts[0], self.bits, 16), mpfr(parts[1], self.bits, 16))

    def value(self) -> mpc:
        return self._mpc(self._run.hex())

    def derivative(self) -> mpc:
        return self._mpc(self._run.derivative_hex())

    def close(self) -> None:
        self._run.close()


def _newton_orbiter(c: mpc, bits: int) -> _GmpyNewton | _ThreadedNewton:
    """z with its derivative, on two threads where orbiter() would use them."""
    if bits >= mpfr_threads.THREAD_BITS and mpfr_threads.available():
        return _ThreadedNewton(c, bits)
    return _GmpyNewton(c, bits)


def nucleus(guess: mpc, period: int, bits: int, max_steps: int = 64, divide: bool = True
            ) -> mpc | None:
    """A nucleus of exact period ``period`` (z_p(c) = 0, z_k(c) != 0 for k < p) that
    Newton's method reaches from ``guess``, to ``bits`` bits, or None when it does not
    converge. Roots of lower periods k | p are divided out (Newton runs on
    z_p / prod z_k), so that a satellite of period p next to a nucleus of period k
    is found, not that nucleus; ``divide`` False runs plain Newton on z_p (a root of
    any period dividing p: lowest_return tells which)."""
    divisors = {k for k in range(1, period) if period % k == 0} if divide else set()
    with _prec(bits):
        c = +guess
        tol = mpfr(2) ** (-bits + 8)
        for _ in range(max_steps):
            run = _newton_orbiter(c, bits)
            lower = mpc(0)  # sum of dz_k / z_k over the divisors k
            try:
                for k in range(1, period + 1):
                    run.step()
                    if k in divisors:
                        z = run.value()
                        if z == 0:
                            return None
                        lower += run.derivative() / z
                z, dz = run.value(), run.derivative()
            finally:
                run.close()
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


def misiurewicz(guess: mpc, preperiod: int, period: int, bits: int, max_steps: int = 64,
                other_than: mpc | None = None) -> mpc | None:
    """A Misiurewicz point c, z_{k+p}(c) = z_k(c) for k = ``preperiod`` and p =
    ``period``, that Newton's method reaches from ``guess`` (c <- c - g / g' with g =
    z_{k+p} - z_k), to ``bits`` bits, or None when it does not converge. Points of a
    lower preperiod (and nuclei of periods dividing p) are roots too: the caller checks
    the orbit it gets (preperiodic_orbit). ``other_than``: a root to
    divide out (Newton on g / (c - r): deflation), so that Newton started near a
    known point finds another."""
    with _prec(bits):
        c = +guess
        tol = mpfr(2) ** (-bits + 8)
        for _ in range(max_steps):
            run = _newton_orbiter(c, bits)
            zk = dzk = mpc(0)
            try:
                for n in range(1, preperiod + period + 1):
                    run.step()
                    if n == preperiod:
                        zk, dzk = run.value(), run.derivative()
                z, dz = run.value(), run.derivative()
            finally:
                run.close()
            g, slope = z - zk, dz - dzk
            if other_than is not None:
                slope = slope - g / (c - other_than)  # (g / (c - r))' (c - r)
            if slope == 0 or not gmpy2.is_finite(slope.real) or not gmpy2.is_finite(slope.imag):
                return None
            step = g / slope
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
    with _prec(bits):
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


def scan(*args, **kwargs):
    """The centre's scan: farm/numerics/scan.py (kept here for its callers)."""
    from farm.numerics.scan import scan as run

    return run(*args, **kwargs)
