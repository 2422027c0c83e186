"""Newton's method to periodic points at the depth's precision: nuclei (roots of
z_p(c) = 0, lower periods divided out), Misiurewicz points (roots of z_{k+q}(c) -
z_k(c)), and the lowest return of a nucleus' orbit (which period it has). z and its
derivative dz/dc step together: on a GPU from orbiters.GPU_ORBIT_BITS up
(farm/numerics/gpu_newton.py, which gives them exactly at the steps asked for), else
here, on two threads at great depths (mpfr_threads.NewtonOrbiter: six products a step,
three a thread).

Precision within one solve: Newton converges quadratically, so an iteration need only
resolve the error it leaves, not the root's final bits. Given ``scale`` (log2 of the
distance at which other roots lie, such as the width of the view the guess was found
in: an iterate's error e becomes about e^2 / 2^scale) and ``guess_bits`` (where the
guess is known), each iteration runs at the bits that resolve the error it is
expected to leave, plus NEWTON_MARGIN (_Precision); the last two, the one that reaches
the requested bits and the one whose step shows it did, run at full precision, so a
solve from a guess of half the bits costs about two full-precision iterations and a
few cheaper ones, however many it takes. Without ``scale`` every iteration runs at
full precision. A solve decides nothing below full precision: a zero or a failed step
there goes on at full precision.
"""

from __future__ import annotations

import math
import os

import gmpy2
import numpy as np
from gmpy2 import mpc, mpfr

from farm.numerics import mpfr_threads
from farm.numerics.mpfr_points import hex_text, log2_abs, precision
from farm.numerics.orbit import Orbit
from farm.numerics.orbiters import ENGINE_VARIABLE, GPU_ORBIT_BITS, orbit

NEWTON_MARGIN = 32  # bits an iteration below full precision runs at beyond the step it expects


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
        self._run = mpfr_threads.NewtonOrbiter((hex_text(c.real, bits), hex_text(c.imag, bits)), bits, 16)

    def step(self) -> None:
        self._run.step()

    def _mpc(self, parts: tuple[str, str]) -> mpc:
        with precision(self.bits):
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


class _Precision:
    """The bits each Newton iteration runs at (see the module docstring). An iteration
    whose step is s leaves an error of about s^2 / 2^scale (quadratic convergence at
    the scale where roots lie), which its rounding must not exceed: it runs at the bits
    that resolve that error, predicted from the step before (or, for the first, from
    ``guess_bits``, where the guess is known: its error about 2^-guess_bits), plus
    NEWTON_MARGIN; never lower than the iteration before, never above ``bits``; all at
    ``bits`` without ``scale``."""

    def __init__(self, bits: int, scale: float | None, guess_bits: int | None):
        self.full, self.scale = bits, math.inf if scale is None else scale
        if scale is None:
            self.bits = bits
        else:
            error = -guess_bits if guess_bits is not None else scale
            self.bits = min(bits, max(64, self._resolving(self._after(error))))

    def _after(self, log2_step: float) -> float:
        """log2 of the step (the error) that follows a step of 2^log2_step."""
        return min(log2_step, 2 * log2_step - self.scale)

    def _resolving(self, log2_error: float) -> int:
        return math.ceil(-log2_error) + NEWTON_MARGIN

    @property
    def at_full(self) -> bool:
        return self.bits >= self.full

    def raise_to_full(self) -> None:
        self.bits = self.full

    def after(self, step: mpc) -> None:
        """The bits of the iteration after one that stepped by ``step``: its own step
        is about the error this one left, and it must resolve the error it leaves."""
        if self.at_full:
            return
        s = log2_abs(step)
        if s == -math.inf:  # no step at these bits: the root to them; the rest at full
            self.bits = self.full
            return
        need = self._resolving(self._after(self._after(s)))
        self.bits = min(self.full, max(self.bits, need))


def _orbit_at(c: mpc, bits: int, steps: int, at: set[int]) -> list[tuple[int, tuple[mpc, mpc]]]:
    """(k, (z_k, dz_k)) for the steps ``at`` below ``steps``, in order, then for
    ``steps`` itself: on a GPU where farm/numerics/gpu_newton.py takes the orbit (from
    orbiters.GPU_ORBIT_BITS; FARM_ORBIT_ENGINE), else here (on two threads at great
    depths). An orbit that leaves the device's range (it escapes) is stepped here."""
    wanted = sorted(k for k in at if 0 < k < steps)
    if bits >= GPU_ORBIT_BITS or os.environ.get(ENGINE_VARIABLE, "").strip().lower() == "gpu":
        from farm.numerics import gpu_newton  # (pyopencl: only where it may run)

        got = gpu_newton.values(c, bits, steps, wanted)
        if got is not None and got.escaped is None:
            return [(k, got[k]) for k in [*wanted, steps]]
    out = []
    run = _newton_orbiter(c, bits)
    try:
        for k in range(1, steps + 1):
            run.step()
            if k in at or k == steps:
                out.append((k, (run.value(), run.derivative())))
    finally:
        run.close()
    return out


def _bad(x: mpc) -> bool:
    return x == 0 or not gmpy2.is_finite(x.real) or not gmpy2.is_finite(x.imag)


