/* qs.cl: escape time in quad-single arithmetic (four float32 limbs, about 96 bits),
 * for deep frames on devices whose float32 is fast.
 *
 * Number format (farm/numerics/encode.py, "quad-single"): float4 x with x.s0 the
 * most significant limb; value x.s0 + x.s1 + x.s2 + x.s3; limbs non-overlapping,
 * |x.s(k+1)| <= ulp(x.s(k)) / 2 as the encoder writes them (results: see
 * "Normalisation" below), so a value is held to about 2^-96 of itself. A zero limb
 * is followed only by zero limbs. GPUs flush float32 subnormals to
 * zero, so limbs below 2^-126 are lost: that costs nothing at |x| <= 4 with pixel
 * spacings >= 1e-27 (2^-89), the range this format serves.
 *
 * Algorithms: the quad-double algorithms of Hida, Li and Bailey (error-free sums
 * and products, renormalisation, "IEEE" and "sloppy" addition), written for float32
 * limbs with fma for the exact products.
 *
 * Extensions: cl_khr_fp64 (to_double, and the double2 that escape_time fills).
 * Expression contraction is switched off inside this file (the error-free
 * transformations need every product and sum rounded as written) and back on at
 * its end.
 *
 * Provides, for mandel.cl: COORD_T = float4, escape_time, to_double, coord_add. For tests and
 * other callers: qs_add (the variant the reference loop uses), qs_add_accurate,
 * qs_add_sloppy, qs_neg, qs_sub (with qs_add), qs_sub_accurate, qs_mul, qs_sqr,
 * qs_mul2, qs_gt, the fused loop steps qs_mul2_add (2ab + c) and qs_sqr_sub_add
 * (a^2 - b^2 + c), and the helpers two_sum, quick_two_sum, two_prod, three_sum,
 * three_sum2, renorm5, qs_renorm_fast.
 *
 * Error bounds, u = 2^-96; x, y the operands' values, e the exact result, r the
 * result's value; f = 2^-120 absolute, for limbs below 2^-126 that GPUs flush (only
 * reached when a difference cancels below about 2^-30):
 *     qs_add_accurate, qs_sub_accurate   |r - e| <= u |e| + f
 *     qs_add_sloppy (and its qs_sub)     |r - e| <= u (|x| + |y|) + f
 *                                        (no bound relative to e when x, y cancel)
 *     qs_mul, qs_sqr                     |r - e| <= u |e| + f
 *     qs_mul2, qs_neg                    exact
 *     qs_gt(x, y)                        x > y, exactly, on the whole values
 *     to_double                          the nearest double, give or take 2^-76 |x|
 *     qs_mul2_add(a, b, c)               |r - e| <= u |e| + 2^-10 u M + f <= u M + f,
 *                                        M = 2 N(a) N(b) + N(c)
 *     qs_sqr_sub_add(a, b, c)            the same, M = N(a)^2 + N(b)^2 + N(c)
 *                                        (no bound relative to e alone when terms cancel)
 * with N(x) = max(|x0|, 2^23 |x1|, 2^47 |x2|, 2^71 |x3|), the least N with |x(k)| <=
 * 2^(1-24k) N: about |x| for normalised operands (below). Each operation is exact up
 * to the rounding of its result's last limb (half an ulp of a limb at most 2^-72 of
 * the first: <= 2^-96 |r|) and terms 2^-24 below that, which the sloppy addition takes
 * relative to the operands, not the result, and the fused steps relative to M (their
 * order-4 sum, summed plainly, and the weak normalisation's last limb: about 2^-11 u M
 * a priori). Worst seen (tests/test_qs.py's operands; 1.2 million random and
 * adversarial pairs): accurate 0.11 u (0.79 u), sloppy 0.10 u (0.50 u, relative to
 * |x| + |y|), mul 0.09 u (0.125 u), sqr 0.12 u (0.125 u), identical on PoCL's CPU and
 * an NVIDIA H100. Fused steps, PoCL (tests/test_qs.py's triples; 1 million random and
 * adversarial triples with their results fed back three times, and 2000 orbits of 3000
 * steps near the set's boundary): mul2_add 0.125 u M (0.125 u M), sqr_sub_add 0.10 u M
 * (0.215 u M, on operands with limbs closer than normalised); above u |e| by at most
 * 5.4 2^-24 u M (21 2^-24 u M = 2^-19.6 u M), never on the orbits.
 *
 * Normalisation of results: |r.s(k+1)| <= ulp(r.s(k)), and a zero limb is followed
 * only by zero limbs. The encoder's |r.s(k+1)| <= ulp(r.s(k)) / 2 holds except after
 * a rounding tie inside renormalisation (about 1 in 10^5 random products; up to 0.75
 * ulp seen, when the operands' limbs sit at exactly half an ulp). Every operation
 * here takes either form as input. The fused steps (qs_renorm_fast) return a weaker
 * form, scaled by the step rather than by the result: with S = N(a)^2 + N(b)^2 +
 * N(c), N(r) <= S (limb k at most 2^(1-24k) S; seen: 1.0 S) and the leading limb within
 * ulp(r0)/2 + 2^-40 S of r (seen 2^-44.7 S); a zero can come out as (0, d, -d, 0) with
 * d ~ 2^-73 S. So in the loop N(z) stays at the step's scale |z|^2 + |c|, and every
 * operation here takes the weak form too: the fused steps with the bounds above
 * (tested on their own results), the others measured at <= 0.14 u |e| on it, qs_gt
 * exact (the loop's escape test feeds them weak x, y).
 *
 * Escape loop (escape_time, details there): by default one qs_sqr_sub_add (x' = x^2 -
 * y^2 + cr) and one qs_mul2_add (y' = 2xy + ci) a step, each summing its partial
 * products and c's limbs by orders and renormalising once, branch-free: 583 float
 * operations a step (PoCL's IR, callees inlined, hot path) and 2 compares, against
 * the reference loop's (-DQS_REFERENCE_LOOP: qs_mul, qs_sqr twice, three qs_adds, six
 * renorm5s) 754 float operations, 96 selects, 92 compares and 49 branches. Its error a
 * step is within u (|x'| + |y'|) + 2^-9 u S (S the step's scale, about |z|^2 + |c|),
 * the reference loop's within a few u (|x|^2 + |y|^2 + |c|) (six roundings, two of
 * them sloppy additions): both a few 2^-96 absolute at |z| <= 2.
 *
 * Default addition: qs_add = qs_add_sloppy, unless built with -DQS_ACCURATE_ADD; the
 * reference loop adds with it throughout, the fused loop only in the escape test's
 * full comparison (|z|^2 within 2^-20 of r2). The sloppy addition loses relative
 * accuracy only when the operands cancel, and the iteration needs only absolute
 * accuracy at |z| <= 2, where both additions err by about 2^-94 a step. Counts against
 * a 200-digit reference, 24 x 16 pixels: classic point -0.7436438870371587 +
 * 0.1318259042053120i at width 1e-18 (max_iter 10000), fused loop and reference loop
 * with sloppy and accurate addition all 99.74%; Seahorse Valley point of
 * tests/test_deep.py at width 1e-24 (max_iter 2000), fused 99.74%, reference loops both
 * 99.48%. On 48 x 32 pixels: classic 1e-18 fused 99.80%, reference 99.74% (sloppy),
 * 99.80% (accurate); Seahorse 3e-24 all 99.61%; fused and reference loop agree on
 * 99.74% and 99.67% of those pixels. At the classic point at width 1e-24 (counts 15000
 * .. 18700) none passes (fused 85.7%, reference loops 85.4%, 86.2%) and no 96-bit format
 * can: iterating exactly from the coordinates rounded to quad-single matches 91.9%.
 *
 * Speed, escape loop (farm bench's workload: all pixels interior, full count; the
 * reference loop via FARM_CL_OPTIONS=-DQS_REFERENCE_LOOP): on PoCL's 2-core CPU (AMD
 * EPYC; 256 x 256 pixels x 200 iterations, median of 3 runs) fused 0.881 s = 14.9 M
 * iterations/s, reference loop 1.719 s = 7.6 M/s, 1.95x (a deep render, classic 1e-18,
 * 48 x 32, max_iter 10000: 0.88 s against 1.82 s). Reference loop 28.6 G/s on an
 * NVIDIA H200 (56 registers); the fused loop not yet measured on a GPU: by the counts
 * above (about 560 issued operations a step against about 940, fnegs folded) about
 * 1.6x, 45 G/s, if issue-bound. Earlier, reference loop with sloppy / accurate addition
 * 27.3 / 17.6 G/s on an H100 (NVIDIA OpenCL).
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#define COORD_T float4

/* ------------------------------------------------------------------ error-free steps */

