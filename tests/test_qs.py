"""Quad-single arithmetic (kernels/qs.cl) against mpmath, and its escape_time.

A value is four float32 limbs, x.s0 the most significant (farm/numerics/encode.py).
Operands: random values with 300 significant bits in +-[1e-3, 4], rounded into limbs by
the host encoder, and edge cases: zeros, +-1, 2 + 2, exact cancellations a + (-a) and
a - a, a - b with a ~ b to 10 .. 94 bits, offsets of a pixel (1e-27), values near 4,
rounding ties between limbs, and operands whose limbs all sit at half an ulp.

Error bounds, u = 2^-96, e the exact result of the operands' exact values, r the
result's value; FLOOR = 2^-120 absolute is for limbs below float32's normal range,
which GPUs flush to zero (each flush loses < 2^-126): only reached when a difference
cancels to below about 2^-30.
    add, sub (accurate)   |r - e| <= 1 u |e| + FLOOR
    add, sub (sloppy)     |r - e| <= 1 u (|a| + |b|) + FLOOR    (no bound relative to e)
    mul, sqr              |r - e| <= 1 u |e| + FLOOR
    mul2, neg             exact
Why these: every step is an exact sum or product (two_sum, two_prod) except (a) the
rounding of the result's last limb, at most half its ulp, and the last limb is at most
2^-72 of the first, so <= 2^-96 |r|; (b) dropped and plainly summed terms 2^-24 below
that, which the sloppy addition takes relative to the operands rather than to e. Worst
observed on these operands (the same on PoCL's CPU and an NVIDIA H100), and in
brackets on 1.2 million pairs from the same generators and from adversarial ones
(limbs at half an ulp, cancelling partial products): accurate add/sub 0.11 u (0.79 u),
sloppy 0.10 u (0.50 u), mul 0.09 u (0.125 u), sqr 0.12 u (0.125 u): the bounds are
the a-priori ones, 1.3 to 8 times the worst seen.

Normalisation: every result has |r.s(k+1)| <= ulp(r.s(k)) and no non-zero limb below
a zero limb; the encoder's stricter |r.s(k+1)| <= ulp(r.s(k)) / 2 holds except after a
rounding tie inside the renormalisation (about 1 in 10^5 random products; frequent, up
to 0.75 ulp, when the operands' limbs sit at exactly half an ulp).

Fused loop steps (qs_mul2_add = 2ab + c, qs_sqr_sub_add = a^2 - b^2 + c, what
escape_time runs by default): on (a, b, c) triples from the same generators plus
cancelling c (-(2ab), -(a^2 - b^2) rounded to 1 .. 4 limbs) and operands with limbs
closer than normalised, and again on their own results fed back as the loop feeds them:
    |r - e| <= u |e| + 2^-10 u M + FLOOR  (so <= u M + FLOOR)
with M = 2 N(a) N(b) + N(c), resp. N(a)^2 + N(b)^2 + N(c), N(x) = max_k 2^(24k-1)|x(k)|
(about |x| for normalised operands). Why: each step is exact but for the last limb's
rounding (<= u |r|) and the plainly summed order-4 terms and dropped orders 5+, which
with the weak normalisation cost about 2^-11 u M a priori. Worst seen here 0.125 u M
(mul2_add) and 0.10 u M (sqr_sub_add), at most 5.4 2^-24 u M above u |e|; on 10^6
random and adversarial triples (results fed back three times) 0.125 and 0.215 u M,
21 2^-24 u M above u |e|; on 2000 orbits of 3000 steps never above u |e|. Results are
weakly normalised, scaled by the step: N(r) <= S = N(a)^2 + N(b)^2 + N(c) (seen: 1.0 S)
and the leading limb within ulp/2 + 2^-40 S of the value (seen 2^-44.7 S), which the
escape test's band relies on.

escape_time: exact contract cases (z(n) at the boundary |z|^2 = 4, the tip c = -2),
the real driver at a shallow view, and deep views against the 200-digit reference for
the fused loop and the reference loop (-DQS_REFERENCE_LOOP) with both additions
(-DQS_ACCURATE_ADD selects the accurate one); and the fused loop against the reference
loop on deep 48 x 32 views (>= 99% equal; seen 99.74% and 99.67%). Deep views: at the
classic point -0.7436438870371587 + 0.1318259042053120i, 24 x 16 pixels, width 1e-18
(counts 8045 .. 9377) all three loops match 99.7% of pixels; at width 1e-24 there
(counts 15288 .. 18657) no 96-bit format can: iterating exactly from the coordinates
rounded to quad-single matches only 91.9% (rounded to fp128's 2^-96 grid, 74.7%), the
reference loop's sloppy and accurate additions give 85.4% and 86.2%, the fused loop
85.7%. So the deep case is at the Seahorse
Valley point of tests/test_deep.py, whose counts stay below 2000, at width 3e-24: inside
quad-single's measured limit (farm/plan/precision.py). At 1e-24, the limit itself, both
additions gave 99.5% on PoCL but one chaotic pixel fewer on an H200 (the fused loop:
99.7% on PoCL).
"""

