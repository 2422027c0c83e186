"""Reference points: period detection, Newton's method to nuclei, attracting cycles and
distance estimates (farm/numerics/period.py, gmpy2), checked against mpmath; and the
choice of references along a zoom (farm/plan/references.py)."""

from __future__ import annotations

import math

import gmpy2
import mpmath
import numpy as np
import pytest
from conftest import make_spec
from gmpy2 import mpfr

from farm.numerics import period as per
from farm.numerics.attracting_cycles import nucleus_cycle
from farm.numerics.orbit import Derivative
from farm.plan import make_plan, references
from farm.plan.reference_pack import pack, unpack
from farm.plan.reference_text import describe
from farm.plan.references import NUCLEUS_REACH, REUSE_PERIODS

SEAHORSE = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")


def _mp(c) -> mpmath.mpc:
    return mpmath.mpc(mpmath.mpf(str(c.real)), mpmath.mpf(str(c.imag)))


def test_period_3_nucleus_is_the_root_of_its_polynomial():
    """z_3(c) = c^4 + 2c^3 + c^2 + c = c (c^3 + 2c^2 + c + 1): the real root near
    -1.7549, from mpmath's root finder at 60 digits (polyroots warns about its
    coefficients' order from mpmath 1.4 on, and its ``asc`` is not in 1.3)."""
    with mpmath.workdps(60):
        want = mpmath.findroot(lambda c: c**3 + 2 * c**2 + c + 1, mpmath.mpf("-1.75"))
        assert abs(want + mpmath.mpf("1.75487766624669276")) < mpmath.mpf(10) ** -16
    scan = per.scan(("-1.75", "0.001"), 256, [math.log2(0.01)], 1000)
    assert scan.periods == (3,)
    c = per.nucleus(per.parse(("-1.75", "0.001"), 256), 3, 256)
    assert c is not None and per.lowest_return(c, 3, 256) == 3
    with mpmath.workdps(60):
        assert abs(_mp(c) - want) < mpmath.mpf(10) ** -58


def test_seahorse_nucleus_of_period_8007():
    """Near the Seahorse centre the disc of width 1e-22 meets a period-8007 atom; Newton
    lands on a nucleus 6e-33 away that mpmath confirms (z_8007 ~ 0 at 300 bits, no
    earlier return) and that an independent mpmath Newton from the centre reaches too."""
    bits = 240
    scan = per.scan(SEAHORSE, bits, [math.log2(0.6e-22), math.log2(0.6e-12)], 20000)
    assert scan.periods == (8007, 998)
    c = per.nucleus(per.parse(SEAHORSE, bits), 8007, bits)
    assert c is not None
    assert 2 ** per.log2_distance(per.point(c, bits), SEAHORSE) == pytest.approx(6.0e-33, rel=0.01)
    with mpmath.workprec(300):
        cm = _mp(c)
        z, dz, smallest = mpmath.mpc(0), mpmath.mpc(0), mpmath.inf
        for k in range(1, 8008):
            dz = 2 * z * dz + 1
            z = z * z + cm
            if k < 8007:
                smallest = min(smallest, abs(z))
        assert abs(z / dz) < mpmath.mpf(2) ** -230  # a root to 230 bits
        assert smallest > 1e-12  # and of period 8007, not of a divisor
        guess = mpmath.mpc(*SEAHORSE)
        for _ in range(6):
            z = dz = mpmath.mpc(0)
            for _k in range(8007):
                dz = 2 * z * dz + 1
                z = z * z + guess
            guess -= z / dz
        assert abs(guess - cm) < mpmath.mpf(10) ** -60


def test_newton_finds_a_satellite_not_its_parent():
    """Period 4990 = 5 x 998 next to the period-998 nucleus: dividing out the lower
    periods, Newton converges to a nucleus of period 4990 itself."""
    c = per.nucleus(per.parse(SEAHORSE, 200), 4990, 200)
    assert c is not None and per.lowest_return(c, 4990, 200) == 4990