/* s + *err == a + b exactly, s = fl(a + b) (Knuth; any a, b). */
inline float two_sum(float a, float b, float *err)
{
    const float s = a + b;
    const float bv = s - a;
    *err = (a - (s - bv)) + (b - bv);
    return s;
}

/* s + *err == a + b exactly, s = fl(a + b), when a == 0 or exponent(a) >= exponent(b)
 * (Dekker). */
inline float quick_two_sum(float a, float b, float *err)
{
    const float s = a + b;
    *err = b - (s - a);
    return s;
}

/* p + *err == a * b exactly, p = fl(a * b) (while the error is not subnormal). */
inline float two_prod(float a, float b, float *err)
{
    const float p = a * b;
    *err = fma(a, b, -p);
    return p;
}

/* (*a, *b, *c) <- sum, first error, second error of a + b + c; exact. */
inline void three_sum(float *a, float *b, float *c)
{
    float e1, e2;
    const float s1 = two_sum(*a, *b, &e1);
    *a = two_sum(s1, *c, &e2);
    *b = two_sum(e1, e2, c);
}

/* (*a, *b) <- sum and rounded error of a + b + c (the error of the error dropped). */
inline void three_sum2(float *a, float *b, float c)
{
    float e1, e2;
    const float s1 = two_sum(*a, *b, &e1);
    *a = two_sum(s1, c, &e2);
    *b = e1 + e2;
}