from __future__ import annotations

import random
from fractions import Fraction

import mpmath
import numpy as np
import pyopencl as cl
import pytest
from conftest import compare_counts, make_spec, render_frame
from reference import escape_count

from farm.compute import programs
from farm.compute.render import TileRenderer
from farm.numerics.encode import decode_qs, encode_qs
from farm.plan import make_plan

NOPS = 9  # kernels/qs_test.cl: QS_NOPS
OPS = {"add_accurate": 0, "add_sloppy": 1, "sub_accurate": 2, "sub_sloppy": 3,
       "mul": 4, "sqr": 5, "mul2": 6, "neg": 7, "add_default": 8}
ACCURATE_ADD = ("-DQS_ACCURATE_ADD",)
REFERENCE_LOOP = ("-DQS_REFERENCE_LOOP",)
U = mpmath.mpf(2) ** -96
FLOOR = mpmath.mpf(2) ** -120
# op: (K, the scale s of the bound |r - e| <= K u s + FLOOR)
BOUNDS = {"add_accurate": (1, "|e|"), "sub_accurate": (1, "|e|"),
          "add_sloppy": (1, "|a|+|b|"), "sub_sloppy": (1, "|a|+|b|"),
          "mul": (1, "|e|"), "sqr": (1, "|e|")}
EXACT_PREC = 1200  # bits: products of two 400-bit values are exact
# fused loop steps (kernels/qs_test.cl, qs_fused): out[i, op]
FUSED = {"mul2_add": 0, "sqr_sub_add": 1}
# |r - e| <= FUSED_K u M + FLOOR and |r - e| <= u |e| + FUSED_M u M + FLOOR, M the scale
FUSED_K, FUSED_M = 1, mpmath.mpf(2) ** -10


# ----------------------------------------------------------------------------- operands

def _random_values(rng: random.Random, n: int) -> list[mpmath.mpf]:
    """n values 10^t, t uniform in [-3, log10 4], with 300 significant bits, random sign."""
    out = []
    with mpmath.workprec(300):
        span = mpmath.log10(4) + 3
        for _ in range(n):
            t = mpmath.mpf(rng.getrandbits(300)) / mpmath.mpf(2) ** 300
            v = mpmath.power(10, -3 + t * span)
            out.append(v if rng.random() < 0.5 else -v)
    return out


def _edge_pairs(x: list[mpmath.mpf]) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    mpf = mpmath.mpf
    with mpmath.workprec(400):
        two = mpf(2)
        pairs = [(mpf(0), mpf(0)), (mpf(0), x[0]), (x[1], mpf(0)), (mpf(1), mpf(-1)),
                 (mpf(-1), mpf(1)), (mpf(1), mpf(1)), (mpf(-1), mpf(-1)), (mpf(2), mpf(2)),
                 (mpf(-2), mpf(2)), (mpf(4), mpf(-4)), (mpf(3), mpf(0.5))]
        pairs += [(v, -v) for v in x[:12]]  # a + (-a) == 0
        pairs += [(v, v) for v in x[:6]]  # a - a == 0
        for i, k in enumerate((10, 24, 30, 48, 60, 72, 80, 90, 94)):  # a - b, a ~ b
            v = x[i]
            pairs += [(v, v * (1 + two**-k)), (v, v * (1 - two**-k))]
        pairs += [(v, v + mpf("1e-27")) for v in x[:4]]  # a pixel apart
        near4 = [4 - two**-k for k in (1, 20, 24, 25, 50, 70, 90)]
        near4 += [-(4 - two**-60), mpf("3.99999999999999999999999999999")]
        pairs += [(v, v) for v in near4] + [(v, x[0]) for v in near4[:3]]
        ties = [1 + two**-24, 1 + two**-24 + two**-90, 1 + two**-24 - two**-90, 1 - two**-25,
                1 - two**-25 - two**-80, 1 + two**-48 + two**-72, 3 * (1 + two**-25),
                (1 + two**-24) * (1 + two**-48)]
        pairs += [(t, w) for t in ties for w in (ties[0], -ties[1], x[2])]
    return pairs


