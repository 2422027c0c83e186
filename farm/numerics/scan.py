"""The view centre's orbit, scanned once: periods of the atoms each frame's disc meets,
the centre's fate (escape, attracting cycle, or a repelling one: a Misiurewicz point),
and the orbit itself, rounded as the kernels keep it.

Only z runs at the depth's precision (farm/numerics/handoff.py: on this host, on two
threads at great depths, and on a GPU once the orbit is long and deep); its
derivative dz/dc, which period detection and distance estimates only compare in
magnitude, runs in doubles with an exponent along the rounded orbit
(farm/numerics/orbit.py), so a scan costs one orbit at full precision (the derivative
at full precision made it about twice that, and an escape's distance estimate took a
second pass).

Notation as in farm/numerics/period.py: z_n = f_c^n(0), dz_n = d z_n / dc.

* Periods (the "ball method" to first order): the disc of radius r around c is mapped
  by f^n to about the disc of radius r |dz_n| around z_n; the lowest n at which that
  disc holds 0 is the period of the lowest-period atom the disc meets.
* Attracting cycles: Brent's cycle finding on z in doubles (z compared with its value
  at the last power of two); a return that moves less than the lap before is checked
  by Newton's method at full precision (attracting_cycles.attracting_cycle).
* Repelling cycles (with ``repeats``): an n at which z_n lands within 2^-40 of an
  earlier z_m on a cycle whose multiplier exceeds 1 (orbit.Repeats): c is at or near
  the Misiurewicz point of preperiod m and period q = n - m. Newton's step from c to
  that point, log2 |(z_{m+q} - z_m) / (dz_{m+q} - dz_m)|, tells which: z_m and z_{m+q}
  are recomputed at full precision from the nearest point the orbiter kept (on the
  host at most checkpoints(bits) of them: replays stay short), dz comes from the
  rounded orbit.
  A step at most 2^log2_exact (the caller's: below its pixels) means c is the point
  (a centre that `farm find` wrote), and the scan stops. A larger one is a candidate:
  c is near that point, and its orbit shadows the point's cycle (within a double's
  resolution) until |c - point| |dz| grows past 2^-40; the scan goes on past it, for
  a point of higher preperiod that c may be exactly, and otherwise ends with the
  first candidate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from gmpy2 import mpc, mpfr

from farm.numerics.attracting_cycles import Cycle, attracting_cycle, nucleus_cycle
from farm.numerics.handoff import HandoffOrbiter
from farm.numerics.mpfr_points import log2_abs, parse
from farm.numerics.orbit import Derivative, Orbit, Recorder, Repeats

RETURN_LOG2 = -48  # a return closer than 2^-48 (relative) hints at an attracting cycle
RETURN_QUIET = -36  # after a repeat that is not exact: none looked at while |dz| < 2^-36 / step
CHECKPOINT_BYTES = 1 << 25  # full-precision points kept for recomputing z_m: 32 MB at most


def checkpoints(bits: int) -> int:
    """How many full-precision points the scan keeps (16 to 256, within CHECKPOINT_BYTES;
    two numbers of bits / 8 bytes each)."""
    return max(16, min(256, CHECKPOINT_BYTES // max(1, bits // 4)))


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
    cycle        that attracting cycle when returns > 0, else None
    repeat       (m, q): the orbit landed on a repelling cycle of period q after m
                 steps (a Misiurewicz point's orbit; ``repeats`` scans only), else None
    log2_newton  at a repeat: log2 of Newton's step from c to the Misiurewicz point
                 (-inf: c is that point to its precision)
    orbit        Z(0) .. Z(steps) rounded (farm/numerics/orbit.py), the escaping point
                 left out
    """

    periods: tuple[int, ...]
    escaped: int
    log2_de: float | None
    returns: int
    steps: int
    cycle: Cycle | None = None
    repeat: tuple[int, int] | None = None
    log2_newton: float = math.inf
    orbit: Orbit | None = field(default=None, compare=False, repr=False)


