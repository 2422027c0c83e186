"""fp128 arithmetic on the device against exact Python integers.

A value is the signed integer u with value u / 2^96 (kernels/fp128.cl). Exact
operations must match to the bit (mod 2^128 where they wrap). fp_mul and fp_sqr round
the magnitude to nearest with an error of at most 1/2 + 3 * 2^-32 ulp, checked exactly
as | |u||v| - 2^96 * |result| | <= 2^95 + 3 * 2^64, and the sign is exact.
"""

from __future__ import annotations

import random

import numpy as np
import pyopencl as cl
import pytest

from farm.compute import programs
from farm.numerics.encode import int_from_words, words_from_int

MOD = 1 << 128
ONE = 1 << 96
NOPS = 10
ROUNDING_LIMIT = (1 << 95) + 3 * (1 << 64)


def _signed(v: int) -> int:
    v %= MOD
    return v - MOD if v >= 1 << 127 else v


def _operands(seed: int):
    """Edge cases and random pairs (u, v, k) whose products stay in range."""
    rng = random.Random(seed)
    word = (1 << 32) - 1
    edges = [0, 1, -1, ONE, -ONE, 2 * ONE, -2 * ONE, (1 << 127) - 1, -(1 << 127) + 1,
             word, word << 32, word << 64, (1 << 96) - 1, -(1 << 96) + 1, (1 << 64) - 1,
             4 * ONE - 1, 4 * ONE + 1, -4 * ONE + 3, (46340 * ONE), -(46340 * ONE) + 12345,
             int(3.999999 * ONE), ONE // 3, -(ONE // 7)]
    pairs = [(u, v, k) for u in edges for v in (edges[0], edges[3], edges[4], edges[15], edges[20])
             for k in (0, 1, -1, 31, 32, 63, 64, 95, 127, 2**31 - 1, -(2**31))]
    for _ in range(400):
        mag = rng.choice([1, 16, 2**8, 2**15, 2**31 - 1])
        u = rng.randrange(-mag * ONE, mag * ONE)
        v = rng.randrange(-ONE * 2**31 // max(mag, 1), ONE * 2**31 // max(mag, 1))
        pairs.append((u, v, rng.randrange(-(2**31), 2**31)))
    return pairs


def _run(cl_device, pairs):
    info, dev = cl_device
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    prg = programs.build(ctx, ("fp128.cl", "fp128_test.cl"), programs.device_options(dev, 1024))
    n = len(pairs)
    a = np.array([words_from_int(u) for u, _, _ in pairs], np.uint32)
    b = np.array([words_from_int(v) for _, v, _ in pairs], np.uint32)
    k = np.array([w for _, _, w in pairs], np.int32)
    out = np.zeros((n * NOPS, 4), np.uint32)
    flags = np.zeros(n, np.int32)
    mf = cl.mem_flags
    bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x) for x in (a, b, k)]
    b_out = cl.Buffer(ctx, mf.WRITE_ONLY, out.nbytes)
    b_flags = cl.Buffer(ctx, mf.WRITE_ONLY, flags.nbytes)
    cl.Kernel(prg, "fp128_ops")(queue, (n,), None, *bufs, b_out, b_flags)
    cl.enqueue_copy(queue, out, b_out)
    cl.enqueue_copy(queue, flags, b_flags)
    return [[int_from_words(out[i * NOPS + op]) for op in range(NOPS)] for i in range(n)], flags


@pytest.mark.parametrize("seed", [0, 1])
def test_fp128_operations(cl_device, seed):
    pairs = _operands(seed)
    results, flags = _run(cl_device, pairs)
    worst = 0
    for (u, v, k), r, flag in zip(pairs, results, flags, strict=True):
        shift = k & 127
        assert r[0] == _signed(u + v)
        assert r[1] == _signed(u - v)
        assert r[2] == _signed(-u)
        assert r[3] == abs(u)
        assert r[4] == _signed(u + 1)
        assert r[7] == _signed(u * k)
        assert r[8] == _signed(u << shift)
        assert r[9] == u >> shift
        assert bool(flag & 1) == (u > v) and bool(flag & 2) == (u < 0)
        assert bool(flag & 4) == (u % MOD > v % MOD)
        for got, x, y in ((r[5], u, v), (r[6], u, u)):
            exact = abs(x) * abs(y)
            if exact >= (1 << 127) * ONE:
                continue  # outside the stated range |a||b| < 2^31
            sign = -1 if (x < 0) != (y < 0) else 1
            assert got == 0 or (got < 0) == (sign < 0)
            error = abs(exact - ONE * abs(got))
            assert error <= ROUNDING_LIMIT, (x, y, got)
            worst = max(worst, error)
    print(f"largest rounding error seen: {worst / ONE:.6f} ulp (bound 0.5 + 3 * 2^-32)")


def test_squares_near_four_and_two_squared(cl_device):
    values = [2 * ONE, 4 * ONE, 4 * ONE - 1, 4 * ONE + 1, -(4 * ONE - 3), int(1.9999999 * ONE)]
    results, _ = _run(cl_device, [(u, u, 0) for u in values])
    assert results[0][6] == 4 * ONE  # 2^2 is exact
    for u, r in zip(values, results, strict=True):
        assert abs(u * u - ONE * r[6]) <= ROUNDING_LIMIT
