"""Pixel-centre coordinates along an image axis, exact, and rounded once into a format.

The pixel mapping puts column ``k`` of ``n`` at ``center + sign * (2k + 1 - n) * step/2``.
With ``center`` and ``step/2`` as exact binary numbers ``C 2^E`` and ``H 2^E`` (mpmath
numbers are), every coordinate is the exact integer ``C + sign (2k + 1 - n) H`` times
``2^E``; the format then rounds it once. Integer arithmetic does this about 25 times
faster than mpmath per value (a 1920-wide f64 axis: 0.4 ms against 10 ms), which
matters because every frame of a direct format needs its axes.

A turned frame (an angle, farm/plan/curve.py) is not separable into a column axis and
a row axis, but each coordinate is a sum of a column term and a row term:
``re(i, j) = A_re[i] + B_re[j]``, ``im(i, j) = A_im[i] + B_im[j]``
(:func:`exact_rotated_axes`). What is rounded where:

1. cos and sin of the angle: once each, to the frame's coordinate bits
   (:func:`farm.numerics.rotation`; exact at multiples of 90 degrees);
2. each of the four terms, computed exactly from the centre's decimal strings, the
   spacing and that cos and sin: once, into the format (:func:`encode_exact`);
3. the kernel's sum of two terms: exact in fp128 (fixed point), one more rounding in
   f64 and quad-single (so a coordinate may be off by 1.5 units of its last place,
   against half a unit unturned). At multiples of 90 degrees one term is exactly 0,
   and the sum is exactly an unturned frame's coordinate.

Unturned frames keep the separable axes and their single rounding.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from farm.numerics.encode import ENCODERS, FP128_FRAC_BITS, words_from_int


def _exact(x: mpmath.mpf) -> tuple[int, int]:
    man, exp = x.man_exp
    return (-int(man) if x < 0 else int(man)), int(exp)


def exact_axis(center: str, step: mpmath.mpf, n: int, sign: int, bits: int) -> tuple[list[int], int]:
    """(values, E): the coordinate of pixel k is ``values[k] * 2**E`` exactly, with the
    centre parsed to ``bits`` bits and ``step`` as given."""
    with mpmath.workprec(bits):
        c = mpmath.mpf(center)
    h = mpmath.ldexp(step, -1)  # step / 2, exact
    (mc, ec), (mh, eh) = _exact(c), _exact(h)
    e = min(ec, eh)
    cc, hh = mc << (ec - e), sign * (mh << (eh - e))
    return [cc + (2 * k + 1 - n) * hh for k in range(n)], e


def _round_shift(v: int, shift: int) -> int:
    """Nearest integer to v * 2**shift, ties to even."""
    if shift >= 0:
        return v << shift
    q, r = divmod(v, 1 << -shift)
    half = 1 << (-shift - 1)
    return q + (r > half or (r == half and q & 1))


def encode_exact(fmt: str, values: list[int], e: int) -> np.ndarray:
    """``values[k] * 2**e`` rounded once into ``fmt`` (f64, fp128 or quad-single): the
    same numbers :data:`farm.numerics.encode.ENCODERS` give for exact inputs."""
    if fmt == "f64":
        if max(abs(v) for v in values).bit_length() < 1000:  # float(int) rounds to nearest
            return np.array([math.ldexp(float(v), e) for v in values], dtype=np.float64)
    elif fmt == "fp128":
        words = [words_from_int(_round_shift(v, e + FP128_FRAC_BITS)) for v in values]
        return np.array(words, dtype=np.uint32).reshape(-1, 4)
    make = mpmath.mp.make_mpf
    return ENCODERS[fmt]([make(mpmath.libmp.from_man_exp(v, e)) for v in values])


OFFSET_BITS = 16  # farm/plan/samples.py: sample offsets in units of 2^-16 px


def exact_sample_axis(center: str, step: mpmath.mpf, n: int, offsets: list[int], sign: int,
                      bits: int) -> tuple[list[int], int]:
    """(values, E) of every (pixel, sample) along the axis (anti-aliasing): value
    ``i * S + k`` (``S = len(offsets)``) is pixel i's sample k, ``center + sign * ((2i + 1
    - n)/2 + offsets[k] / 2^16) * step``, exactly ``values[i * S + k] * 2**E``.

    With ``H 2^e`` = step / 2^17 (exact) the offset is the integer ``(2i + 1 - n) 2^16 +
    2 offsets[k]`` times H, so every value is an exact integer, rounded once by
    :func:`encode_exact`; a sample at offset 0 is the same number as
    :func:`exact_axis`'s pixel centre, so it encodes to the same bits."""
    with mpmath.workprec(bits):
        c = mpmath.mpf(center)
    q = mpmath.ldexp(step, -1 - OFFSET_BITS)  # step / 2^17, exact
    (mc, ec), (mq, eq) = _exact(c), _exact(q)
    e = min(ec, eq)
    cc, qq = mc << (ec - e), sign * (mq << (eq - e))
    return [cc + (((2 * i + 1 - n) << OFFSET_BITS) + 2 * o) * qq
            for i in range(n) for o in offsets], e