def _half_ulp_rows(rng: random.Random, n: int) -> np.ndarray:
    """Limbs built directly, each next limb +-(1 - j 2^-23) half an ulp of the one above
    (the largest the format allows), first limb just above a power of two."""
    rows = np.zeros((n, 4), np.float32)
    for i in range(n):
        sign = rng.choice((-1.0, 1.0))
        rows[i, 0] = sign * 2.0 ** rng.randint(-9, 1) * (1 + rng.randint(0, 63) * 2.0**-23)
        for k in (1, 2, 3):
            half = float(np.spacing(np.abs(rows[i, k - 1]))) / 2
            rows[i, k] = rng.choice((-1.0, 1.0)) * half * (1 - rng.randint(0, 3) * 2.0**-23)
    return rows


def _operands(seed: int = 20251):
    """(a, b): (n, 4) float32 limb arrays of the operand pairs."""
    rng = random.Random(seed)
    x = _random_values(rng, 320)
    pairs = list(zip(x[:300:2], x[1:300:2], strict=True)) + list(zip(x[:300:2], x[-150:], strict=False))
    pairs += _edge_pairs(x[300:])
    a = encode_qs(p for p, _ in pairs)
    b = encode_qs(q for _, q in pairs)
    h = _half_ulp_rows(rng, 40)
    a = np.concatenate([a, h, h[:20], h[20:]])
    b = np.concatenate([b, h[::-1], h[:20], -h[20:]])
    return a, b


# ----------------------------------------------------------------------------- device

_cache: dict = {}


def _run_ops(cl_device, options: tuple[str, ...] = ()):
    """(a, b, out, cmp, dbl) of qs_ops on the operands; cached per device and options."""
    info, dev = cl_device
    key = (dev.int_ptr, options)
    if key not in _cache:
        a, b = _operands()
        ctx = cl.Context([dev])
        queue = cl.CommandQueue(ctx)
        prg = programs.build(ctx, ("qs.cl", "qs_test.cl"),
                             programs.device_options(dev, 1024) + options)
        n = len(a)
        mf = cl.mem_flags
        out = np.empty((n, NOPS, 4), np.float32)
        cmp = np.empty((n, 2), np.int32)
        dbl = np.empty(n, np.float64)
        b_a = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
        b_b = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
        b_out, b_cmp, b_dbl = (cl.Buffer(ctx, mf.WRITE_ONLY, arr.nbytes) for arr in (out, cmp, dbl))
        prg.qs_ops(queue, (n,), None, b_a, b_b, b_out, b_cmp, b_dbl)
        for host, buf in ((out, b_out), (cmp, b_cmp), (dbl, b_dbl)):
            cl.enqueue_copy(queue, host, buf)
        queue.finish()
        _cache[key] = (a, b, out, cmp, dbl)
    return _cache[key]


def _values(rows: np.ndarray) -> list[mpmath.mpf]:
    return decode_qs(rows.reshape(-1, 4))


# ----------------------------------------------------------------------------- arithmetic

@pytest.mark.parametrize("op", sorted(BOUNDS))
def test_error_bounds(cl_device, op):
    a, b, out, _, _ = _run_ops(cl_device)
    k, scale = BOUNDS[op]
    va, vb, vr = _values(a), _values(b), _values(out[:, OPS[op]])
    worst, where = 0.0, None
    with mpmath.workprec(EXACT_PREC):
        for i, (x, y, r) in enumerate(zip(va, vb, vr, strict=True)):
            exact = {"add_accurate": x + y, "add_sloppy": x + y, "sub_accurate": x - y,
                     "sub_sloppy": x - y, "mul": x * y, "sqr": x * x}[op]
            s = abs(exact) if scale == "|e|" else abs(x) + abs(y)
            err = abs(r - exact)
            assert err <= k * U * s + FLOOR, (
                f"{op} of {a[i].tolist()}, {b[i].tolist()}: {out[i, OPS[op]].tolist()} is "
                f"{mpmath.nstr(err / (U * s), 5) if s else err} u off (bound {k} u {scale})")
            if s and err / (U * s) > worst:
                worst, where = float(err / (U * s)), i
    print(f"{op}: worst {worst:.3f} u (x {scale}) at pair {where}, bound {k}")


