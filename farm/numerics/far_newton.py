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


class _Fe:
    """A complex number m 2^e (m a Python complex), normalised now and then."""

    __slots__ = ("m", "e")

    def __init__(self, m: complex, e: int = 0):
        self.m, self.e = m, e
        self._norm()

    def _norm(self) -> None:
        a = max(abs(self.m.real), abs(self.m.imag))
        if a == 0:
            self.e = -(1 << 60)
        elif a > 2.0**64 or a < 2.0**-64:
            k = math.frexp(a)[1]
            self.m, self.e = complex(math.ldexp(self.m.real, -k), math.ldexp(self.m.imag, -k)), self.e + k

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


class _Orbit:
    """The reference's rounded points as complex doubles (tiny ones as 0: near 0 the
    perturbed value is delta alone), with the steps to record."""

    def __init__(self, orbit: Orbit, steps: int):
        if len(orbit) <= steps:
            raise ValueError(f"the reference orbit has {len(orbit) - 1} steps, not {steps}")
        values = orbit.values[: steps + 1]
        self.z = [complex(r, i) for r, i in values]


def _run(ref: _Orbit, dc: _Fe, steps: int, at: set[int]) -> dict[int, tuple[complex, int, complex, int]]:
    """(delta_n, d_n) as (m, e, m, e) for the steps ``at`` (n <= ``steps``)."""
    dm, de = 0j, -(1 << 60)  # delta
    gm, ge = 0j, 0  # d (dz/dc), from 0
    cm, ce = dc.m, dc.e
    out = {}
    z = ref.z
    for n in range(steps):
        zn = z[n]
        # d_{n+1} = 2 (Z_n + delta_n) d_n + 1
        wm, we = _add(zn, 0, dm, de)  # Z_n + delta_n
        gm, ge = 2 * wm * gm, we + ge
        gm, ge = _add(gm, ge, 1 + 0j, 0)
        # delta_{n+1} = (2 Z_n + delta_n) delta_n + dc
        vm, ve = _add(2 * zn, 0, dm, de)
        dm, de = _add(vm * dm, ve + de, cm, ce)
        a = max(abs(dm.real), abs(dm.imag))
        if a > 2.0**64 or (0 < a < 2.0**-64):
            k = math.frexp(a)[1]
            dm, de = complex(math.ldexp(dm.real, -k), math.ldexp(dm.imag, -k)), de + k
        a = max(abs(gm.real), abs(gm.imag))
        if a > 2.0**64 or (0 < a < 2.0**-64):
            k = math.frexp(a)[1]
            gm, ge = complex(math.ldexp(gm.real, -k), math.ldexp(gm.imag, -k)), ge + k
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
    ref = _Orbit(reference, end)
    z_diff = ref.z[end] - ref.z[k]

    def step(dc: _Fe) -> _Fe:
        got = _run(ref, dc, end, {k, end})
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
    ref = _Orbit(reference, period)
    at = set(divisors) | {period}

    def step(dc: _Fe) -> _Fe:
        got = _run(ref, dc, period, at)
        # (log h)' = dz_p / z_p - sum over the divisors of dz_k / z_k, z_n = Z_n + delta_n
        sm, se = 0j, -(1 << 60)
        for n in sorted(at):
            dm, de, gm, ge = got[n]
            zm, ze = _add(ref.z[n], 0, dm, de)
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
