"""Newton's method to periodic points at the depth's precision: nuclei (roots of
z_p(c) = 0, lower periods divided out), Misiurewicz points (roots of z_{k+q}(c) -
z_k(c)), and the lowest return of a nucleus' orbit (which period it has). z and its
derivative dz/dc step together, on two threads at great depths
(mpfr_threads.NewtonOrbiter: six products a step, three a thread).
"""

from __future__ import annotations

import gmpy2
from gmpy2 import mpc, mpfr

from farm.numerics import mpfr_threads
from farm.numerics.mpfr_points import hex_text, precision


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


def nucleus(guess: mpc, period: int, bits: int, max_steps: int = 64, divide: bool = True
            ) -> mpc | None:
    """A nucleus of exact period ``period`` (z_p(c) = 0, z_k(c) != 0 for k < p) that
    Newton's method reaches from ``guess``, to ``bits`` bits, or None when it does not
    converge. Roots of lower periods k | p are divided out (Newton runs on
    z_p / prod z_k), so that a satellite of period p next to a nucleus of period k
    is found, not that nucleus; ``divide`` False runs plain Newton on z_p (a root of
    any period dividing p: lowest_return tells which)."""
    divisors = {k for k in range(1, period) if period % k == 0} if divide else set()
    with precision(bits):
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
    with precision(bits):
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
    with precision(bits):
        z = mpc(0)
        small = mpfr(2) ** (-bits // 2)
        for k in range(1, period + 1):
            z = z * z + c
            if abs(z) < small:
                return k
    return period
