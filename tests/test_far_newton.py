"""Newton's method from afar in perturbation (farm/numerics/far_newton.py): from a
guess a fraction of the view away it lands within 2^-30 of the view of the root that
Newton's method at full precision finds (newton.py), or says it cannot (None)."""

from __future__ import annotations

import cmath
import math

import gmpy2
import pytest
from gmpy2 import mpc, mpfr

from farm.numerics import far_newton
from farm.numerics import period as per

MISI = ("-1.76869679074560518017859914435463056901754636527595626787",
        "0.00172823629645281309494452004972472814841149401864922044409")
# the minibrot of period 651 (7.6e-302 wide) that `farm find -1.7687 0.0017 --depth 1e-300`
# finds: its centre's first 160 digits (Newton at full precision goes on from there)
MINIBROT_651 = (
    "-1.76869679074560518017859917217081657512642852957578592179655425742504237114908"
    "63146944266105649638532046517179204221536551649327303510724066397007541982155969"
    "49",
    "0.001728236296452813094944464293131081843360355845334003047267680331398829885686"
    "46960326140648874632815563265127647581560628007854225196715281835655178105044827"
    "3")


def near(c: mpc, log2_offset: float, angle: float, bits: int) -> mpc:
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        w = cmath.rect(1.0, angle)
        return c + mpc(w) * mpfr(2) ** log2_offset


@pytest.mark.parametrize("angle", [0.3, 2.0, 4.4])
def test_far_misiurewicz_lands_next_to_the_full_precision_root(angle):
    bits, view = 300, math.log2(1e-25)
    root = per.misiurewicz(per.parse(MISI, bits), 177, 1, bits)
    c_ref = near(root, view - 3, angle + 1.0, bits)  # the reference: some point nearby
    guess = near(root, view - 6, angle, bits)
    orbit = per.orbit(c_ref, bits, 178, 1e300)
    got = far_newton.misiurewicz(c_ref, orbit, guess, 177, 1, bits, view, deflate=False)
    assert got is not None
    assert per.log2_abs(got - root) <= view - 30
    # and Newton at full precision from there takes it to the root's bits
    again = per.misiurewicz(got, 177, 1, bits, scale=view, guess_bits=int(30 - view))
    assert again is not None and per.log2_abs(again - root) <= 16 - bits


@pytest.mark.parametrize("angle", [0.5, 2.5, 4.0])
def test_far_nucleus_lands_next_to_the_full_precision_root(angle):
    """The minibrot of period 651 that `farm find -1.7687 0.0017 --depth 1e-300` finds,
    from a reference and guess 2^-3 of the view (1e-150) away."""
    view = math.log2(1e-150)
    bits = int(-view) + 96
    root = per.nucleus(per.parse(MINIBROT_651, bits), 651, bits)
    assert root is not None
    c_ref = near(root, view - 3, angle, bits)
    divisors = {k for k in range(1, 651) if 651 % k == 0}
    got = far_newton.nucleus(c_ref, per.orbit(c_ref, bits, 651, 1e300), 651, divisors, bits, view)
    assert got is not None
    assert per.log2_abs(got - root) <= view - 30


def test_far_newton_gives_up_rather_than_wander():
    """A guess with no root of that preperiod near it: None, not a point far away."""
    bits, view = 300, math.log2(1e-25)
    root = per.misiurewicz(per.parse(MISI, bits), 177, 1, bits)
    orbit = per.orbit(root, bits, 200, 1e300)
    got = far_newton.misiurewicz(root, orbit, near(root, view - 6, 1.0, bits), 3, 1, bits, view,
                                 deflate=False)
    assert got is None or per.log2_abs(got - root) <= view + far_newton.WIDE
