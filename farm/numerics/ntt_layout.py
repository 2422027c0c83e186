"""The numbers of the device's reference orbits (farm/numerics/gpu_orbit.py,
kernels/orbit_ntt.cl) and the shape of their transforms; host-side, exact, no OpenCL.

Fixed point: a real v is the integer V = round(v 2^F) held as ND = NF + 1 balanced
digits of B bits, V = sum_k d[k] 2^(B k), |d[k]| <= 2^(B-1) + 1 (int64, least
significant first), F = NF B. The top digit is the integer part: |v| below about
2^(B-2) is held (an orbit stops on the device once |Re z| or |Im z| reaches FREEZE,
so z^2 + c always fits). F is the orbit's bits plus GUARD_BITS, rounded up to whole
digits: fixed point keeps the bits below 2^-F that MPFR keeps relative to |z|, and
the guard bits keep the device's orbit at least as close to the true one as MPFR's
at ``bits`` bits (each step's truncation errs by under one unit of 2^-F).

Multiplication: the digits' convolution by number-theoretic transforms modulo the
prime P = 2^64 - 2^32 + 1 (2^32 divides P - 1; 7 generates its multiplicative
group). A coefficient of x^2 - y^2 or of 2xy is a sum of at most ND products of two
digits, twice: |coefficient| <= 2 ND (2^(B-1) + 1)^2 (+ c's digit), which must stay
below P/2 to be read back signed: B = 24 does up to ND = 65,535 digits (1.57M bits),
23 up to 262k, 22 beyond (:func:`layout` takes the largest B that holds). The
transform's length L is the power of two at or above the product's 2 ND - 1
coefficients (no wrap-around), L = R C with R = C or 2C; kernels do R- and C-point
transforms in local memory, so L is at most MAX_LENGTH (R, C <= 1024).

Carries: a coefficient splits into three balanced B-bit pieces (B >= 22 keeps the
top piece below 2^(B-1)); digit j's sum t_j of coefficient j's low piece, j-1's
middle and j-2's top is below 3 2^(B-1), so t_j = b_j + e_j 2^B with e_j in
{-1, 0, 1}, and d_j = b_j + e_{j-1}: two passes, each digit from four coefficients,
no ripple.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import gmpy2
import numpy as np
from gmpy2 import mpc, mpfr

P = 2**64 - 2**32 + 1
GENERATOR = 7  # of the multiplicative group modulo P
GUARD_BITS = 64  # fraction bits beyond the orbit's bits
DIGIT_BITS = (24, 23, 22)  # the largest that the coefficient bound allows is used
MAX_LENGTH = 1 << 20  # transforms of R, C <= 1024 points in local memory
FREEZE = 16  # the device stops once |Re z| or |Im z| has integer part >= this


class TooLong(ValueError):
    """The precision needs transforms longer than MAX_LENGTH."""


@dataclass(frozen=True)
class Layout:
    """Digits and transform of fixed-point numbers with ``nf`` fraction digits of ``b`` bits."""

    b: int  # bits a digit
    nf: int  # fraction digits: F = nf * b
    r_log: int  # L = 2^r_log * 2^c_log
    c_log: int

    @property
    def nd(self) -> int:
        """Digits of a number: the fraction's and one integer digit."""
        return self.nf + 1

    @property
    def fraction_bits(self) -> int:
        return self.nf * self.b

    @property
    def length(self) -> int:
        return 1 << (self.r_log + self.c_log)

    def options(self) -> tuple[str, ...]:
        """The kernels' build options (kernels/orbit_ntt.cl)."""
        return (f"-DB={self.b}", f"-DNF={self.nf}", f"-DND={self.nd}", f"-DR_LOG={self.r_log}",
                f"-DC_LOG={self.c_log}", f"-DFREEZE={FREEZE}")


def coefficient_bound(b: int, nd: int) -> int:
    """The largest |coefficient| of x^2 - y^2 + cr or 2xy + ci (module docstring)."""
    d = (1 << (b - 1)) + 1
    return 2 * nd * d * d + (1 << (b - 1))