def test_exact_results(cl_device):
    """mul2 and neg are exact; a + (-a), a - a give exactly zero in both additions;
    sums and products that fit one float come back as that float alone."""
    a, b, out, _, _ = _run_ops(cl_device)
    assert np.array_equal(out[:, OPS["mul2"]], 2 * a)
    assert np.array_equal(out[:, OPS["neg"]], -a)
    assert (np.signbit(out[:, OPS["neg"]]) != np.signbit(a)).all()
    cancel = (a == -b).all(axis=1)
    same = (a == b).all(axis=1)
    assert cancel.sum() >= 12 and same.sum() >= 6
    for op in ("add_accurate", "add_sloppy"):
        assert (out[cancel, OPS[op]] == 0).all()
    for op in ("sub_accurate", "sub_sloppy"):
        assert (out[same, OPS[op]] == 0).all()
    for x, y, add, mul in [(2, 2, 4, 4), (-2, 2, 0, -4), (4, -4, 0, -16), (3, 0.5, 3.5, 1.5),
                           (1, -1, 0, -1)]:
        i = np.flatnonzero((a[:, 0] == x) & (b[:, 0] == y) & (a[:, 1:] == 0).all(axis=1)
                           & (b[:, 1:] == 0).all(axis=1))[0]
        for op in ("add_accurate", "add_sloppy"):
            assert out[i, OPS[op]].tolist() == [add, 0, 0, 0]
        assert out[i, OPS["mul"]].tolist() == [mul, 0, 0, 0]
        assert out[i, OPS["sqr"]].tolist() == [x * x, 0, 0, 0]


def _ulp(v: float) -> float:
    return float(np.spacing(np.float32(abs(v))))


def _overlap(row) -> float:
    """max |x.s(k+1)| / ulp(x.s(k)) over the limbs; inf if a non-zero limb follows a zero."""
    worst = 0.0
    for k in range(3):
        if row[k] == 0:
            return 0.0 if not row[k + 1:].any() else float("inf")
        worst = max(worst, abs(float(row[k + 1])) / _ulp(row[k]))
    return worst


def test_results_are_normalised(cl_device):
    a, b, out, _, _ = _run_ops(cl_device)
    assert max(_overlap(r) for r in a) <= 0.5 and max(_overlap(r) for r in b) <= 0.5
    n_random = 300  # the encoder's random pairs come first
    for op in ("add_accurate", "add_sloppy", "sub_accurate", "sub_sloppy", "mul", "sqr"):
        ratios = np.array([_overlap(r) for r in out[:, OPS[op]]])
        assert ratios.max() <= 1.0, f"{op}: limbs overlap ({ratios.max()})"
        strict_share = np.mean(ratios[:n_random] <= 0.5)  # the rare ties: see the docstring
        assert strict_share >= 0.99, f"{op}: {1 - strict_share:.3f} of random results non-strict"
        print(f"{op}: {np.count_nonzero(ratios > 0.5)} of {len(ratios)} results with a limb "
              f"above half an ulp (largest {ratios.max():.3f} ulp)")


def test_comparison(cl_device):
    a, b, _, cmp, _ = _run_ops(cl_device)
    va, vb = _values(a), _values(b)
    want = np.array([[x > y, y > x] for x, y in zip(va, vb, strict=True)])
    assert np.array_equal(cmp.astype(bool), want)
    assert (~want).all(axis=1).sum() >= 18  # equal pairs: neither is greater


def test_to_double(cl_device):
    """The double nearest the value (the inner sums round far below its last bit)."""
    a, _, _, _, dbl = _run_ops(cl_device)
    with mpmath.workprec(EXACT_PREC):
        for x, d in zip(_values(a), dbl, strict=True):
            half_ulp = np.spacing(abs(d)) / 2 if d else 0.0
            assert abs(mpmath.mpf(float(d)) - x) <= half_ulp + abs(x) * mpmath.mpf(2) ** -76


