"""Arbitrary-precision numbers for the host side; the one module that imports mpmath.

Everything a kernel needs as a number starts here as an mpmath ``mpf`` parsed from
a decimal string at full precision, and is rounded exactly once into the kernel's
format by :mod:`farm.numerics.encode`. No coordinate passes through a Python float.

Pixel mapping (DESIGN.md): image ``W x H``, centre ``(cr, ci)``, view width ``w``,
``s = w / W``; pixel column ``i``, row ``j`` (row 0 at the top)::

    re = cr + (i + 0.5 - W/2) * s        im = ci - (j + 0.5 - H/2) * s

and, for a frame turned by the angle theta (degrees, counter-clockwise; farm/plan/curve.py),
with ``u = i + 0.5 - W/2``, ``v = -(j + 0.5 - H/2)`` (v up)::

    re = cr + s (u cos theta - v sin theta)      im = ci + s (u sin theta + v cos theta)

where cos theta and sin theta are :func:`rotation`'s: mpmath numbers rounded once to
the frame's coordinate bits (exact at multiples of 90 degrees). Everything else is
exact until a kernel's format rounds it (farm/numerics/axes.py says where).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath

mpf = mpmath.mpf
workprec = mpmath.workprec

WIDTH_BITS = 256  # relative precision of frame widths


def parse(decimal: str, bits: int) -> mpmath.mpf:
    """A decimal string as an mpf rounded to ``bits`` bits (exact if it fits)."""
    with workprec(bits):
        return mpf(decimal)


def coordinate_bits(spacing: mpmath.mpf, extent: float = 4.0) -> int:
    """mpmath precision that resolves ``spacing`` within coordinates up to ``extent``
    with 80 bits to spare (so rounding into any kernel format happens once)."""
    return max(200, int(math.log2(extent)) - int(mpmath.floor(mpmath.log(spacing, 2))) + 80)


def frame_width(first: str, last: str, k: int, frames: int) -> mpmath.mpf:
    """Width of frame ``k`` of ``frames``: ``w0 * (w1/w0) ** (k/(F-1))``, constant zoom speed."""
    with workprec(WIDTH_BITS):
        w0, w1 = mpf(first), mpf(last)
        if frames == 1 or k == 0:
            return +w0
        if k == frames - 1:
            return +w1
        return w0 * mpmath.power(w1 / w0, mpf(k) / (frames - 1))


def turns(angle: Fraction) -> Fraction:
    """An angle in degrees as the part of a full turn, reduced exactly into [0, 1)."""
    return (Fraction(angle) / 360) % 1


def rotation(angle: Fraction, bits: int) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(cos theta, sin theta) of an angle in degrees (an exact rational): computed with
    16 guard bits, then rounded to ``bits`` bits (within about half a unit of their
    last bit); exact (0, 1 or -1) at multiples of 90 degrees."""
    t = 2 * turns(angle)  # theta / pi in [0, 2): cospi and sinpi are exact at halves
    with workprec(bits + 16):
        x = mpf(t.numerator) / t.denominator
        c, s = mpmath.cospi(x), mpmath.sinpi(x)
    with workprec(bits):
        return +c, +s


def rotation_doubles(angle: Fraction) -> tuple[float, float]:
    """(cos theta, sin theta) of an angle in degrees, each rounded to the nearest double
    (exact at multiples of 90 degrees)."""
    c, s = rotation(angle, 80)
    return float(c), float(s)


def escape_r2(radius: float) -> mpmath.mpf:
    """R squared, exact (R is a binary float from the spec)."""
    with workprec(128):
        return mpf(radius) ** 2


def log10(x: mpmath.mpf) -> float:
    """log10 of a positive mpf as a float (fine for widths far below 1e-308)."""
    return float(mpmath.log10(x))


def axis(center: str, step: mpmath.mpf, n: int, start: int, count: int, sign: int,
         bits: int) -> list[mpmath.mpf]:
    """Pixel-centre coordinates along one image axis.

    Returns ``center + sign * (k + 0.5 - n/2) * step`` for ``k = start .. start+count-1``
    at ``bits`` bits; ``sign`` is +1 for columns (re) and -1 for rows (im, row 0 on top).
    The offset ``(2k + 1 - n) / 2`` is exact, so each value is rounded once.
    """
    with workprec(bits):
        c = mpf(center)
        half = step / 2
        return [c + sign * (2 * k + 1 - n) * half for k in range(start, start + count)]


def decimal_text(x: mpmath.mpf, digits: int) -> str:
    """``x`` as a decimal string with ``digits`` significant digits."""
    return mpmath.nstr(x, digits, min_fixed=-5, max_fixed=8)


def frexp(x: mpmath.mpf) -> tuple[float, int]:
    """(m, e) with x = m * 2**e, |m| in [0.5, 1) rounded to a double; works far below
    double's range (perturbation's pixel spacing at any depth)."""
    m, e = mpmath.frexp(x)
    return float(m), int(e)


def float_at_least(x: mpmath.mpf) -> float:
    """A double >= x > 0: x rounded up, or the smallest subnormal below double's range
    (a safe bound for |dc| at any depth: bla.py's radii only shrink with it)."""
    return max(math.nextafter(float(x), math.inf), math.ulp(0.0))