/* ------------------------------------------------------------------ renormalisation */

/* Replace limb k of *r by v (k a run-time index). */
inline void set_limb(float4 *r, int k, float v)
{
    r->s0 = k == 0 ? v : r->s0;
    r->s1 = k == 1 ? v : r->s1;
    r->s2 = k == 2 ? v : r->s2;
    r->s3 = k == 3 ? v : r->s3;
}

/* Four limbs for c0 + c1 + c2 + c3 + c4, terms roughly decreasing in size (c(k) of
 * order 2^-24k c0; any order is summed exactly, only the limbs' spacing suffers).
 * Error: the last limb is rounded, <= ulp(limb 3) / 2. Limbs: |r(k+1)| <= ulp(r(k)),
 * <= ulp(r(k)) / 2 but after a rounding tie (see "Normalisation" above).
 *
 * Pass 1, bottom-up: exact two_sums carry the sum of the tail upwards, so c0 is
 * (nearly) the rounded total and each c(k) is the rounding error of a sum.
 * Pass 2, top-down: a running remainder takes each term in turn; a sum whose error
 * is non-zero is final and becomes the next limb, the error going on as the
 * remainder; a sum with zero error stays the remainder (this squeezes zeros out, so
 * no zero limb sits above a non-zero one). Once three limbs are out the fourth
 * takes the rest, rounded. */
inline float4 renorm5(float c0, float c1, float c2, float c3, float c4)
{
    c3 = two_sum(c3, c4, &c4);
    c2 = two_sum(c2, c3, &c3);
    c1 = two_sum(c1, c2, &c2);
    c0 = two_sum(c0, c1, &c1);

    float4 r = (float4)(0.0f);
    float acc = c0, s, e;
    int k = 0;
#define QS_RENORM_STEP(t)                   \
    s = quick_two_sum(acc, (t), &e);        \
    if (e != 0.0f && k < 3) {               \
        set_limb(&r, k, s);                 \
        ++k;                                \
        acc = e;                            \
    } else {                                \
        acc = s;                            \
    }
    QS_RENORM_STEP(c1)
    QS_RENORM_STEP(c2)
    QS_RENORM_STEP(c3)
    QS_RENORM_STEP(c4)
#undef QS_RENORM_STEP
    set_limb(&r, k, acc);
    return r;
}

/* ------------------------------------------------------------------ addition */

/* Sloppy addition: limb-wise exact sums, the errors carried one level down, then
 * renormalised. Error <= u (|a| + |b|): accurate relative to the operands, not to
 * the result when they cancel. */