def sample_axis(center: str, step: mpmath.mpf, n: int, offsets: list[int], sign: int,
                bits: int, fmt: str) -> np.ndarray:
    """:func:`exact_sample_axis` encoded in ``fmt``: ``(n * S)`` float64 for f64, ``(n *
    S, 4)`` uint32 words for fp128 or float32 limbs for quad-single."""
    return encode_exact(fmt, *exact_sample_axis(center, step, n, offsets, sign, bits))


def exact_rotated_axes(center: tuple[str, str], step: mpmath.mpf, size: tuple[int, int],
                       offsets: list[tuple[int, int]], cos_sin: tuple[mpmath.mpf, mpmath.mpf],
                       bits: int) -> tuple[list[int], list[int], int]:
    """The four axes of a turned frame as exact integers times ``2**E``: ``(cols, rows,
    E)``, ``cols[2 (i S + k)]``, ``cols[2 (i S + k) + 1]`` = A_re, A_im of column i's
    sample k and ``rows[2 (j S + k)]``, ``rows[2 (j S + k) + 1]`` = B_re, B_im of row
    j's sample k (``S = len(offsets)``, offsets in 2^-16 px, x right, y down), so that
    the sample's point is ``re = A_re + B_re``, ``im = A_im + B_im`` exactly.

    With ``u = i + 1/2 - W/2 + ox``, ``v = -(j + 1/2 - H/2 + oy)`` (pixels, v up), ``s``
    the spacing and ``(c, n)`` = (cos, sin) (``cos_sin``, exact binary numbers):
    ``A_re = s u c``, ``B_re = -s v n``, ``A_im = s u n``, ``B_im = s v c``, and the
    centre (parsed to ``bits`` bits) joins the term of the larger weight: ``cr`` to
    A_re and ``ci`` to B_im when ``|c| >= |n|``, else ``cr`` to B_re and ``ci`` to
    A_im. So at multiples of 90 degrees one term of each sum is exactly 0 and the other
    is an unturned frame's coordinate (:func:`exact_sample_axis`'s value)."""
    w, h = size
    with mpmath.workprec(bits):
        cr, ci = mpmath.mpf(center[0]), mpmath.mpf(center[1])
    q = mpmath.ldexp(step, -1 - OFFSET_BITS)  # step / 2^17, exact
    c, n = cos_sin
    parts = [_exact(x) for x in (cr, ci)]
    (mq, eq), (mc, ec), (mn, en) = _exact(q), _exact(c), _exact(n)
    e = min(parts[0][1], parts[1][1], eq + ec, eq + en)
    cr_i, ci_i = (m << (x - e) for m, x in parts)
    qc, qn = (mq * mc) << (eq + ec - e), (mq * mn) << (eq + en - e)
    major = abs(c) >= abs(n)
    cols, rows = [], []
    for i in range(w):
        for ox, _ in offsets:
            u = ((2 * i + 1 - w) << OFFSET_BITS) + 2 * ox  # u in units of step / 2^17
            cols += [u * qc + (cr_i if major else 0), u * qn + (0 if major else ci_i)]
    for j in range(h):
        for _, oy in offsets:
            v = -(((2 * j + 1 - h) << OFFSET_BITS) + 2 * oy)
            rows += [-v * qn + (0 if major else cr_i), v * qc + (ci_i if major else 0)]
    return cols, rows, e


def rotated_axes(center: tuple[str, str], step: mpmath.mpf, size: tuple[int, int],
                 offsets: list[tuple[int, int]], cos_sin: tuple[mpmath.mpf, mpmath.mpf],
                 bits: int, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`exact_rotated_axes` encoded in ``fmt``, each term rounded once: ``(2 W S)``
    and ``(2 H S)`` float64 for f64, ``(2 W S, 4)`` and ``(2 H S, 4)`` uint32 words
    (fp128) or float32 limbs (quad-single); the kernel adds the two terms of a sample
    (kernels/mandel.cl, -DROTATED)."""
    cols, rows, e = exact_rotated_axes(center, step, size, offsets, cos_sin, bits)
    return encode_exact(fmt, cols, e), encode_exact(fmt, rows, e)