def test_attracting_cycle_and_interior_distance():
    """c = -0.1 + 0.1i is inside the main cardioid: multiplier 2 z* with z* = (1 -
    sqrt(1 - 4c)) / 2, and the interior distance estimate b brackets the distance to
    the cardioid (b/4 <= d <= b; the cardioid c(t) = e^it / 2 - e^2it / 4)."""
    c = complex(-0.1, 0.1)
    cycle = per.attracting_cycle(per.parse(("-0.1", "0.1"), 200), 1, 200)
    assert cycle is not None
    assert cycle.multiplier == pytest.approx(abs(1 - np.sqrt(1 - 4 * c)), rel=1e-12)
    t = np.linspace(0, 2 * np.pi, 200001)
    d = np.min(np.abs(c - (np.exp(1j * t) / 2 - np.exp(2j * t) / 4)))
    b = 2 ** cycle.log2_de
    assert b / 4 <= d <= b
    assert per.attracting_cycle(per.parse(("0", "1"), 200), 2, 200) is None  # repelling
    # f^2 fixes the fixed point too: it is a cycle of period 1, not 2 (nor 3 for f^3)
    assert per.attracting_cycle(per.parse(("-0.1", "0.1"), 200), 2, 200) is None
    assert per.attracting_cycle(per.parse(("-0.1", "0.1"), 200), 3, 200) is None


@pytest.mark.parametrize("center, period", [(("-0.1528", "1.0397"), 3),
                                            (("-1.7548776662466927600495", "0"), 3), (SEAHORSE, 4990)])
def test_the_cycle_at_a_nucleus_in_closed_form_is_newtons(center, period):
    """At a nucleus the scan takes the multiplier and the interior distance estimate from
    the rounded orbit (attracting_cycles.nucleus_cycle), as Newton's method at full
    precision finds them; a point off the nucleus by more than the slack gets None."""
    bits = 200
    c = per.nucleus(per.parse(center, bits), period, bits)
    assert c is not None

    def closed_form(c):
        orbit = per.orbit(c, bits, period, 1e300)
        dz = Derivative()
        for k in range(period):
            dz.step(orbit.mant[k, 0], orbit.mant[k, 1], int(orbit.exps[k]))
        lap = float(np.sum(1 + orbit.log2_abs[1:period + 1]))
        return nucleus_cycle(lap, orbit.log2_abs[period], dz.log2_abs)

    got, want = closed_form(c), per.attracting_cycle(c, period, bits)
    assert got is not None and want is not None
    assert got.log2_de == pytest.approx(want.log2_de, abs=1e-9)
    assert got.multiplier == pytest.approx(want.multiplier, rel=1e-9)
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        off = c + mpfr(2) ** (want.log2_de - 8)  # inside, but not at the nucleus
    assert closed_form(off) is None


def test_a_long_cycle_at_a_modest_precision_is_found_at_its_floor(monkeypatch):
    """The Seahorse centre lies in a period-8007 component (|lambda| 0.925, 6e-33 from
    its nucleus). At 128 bits Newton's residual stalls near 1e-23, far above 2^-120:
    the method stops at that floor and finds the cycle one lap in, as Brent's returns
    (where the 128-bit orbit has become exactly periodic) find it three laps in: the
    scan stops at 8007 steps, with the same interior distance."""
    from farm.numerics import scan as scan_mod

    c = per.parse(SEAHORSE, 128)
    cycle = per.attracting_cycle(c, 8007, 128)
    assert cycle is not None and cycle.multiplier == pytest.approx(0.92519, abs=1e-4)
    quick = per.scan(SEAHORSE, 128, [-100.0], 50000)
    monkeypatch.setattr(scan_mod._State, "_inside", lambda self, n: None)
    brent = per.scan(SEAHORSE, 128, [-100.0], 50000)
    assert quick.returns == brent.returns == 8007
    assert quick.steps == 8007 < 3 * 8007 <= brent.steps
    assert quick.cycle is not None and brent.cycle is not None
    assert quick.cycle.log2_de == pytest.approx(brent.cycle.log2_de, abs=1e-6)


def test_exterior_distance_estimate():
    """c = 1 is 0.75 from the set (its nearest point is the cusp 1/4); c = 0.5 + 0.5i
    escapes; both distance estimates bracket: b/4 <= d <= b."""
    scan = per.scan(("1", "0"), 200, [], 100)
    assert scan.escaped == 3  # 1, 2, 5
    b = 2 ** scan.log2_de
    assert b / 4 <= 0.75 <= b


def test_scan_sees_an_attracting_cycle_and_goes_on_past_a_repelling_one():
    inside = per.scan(("-0.1", "0.1"), 200, [math.log2(1e-9)], 10000)
    assert inside.returns == 1 and inside.periods == (0,) and inside.escaped == 0
    misiurewicz = per.scan(("0", "1"), 200, [math.log2(1e-30)], 10000)
    assert misiurewicz.returns == 0 and misiurewicz.periods[0] > 50  # c = i: i -> -1+i -> -i