inline float4 qs_add_sloppy(float4 a, float4 b)
{
    float t0, t1, t2, t3;
    float s0 = two_sum(a.s0, b.s0, &t0);
    float s1 = two_sum(a.s1, b.s1, &t1);
    float s2 = two_sum(a.s2, b.s2, &t2);
    float s3 = two_sum(a.s3, b.s3, &t3);
    s1 = two_sum(s1, t0, &t0);  /* level 1 done; t0 now level 2 */
    three_sum(&s2, &t0, &t1);   /* s2 + t0 + t1: s2, errors t0 (level 3), t1 (level 4) */
    three_sum2(&s3, &t0, t2);   /* s3 + t0 + t2: s3, error t0 (level 4) */
    t0 = t0 + t1 + t3;
    return renorm5(s0, s1, s2, s3, t0);
}

/* Compare-exchange by magnitude: afterwards |*hi| >= |*lo|. */
inline void cx_mag(float *hi, float *lo)
{
    const float h = *hi, l = *lo;
    const int swap = fabs(l) > fabs(h);
    *hi = swap ? l : h;
    *lo = swap ? h : l;
}

/* Accurate ("IEEE") addition: the eight limbs merged by decreasing magnitude (a
 * Batcher odd-even merge network of the two sorted limb lists, branch-free), then
 * summed through a two-float accumulator (u, v) that hands on a finished limb
 * whenever both of its exact sums leave a non-zero error. Terms left once four
 * limbs are out (all below the last limb's ulp) are added to it plainly.
 * Error <= u |a + b|, also under cancellation; exactly 0 when a + b == 0. */
inline float4 qs_add_accurate(float4 a, float4 b)
{
    /* merge: evens (a0 a2 | b0 b2) and odds (a1 a3 | b1 b3), then one layer */
    float e0 = a.s0, e1 = a.s2, e2 = b.s0, e3 = b.s2;
    float o0 = a.s1, o1 = a.s3, o2 = b.s1, o3 = b.s3;
    cx_mag(&e0, &e2); cx_mag(&e1, &e3); cx_mag(&e2, &e1); /* e0 e2 e1 e3 sorted */
    cx_mag(&o0, &o2); cx_mag(&o1, &o3); cx_mag(&o2, &o1); /* o0 o2 o1 o3 sorted */
    float t0 = e0, t1 = o0, t2 = e2, t3 = o2, t4 = e1, t5 = o1, t6 = e3, t7 = o3;
    cx_mag(&t1, &t2); cx_mag(&t3, &t4); cx_mag(&t5, &t6); /* t0 .. t7 sorted */

    float4 r = (float4)(0.0f);
    int k = 0;
    float tail = 0.0f, u, v;
    u = quick_two_sum(t0, t1, &v);
#define QS_ACCUM(t)                                             \
    if (k < 4) {                                                \
        float eb, ea;                                           \
        const float sv = two_sum(v, (t), &eb);                  \
        const float su = two_sum(u, sv, &ea);                   \
        if (ea != 0.0f && eb != 0.0f) {                         \
            set_limb(&r, k, su);                                \
            ++k;                                                \
            u = ea;                                             \
            v = eb;                                             \
        } else {                                                \
            u = su;                                             \
            v = ea != 0.0f ? ea : eb;                           \
        }                                                       \
    } else {                                                    \
        tail += (t);                                            \
    }
    QS_ACCUM(t2)
    QS_ACCUM(t3)
    QS_ACCUM(t4)
    QS_ACCUM(t5)
    QS_ACCUM(t6)
    QS_ACCUM(t7)
#undef QS_ACCUM
    /* the accumulator (and tail) below the limbs out so far */
    if (k == 4) {
        r.s3 += (u + v) + tail;
    } else if (k == 3) {
        r.s3 = u + v;
    } else {
        set_limb(&r, k, u);
        set_limb(&r, k + 1, v);
    }
    return renorm5(r.s0, r.s1, r.s2, r.s3, 0.0f);
}

#ifdef QS_ACCURATE_ADD
#define qs_add qs_add_accurate
#else
#define qs_add qs_add_sloppy
#endif

inline float4 qs_neg(float4 a) { return -a; }

inline float4 qs_sub(float4 a, float4 b) { return qs_add(a, -b); }

