"""Reference orbits at any depth (farm/numerics/orbit.py, scan.py, mpfr_threads.py):
points below double's range kept with their exponent, the derivative in doubles, the
search for a repelling cycle (Misiurewicz points), laps of a cycle for the kernels,
and the two-thread orbiter, each against mpmath or gmpy2 on one thread."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from conftest import make_spec
from reference import misiurewicz

from farm.numerics import mpfr_threads
from farm.numerics import period as per
from farm.numerics.orbit import Derivative, Orbit, Recorder, laps
from farm.numerics.scan import scan
from farm.plan import make_plan
from farm.plan.reference_pack import pack, unpack

PERIOD3 = "-1.75487766624669276004950889635852869189460661777279314398"  # nucleus of period 3
SEAHORSE_M = ("-0.7495257189675268990762843695478956", "0.1358767313452441176005715023602258")


def test_points_below_double_range_keep_their_exponent():
    """c = 1e-400 off the period-3 nucleus: z_3 ~ 1e-400 dz_3 underflows a double; the
    orbit keeps it as a mantissa and an exponent, equal to mpmath's to 1e-15, and the
    doubles (``values``) of the same orbit hold 0 there."""
    bits = 1600
    with mpmath.workprec(bits):
        nucleus = mpmath.findroot(lambda c: c**3 + 2 * c**2 + c + 1, mpmath.mpf("-1.7549"))
        re = mpmath.nstr(nucleus + mpmath.mpf(10) ** -400, 480)
    points = per.orbit(per.parse((re, "0"), bits), bits, 5, 4.0)
    assert len(points) == 6 and points.exps[3] < -1000 and not points.exps[[1, 2, 4, 5]].any()
    assert points.values[3, 0] == 0.0
    with mpmath.workprec(bits):
        c, z = mpmath.mpf(re), mpmath.mpf(0)
        for n in range(1, 6):
            z = z * z + c
            got = mpmath.ldexp(mpmath.mpf(points.mant[n, 0]), int(points.exps[n]))
            assert abs(got / z - 1) < 1e-15, n
            assert points.log2_abs[n] == pytest.approx(float(mpmath.log(abs(z), 2)), rel=1e-12)


def test_derivative_in_doubles_follows_mpmath():
    """dz/dc along c = i's orbit (it grows by 2^2.5 a lap, past any double at depth):
    the doubles-and-exponent recursion against mpmath's at 3000 steps."""
    rec, dz = Recorder(), Derivative()
    cycle = [(0.0, 1.0), (-1.0, 1.0), (0.0, -1.0)]  # z_1 = i, then -1+i, -i, -1+i, ...
    with mpmath.workdps(30):
        c, z, want = mpmath.mpc(0, 1), mpmath.mpc(0), mpmath.mpc(0)
        for n in range(3000):
            dz.step(rec.re[n], rec.im[n], rec.ex[n])
            want = 2 * z * want + 1
            z = z * z + c
            rec.add(*cycle[min(n, 1 + (n - 1) % 2)], 0)
            assert abs(rec.re[n + 1] - float(z.real)) < 1e-12 and abs(rec.im[n + 1] - float(z.imag)) < 1e-12
        assert dz.log2_abs == pytest.approx(float(mpmath.log(abs(want), 2)), rel=1e-12)
    assert dz.log2_abs > 3000  # far beyond a double


def test_scan_finds_misiurewicz_points():
    """c = i lands on the 2-cycle -1+i, -i after 2 steps; the Seahorse point of
    tests/reference.py on a fixed point after 23 (mpmath: z_24 = z_23 there). A centre
    that is the point to its precision gets Newton's step below it; one 1e-30 away a
    step of about 1e-30; an interior point and a nucleus have no repeat."""
    at_i = scan(("0", "1"), 200, [], 1000, repeats=True)
    assert at_i.repeat == (2, 2) and at_i.log2_newton == -math.inf and at_i.steps == 4
    point = misiurewicz(SEAHORSE_M, 23, 1, 450)
    exact = scan(point, 1500, [], 10000, repeats=True)
    assert exact.repeat == (23, 1) and exact.log2_newton < -1450
    with mpmath.workprec(1500):
        c, z = mpmath.mpc(*point), mpmath.mpc(0)
        zs = []
        for _ in range(25):
            z = z * z + c
            zs.append(z)
        assert abs(zs[23] - zs[22]) < mpmath.mpf(2) ** -1400 and abs(zs[22] - zs[21]) > 1e-3
    near = (point[0][:32] + "1", point[1])  # moved by 1e-30
    off = scan(near, 1500, [], 10000, repeats=True)
    assert off.repeat == (23, 1) and -120 < off.log2_newton < -90
    assert scan(("-0.1", "0.1"), 200, [], 10000, repeats=True).repeat is None
    assert scan((PERIOD3, "0"), 200, [], 10000, repeats=True).repeat is None


def test_newton_to_a_misiurewicz_point():
    """From 1e-5 off c = i, Newton's method on z_4 - z_2 lands on i to its precision;
    the orbit of the point found repeats from step 2 at full precision."""
    guess = per.parse(("0.00001", "1.00001"), 300)
    c = per.misiurewicz(guess, 2, 2, 300)
    assert c is not None and abs(c - per.parse(("0", "1"), 300)) < 2.0**-290
    got = per.preperiodic_orbit(c, 2, 300, 10)
    assert got is not None and got[1] == 2 and len(got[0]) == 5