def test_a_centre_deep_in_a_minibrot_is_known_one_period_in(monkeypatch):
    """At the smallest disc's period, a centre deep in that period's component is
    confirmed by Newton's method at once (farm/numerics/scan.py ``_inside``): the scan
    stops after one period, with the cycle that Brent's returns find laps later."""
    from farm.numerics import scan as scan_mod

    c = per.point(per.nucleus(per.parse(SEAHORSE, 300), 998, 300), 300)
    centre = (c.re, c.im)
    quick = per.scan(centre, 300, [-200.0], 20000)
    monkeypatch.setattr(scan_mod._State, "_inside", lambda self, n: None)
    brent = per.scan(centre, 300, [-200.0], 20000)
    assert quick.periods == brent.periods == (998,)
    assert quick.returns == brent.returns == 998
    assert quick.steps == 998 < 2 * 998 < brent.steps
    assert quick.cycle is not None and brent.cycle is not None
    assert quick.cycle.log2_de == pytest.approx(brent.cycle.log2_de, abs=1e-9)
    assert quick.cycle.multiplier == pytest.approx(brent.cycle.multiplier, rel=1e-6, abs=1e-300)
    assert len(quick.orbit) == 999 and np.array_equal(quick.orbit.mant, brent.orbit.mant[:999])


def test_points_round_trip_and_offsets_are_exact():
    c = per.nucleus(per.parse(SEAHORSE, 300), 998, 300)
    p = per.point(c, 300)
    assert p.value() == c  # the decimal strings parse back to the same binary numbers
    ox, oy = per.offset_in(SEAHORSE, p, 0.5, -80, 300)  # (centre - c) / 2^-81
    with mpmath.workprec(400):
        want = (mpmath.mpc(*SEAHORSE) - _mp(c)) * mpmath.mpf(2) ** 81
    assert ox == pytest.approx(float(want.real), rel=1e-15)
    assert oy == pytest.approx(float(want.imag), rel=1e-15)


def test_references_along_a_zoom(monkeypatch):
    """A zoom into c = i meets a new minibrot at every frame (the scanned periods grow);
    without the Misiurewicz reference (the farm's choice there: next test), frames share
    a nucleus found for a deeper frame when it is within reach and its period at most 4
    times their own, so the zoom takes a few references, each within reach of its
    frames, with periods growing along the zoom."""
    monkeypatch.setattr(references, "MISIUREWICZ", False)
    plan = make_plan(make_spec(size=(64, 36), center=("0", "1"), width=("3", "1e-120"), frames=12,
                               max_iter="auto", tile=(64, 36)))
    refs = plan.references()
    assert refs is not None
    perturbed = [f.index for f in plan.frames if f.precision == "perturb"]
    assert all(refs.frame_ref[k] >= 0 for k in perturbed)
    assert all(refs.frame_ref[f.index] == -1 for f in plan.frames if f.precision != "perturb")
    periods = [refs.of(k).period for k in perturbed]
    assert all(p > 0 for p in periods) and periods == sorted(periods) and 2 <= len(refs.refs) <= 4
    radii = [math.log2(math.hypot(64, 36) / 2) + plan.frames[k].log10_spacing * math.log2(10)
             for k in perturbed]
    own = per.scan(plan.spec.view.center, plan.frames[-1].bits, radii, 100_000).periods
    assert len(set(own)) == len(perturbed)  # a new period at every frame
    assert all(p <= REUSE_PERIODS * q for p, q in zip(periods, own, strict=True))
    for k in perturbed:
        ref, frame = refs.of(k), plan.frames[k]
        radius = math.log2(math.hypot(64, 36) / 2) + frame.log10_spacing * math.log2(10)
        assert per.log2_distance(ref.point, plan.spec.view.center) <= radius + math.log2(NUCLEUS_REACH)
        assert abs(ref.orbit[-1]).max() < 1e-15 and len(ref.orbit) == ref.period + 1  # Z(p) ~ 0
    again = unpack(*pack(refs))
    assert again.frame_ref == refs.frame_ref and again.refs == refs.refs
    assert all(np.array_equal(a.orbit, b.orbit) for a, b in zip(again.refs, refs.refs, strict=True))
    assert len(describe(refs, plan)) <= 8


def test_a_view_inside_a_component_uses_its_centre():
    plan = make_plan(make_spec(size=(32, 18), center=("-0.1", "0.1"), width=("1e-9", "1e-9"),
                               max_iter=1000, precision="perturb", tile=(32, 18)))
    refs = plan.references()
    assert refs is not None and [r.kind for r in refs.refs] == ["center"]
    assert refs.centre is not None and refs.centre.kind == "interior" and refs.centre.n == 1