inline float4 qs_sub_accurate(float4 a, float4 b) { return qs_add_accurate(a, -b); }

/* 2a, exact (each limb doubled; no overflow below 2^127). */
inline float4 qs_mul2(float4 a) { return a + a; }

/* a > b on the whole values: the sign of the accurate difference, whose leading
 * limb carries the sign of a - b (its error is below |a - b|) and is 0 only when
 * a == b. */
inline int qs_gt(float4 a, float4 b) { return qs_sub_accurate(a, b).s0 > 0.0f; }

/* ------------------------------------------------------------------ multiplication */

/* *hi + *lo += t: exact into *hi, the error rounded into *lo. */
inline void add_carry(float *hi, float *lo, float t)
{
    float e;
    *hi = two_sum(*hi, t, &e);
    *lo += e;
}

/* Product by orders: with |x(k)| <= 2^-24k |x0|, the partial products a(i) b(j) are
 * of order 2^-24(i+j). Orders 0 to 3 are formed exactly (two_prod) and each order
 * is summed exactly (two_sum), its errors going one order down; order 3 ends as
 * c3 + c4, with c4 (order 4: three products, the order-3 errors) summed plainly.
 * Rounding errors left are those of c4, of order 2^-120, and the dropped orders
 * 5 and below (< 2^-118); the result is then rounded to four limbs (renorm5). */
inline float4 qs_mul(float4 a, float4 b)
{
    float e00, e01, e10, e02, e11, e20, f03, f12, f21, f30, w0, w1, w2, w3, w4;
    const float p00 = two_prod(a.s0, b.s0, &e00);
    float p01 = two_prod(a.s0, b.s1, &e01);
    float p10 = two_prod(a.s1, b.s0, &e10);
    const float p02 = two_prod(a.s0, b.s2, &e02);
    const float p11 = two_prod(a.s1, b.s1, &e11);
    const float p20 = two_prod(a.s2, b.s0, &e20);
    const float p03 = two_prod(a.s0, b.s3, &f03);
    const float p12 = two_prod(a.s1, b.s2, &f12);
    const float p21 = two_prod(a.s2, b.s1, &f21);
    const float p30 = two_prod(a.s3, b.s0, &f30);

    /* order 1: p01 + p10 + e00 -> c1 = p01; carries p10 (order 2), e00 (order 3) */
    three_sum(&p01, &p10, &e00);
    /* order 2 */
    float c2 = two_sum(p10, p02, &w0);
    c2 = two_sum(c2, p11, &w1);
    c2 = two_sum(c2, p20, &w2);
    c2 = two_sum(c2, e01, &w3);
    c2 = two_sum(c2, e10, &w4);
    /* order 3 into c3 + c4; order 4 into c4 */
    float c3 = e00;
    float c4 = fma(a.s1, b.s3, fma(a.s2, b.s2, fma(a.s3, b.s1, (f03 + f12) + (f21 + f30))));
    add_carry(&c3, &c4, w0);
    add_carry(&c3, &c4, w1);
    add_carry(&c3, &c4, w2);
    add_carry(&c3, &c4, w3);
    add_carry(&c3, &c4, w4);
    add_carry(&c3, &c4, e02);
    add_carry(&c3, &c4, e11);
    add_carry(&c3, &c4, e20);
    add_carry(&c3, &c4, p03);
    add_carry(&c3, &c4, p12);
    add_carry(&c3, &c4, p21);
    add_carry(&c3, &c4, p30);
    return renorm5(p00, p01, c2, c3, c4);
}

/* Square: qs_mul's scheme with the symmetric products taken once and doubled
 * (doubling is exact). */
