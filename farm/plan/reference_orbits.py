"""The orbit of each kind of reference, at the depth's precision (farm/numerics): a
nucleus of a frame's period (Newton's method from the view centre), the Misiurewicz
point whose cycle the centre's orbit landed on, and the view centre itself (iterated
to the frames' iteration limit or its escape). Where the centre is that point to
within 2^-EXACT_BELOW_PIXEL of a pixel (a centre that `farm find` wrote), the centre's
scanned orbit is the reference: no pass more at full precision. Also lambda' of a
nucleus' orbit, the minibrot's own scale.

farm/plan/references.py chooses which reference each frame takes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from farm.plan.reference_types import Reference

if TYPE_CHECKING:  # the rest where used: mpmath and gmpy2 take 40-60 ms to import
    from farm.numerics.orbit import Orbit
    from farm.numerics.scan import Scan

EXACT_BELOW_PIXEL = 64  # the centre is the point when Newton's step is 2^-64 of a pixel or less


def lambda_prime(points: Orbit) -> tuple[float, float]:
    """(log2 |lambda'|, arg lambda' in [0, 2 pi)) of lambda' = prod_{m=1}^{L-2} 2 Z(m),
    for an orbit Z(0) .. Z(L-1) of a nucleus (summed as logs and angles: no overflow,
    and no underflow where Z(m) is below double's range)."""
    mant = points.mant[1:-1]
    logs = 1.0 + points.log2_abs[1:-1]
    angles = np.arctan2(mant[:, 1], mant[:, 0])
    return float(np.sum(logs)), float(np.sum(angles) % (2 * math.pi))


def misiurewicz_reference(plan, frames, scan: Scan, bits: int,
                          say: Callable[[str], None]) -> Reference | None:
    """The Misiurewicz point whose cycle the centre's orbit landed on (scan.repeat), as a
    reference: the centre itself when Newton's step from it is below 2^-64 of the
    deepest pixel spacing (its scanned orbit is then the reference's: no more work),
    else the point Newton's method reaches from the centre, and its orbit (None when
    Newton fails, or lands on a point of preperiod below 2: a nucleus)."""
    from farm.numerics import period as per

    assert scan.repeat is not None and scan.orbit is not None
    k, q = scan.repeat
    center = plan.spec.view.center
    log2_spacing = min(f.log10_spacing for f in frames) * math.log2(10)
    if scan.log2_newton <= log2_spacing - EXACT_BELOW_PIXEL and len(scan.orbit) > k + q:
        c, points = per.parse(center, bits), scan.orbit.head(k + q + 1)
    else:
        say(f"reference: Newton's method to the Misiurewicz point of preperiod {k}, period {q}")
        found = per.misiurewicz(per.parse(center, bits), k, q, bits)
        if found is None:
            return None
        got = per.preperiodic_orbit(found, q, bits, k + q)  # its preperiod at full precision
        if got is None or got[1] < 2:
            return None
        c, (points, k) = found, got
    return Reference(per.point(c, bits), 0, points, "misiurewicz", wrap=k)


def nucleus_reference(center: Sequence[str], p: int, bits: int, plan,
                      scanned: Scan | None = None) -> Reference | None:
    """The nucleus of period ``p`` that Newton's method finds from the centre, as a
    reference (None when Newton fails or finds a nucleus of a lower period). When the
    centre is that nucleus to within 2^-64 of the deepest pixel (Newton's step from
    it, |z_p / dz_p|, from the centre's scan at the same precision: a centre that `farm
    find` wrote), the scanned orbit is the reference: no pass more at full precision."""
    from farm.numerics import period as per

    if scanned is not None and _is_nucleus(scanned, p, plan):
        c = per.parse(center, bits)
        assert scanned.orbit is not None
        points = scanned.orbit.head(p + 1)
        return Reference(per.point(c, bits), p, points, "nucleus", *lambda_prime(points))
    c = per.nucleus(per.parse(center, bits), p, bits)
    if c is None:
        return None
    points = per.orbit(c, bits, p, escape_r2(plan))  # one orbit: the reference and its period
    if len(points) != p + 1 or per.first_return(points, p, bits) != p:
        return None
    return Reference(per.point(c, bits), p, points, "nucleus", *lambda_prime(points))


def _is_nucleus(scanned: Scan, p: int, plan) -> bool:
    """Whether Newton's step from the scanned centre to a root of z_p, |z_p / dz_p| (the
    derivative in doubles along the scanned orbit), is below 2^-64 of the deepest
    perturbed frame's pixel."""
    from farm.numerics.orbit import Derivative

    got = scanned.orbit
    if got is None or len(got) <= p:
        return False
    dz = Derivative()
    for k in range(p):
        dz.step(float(got.mant[k, 0]), float(got.mant[k, 1]), int(got.exps[k]))
    log2_pixel = min(f.log10_spacing for f in plan.perturbed) * math.log2(10)
    return float(got.log2_abs[p]) - dz.log2_abs <= log2_pixel - EXACT_BELOW_PIXEL


def center_reference(center: Sequence[str], bits: int, iterations: int, plan,
                     progress: Callable[[int], None] | None = None,
                     scanned: Scan | None = None) -> Reference:
    """The centre's orbit to ``iterations`` (or its escape); the centre's scan at the
    same precision and escape radius 2, when it covers that far, is taken as it is."""
    from farm.numerics import period as per

    c = per.parse(center, bits)
    got = None if scanned is None else scanned.orbit
    if scanned is not None and got is not None and escape_r2(plan) == 4.0 and (
            len(got) > iterations or scanned.escaped):
        return Reference(per.point(c, bits), 0, got.head(iterations + 1), "center")
    points = per.orbit(c, bits, iterations, escape_r2(plan), progress)
    return Reference(per.point(c, bits), 0, points, "center")


def escape_r2(plan) -> float:
    """The square of the spec's escape radius, as a double."""
    r = plan.spec.iterations.escape_radius
    return float(r) * float(r)

