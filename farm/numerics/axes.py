"""Coordinates of every sample of every pixel along one image axis, in a kernel format.

With ``[image] samples = N`` the direct formats (f64, fp128, quad-single) get, per
frame, the real part of every (column, sample) and the imaginary part of every (row,
sample), ``N`` times the axes of one sample per pixel (farm/plan/samples.py gives the
offsets). Value k of column (or row) i is::

    center + sign * ((2 i + 1 - n) / 2 + o_k / 2^16) * step

with ``o_k`` the sample's offset in units of 2^-16 px. Sample 0 (offset 0, the pixel
centre of the contract) comes from :func:`farm.numerics.axis` and the format's encoder,
exactly as without samples, so it is bitwise the same coordinate. The other samples
are computed in exact integer arithmetic (the centre at its parsed precision plus an
exact multiple of ``step / 2^17``) and rounded once into the format: no coordinate
passes through a float, and no mpmath operation per value (N times the axes would
otherwise cost seconds per frame in quad-single's encoder).
"""

from __future__ import annotations

from collections.abc import Sequence

import mpmath
import numpy as np

from farm.numerics import axis, workprec
from farm.numerics.encode import ENCODERS, FP128_FRAC_BITS, FP128_LIMIT, words_from_int

OFFSET_BITS = 16  # farm/plan/samples.py: offsets in units of 2^-16 px
FLOAT32_MIN_EXP = -126  # float32's smallest normal is 2^-126 (encode.FLOAT32_MIN_NORMAL)


def _int_exp(x: mpmath.mpf) -> tuple[int, int]:
    """(m, e) with x == m * 2**e exactly, m a signed Python int."""
    sign, man, exp, _ = x._mpf_
    if not man:
        return 0, 0
    return (-int(man) if sign else int(man)), int(exp)


def _round_shift(v: int, shift: int) -> int:
    """Nearest integer to v / 2**shift (shift >= 0), ties to even."""
    if shift <= 0:
        return v << -shift
    q, r = divmod(v, 1 << shift)
    half = 1 << (shift - 1)
    return q + (r > half or (r == half and q & 1))


def _to_f64(v: int, e: int) -> float:
    """v * 2**e rounded to the nearest double (Python's int division rounds correctly)."""
    return v / (1 << -e) if e < 0 else float(v << e)


def _to_fp128(v: int, e: int) -> tuple[int, int, int, int]:
    u = _round_shift(v, -(e + FP128_FRAC_BITS))
    if not -FP128_LIMIT <= u < FP128_LIMIT:
        raise OverflowError(f"{v} * 2**{e} is outside fp128's range")
    return words_from_int(u)


def _to_qs(v: int, e: int) -> tuple[float, float, float, float]:
    """Quad-single limbs of v * 2**e: each the rest rounded to 24 significant bits (ties to
    even), limbs below float32's normal range set to 0 (as encode.qs_limbs)."""
    limbs = []
    for _ in range(4):
        if v == 0:
            limbs.append(0.0)
            continue
        drop = max(abs(v).bit_length() - 24, 0)
        limb = _round_shift(v, drop) << drop  # 24 significant bits at most, exact
        if abs(limb).bit_length() + e <= FLOAT32_MIN_EXP:  # |limb * 2^e| < 2^-126
            limb = 0
        limbs.append(_to_f64(limb, e))
        v -= limb
    return limbs[0], limbs[1], limbs[2], limbs[3]


def sample_axis(center: str, step: mpmath.mpf, n: int, offsets: Sequence[int], sign: int,
                bits: int, fmt: str) -> np.ndarray:
    """Every (pixel, sample) coordinate along one axis of ``n`` pixels, encoded in
    ``fmt``: shape ``(n * S)`` float64 for f64, ``(n * S, 4)`` uint32 words for fp128 or
    float32 limbs for quad-single, value ``i * S + k`` the k-th sample of pixel i (see the
    module docstring); ``S = len(offsets)``, ``offsets[0] == 0``."""
    if offsets[0] != 0:
        raise ValueError("sample 0 must be the pixel centre")
    s_count = len(offsets)
    centre = ENCODERS[fmt](axis(center, step, n, 0, n, sign, bits))
    out = np.repeat(centre, s_count, axis=0)
    if s_count == 1:
        return out
    with workprec(bits):
        cm, ce = _int_exp(mpmath.mpf(center))
    sm, se = _int_exp(step)
    se -= OFFSET_BITS + 1  # step / 2^17: the unit of m below
    e = min(ce, se)
    c_scaled = cm << (ce - e)
    s_scaled = sign * (sm << (se - e))
    encode = {"f64": _to_f64, "fp128": _to_fp128, "quad-single": _to_qs}[fmt]
    for i in range(n):
        base = (2 * i + 1 - n) << OFFSET_BITS
        for k in range(1, s_count):
            out[i * s_count + k] = encode(c_scaled + (base + 2 * offsets[k]) * s_scaled, e)
    return out