def test_default_addition_is_sloppy(cl_device):
    """qs_add is the sloppy addition unless built with -DQS_ACCURATE_ADD."""
    _, _, out, _, _ = _run_ops(cl_device)
    assert np.array_equal(out[:, OPS["add_default"]], out[:, OPS["add_sloppy"]])
    _, _, out_acc, _, _ = _run_ops(cl_device, ACCURATE_ADD)
    assert np.array_equal(out_acc[:, OPS["add_default"]], out_acc[:, OPS["add_accurate"]])


# ----------------------------------------------------------------------------- fused steps

def _fused_operands(seed: int = 4711):
    """(a, b, c): _operands()'s pairs with a third operand c per pair, in turn: a random
    value, zero, -(2ab) and -(a^2 - b^2) rounded to their first 1 .. 4 limbs (cancelling
    the result's orders 0 .. k-1: r is of order k), and a half-ulp row; then half-ulp
    rows a, b with b's leading limb replaced by a's (a^2 - b^2 cancels order 0, and b's
    other limbs sit up to 2^6 closer than normalised ones: a weak operand)."""
    a, b = _operands()
    rng = random.Random(seed)
    h = _half_ulp_rows(rng, 80)
    tails = h[40:].copy()
    tails[:, 0] = h[:40, 0]
    a, b = np.concatenate([a, h[:40]]), np.concatenate([b, tails])
    va, vb = _values(a), _values(b)
    rand = _random_values(rng, len(a))
    half = _half_ulp_rows(rng, len(a))
    c = np.zeros_like(a)
    with mpmath.workprec(EXACT_PREC):
        for i, (x, y) in enumerate(zip(va, vb, strict=True)):
            kind = i % 10
            if kind < 3:
                c[i] = encode_qs([rand[i]])[0]
            elif kind == 3:
                c[i] = 0
            elif kind < 9:
                limbs = encode_qs([-(2 * x * y) if kind % 2 else -(x * x - y * y)])[0]
                limbs[1 + i % 4:] = 0
                c[i] = limbs
            else:
                c[i] = half[i]
    return a, b, c


def _run_fused(cl_device, a, b, c) -> np.ndarray:
    """(n, 2, 4) results of qs_fused: [:, 0] 2ab + c, [:, 1] a^2 - b^2 + c."""
    info, dev = cl_device
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    prg = programs.build(ctx, ("qs.cl", "qs_test.cl"), programs.device_options(dev, 1024))
    mf = cl.mem_flags
    bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(v))
            for v in (a, b, c)]
    out = np.empty((len(a), 2, 4), np.float32)
    b_out = cl.Buffer(ctx, mf.WRITE_ONLY, out.nbytes)
    cl.Kernel(prg, "qs_fused")(queue, (len(a),), None, *bufs, b_out)
    cl.enqueue_copy(queue, out, b_out)
    queue.finish()
    return out


def _fused_cases(cl_device):
    """[(pass, a, b, c, out)]: the operands, and as a second pass the results fed back as
    the loop feeds them (a = a^2 - b^2 + c, b = 2ab + c: weakly normalised operands)."""
    key = ("fused", cl_device[1].int_ptr)
    if key not in _cache:
        a, b, c = _fused_operands()
        out = _run_fused(cl_device, a, b, c)
        a2, b2 = out[:, 1].copy(), out[:, 0].copy()
        _cache[key] = [("normalised", a, b, c, out),
                       ("weak", a2, b2, c, _run_fused(cl_device, a2, b2, c))]
    return _cache[key]


def _limb_scales(rows: np.ndarray) -> list[mpmath.mpf]:
    """N(x) = max(|x0|, 2^23 |x1|, 2^47 |x2|, 2^71 |x3|), the least N with |x(k)| <= 2^(1-24k) N:
    about |x| for normalised operands, at most the step's scale S for the loop's state."""
    out = []
    with mpmath.workprec(EXACT_PREC):
        for row in np.abs(rows.astype(np.float64)):
            out.append(max(mpmath.ldexp(mpmath.mpf(float(v)), 24 * k - 1 if k else 0)
                           for k, v in enumerate(row)))
    return out