def nucleus(guess: mpc, period: int, bits: int, max_steps: int = 64, divide: bool = True,
            scale: float | None = None, guess_bits: int | None = None) -> mpc | None:
    """A nucleus of exact period ``period`` (z_p(c) = 0, z_k(c) != 0 for k < p) that
    Newton's method reaches from ``guess``, to ``bits`` bits, or None when it does not
    converge. Roots of lower periods k | p are divided out (Newton runs on
    z_p / prod z_k), so that a satellite of period p next to a nucleus of period k
    is found, not that nucleus; ``divide`` False runs plain Newton on z_p (a root of
    any period dividing p: lowest_return tells which). ``scale``, ``guess_bits``: the
    precision of the iterations before the last (module docstring)."""
    divisors = {k for k in range(1, period) if period % k == 0} if divide else set()
    prec = _Precision(bits, scale, guess_bits)
    with precision(bits):
        c = +guess
        tol = mpfr(2) ** (-bits + 8)
    for _ in range(max_steps):
        p = prec.bits
        with precision(p):
            lower = mpc(0)  # sum of dz_k / z_k over the divisors k
            zero = False
            for k, (z, dz) in _orbit_at(+c, p, period, divisors):
                if k == period:
                    break
                if z == 0:
                    zero = True
                    break
                lower += dz / z
            if not zero and z != 0:
                slope = dz / z - lower  # (log h)' for h = z_p / prod z_k
        if not prec.at_full and (zero or z == 0 or _bad(slope)):
            prec.raise_to_full()  # decided at full precision only
            continue
        if zero:
            return None
        if z == 0:
            return c
        if _bad(slope):
            return None
        with precision(p):
            step = 1 / slope
        with precision(bits):
            c = c - step
            if prec.at_full and abs(step) <= tol * max(abs(c), mpfr(1)):
                return c
        prec.after(step)
    return None


def nucleus_step(c: mpc, period: int, bits: int) -> mpc | None:
    """One plain Newton iteration for a nucleus of ``period`` at ``bits`` bits, c -
    z_p / dz_p, with no test of convergence (for a caller that refines the result
    further, such as farm/numerics/spiral.py); None where dz_p is 0 or not finite."""
    with precision(bits):
        _, (z, dz) = _orbit_at(+c, bits, period, set())[-1]
        return None if _bad(dz) else c - z / dz


def misiurewicz(guess: mpc, preperiod: int, period: int, bits: int, max_steps: int = 64,
                other_than: mpc | None = None, scale: float | None = None,
                guess_bits: int | None = None) -> mpc | None:
    """A Misiurewicz point c, z_{k+p}(c) = z_k(c) for k = ``preperiod`` and p =
    ``period``, that Newton's method reaches from ``guess`` (c <- c - g / g' with g =
    z_{k+p} - z_k), to ``bits`` bits, or None when it does not converge. Points of a
    lower preperiod (and nuclei of periods dividing p) are roots too: the caller checks
    the orbit it gets (preperiodic_orbit). ``other_than``: a root to
    divide out (Newton on g / (c - r): deflation), so that Newton started near a
    known point finds another. ``scale``, ``guess_bits``: the precision of the
    iterations before the last (module docstring)."""
    prec = _Precision(bits, scale, guess_bits)
    with precision(bits):
        c = +guess
        tol = mpfr(2) ** (-bits + 8)
    for _ in range(max_steps):
        p = prec.bits
        with precision(p):
            got = dict(_orbit_at(+c, p, preperiod + period, {preperiod}))
            zk, dzk = got.get(preperiod, (mpc(0), mpc(0)))  # (z_0 = dz_0 = 0)
            z, dz = got[preperiod + period]
            g, slope = z - zk, dz - dzk
            if other_than is not None:
                slope = slope - g / (c - other_than)  # (g / (c - r))' (c - r)
        if _bad(slope):
            if not prec.at_full:
                prec.raise_to_full()  # decided at full precision only
                continue
            return None
        with precision(p):
            step = g / slope
        with precision(bits):
            c = c - step
            if prec.at_full and abs(step) <= tol * max(abs(c), mpfr(1)):
                return c
        prec.after(step)
    return None


def cycle_multiplier(c: mpc, preperiod: int, period: int, bits: int) -> mpc:
    """(f^q)'(z_k) = prod 2 z_j over j = k .. k + q - 1 (k = ``preperiod``, q =
    ``period``) at ``bits`` bits: for a Misiurewicz point c, the multiplier of the
    repelling cycle its orbit lands on at step k."""
    last = preperiod + period - 1
    with precision(bits):
        out = mpc(1)
        for _, (z, _dz) in _orbit_at(+c, bits, last, set(range(preperiod, last))):
            out *= 2 * z
    return out


def lowest_return(c: mpc, period: int, bits: int) -> int:
    """The first k <= period with |z_k(c)| < 2^(-bits/2) (for a nucleus of period p:
    p itself, unless it is also the nucleus of a lower period k dividing p), from the
    rounded orbit (its exponents hold any depth): on a GPU where orbiters.orbit() takes
    a long, deep orbit there."""
    return first_return(orbit(c, bits, period, math.inf), period, bits)


def first_return(points: Orbit, period: int, bits: int) -> int:
    """:func:`lowest_return` from c's rounded orbit ``points`` (z_0 .. z_period at
    least), where the caller has it already."""
    small = np.flatnonzero(points.log2_abs[1:period + 1] < -bits / 2)
    return int(small[0]) + 1 if len(small) else period
