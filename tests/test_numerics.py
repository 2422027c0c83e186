"""Host-side numbers: the pixel-mapping axes and the exact encoders."""

from __future__ import annotations

import random
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from reference import pixel_c

import farm.numerics as num
from farm.numerics import encode as enc


def test_axis_is_the_pixel_mapping():
    center = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
    width, size = "3.1e-17", (40, 24)
    with mpmath.workprec(400):
        step = num.parse(width, 400) / size[0]
    xs = num.axis(center[0], step, size[0], 0, size[0], +1, 400)
    ys = num.axis(center[1], step, size[1], 0, size[1], -1, 400)
    with mpmath.workprec(800):
        for i in range(size[0]):
            re, _ = pixel_c(center, width, size, i, 0)
            assert abs(xs[i] - mpmath.mpf(re.numerator) / re.denominator) < mpmath.mpf(2) ** -380
        for j in range(size[1]):
            _, im = pixel_c(center, width, size, 0, j)
            assert abs(ys[j] - mpmath.mpf(im.numerator) / im.denominator) < mpmath.mpf(2) ** -380
    assert ys[0] > ys[-1]  # row 0 is the top: largest imaginary part


def _samples(rng: random.Random, n: int = 300) -> list[Fraction]:
    edge = [Fraction(0), Fraction(1), Fraction(-1), Fraction(2**31 - 1), Fraction(-(2**31)),
            Fraction(1, 2**96), Fraction(-1, 2**96), Fraction(3, 2**97), Fraction(-7, 3)]
    rand = [Fraction(rng.randrange(-(2**127), 2**127), 2**96 * rng.choice([1, 3, 7, 1000]))
            for _ in range(n)]
    return edge + rand


def test_fp128_encoder_is_exact_round_to_nearest():
    rng = random.Random(1)
    for q in _samples(rng):
        with mpmath.workprec(600):
            x = mpmath.mpf(q.numerator) / q.denominator
        u = enc.fp128_int(x)
        exact = q * 2**96
        assert abs(u - exact) <= Fraction(1, 2)
        words = enc.words_from_int(u)
        assert all(0 <= w < 2**32 for w in words)
        assert enc.int_from_words(words) == u
        assert enc.decode_fp128(enc.encode_fp128([x]))[0] == mpmath.ldexp(u, -96)


def test_fp128_encoder_range():
    with pytest.raises(OverflowError):
        enc.fp128_int(mpmath.mpf(2**31))


def test_qs_encoder_limbs():
    rng = random.Random(2)
    for _ in range(300):
        with mpmath.workprec(400):
            x = mpmath.mpf(rng.uniform(-4, 4)) + mpmath.mpf(rng.random()) * mpmath.mpf(2) ** -60
        limbs = enc.qs_limbs(x)
        assert all(np.float32(v) == v for v in limbs)  # each exact in float32
        for a, b in zip(limbs, limbs[1:], strict=False):  # non-overlapping
            if a != 0:
                assert abs(b) <= abs(float(np.spacing(np.float32(a)))) / 2
        err = abs(enc.decode_qs(np.array([limbs], np.float32))[0] - x)
        assert err <= abs(x) * mpmath.mpf(2) ** -96


def test_f64_encoder_round_to_nearest():
    third = num.parse("0.3333333333333333333333333333333", 300)
    assert enc.encode_f64([third])[0] == 1 / 3


def test_exact_axes_round_like_mpmath_axes():
    """The integer axes the renderer uses give the very numbers of the mpmath pixel
    mapping rounded once, in every direct format, for random centres and spacings."""
    import random

    import mpmath
    import numpy as np

    from farm.numerics import axis
    from farm.numerics.axes import encode_exact, exact_axis
    from farm.numerics.encode import ENCODERS

    rng = random.Random(7)
    for _ in range(12):
        digits = rng.randint(3, 40)
        center = f"{rng.choice('-+')}{rng.random() * 2:.{digits}f}"
        step = mpmath.mpf(f"{rng.random() + 0.1:.6f}e-{rng.randint(1, 24)}") / rng.randint(3, 999)
        n, sign, bits = rng.randint(1, 64), rng.choice((1, -1)), rng.choice((200, 256, 333))
        want = axis(center, step, n, 0, n, sign, bits)
        for fmt in ("f64", "fp128", "quad-single"):
            got = encode_exact(fmt, *exact_axis(center, step, n, sign, bits))
            assert np.array_equal(got, ENCODERS[fmt](want)), (fmt, center, step, n)