def quantised(nf: int) -> int:
    """``nf`` rounded up to one of 32 digit counts an octave: the kernels are built for
    their digit count, and Newton's method and `farm find` ask for a new precision at
    every step (a build takes 0.4-0.8 s on an H200); a few more guard bits cost nothing."""
    quantum = 1 << max(0, nf.bit_length() - 5)
    return -(-nf // quantum) * quantum


def layout(bits: int) -> Layout:
    """The layout for an orbit at ``bits`` bits (TooLong past MAX_LENGTH): at least
    ``bits`` + GUARD_BITS fraction bits, the digit count :func:`quantised`."""
    for b in DIGIT_BITS:
        nf = quantised(-(-(bits + GUARD_BITS) // b))
        if coefficient_bound(b, nf + 1) < P // 2:
            break
    else:
        raise TooLong(f"{bits} bits need too many digits")
    log = max(2, math.ceil(math.log2(2 * (nf + 1) - 1)))
    if 1 << log > MAX_LENGTH:
        raise TooLong(f"{bits} bits need transforms of 2^{log} points (at most {MAX_LENGTH})")
    return Layout(b, nf, (log + 1) // 2, log // 2)


@cache
def _powers(length: int) -> np.ndarray:
    """w^k mod P for k < length, w a primitive length-th root of unity (uint64)."""
    w = pow(GENERATOR, (P - 1) // length, P)
    out = [1] * length
    for k in range(1, length):
        out[k] = out[k - 1] * w % P
    return np.array(out, dtype=np.uint64)


def root_powers(length: int) -> np.ndarray:
    """The kernels' table tw: w^k for k < L (a copy of the cached one)."""
    return _powers(length).copy()


def inverse(v: int) -> int:
    """1/v mod P."""
    return pow(v, P - 2, P)


def to_fixed(v: mpfr, lay: Layout) -> int:
    """round(v 2^F), exactly (ties away from zero)."""
    num, den = v.as_integer_ratio()
    num <<= lay.fraction_bits
    q, r = divmod(abs(num), den)
    q += 2 * r >= den
    return -q if num < 0 else q


def digits_of(value: int, lay: Layout) -> np.ndarray:
    """The integer ``value`` as lay.nd balanced digits (int64, least significant first);
    ValueError if it does not fit (|value| >= 2^(B nd - 1))."""
    b, nd = lay.b, lay.nd
    mag = abs(value)
    if mag.bit_length() >= b * nd:
        raise ValueError("the number does not fit the fixed-point digits")
    raw = np.frombuffer(mag.to_bytes((b * nd + 7) // 8, "little"), np.uint8)
    bits = np.unpackbits(raw, bitorder="little")[: b * nd].reshape(nd, b)
    u = bits.astype(np.int64) @ (np.int64(1) << np.arange(b, dtype=np.int64))
    high = u >= 1 << (b - 1)
    d = u - (high.astype(np.int64) << b)
    d[1:] += high[:-1]
    if high[-1]:
        raise ValueError("the number does not fit the fixed-point digits")
    return -d if value < 0 else d


def _pack(u: np.ndarray, b: int) -> int:
    """sum u[k] 2^(b k) for digits 0 <= u[k] < 2^b."""
    bits = ((u[:, None] >> np.arange(b, dtype=np.int64)) & 1).astype(np.uint8).ravel()
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def value_of(digits: np.ndarray, lay: Layout) -> int:
    """The integer that balanced ``digits`` hold."""
    d = np.asarray(digits, dtype=np.int64)
    return _pack(np.where(d > 0, d, 0), lay.b) - _pack(np.where(d < 0, -d, 0), lay.b)


def from_fixed(value: int, lay: Layout) -> mpfr:
    """value / 2^F as an exact mpfr."""
    with gmpy2.context(gmpy2.get_context(), precision=max(value.bit_length(), 1) + 2):
        return gmpy2.mul_2exp(mpfr(value), -lay.fraction_bits)


def complex_digits(z: mpc, lay: Layout) -> np.ndarray:
    """(2 nd,) int64: Re z's digits, then Im z's."""
    return np.concatenate([digits_of(to_fixed(z.real, lay), lay), digits_of(to_fixed(z.imag, lay), lay)])


def complex_value(digits: np.ndarray, lay: Layout) -> mpc:
    """The exact complex number that :func:`complex_digits`' layout holds."""
    nd = lay.nd
    x, y = (from_fixed(value_of(digits[k * nd:(k + 1) * nd], lay), lay) for k in (0, 1))
    with gmpy2.context(gmpy2.get_context(), precision=max(x.precision, y.precision)):
        return mpc(x, y)