inline float4 qs_sqr(float4 a)
{
    float e00, e01, e02, e11, f03, f12, w0, w1, w2;
    const float a0x2 = a.s0 + a.s0, a1x2 = a.s1 + a.s1;
    const float p00 = two_prod(a.s0, a.s0, &e00);
    float p01 = two_prod(a0x2, a.s1, &e01);
    const float p02 = two_prod(a0x2, a.s2, &e02);
    const float p11 = two_prod(a.s1, a.s1, &e11);
    const float p03 = two_prod(a0x2, a.s3, &f03);
    const float p12 = two_prod(a1x2, a.s2, &f12);

    /* order 1: p01 + e00 -> c1 = p01; carry e00 (order 2) */
    p01 = two_sum(p01, e00, &e00);
    /* order 2 */
    float c2 = two_sum(p02, p11, &w0);
    c2 = two_sum(c2, e01, &w1);
    c2 = two_sum(c2, e00, &w2);
    /* order 3 (2 a0 a3, 2 a1 a2, errors) into c3 + c4; order 4 (2 a1 a3 + a2^2) */
    float c3 = w0;
    float c4 = fma(a1x2, a.s3, fma(a.s2, a.s2, f03 + f12));
    add_carry(&c3, &c4, w1);
    add_carry(&c3, &c4, w2);
    add_carry(&c3, &c4, e02);
    add_carry(&c3, &c4, e11);
    add_carry(&c3, &c4, p03);
    add_carry(&c3, &c4, p12);
    return renorm5(p00, p01, c2, c3, c4);
}

/* ------------------------------------------------------------------ fused loop steps */

/* The escape loop's two results, each summed from its partial products and the
 * addend by orders and renormalised once (qs_renorm_fast), instead of a product, an
 * addition and up to three renormalisations each:
 *     qs_mul2_add(a, b, c)       2ab + c
 *     qs_sqr_sub_add(a, b, c)    a^2 - b^2 + c
 * Orders as in qs_mul: term t of order k (of size about 2^-24k of the scale M below)
 * goes into the order's running sum s(k) by an exact two_sum, whose error is a term of
 * order k + 1, down to order 3, whose errors go into s4, summed plainly with the
 * order-4 products; orders 5 and below are dropped. Then s0 .. s4 are renormalised
 * once. The first term of each order starts its sum (no two_sum). */

/* Four limbs for s0 + s1 + s2 + s3 + s4, s(k) the order sums of a fused operation
 * (|s(k)| of order 2^-24k of its scale, in any relation to each other): one top-down
 * pass of exact two_sums, the last limb rounded. Branch-free, no zero-squeezing, no
 * bottom-up pass: the result r is only weakly normalised (|r1| <= ulp(r0)/2 + |s2|,
 * |r2| <= ulp(r1)/2 + |s3|, |r3| <= ulp(r2)/2 + |s4|), which the fused operations take
 * as input; its error, ulp(r3)/2, is <= 2^-96 |r0| + 2^-72 |s2| + 2^-48 |s3| + 2^-24
 * |s4| (first order), so about u |r| + 2^-110 M. */
inline float4 qs_renorm_fast(float s0, float s1, float s2, float s3, float s4)
{
    float e;
    const float r0 = two_sum(s0, s1, &e);
    const float r1 = two_sum(e, s2, &e);
    const float r2 = two_sum(e, s3, &e);
    return (float4)(r0, r1, r2, e + s4);
}

/* Add term t of order k to the order sums (exact down to order 3; see above). */
#define QS_ADD3(t) add_carry(&s3, &s4, (t))
#define QS_ADD2(t) do { float e2_; s2 = two_sum(s2, (t), &e2_); QS_ADD3(e2_); } while (0)
#define QS_ADD1(t) do { float e1_; s1 = two_sum(s1, (t), &e1_); QS_ADD2(e1_); } while (0)
#define QS_ADD0(t) do { float e0_; s0 = two_sum(s0, (t), &e0_); QS_ADD1(e0_); } while (0)

/* 2ab + c: the partial products of (2a) b (doubling is exact) by orders, c's limbs
 * added to orders 0 .. 3. */
inline float4 qs_mul2_add(float4 a, float4 b, float4 c)
{
    const float4 A = a + a;
    float e00, e01, e10, e02, e11, e20, f03, f12, f21, f30;
    float s0 = two_prod(A.s0, b.s0, &e00);
    float s1 = two_prod(A.s0, b.s1, &e01);
    const float p10 = two_prod(A.s1, b.s0, &e10);
    float s2 = two_prod(A.s0, b.s2, &e02);
    const float p11 = two_prod(A.s1, b.s1, &e11);
    const float p20 = two_prod(A.s2, b.s0, &e20);
    float s3 = two_prod(A.s0, b.s3, &f03);
    const float p12 = two_prod(A.s1, b.s2, &f12);
    const float p21 = two_prod(A.s2, b.s1, &f21);
    const float p30 = two_prod(A.s3, b.s0, &f30);
    float s4 = fma(A.s1, b.s3, fma(A.s2, b.s2, fma(A.s3, b.s1, (f03 + f12) + (f21 + f30))));
    QS_ADD3(p12); QS_ADD3(p21); QS_ADD3(p30);
    QS_ADD3(e02); QS_ADD3(e11); QS_ADD3(e20); QS_ADD3(c.s3);
    QS_ADD2(p11); QS_ADD2(p20); QS_ADD2(e01); QS_ADD2(e10); QS_ADD2(c.s2);
    QS_ADD1(p10); QS_ADD1(e00); QS_ADD1(c.s1);
    QS_ADD0(c.s0);
    return qs_renorm_fast(s0, s1, s2, s3, s4);
}