@pytest.mark.parametrize("op", sorted(FUSED))
def test_fused_error_bounds(cl_device, op):
    """|r - e| <= u |e| + 2^-10 u M + FLOOR, hence <= u M + FLOOR, for M = 2 N(a) N(b) + N(c)
    (mul2_add) or N(a)^2 + N(b)^2 + N(c) (sqr_sub_add), N the limb scale (_limb_scales);
    on normalised operands and on the operations' own, weakly normalised, results."""
    for name, a, b, c, out in _fused_cases(cl_device):
        va, vb, vc, vr = _values(a), _values(b), _values(c), _values(out[:, FUSED[op]])
        na, nb, nc = _limb_scales(a), _limb_scales(b), _limb_scales(c)
        worst_m = worst_e = worst_mix = 0.0
        with mpmath.workprec(EXACT_PREC):
            for i in range(len(a)):
                x, y, z, r = va[i], vb[i], vc[i], vr[i]
                if op == "mul2_add":
                    exact, scale = 2 * x * y + z, 2 * na[i] * nb[i] + nc[i]
                else:
                    exact, scale = x * x - y * y + z, na[i] ** 2 + nb[i] ** 2 + nc[i]
                err = abs(r - exact)
                where = (f"{op} ({name}) of {a[i].tolist()}, {b[i].tolist()}, {c[i].tolist()}: "
                         f"{out[i, FUSED[op]].tolist()}")
                assert err <= FUSED_K * U * scale + FLOOR, f"{where}: {err / (U * scale)} u M off"
                assert err <= U * abs(exact) + FUSED_M * U * scale + FLOOR, (
                    f"{where}: {err / U} u off, |e| = {exact}, M = {scale}")
                if scale:
                    worst_m = max(worst_m, float(max(err - FLOOR, 0) / (U * scale)))
                    worst_mix = max(worst_mix, float((err - FLOOR - U * abs(exact)) / (U * scale)))
                if exact and 4 * abs(exact) >= scale:
                    worst_e = max(worst_e, float(max(err - FLOOR, 0) / (U * abs(exact))))
        print(f"{op} ({name} operands): worst {worst_m:.3f} u M, {worst_e:.3f} u |e| (|e| >= M/4), "
              f"excess over u |e| {worst_mix * 2**24:.2f} 2^-24 u M")


def test_fused_results_weakly_normalised(cl_device):
    """What the loop relies on, with S = N(a)^2 + N(b)^2 + N(c) the scale of a loop step
    (N the limb scale): N(r) <= S, i.e. limb k of a result is at most 2^(1 - 24k) S, so the
    state's scale does not grow from step to step beyond the values' own; and the
    leading limb is within ulp(r0)/2 + 2^-40 S of the whole (the escape test's band).
    Not relative to the result's own value: a zero can come out as (0, d, -d, 0),
    d ~ 2^-73 S (an order-2 rounding and its compensating error), and 2ab + c from that
    as (x, -x, 0, 0), x ~ 2^-70 S."""
    for name, a, b, c, out in _fused_cases(cl_device):
        na, nb, nc = _limb_scales(a), _limb_scales(b), _limb_scales(c)
        for op, k in FUSED.items():
            worst_lead = 0.0
            worst_limb = [0.0] * 4
            rows = out[:, k]
            with mpmath.workprec(EXACT_PREC):
                for i, r in enumerate(_values(rows)):
                    scale = na[i] ** 2 + nb[i] ** 2 + nc[i]
                    if not scale:
                        assert not rows[i].any()
                        continue
                    for j in range(4):
                        limb = abs(mpmath.mpf(float(rows[i, j])))
                        assert limb <= 2 * scale * mpmath.mpf(2) ** (-24 * j) + FLOOR, (
                            f"{op} ({name}): limb {j} of {rows[i].tolist()}, S = {scale}")
                        worst_limb[j] = max(worst_limb[j], float(limb / scale * 2 ** (24 * j)))
                    lead = abs(r - mpmath.mpf(float(rows[i, 0]))) - _ulp(rows[i, 0]) / 2
                    assert lead <= scale * mpmath.mpf(2) ** -40 + FLOOR, f"{op} ({name}): {rows[i].tolist()}"
                    worst_lead = max(worst_lead, float(lead / scale))
            print(f"{op} ({name}): limbs up to {[round(v, 3) for v in worst_limb]} 2^-24k S; "
                  f"leading limb off by up to ulp/2 + {worst_lead:.2e} S")


