"""Exact encoders from mpmath numbers into the kernels' number formats, and back.

Formats (see kernels/*.cl for the device side):

``f64``
    IEEE binary64, round to nearest.

``fp128``
    Signed 128-bit fixed point, value ``u / 2**96``, two's complement, stored as
    four little-endian uint32 words ``(w0, w1, w2, w3)``, ``w3`` the most
    significant (OpenCL ``uint4`` with ``.s0 = w0``). Range ``[-2**31, 2**31)``,
    resolution ``2**-96`` (about 1.26e-29). Encoding rounds to nearest.

``quad-single``
    Four float32 limbs ``(l0, l1, l2, l3)``, ``|l0| > |l1| > ...``, non-overlapping:
    each limb is the remainder so far rounded to 24 bits, so
    ``|l(k+1)| <= ulp(l(k)) / 2``. The sum approximates ``x`` to about ``2**-97 |x|``.
    Limbs that would be float32 subnormals are 0 (GPUs flush them).
"""

from __future__ import annotations

from collections.abc import Iterable

import mpmath
import numpy as np

FP128_FRAC_BITS = 96
FP128_MOD = 1 << 128
FP128_LIMIT = 1 << 127  # |u| bound: |value| < 2**31
FLOAT32_MIN_NORMAL = 2.0**-126


def round_scaled(x: mpmath.mpf, bits: int) -> int:
    """Nearest integer to ``x * 2**bits``, ties to even, in exact integer arithmetic
    (mpmath functions would round their result to the context precision)."""
    if not isinstance(x, mpmath.mpf):
        x = mpmath.mpf(x)  # (never for an mpf: that would round it to the context's precision)
    man, exp = x.man_exp  # |x| == man * 2**exp exactly
    man = -int(man) if x < 0 else int(man)
    shift = exp + bits
    if shift >= 0:
        return man << shift
    q, r = divmod(man, 1 << -shift)  # floor division: r >= 0
    half = 1 << (-shift - 1)
    return q + (r > half or (r == half and q & 1))


def fp128_int(x: mpmath.mpf) -> int:
    """Nearest integer to ``x * 2**96`` (the signed fp128 integer ``u``)."""
    u = round_scaled(x, FP128_FRAC_BITS)
    if not -FP128_LIMIT <= u < FP128_LIMIT:
        raise OverflowError(f"{x} is outside fp128's range [-2**31, 2**31)")
    return u


def words_from_int(u: int) -> tuple[int, int, int, int]:
    """Two's-complement 128-bit words, least significant first."""
    v = u % FP128_MOD
    return (v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF, (v >> 64) & 0xFFFFFFFF, v >> 96)


def int_from_words(words: Iterable[int]) -> int:
    """Inverse of :func:`words_from_int`: the signed integer ``u``."""
    w = [int(x) for x in words]
    v = w[0] | (w[1] << 32) | (w[2] << 64) | (w[3] << 96)
    return v - FP128_MOD if v >= FP128_LIMIT else v


def encode_fp128(values: Iterable[mpmath.mpf]) -> np.ndarray:
    """``(n, 4)`` uint32 array of fp128 words."""
    rows = [words_from_int(fp128_int(x)) for x in values]
    return np.array(rows, dtype=np.uint32).reshape(-1, 4)


def decode_fp128(words: np.ndarray) -> list[mpmath.mpf]:
    """Exact values of ``(n, 4)`` fp128 words."""
    return [mpmath.ldexp(int_from_words(row), -FP128_FRAC_BITS) for row in np.atleast_2d(words)]


def qs_limbs(x: mpmath.mpf) -> tuple[float, float, float, float]:
    """Quad-single limbs of ``x`` (see module docstring); each is exact in float32."""
    if abs(x) >= 2.0**128:
        raise OverflowError(f"{x} is outside float32's range")
    limbs = []
    rest = x
    bits = max(mpmath.mp.prec, 400)
    for _ in range(4):
        with mpmath.workprec(24):
            limb = +rest  # round to 24 significant bits, nearest
        if limb != 0 and abs(limb) < FLOAT32_MIN_NORMAL:
            limb = mpmath.mpf(0)
        limbs.append(float(limb))
        with mpmath.workprec(bits):
            rest = rest - limb  # exact: both are binary numbers within `bits`
    return tuple(limbs)  # type: ignore[return-value]


def encode_qs(values: Iterable[mpmath.mpf]) -> np.ndarray:
    """``(n, 4)`` float32 array of quad-single limbs."""
    return np.array([qs_limbs(x) for x in values], dtype=np.float32).reshape(-1, 4)


def decode_qs(limbs: np.ndarray) -> list[mpmath.mpf]:
    """Exact sum of each row of ``(n, 4)`` float32 limbs."""
    out = []
    with mpmath.workprec(400):
        for row in np.atleast_2d(limbs).astype(np.float64):
            out.append(mpmath.fsum(mpmath.mpf(float(v)) for v in row))
    return out


def encode_f64(values: Iterable[mpmath.mpf]) -> np.ndarray:
    """float64 array, each value rounded to nearest once."""
    return np.array([float(x) for x in values], dtype=np.float64)


ENCODERS = {"f64": encode_f64, "fp128": encode_fp128, "quad-single": encode_qs}