/* a^2 - b^2 + c: both squares' partial products (symmetric ones taken once and
 * doubled, as in qs_sqr) by orders, those of b^2 negated, c's limbs added to orders
 * 0 .. 3. */
inline float4 qs_sqr_sub_add(float4 a, float4 b, float4 c)
{
    const float a0x2 = a.s0 + a.s0, a1x2 = a.s1 + a.s1;
    const float b0x2 = b.s0 + b.s0, b1x2 = b.s1 + b.s1;
    float ea00, ea01, ea02, ea11, fa03, fa12, eb00, eb01, eb02, eb11, fb03, fb12;
    float s0 = two_prod(a.s0, a.s0, &ea00);
    const float pb00 = two_prod(b.s0, b.s0, &eb00);
    float s1 = two_prod(a0x2, a.s1, &ea01);
    const float pb01 = two_prod(b0x2, b.s1, &eb01);
    float s2 = two_prod(a0x2, a.s2, &ea02);
    const float pa11 = two_prod(a.s1, a.s1, &ea11);
    const float pb02 = two_prod(b0x2, b.s2, &eb02);
    const float pb11 = two_prod(b.s1, b.s1, &eb11);
    float s3 = two_prod(a0x2, a.s3, &fa03);
    const float pa12 = two_prod(a1x2, a.s2, &fa12);
    const float pb03 = two_prod(b0x2, b.s3, &fb03);
    const float pb12 = two_prod(b1x2, b.s2, &fb12);
    float s4 = fma(a1x2, a.s3, fma(a.s2, a.s2, fma(-b1x2, b.s3, fma(-b.s2, b.s2,
                   (fa03 + fa12) - (fb03 + fb12)))));
    QS_ADD3(pa12); QS_ADD3(-pb03); QS_ADD3(-pb12);
    QS_ADD3(ea02); QS_ADD3(ea11); QS_ADD3(-eb02); QS_ADD3(-eb11); QS_ADD3(c.s3);
    QS_ADD2(pa11); QS_ADD2(-pb02); QS_ADD2(-pb11); QS_ADD2(ea01); QS_ADD2(-eb01);
    QS_ADD2(c.s2);
    QS_ADD1(-pb01); QS_ADD1(ea00); QS_ADD1(-eb00); QS_ADD1(c.s1);
    QS_ADD0(-pb00); QS_ADD0(c.s0);
    return qs_renorm_fast(s0, s1, s2, s3, s4);
}

#undef QS_ADD0
#undef QS_ADD1
#undef QS_ADD2
#undef QS_ADD3

/* ------------------------------------------------------------------ for mandel.cl */

/* a + b for a turned frame's coordinate (mandel.cl, -DROTATED): the accurate addition
 * (one rounding, <= 2^-96 |a + b|); a term that is exactly 0 (at multiples of 90
 * degrees, farm/numerics/axes.py) gives the other term's limbs unchanged. */
inline float4 coord_add(float4 a, float4 b)
{
    if (b.s0 == 0.0f)
        return a;
    if (a.s0 == 0.0f)
        return b;
    return qs_add_accurate(a, b);
}

/* The value rounded to double: the limbs summed smallest first. */
inline double to_double(float4 x)
{
    return (double)x.s0 + ((double)x.s1 + ((double)x.s2 + (double)x.s3));
}

