"""Points of the complex plane at the depth's precision (gmpy2, MPFR/MPC): a point as
decimal strings exact at its bits (:class:`Point`), parsing and rounding, offsets and
moves, log2 distances and magnitudes at any depth, and numbers as exact base-16 texts
(how farm/numerics/mpfr_threads.py takes them).

Every function takes its points as decimal strings or gmpy2 numbers and a precision
in bits; it returns doubles or decimal strings, so no gmpy2 number leaves the
reference numerics except through :class:`Point`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import gmpy2
from gmpy2 import mpc, mpfr


@dataclass(frozen=True)
class Point:
    """A point c of the complex plane at ``bits`` bits; ``re``, ``im`` are decimal
    strings that parse back to exactly the same binary numbers at ``bits`` bits."""

    re: str
    im: str
    bits: int

    def value(self) -> mpc:
        with precision(self.bits):
            return mpc(mpfr(self.re), mpfr(self.im))


def precision(bits: int):
    """A context manager: gmpy2 arithmetic at ``bits`` bits inside it (numbers made
    outside any such context have 53 bits)."""
    return gmpy2.context(gmpy2.get_context(), precision=bits)


def _digits(bits: int) -> int:
    """Significant decimal digits that round-trip a ``bits``-bit binary number."""
    return int(math.ceil(bits * math.log10(2))) + 2


def point(c: mpc, bits: int) -> Point:
    """``c`` (rounded to ``bits`` bits) as a :class:`Point`."""
    with precision(bits):
        re, im = +c.real, +c.imag
    d = _digits(bits)
    return Point(f"{re:.{d}g}", f"{im:.{d}g}", bits)


def parse(center: Sequence[str], bits: int) -> mpc:
    """The decimal strings (re, im) as a complex number rounded to ``bits`` bits."""
    with precision(bits):
        return mpc(mpfr(center[0]), mpfr(center[1]))


def offset_in(center: Sequence[str], ref: Point, unit_mantissa: float, unit_exp: int,
              bits: int) -> tuple[float, float]:
    """(centre - ref) / u as two doubles, u = unit_mantissa * 2**unit_exp (the kernels'
    half pixel spacing), computed at ``bits`` bits and rounded once."""
    with precision(bits + 64):
        diff = parse(center, bits + 64) - ref.value()
        u = mpfr(unit_mantissa) * mpfr(2) ** unit_exp
        return float(diff.real / u), float(diff.imag / u)


def moved(center: Sequence[str], dx: float, dy: float, exp: int, bits: int) -> tuple[str, str]:
    """centre + (dx + i dy) 2^exp at ``bits`` bits, as decimal strings (any depth)."""
    with precision(bits):
        step = mpc(gmpy2.mul_2exp(mpfr(dx), exp), gmpy2.mul_2exp(mpfr(dy), exp))
        p = point(parse(center, bits) + step, bits)
    return p.re, p.im


def log2_distance(a: Point, center: Sequence[str]) -> float:
    """log2 |a - centre| (-inf when they are equal), at any depth."""
    bits = a.bits + 64
    with precision(bits):
        return log2_abs(a.value() - parse(center, bits))


def log2_abs(x: mpc | mpfr) -> float:
    """log2 |x|, -inf for 0; works far outside double's range."""
    if x == 0:
        return -math.inf
    e, m = gmpy2.frexp(abs(x))
    return math.log2(float(m)) + e


def hex_text(x: mpfr, bits: int) -> str:
    """x exactly in base 16, as MPFR reads it back ("-0.1a2b@3" = -0.1a2b x 16^3)."""
    with precision(bits):
        digits, exp, _ = (+x).digits(16)
    if not digits.strip("-0"):
        return "0"
    sign = "-" if digits.startswith("-") else ""
    return f"{sign}0.{digits.lstrip('-')}@{exp}"