def test_fused_exact_cases(cl_device):
    """Results that fit one float come back as that float alone; with a zero product
    (the loop's first step: z = 0) the result is c's value."""
    rows = [((1, 1, 1), 3, 1), ((2, -2, 8), 0, 8), ((3, 0.5, 0), 3, 8.75),
            ((0.5, 1.5, -1.5), 0, -3.5), ((-2, 0, -2), -2, 2)]  # (a, b, c), 2ab + c, a^2 - b^2 + c
    cs = encode_qs(_random_values(random.Random(5), 8))
    lone = np.zeros((len(rows), 3, 4), np.float32)
    lone[:, :, 0] = [r[0] for r in rows]
    zero, one = np.zeros((8, 4), np.float32), np.tile(np.float32([1, 0, 0, 0]), (8, 1))
    a = np.concatenate([lone[:, 0], zero, zero])
    b = np.concatenate([lone[:, 1], zero, one])
    c = np.concatenate([lone[:, 2], cs, cs])
    out = _run_fused(cl_device, a, b, c)
    n = len(rows)
    for i, (_, mul2_add, sqr_sub_add) in enumerate(rows):
        assert out[i, 0].tolist() == [mul2_add, 0, 0, 0], out[i, 0].tolist()
        assert out[i, 1].tolist() == [sqr_sub_add, 0, 0, 0], out[i, 1].tolist()
    vc = _values(cs)
    assert _values(out[n:n + 8, 0]) == vc and _values(out[n:n + 8, 1]) == vc  # 0 a b + c, 0 - 0 + c
    assert _values(out[n + 8:, 0]) == vc  # 2 * 0 * 1 + c


# ----------------------------------------------------------------------------- escape_time

def _fraction_mpf(q: Fraction) -> mpmath.mpf:
    with mpmath.workprec(600):
        return mpmath.mpf(q.numerator) / q.denominator


# c (as exact rationals), and max_iter: boundary and tip cases of the contract
ESCAPE_CASES = [
    ((Fraction(2), Fraction(0)), 50),  # z1 = 2: |z1|^2 == 4 is not > 4; z2 = 6
    ((Fraction(2) + Fraction(1, 2**90), Fraction(0)), 50),  # |z1|^2 = 4 + 2^-88: escapes at 1
    ((Fraction(2) - Fraction(1, 2**90), Fraction(0)), 50),
    ((Fraction(0), Fraction(2) + Fraction(1, 2**80)), 50),
    ((Fraction(0), Fraction(2)), 50),
    ((Fraction(1), Fraction(0)), 50),  # 1, 2, 5
    ((Fraction(-2), Fraction(0)), 50),  # -2, 2, 2, ...: interior
    ((Fraction(-2) - Fraction(1, 2**90), Fraction(0)), 200),  # the error grows 4x a step
    ((Fraction(-2) + Fraction(1, 2**90), Fraction(0)), 200),  # stays in [-2, 2]: interior
    ((Fraction(0), Fraction(0)), 50),
    ((Fraction(1, 4) + Fraction(1, 2**40), Fraction(0)), 5000),  # slow escape past the cusp
    ((Fraction(-3, 4), Fraction(1, 2**20)), 5000),
]


@pytest.mark.parametrize("options", [(), REFERENCE_LOOP], ids=["fused", "reference-loop"])
def test_escape_time_contract(cl_device, options):
    info, dev = cl_device
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx)
    prg = programs.build(ctx, ("qs.cl", "qs_test.cl"), programs.device_options(dev, 1024) + options)
    kernel = cl.Kernel(prg, "qs_escape")
    r2 = np.ascontiguousarray(encode_qs([mpmath.mpf(4)])[0]).view(cl.cltypes.float4)[0]
    for (re, im), max_iter in ESCAPE_CASES:
        cr = encode_qs([_fraction_mpf(re)])
        ci = encode_qs([_fraction_mpf(im)])
        assert decode_qs(cr)[0] == _fraction_mpf(re) and decode_qs(ci)[0] == _fraction_mpf(im)
        mf = cl.mem_flags
        b_cr = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=cr)
        b_ci = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=ci)
        n = np.empty(1, np.uint32)
        z = np.empty(2, np.float64)
        b_n, b_z = cl.Buffer(ctx, mf.WRITE_ONLY, 4), cl.Buffer(ctx, mf.WRITE_ONLY, 16)
        kernel(queue, (1,), None, b_cr, b_ci, np.uint32(max_iter), r2, b_n, b_z)
        cl.enqueue_copy(queue, n, b_n)
        cl.enqueue_copy(queue, z, b_z)
        want = escape_count(re, im, max_iter)
        assert n[0] == want, f"c = {float(re)} + {float(im)}i: {n[0]}, reference {want}"
        if want:  # z(n) in doubles
            with mpmath.workprec(400):
                cx, cy = _fraction_mpf(re), _fraction_mpf(im)
                x = y = mpmath.mpf(0)
                for _ in range(want):
                    x, y = x * x - y * y + cx, 2 * x * y + cy
            assert abs(z[0] - float(x)) <= 1e-12 * abs(float(x)) + 1e-300
            assert abs(z[1] - float(y)) <= 1e-12 * abs(float(y)) + 1e-300
        else:
            assert (z == 0).all()