def test_laps_unroll_the_cycle():
    """A Misiurewicz orbit Z(0) .. Z(k + q) becomes Z(0) .. Z(k-1), laps of Z(k) ..
    Z(k+q-1) enough for the iterations, and Z(k) last; at most UNROLL_POINTS points."""
    mant = np.arange(12, dtype=float).reshape(6, 2)
    orbit = Orbit(mant, np.zeros(6, np.int32))  # k = 2, q = 3: Z(5) stands for Z(2)
    out = laps(orbit, 2, 20).mant[:, 0].tolist()
    assert len(out) > 20 and out[:2] == [0, 2] and out[-1] == 4
    assert out[2:-1] == [4, 6, 8] * ((len(out) - 3) // 3)
    assert len(laps(orbit, 2, 10**9)) <= 1 << 18


def test_references_pack_with_exponents_and_wraps():
    """A zoom into c = i takes the Misiurewicz point as its one reference (preperiod 2,
    its orbit 5 points), and pack/unpack keep exponents and wraps."""
    plan = make_plan(make_spec(size=(32, 18), center=("0", "1"), width=("3", "1e-120"), frames=6,
                               max_iter="auto", tile=(32, 18)))
    refs = plan.references()
    assert refs is not None and [r.kind for r in refs.refs] == ["misiurewicz"]
    ref = refs.refs[0]
    assert ref.wrap == 2 and len(ref.points) == 5 and refs.centre is not None
    assert refs.centre.kind == "boundary"
    meta, orbits = pack(refs)
    meta["exps"][3] = -2000  # (stands for a point below double's range)
    again = unpack(meta, orbits)
    assert again.refs[0].wrap == 2 and again.refs[0].points.exps[3] == -2000


@pytest.mark.parametrize("bits", [128, 1024])
def test_the_complex_orbiter_follows_the_exact_orbit(bits):
    """Below COMPLEX_BITS orbits step as one complex number: 300 steps of the Seahorse
    centre stay within the rounding that ``bits`` allows of mpmath's orbit at twice the
    precision (a bound carried along: each step's error doubles with |2 z| and gains a
    few roundings of |z|^2 + |c|), its doubles agree with GmpyOrbiter's, and it starts
    again from a saved point on the same points bit for bit."""
    centre = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
    c = per.parse(centre, bits)
    assert bits < per.COMPLEX_BITS and isinstance(per.orbiter(c, bits), per.ComplexOrbiter)
    run, pair = per.ComplexOrbiter(c, bits), per.GmpyOrbiter(c, bits)
    with mpmath.workprec(2 * bits):
        cc = mpmath.mpc(mpmath.mpf(str(c.real)), mpmath.mpf(str(c.imag)))  # c at ``bits``, exactly
        exact, bound, ulp = mpmath.mpc(0), mpmath.mpf(0), mpmath.mpf(2) ** -bits
        for _ in range(300):
            bound = 2 * abs(exact) * bound + bound**2 + 4 * ulp * (abs(exact) ** 2 + abs(cc))
            exact = exact * exact + cc
            run.step()
            pair.step()
            got = mpmath.mpc(mpmath.mpf(str(run.value().real)), mpmath.mpf(str(run.value().imag)))
            assert abs(got - exact) <= bound
            zr, zi, e = run.point()
            z = complex(zr, zi)
            assert e == 0 and abs(z - complex(*pair.point()[:2])) <= 2.0**-50 * abs(z)
    saved = run.save()
    again = per.restart(c, bits, saved)
    for _ in range(20):
        again.step()
        run.step()
        assert again.point() == run.point()


@pytest.mark.skipif(not mpfr_threads.available(), reason="needs MPFR and two cores")
def test_two_threads_give_the_same_orbit():
    """The two-thread orbiter rounds as gmpy2 does, step for step: the same points bit
    for bit over 200 steps at 70,000 bits, and it starts again from a saved point."""
    digits = "".join(str(k * k % 10) for k in range(21_000))
    c = per.parse(("-0.1" + digits, "0.1" + digits[::-1]), 70_000)
    one, two = per.GmpyOrbiter(c, 70_000), per.ThreadedOrbiter(c, 70_000)
    try:
        for _ in range(200):
            one.step()
            two.step()
            assert one.point() == two.point()
        assert one.value() == two.value()
        again = per.restart(c, 70_000, two.save())
        again.step()
        one.step()
        assert again.point() == one.point()
        again.close()
    finally:
        two.close()


@pytest.mark.skipif(not mpfr_threads.available(), reason="needs MPFR and two cores")
def test_newton_on_two_threads():
    """Newton's method at 70,000 bits runs z and dz on two threads (six products a step,
    three each): it lands on the period-3 nucleus (mpmath's root of c^3 + 2c^2 + c + 1)
    and on c = i from 1e-5 off it, to 2^-69000."""
    bits = 70_000
    c = per.nucleus(per.parse(("-1.75", "0.001"), bits), 3, bits)
    assert c is not None and per.lowest_return(c, 3, bits) == 3
    with mpmath.workprec(bits):
        root = mpmath.findroot(lambda x: x**3 + 2 * x**2 + x + 1, mpmath.mpf("-1.7549"))
        assert abs(mpmath.mpc(str(c.real), str(c.imag)) - root) < mpmath.mpf(2) ** -69000
    m = per.misiurewicz(per.parse(("0.00001", "1.00001"), bits), 2, 2, bits)
    assert m is not None and per.log2_abs(m - per.parse(("0", "1"), bits)) < -69000
