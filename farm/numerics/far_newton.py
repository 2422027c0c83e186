"""Newton's method from afar, by perturbation: the iterations that only bring a guess
near a root run in doubles with an exponent against one rounded reference orbit,
instead of each stepping z and dz at full precision (issue 45).

`farm find` starts Newton a fraction of the view from the root it wants (a Misiurewicz
point 2^-8 of the view from the last one; a nucleus from the view's centre). Newton
converges quadratically only near the root, so those solves took ~7 iterations at about
the view's full precision, each an orbit of z and dz over the whole preperiod or period:
at 1e-100000 that is ~200,000 steps a iteration, 11 s on an H200 and hours on a host.
Here, with c = c_ref + dc and the rounded orbit Z_n of c_ref (which the search has
anyway: the centre's orbit),

    delta_{n+1} = (2 Z_n + delta_n) delta_n + dc        (z_n = Z_n + delta_n)
    d_{n+1}     = 2 (Z_n + delta_n) d_n + 1             (d_n = dz_n / dc)

in complex doubles with a separate exponent (delta is as small as 2^-bits at first, d
as large as 2^bits), a few microseconds a step. The rounded Z limits what this can
resolve to about 2^-45 of the step's size, which is what the full-precision solve after
it needs: it then takes ~3 iterations (newton.py, with ``guess_bits``). Where this
phase does not settle (it diverges, leaves the view, or stalls), it gives None and the
full-precision solve starts from the guess as before; it decides nothing.
"""

from __future__ import annotations

import math

from gmpy2 import mpc

from farm.numerics.mpfr_points import log2_abs, precision
from farm.numerics.orbit import Orbit

SETTLED_LOG2 = -44  # done once a step is below 2^-44 of the view
MOST = 24  # iterations at most ...
STALLED = 4  # ... and none once this many in a row have not made the step smaller
WIDE = 8  # gives up where dc leaves 2^WIDE views


ZERO_E = -(1 << 60)  # the exponent of 0
SMALL, BIG = 2.0**-64, 2.0**64  # a mantissa's larger part stays between these


def _normal(m: complex, e: int) -> tuple[complex, int]:
    """m 2^e with m's larger part in [0.5, 1) where it strays past SMALL or BIG (0: ZERO_E)."""
    a = max(abs(m.real), abs(m.imag))
    if a == 0:
        return 0j, ZERO_E
    if not SMALL <= a <= BIG:
        k = math.frexp(a)[1]
        return complex(math.ldexp(m.real, -k), math.ldexp(m.imag, -k)), e + k
    return m, e


class _Fe:
    """A complex number m 2^e (m a Python complex), normalised."""

    __slots__ = ("m", "e")

    def __init__(self, m: complex, e: int = 0):
        self.m, self.e = _normal(m, e)

    def log2(self) -> float:
        a = abs(self.m)
        return math.log2(a) + self.e if a else -math.inf


def _scaled(m: complex, shift: int) -> complex:
    """m 2^shift (shift <= 0; 0 below double's range)."""
    if shift < -1100:
        return 0j
    f = 2.0**shift
    return complex(m.real * f, m.imag * f)


def _add(a_m: complex, a_e: int, b_m: complex, b_e: int) -> tuple[complex, int]:
    if a_e >= b_e:
        return a_m + _scaled(b_m, b_e - a_e), a_e
    return _scaled(a_m, a_e - b_e) + b_m, b_e


def _to_fe(x: mpc) -> _Fe:
    """x (any size) as m 2^e."""
    lx = log2_abs(x)
    if lx == -math.inf:
        return _Fe(0j)
    e = int(math.floor(lx))
    with precision(64):
        y = x * mpc(2) ** (-e)
    return _Fe(complex(float(y.real), float(y.imag)), e)


def _to_mpc(x: _Fe, bits: int) -> mpc:
    with precision(bits):
        return mpc(x.m) * mpc(2) ** x.e


def _points(orbit: Orbit, steps: int) -> list[complex]:
    """The reference's rounded points Z(0) .. Z(steps) as complex doubles (tiny ones as
    0: near 0 the perturbed value is delta alone); ValueError where it is shorter."""
    if len(orbit) <= steps:
        raise ValueError(f"the reference orbit has {len(orbit) - 1} steps, not {steps}")
    return [complex(r, i) for r, i in orbit.values[: steps + 1]]


