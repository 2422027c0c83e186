"""Arbitrary-precision numbers for the host side; the one module that imports mpmath.

Everything a kernel needs as a number starts here as an mpmath ``mpf`` parsed from
a decimal string at full precision, and is rounded exactly once into the kernel's
format by :mod:`farm.numerics.encode`. No coordinate passes through a Python float.

Pixel mapping (DESIGN.md): image ``W x H``, centre ``(cr, ci)``, view width ``w``,
``s = w / W``; pixel column ``i``, row ``j`` (row 0 at the top)::

    re = cr + (i + 0.5 - W/2) * s        im = ci - (j + 0.5 - H/2) * s
"""

from __future__ import annotations

import math

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