/* z(0) = 0, z(k+1) = z(k)^2 + c: the first k >= 1 with |z(k)|^2 > r2, or 0 after
 * max_iter steps; on escape *z = z(k) in doubles. r2 > 0.
 *
 * Per step (default): y' = qs_mul2_add(x, y, ci), x' = qs_sqr_sub_add(x, y, cr), two
 * renormalisations in all; x, y are only weakly normalised (qs_renorm_fast). The
 * escape test reads the leading limbs: each is within ulp/2 (<= 2^-24 of itself) plus
 * 2^-40 S of its value, S the step's scale, and S <= 1.5 r2 when |z|^2 is near r2 (the
 * step before did not escape, nor did z(1) = c), so m = fl(x.s0^2 + y.s0^2) (one fma)
 * lies within m (1 +- 2^-21.9) of |z|^2 at r2 <= 128^2; r2 lies within r2.s0 (1 +-
 * 2^-24). So outside r2.s0 (1 +- 2^-20) the leading limbs decide; inside, x^2 + y^2 is
 * formed in full (qs_sqr, qs_add) and compared exactly (qs_gt), as in the reference
 * loop.
 *
 * -DQS_REFERENCE_LOOP: the previous loop, x^2, y^2 and x y once each by qs_sqr and
 * qs_mul, x' = x^2 - y^2 + cr and y' = 2 x y + ci by two qs_adds each, six
 * renormalisations (renorm5); the test reads m = fl(xx.s0 + yy.s0), within
 * m (1 +- 2^-22) of |z|^2.
 *
 * -DDISTANCE (both loops): *dz = w(k), w(0) = 0, w(k) = 2 z(k-1) w(k-1) + ds (ds dz/dc,
 * see mandel.cl), in double from z rounded to double each step. */
#ifdef DISTANCE
#define QS_DE_DECL double wx = 0.0, wy = 0.0;
#define QS_DE_STEP                                                   \
    {                                                                \
        const double zx = to_double(x), zy = to_double(y);           \
        const double t = 2.0 * (zx * wx - zy * wy) + ds;             \
        wy = 2.0 * (zx * wy + zy * wx);                              \
        wx = t;                                                      \
    }
#define QS_DE_OUT *dz = (double2)(wx, wy);
#else
#define QS_DE_DECL
#define QS_DE_STEP
#define QS_DE_OUT
#endif
#ifdef QS_REFERENCE_LOOP
inline uint escape_time(float4 cr, float4 ci, uint max_iter, float4 r2, double ds, double2 *z,
                        double2 *dz)
{
    const float hi = r2.s0 * (1.0f + 0x1p-20f), lo = r2.s0 * (1.0f - 0x1p-20f);
    float4 x = (float4)(0.0f), y = (float4)(0.0f), xx = (float4)(0.0f), yy = (float4)(0.0f);
    QS_DE_DECL
    for (uint k = 1; k <= max_iter; ++k) {
        QS_DE_STEP
        y = qs_add(qs_mul2(qs_mul(x, y)), ci);
        x = qs_add(qs_sub(xx, yy), cr);
        xx = qs_sqr(x);
        yy = qs_sqr(y);
        const float m = xx.s0 + yy.s0;
        if (m > lo && (m > hi || qs_gt(qs_add(xx, yy), r2))) {
            *z = (double2)(to_double(x), to_double(y));
            QS_DE_OUT
            return k;
        }
    }
    return 0;
}
#else
inline uint escape_time(float4 cr, float4 ci, uint max_iter, float4 r2, double ds, double2 *z,
                        double2 *dz)
{
    const float hi = r2.s0 * (1.0f + 0x1p-20f), lo = r2.s0 * (1.0f - 0x1p-20f);
    float4 x = (float4)(0.0f), y = (float4)(0.0f);
    QS_DE_DECL
    for (uint k = 1; k <= max_iter; ++k) {
        QS_DE_STEP
        const float4 yn = qs_mul2_add(x, y, ci);
        x = qs_sqr_sub_add(x, y, cr);
        y = yn;
        const float m = fma(x.s0, x.s0, y.s0 * y.s0);
        if (m > lo && (m > hi || qs_gt(qs_add(qs_sqr(x), qs_sqr(y)), r2))) {
            *z = (double2)(to_double(x), to_double(y));
            QS_DE_OUT
            return k;
        }
    }
    return 0;
}
#endif

#pragma OPENCL FP_CONTRACT ON