def _run(z: list[complex], dc: _Fe, steps: int, at: set[int]) -> dict[int, tuple[complex, int, complex, int]]:
    """(delta_n, d_n) as (m, e, m, e) for the steps ``at`` (n <= ``steps``), along the
    reference's points ``z``."""
    dm, de = 0j, ZERO_E  # delta
    gm, ge = 0j, 0  # d (dz/dc), from 0
    cm, ce = dc.m, dc.e
    out = {}
    for n in range(steps):
        zn = z[n]
        # d_{n+1} = 2 (Z_n + delta_n) d_n + 1
        wm, we = _add(zn, 0, dm, de)  # Z_n + delta_n
        gm, ge = 2 * wm * gm, we + ge
        gm, ge = _add(gm, ge, 1 + 0j, 0)
        # delta_{n+1} = (2 Z_n + delta_n) delta_n + dc
        vm, ve = _add(2 * zn, 0, dm, de)
        dm, de = _add(vm * dm, ve + de, cm, ce)
        # (the test inline with SMALL and BIG as literals, the call rare: _normal on every
        # step made the loop 40% slower)
        a = max(abs(dm.real), abs(dm.imag))
        if a > 2.0**64 or 0 < a < 2.0**-64:
            dm, de = _normal(dm, de)
        a = max(abs(gm.real), abs(gm.imag))
        if a > 2.0**64 or 0 < a < 2.0**-64:
            gm, ge = _normal(gm, ge)
        if n + 1 in at:
            out[n + 1] = (dm, de, gm, ge)
    return out


def _div(a_m: complex, a_e: int, b_m: complex, b_e: int) -> _Fe:
    return _Fe(a_m / b_m, a_e - b_e) if b_m else _Fe(complex(math.inf, 0))


def misiurewicz(c_ref: mpc, reference: Orbit, guess: mpc, preperiod: int, period: int, bits: int,
                log2_view: float, deflate: bool) -> mpc | None:
    """The guess brought near the Misiurewicz point of ``preperiod`` and ``period``
    (z_{k+q} = z_k) by Newton's method in perturbation from c_ref, whose rounded orbit
    ``reference`` reaches k + q at least (``deflate``: c_ref is itself such a point,
    divided out as newton.misiurewicz's other_than does); None where it does not
    settle within 2^WIDE views."""
    k, end = preperiod, preperiod + period
    z = _points(reference, end)
    z_diff = z[end] - z[k]

    def step(dc: _Fe) -> _Fe:
        got = _run(z, dc, end, {k, end})
        (am, ae, agm, age), (bm, be, bgm, bge) = got[k], got[end]
        # g = (Z_end - Z_k) + (delta_end - delta_k), g' = d_end - d_k
        gm, ge = _add(z_diff, 0, *_add(bm, be, -am, ae))
        sm, se = _add(bgm, bge, -agm, age)
        if deflate:  # (g / dc)' dc = g' - g / dc
            q = _div(gm, ge, dc.m, dc.e)
            sm, se = _add(sm, se, -q.m, q.e)
        return _div(gm, ge, sm, se)

    with precision(bits):
        start = _to_fe(guess - c_ref)
    return _newton(step, start, c_ref, bits, log2_view)


def nucleus(c_ref: mpc, reference: Orbit, period: int, divisors: set[int], bits: int,
            log2_view: float) -> mpc | None:
    """c_ref brought near the nucleus of ``period`` (z_p = 0, the nuclei of
    ``divisors`` divided out, as newton.nucleus does) by Newton's method in
    perturbation, from c_ref's rounded orbit ``reference`` (at least ``period`` steps);
    None where it does not settle within 2^WIDE views."""
    z = _points(reference, period)
    at = set(divisors) | {period}

    def step(dc: _Fe) -> _Fe:
        got = _run(z, dc, period, at)
        # (log h)' = dz_p / z_p - sum over the divisors of dz_k / z_k, z_n = Z_n + delta_n
        sm, se = 0j, ZERO_E
        for n in sorted(at):
            dm, de, gm, ge = got[n]
            zm, ze = _add(z[n], 0, dm, de)
            r = _div(gm, ge, zm, ze)
            sm, se = _add(sm, se, r.m if n == period else -r.m, r.e)
        return _div(1 + 0j, 0, sm, se)

    return _newton(step, _Fe(0j), c_ref, bits, log2_view)


def _newton(step_at, dc: _Fe, c_ref: mpc, bits: int, log2_view: float) -> mpc | None:
    """dc <- dc - step_at(dc) until the step is below 2^SETTLED_LOG2 of the view
    (c_ref + dc at ``bits``), or None: a step that is not finite, dc outside 2^WIDE
    views, STALLED steps in a row none smaller than the smallest before, MOST in all."""
    steps: list[float] = []
    for _ in range(MOST):
        step = step_at(dc)
        dc = _Fe(*_add(dc.m, dc.e, -step.m, step.e))
        s = step.log2()
        if math.isnan(s) or s == math.inf or dc.log2() > log2_view + WIDE:
            return None
        if s <= log2_view + SETTLED_LOG2:
            with precision(bits):
                return c_ref + _to_mpc(dc, bits)
        steps.append(s)
        if len(steps) - 1 - steps.index(min(steps)) >= STALLED:
            return None
    return None