def scan(center: Sequence[str], bits: int, log2_radii: Sequence[float], max_iter: int,
         period_steps: int | None = None, repeats: bool = False,
         log2_exact: float = -math.inf) -> Scan:
    """Iterate the centre c, finding for each disc radius r (given as log2 r, so that
    depths beyond double's range work) the lowest period n with |z_n| < r |dz_n|, and
    watching for an escape or an attracting cycle (and, with ``repeats``, a repelling
    one: c is a Misiurewicz point when Newton's step to it is at most 2^log2_exact).
    Stops at an escape, an attracting cycle, an exact repeat, after ``max_iter``
    steps, or ``period_steps`` (default the same) while some radius has no period yet
    (callers cap both to bound the cost). A radius whose period is not found by then
    gets 0 (an attracted orbit never comes near 0 again)."""
    state = _State(center, bits, log2_radii, repeats, log2_exact)
    steps = max(max_iter, period_steps or 0)
    try:
        for n in range(1, steps + 1):
            done = state.step(n)
            if done is not None:
                return done
            if state.periods_found and n >= max_iter:
                break
        return state.result(state.n)
    finally:
        state.run.close()


class _State:
    """The scan's loop state (see :func:`scan`); ``step`` returns a Scan when it ends."""

    def __init__(self, center: Sequence[str], bits: int, log2_radii: Sequence[float],
                 repeats: bool, log2_exact: float):
        self.bits = bits
        self.c = parse(center, bits)
        self.run = HandoffOrbiter(self.c, bits, checkpoints(bits))
        self.rec = Recorder()
        self.dz = Derivative()
        self.radii = list(log2_radii)
        self.order = sorted(range(len(self.radii)), key=lambda k: -self.radii[k])  # widest first
        self.periods = [0] * len(self.radii)
        self.nxt = 0
        self.lap_log2 = 0.0  # log2 |prod 2 z_j| over the steps so far (while periods are sought)
        self.repeats = Repeats(self.rec) if repeats else None
        self.log2_exact = log2_exact
        self.candidate: tuple[int, int, float] | None = None  # (m, q, log2 Newton step)
        self.quiet = -math.inf  # repeats are not looked at while log2 |dz| is below this
        self.n = 0
        # Brent: z at the last power of two (double and full), a pending return
        self.saved, self.saved_z, self.saved_at, self.watch = 0j, mpc(0), 0, True
        self.pending: tuple[int, int, mpc, mpfr] | None = None

    @property
    def periods_found(self) -> bool:
        return self.nxt >= len(self.order)

    def step(self, n: int) -> Scan | None:
        rec = self.rec
        self.dz.step(rec.re[n - 1], rec.im[n - 1], rec.ex[n - 1])  # dz_n from z_{n-1}
        self.run.step()
        zr, zi, ze = self.run.point()
        if not ze and zr * zr + zi * zi > 4:
            m, q, log2_step = self.candidate or (0, 0, math.inf)
            return Scan(tuple(self.periods), n, self._exterior_de(complex(zr, zi)), 0, n,
                        repeat=(m, q) if self.candidate else None, log2_newton=log2_step,
                        orbit=rec.orbit())
        rec.add(zr, zi, ze)
        self.n = n
        if not self.periods_found:
            self._periods(n)
            if self.periods_found:
                done = self._inside(n)
                if done is not None:
                    return done
        if self.repeats is not None:
            hit = self.repeats.see(n, look=self.dz.log2_abs >= self.quiet)
            if hit is not None:
                m, q = hit
                log2_step = self._newton_step(m, q)
                if log2_step <= self.log2_exact:
                    return self.result(n, repeat=hit, log2_newton=log2_step)
                self.candidate = self.candidate or (m, q, log2_step)
                self.quiet = RETURN_QUIET - log2_step  # while the orbit shadows its cycle
        return self._brent(n, complex(zr, zi), ze)

    def _periods(self, n: int) -> None:
        lz, ldz = self.rec.log2_abs(n), self.dz.log2_abs
        self.lap_log2 += 1 + lz
        while not self.periods_found and lz < self.radii[self.order[self.nxt]] + ldz:
            self.periods[self.order[self.nxt]] = n
            self.nxt += 1

    def _inside(self, n: int) -> Scan | None:
        """At the smallest disc's period n: is c inside a component of period n?
        Newton's method at full precision answers (attracting_cycle, which also
        refuses a cycle of a divisor's period), asked only where the first lap's
        multiplier |prod_{j<=n} 2 z_j| is below 2, the bound at which that method gives
        up. A centre in a minibrot, or near a component's edge (the Seahorse centre:
        |lambda| 0.925), is known here, n steps in, where Brent's returns (below) need
        two laps more past the next power of two; where Newton's method fails here,
        the scan goes on. A nucleus is known in closed form (nucleus_cycle) even after
        Brent's returns found a repelling cycle (a minibrot on a Misiurewicz point's
        spiral shadows the point's cycle first: farm/numerics/spiral.py)."""
        if self.lap_log2 >= 1:
            return None
        at_nucleus = nucleus_cycle(self.lap_log2, self.rec.log2_abs(n), self.dz.log2_abs)
        if at_nucleus is not None:
            return self.result(n, returns=n, cycle=at_nucleus)
        if not self.watch or self.pending is not None:
            return None
        cycle = attracting_cycle(self.c, n, self.bits, self.run.value())
        return None if cycle is None else self.result(n, returns=n, cycle=cycle)

    def _brent(self, n: int, zf: complex, ze: int) -> Scan | None:
        """Brent's cycle finding for attracting cycles (see the module docstring)."""
        z = None
        if self.pending is not None and n == self.pending[1]:
            # a return: attracted when the next lap moves z less than the last one did
            # (at full precision: the moves can be far below a double's resolution)
            q, _, then, moved = self.pending
            z = self.run.value()
            cycle = (attracting_cycle(self.c, q, self.bits, z) if abs(z - then) <= moved
                     else None)
            if cycle is not None:
                return self.result(n, returns=q, cycle=cycle)
            self.pending, self.watch = None, False  # repelling (a Misiurewicz point): scan on
        elif (self.watch and self.pending is None and not ze
              and abs(zf - self.saved) < 2.0**RETURN_LOG2 * max(abs(zf), 1.0)):
            z = self.run.value()
            self.pending = (n - self.saved_at, 2 * n - self.saved_at, z, abs(z - self.saved_z))
        if n & (n - 1) == 0 and self.watch:  # a power of two: the next comparisons are with z_n
            self.saved, self.saved_z, self.saved_at = zf, z if z is not None else self.run.value(), n
        return None

    def result(self, n: int, returns: int = 0, cycle: Cycle | None = None,
               repeat: tuple[int, int] | None = None, log2_newton: float = math.inf) -> Scan:
        if repeat is None and returns == 0 and self.candidate is not None:
            repeat, log2_newton = self.candidate[:2], self.candidate[2]
        return Scan(tuple(self.periods), 0, None, returns, n, cycle, repeat, log2_newton,
                    self.rec.orbit())

    def _exterior_de(self, z: complex) -> float:
        """log2 of 2 |z| ln|z| / |dz| once |z| > 2^16, going on from the escape in doubles
        (z is large there: doubles resolve it)."""
        c = complex(float(self.c.real), float(self.c.imag))
        dz = self.dz
        for _ in range(64):
            if math.log2(abs(z)) > 16:
                break
            dz.step(z.real, z.imag, 0)
            z = z * z + c
        lz = math.log2(abs(z))
        return 1 + math.log2(lz) + math.log2(math.log(2)) + lz - dz.log2_abs

    def _newton_step(self, m: int, q: int) -> float:
        """log2 |g / g'| for g = z_{m+q} - z_m at c: Newton's step from c to the
        Misiurewicz point of preperiod m and period q (see the module docstring)."""
        delta = self.run.value_at(m + q) - self.run.value_at(m)
        dz, before = Derivative(), (0j, 0)
        for k in range(m + q):  # dz_{k+1} from z_k
            if k == m:
                before = dz.value()
            dz.step(self.rec.re[k], self.rec.im[k], self.rec.ex[k])
        (a, ea), (b, eb) = dz.value(), before
        top = max(ea, eb)
        slope = a * math.ldexp(1.0, ea - top) - b * math.ldexp(1.0, eb - top)
        return log2_abs(delta) - (math.log2(abs(slope)) + top) if slope else math.inf