def test_shallow_counts_match_reference(cl_device, reference):
    center, width, size, max_iter = ("-0.75", "0.1"), "2.7", (30, 17), 300
    plan = make_plan(make_spec(size=size, center=center, width=(width, width), max_iter=max_iter,
                               tile=(16, 8), precision="quad-single"))
    got, frac = render_frame(cl_device, plan)
    compare_counts(got, reference(center, width, size, max_iter), min_equal=0.99)
    assert (frac[got == 0] == 0).all()
    assert np.all(frac[got > 0] > -1.0001) and np.all(frac[got > 0] < 8)


CLASSIC = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
SEAHORSE = ("-0.749525718967526899076284369547895600256399088280799332045540",
            "0.135876731345244117600571502360225831462570615468277546381148")
# the classic view's 10,000-iteration mpmath counts take half a minute on two cores: slow set
DEEP = [pytest.param(CLASSIC, "1e-18", 10000, marks=pytest.mark.slow, id="classic-1e-18"),
        pytest.param(SEAHORSE, "3e-24", 2000, id="seahorse-3e-24")]


LOOPS = {"fused": (), "reference-sloppy": REFERENCE_LOOP,
         "reference-accurate": REFERENCE_LOOP + ACCURATE_ADD}


def _render_deep(cl_device, center, width, size, max_iter, options) -> np.ndarray:
    plan = make_plan(make_spec(size=size, center=center, width=(width, width), max_iter=max_iter,
                               tile=(16, 16), precision="quad-single"))
    info, dev = cl_device
    renderer = TileRenderer(dev, info, plan)
    renderer.options = renderer.options + options
    got = np.zeros((size[1], size[0]), np.uint32)
    for tile in plan.grid:
        res = renderer.render(plan.frames[0], tile)
        got[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = res.iterations
    return got


@pytest.mark.parametrize("center,width,max_iter", DEEP)
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_deep_counts_match_reference(cl_device, reference, loop, center, width, max_iter):
    """The fused loop (the default) and the reference loop with either addition resolve
    deep views."""
    size = (24, 16)
    want = reference(center, width, size, max_iter)
    assert (want > 0).mean() >= 0.9, "the view must be mostly escaping pixels"
    got = _render_deep(cl_device, center, width, size, max_iter, LOOPS[loop])
    compare_counts(got, want, min_equal=0.99)


# (center, width, max_iter): deep views with chaotic pixels whose counts the last bits
# decide; no reference needed, so a larger grid (seahorse: pixel spacing 6e-26, near
# quad-single's planned limit of 4.2e-26)
LOOP_VIEWS = [(CLASSIC, "1e-18", 10000), (SEAHORSE, "3e-24", 2000)]


@pytest.mark.parametrize("center,width,max_iter", LOOP_VIEWS, ids=["classic-1e-18", "seahorse-3e-24"])
def test_fused_loop_matches_reference_loop(cl_device, center, width, max_iter):
    """The fused loop gives the reference loop's counts on >= 99% of a deep view's
    pixels (48 x 32)."""
    size = (48, 32)
    old = _render_deep(cl_device, center, width, size, max_iter, REFERENCE_LOOP)
    new = _render_deep(cl_device, center, width, size, max_iter, ())
    assert (old > 0).mean() >= 0.9
    share = compare_counts(new, old, min_equal=0.99)
    print(f"fused vs reference loop: {share:.4f} of {new.size} pixels equal")
