/* fp128.cl: escape time in 128-bit fixed point, for deep frames.
 *
 * Number format (fp128): a signed two's-complement 128-bit integer u in four 32-bit
 * words, OpenCL uint4 with .s0 the least significant word; the value is u / 2^96:
 * 32 integer bits, 96 fraction bits, range [-2^31, 2^31), resolution 2^-96 (one
 * "ulp", about 1.26e-29). The host encodes exactly (farm/numerics/encode.py).
 *
 * Extensions: none for the arithmetic (32- and 64-bit integers); cl_khr_fp64 for
 * to_double (the smooth offset in mandel.cl).
 *
 * Operations (u, v the integers of a, b; "mod 2^128" means two's-complement wrap):
 *   fp_add, fp_sub    u + v, u - v mod 2^128 (exact)
 *   fp_neg, fp_inc    -u, u + 1 mod 2^128 (exact)
 *   fp_abs            |u| (exact for u > -2^127)
 *   fp_is_neg         u < 0
 *   fp_gt, fp_gt_u    u > v (signed; unsigned)
 *   fp_shl, fp_shr    u * 2^n mod 2^128, floor(u / 2^n) (arithmetic), 0 <= n < 128
 *   fp_mul_word       u * k mod 2^128 for a signed 32-bit word k (exact)
 *   fp_mul, fp_sqr    a * b and a * a, rounded to nearest: the magnitude |a||b| sums
 *                     every partial product of weight >= 2^64, the high halves of those
 *                     of weight 2^32 and half an ulp, then drops the low 96 bits. What
 *                     is left out (two low halves < 2^64 each at weight 2^32, one product
 *                     < 2^64 at weight 1) is below 3 * 2^-32 ulp, so the error is at most
 *                     1/2 + 3 * 2^-32 ulp, ties away from zero (the sign is applied to
 *                     the rounded magnitude: no bias). Valid while |a||b| < 2^31.
 *                     fp_mul uses 27 32-bit multiplies, fp_sqr 16 (the truncated seed
 *                     formulation, low by up to 5 ulp, used 22 and 13; its bias made
 *                     counts drift at width 1e-24, see tests/test_deep.py).
 *
 * The iteration: with xx = x^2, yy = y^2, s = (x + y)^2 (three squares, no general
 * multiply), x' = xx - yy + cr and y' = s - xx - yy + ci = 2xy + ci. Per step the
 * error of x' is at most 1 ulp and of y' at most 1.5 ulp (plus 9 * 2^-32).
 * Range: while |z|^2 <= R^2 (R <= 128), every intermediate stays below 2^31: |x+y|^2
 * <= 2R^2, and the step after the last unescaped one has |z|^2 <= (R^2 + |c|)^2 < 2^31.
 *
 * NVIDIA: built with -DFP128_PTX (farm/compute/programs.py does so on NVIDIA's
 * platform), the square, additions, negation-by-mask and the escape comparison use
 * inline PTX carry chains (add.cc/addc, mad.lo.cc/madc.hi), which C cannot express:
 * a square is 26 instructions. The PTX square keeps exactly the partial products the
 * portable one keeps, so results are bitwise identical (tests/test_fp128.py checks
 * both against exact integers).
 *
 * Provides, for mandel.cl: COORD_T = uint4, escape_time, to_double, coord_add. With -DDISTANCE
 * escape_time also carries w = ds dz/dc in double, from z rounded to double each step
 * (see mandel.cl): the derivative needs no more than double's relative precision.
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

typedef uint4 fp128;
#define COORD_T fp128

/* The two 64-bit halves of a value, and back. */
inline ulong fp_lo(fp128 a) { return upsample(a.s1, a.s0); }
inline ulong fp_hi(fp128 a) { return upsample(a.s3, a.s2); }
inline fp128 fp_make(ulong hi, ulong lo)
{
    return (fp128)((uint)lo, (uint)(lo >> 32), (uint)hi, (uint)(hi >> 32));
}

#ifdef FP128_PTX
/* u + v and u - v as four-word carry chains. */
inline fp128 fp_add(fp128 a, fp128 b)
{
    fp128 r;
    asm("add.cc.u32  %0, %4, %8;\n\t"
        "addc.cc.u32 %1, %5, %9;\n\t"
        "addc.cc.u32 %2, %6, %10;\n\t"
        "addc.u32    %3, %7, %11;"
        : "=r"(r.s0), "=r"(r.s1), "=r"(r.s2), "=r"(r.s3)
        : "r"(a.s0), "r"(a.s1), "r"(a.s2), "r"(a.s3), "r"(b.s0), "r"(b.s1), "r"(b.s2), "r"(b.s3));
    return r;
}

inline fp128 fp_sub(fp128 a, fp128 b)
{
    fp128 r;
    asm("sub.cc.u32  %0, %4, %8;\n\t"
        "subc.cc.u32 %1, %5, %9;\n\t"
        "subc.cc.u32 %2, %6, %10;\n\t"
        "subc.u32    %3, %7, %11;"
        : "=r"(r.s0), "=r"(r.s1), "=r"(r.s2), "=r"(r.s3)
        : "r"(a.s0), "r"(a.s1), "r"(a.s2), "r"(a.s3), "r"(b.s0), "r"(b.s1), "r"(b.s2), "r"(b.s3));
    return r;
}
#else
inline fp128 fp_add(fp128 a, fp128 b)
{
    const ulong lo = fp_lo(a) + fp_lo(b);
    return fp_make(fp_hi(a) + fp_hi(b) + (lo < fp_lo(a)), lo);
}

inline fp128 fp_sub(fp128 a, fp128 b)
{
    const ulong alo = fp_lo(a), blo = fp_lo(b);
    return fp_make(fp_hi(a) - fp_hi(b) - (alo < blo), alo - blo);
}

#endif

inline fp128 fp_neg(fp128 a) { return fp_sub((fp128)(0u), a); }

inline fp128 fp_inc(fp128 a)
{
    const ulong lo = fp_lo(a) + 1;
    return fp_make(fp_hi(a) + (lo == 0), lo);
}

inline int fp_is_neg(fp128 a) { return (int)a.s3 < 0; }

/* Branch-free negation where m is all ones (m = 0: unchanged): (u ^ m) - m, since m
 * read as a 128-bit integer is -1 or 0. */
inline fp128 fp_flip(fp128 a, uint m)
{
    const fp128 mask = (fp128)(m);
    return fp_sub(a ^ mask, mask);
}

inline fp128 fp_abs(fp128 a) { return fp_flip(a, (uint)((int)a.s3 >> 31)); }

inline fp128 fp_negate_if(fp128 a, int neg) { return fp_flip(a, neg ? ~0u : 0u); }

inline int fp_gt(fp128 a, fp128 b)
{
    const long ah = (long)fp_hi(a), bh = (long)fp_hi(b);
    return ah > bh || (ah == bh && fp_lo(a) > fp_lo(b));
}

/* u > v for u, v read as unsigned (the escape test: |z|^2 and R^2 are >= 0). */
#ifdef FP128_PTX
inline int fp_gt_u(fp128 a, fp128 b)
{
    uint borrow;
    asm("{\n\t.reg .u32 t;\n\t"
        "sub.cc.u32  t, %1, %5;\n\t"
        "subc.cc.u32 t, %2, %6;\n\t"
        "subc.cc.u32 t, %3, %7;\n\t"
        "subc.cc.u32 t, %4, %8;\n\t"
        "subc.u32    %0, 0, 0;\n\t}"
        : "=r"(borrow)
        : "r"(b.s0), "r"(b.s1), "r"(b.s2), "r"(b.s3), "r"(a.s0), "r"(a.s1), "r"(a.s2), "r"(a.s3));
    return borrow != 0; /* v - u borrows */
}
#else
inline int fp_gt_u(fp128 a, fp128 b)
{
    const ulong ah = fp_hi(a), bh = fp_hi(b);
    return ah > bh || (ah == bh && fp_lo(a) > fp_lo(b));
}
#endif

inline fp128 fp_shl(fp128 a, uint n)
{
    ulong lo = fp_lo(a), hi = fp_hi(a);
    if (n >= 64) {
        hi = lo << (n - 64);
        lo = 0;
    } else if (n) {
        hi = (hi << n) | (lo >> (64 - n));
        lo <<= n;
    }
    return fp_make(hi, lo);
}

inline fp128 fp_shr(fp128 a, uint n)
{
    ulong lo = fp_lo(a), hi = fp_hi(a);
    if (n >= 64) {
        lo = (ulong)((long)hi >> (n - 64));
        hi = (ulong)((long)hi >> 63);
    } else if (n) {
        lo = (lo >> n) | (hi << (64 - n));
        hi = (ulong)((long)hi >> n);
    }
    return fp_make(hi, lo);
}

inline fp128 fp_mul_word(fp128 a, int k)
{
    const uint m = (uint)abs(k);
    const ulong t0 = (ulong)a.s0 * m;
    const ulong t1 = (ulong)a.s1 * m + (t0 >> 32);
    const ulong t2 = (ulong)a.s2 * m + (t1 >> 32);
    const uint t3 = a.s3 * m + (uint)(t2 >> 32);
    return fp_negate_if((fp128)((uint)t0, (uint)t1, (uint)t2, t3), k < 0);
}

#define LO(p) ((p) & 0xffffffffUL)
#define HI(p) ((p) >> 32)

/* Magnitude product (a, b read as unsigned), rounded to nearest as described above.
 * Column k sums the 32-bit halves of partial products of weight 2^(32k); column 2
 * starts at 2^31, half an ulp of the result, which is columns 3..6. */
inline fp128 fp_mul_u(fp128 a, fp128 b)
{
    const ulong p02 = (ulong)a.s0 * b.s2, p11 = (ulong)a.s1 * b.s1, p20 = (ulong)a.s2 * b.s0,
                p03 = (ulong)a.s0 * b.s3, p12 = (ulong)a.s1 * b.s2,
                p21 = (ulong)a.s2 * b.s1, p30 = (ulong)a.s3 * b.s0,
                p13 = (ulong)a.s1 * b.s3, p22 = (ulong)a.s2 * b.s2, p31 = (ulong)a.s3 * b.s1,
                p23 = (ulong)a.s2 * b.s3, p32 = (ulong)a.s3 * b.s2;
    const ulong c2 = 0x80000000UL + mul_hi(a.s0, b.s1) + mul_hi(a.s1, b.s0)
                   + LO(p02) + LO(p11) + LO(p20);
    const ulong c3 = HI(c2) + HI(p02) + HI(p11) + HI(p20) + LO(p03) + LO(p12) + LO(p21) + LO(p30);
    const ulong c4 = HI(c3) + HI(p03) + HI(p12) + HI(p21) + HI(p30) + LO(p13) + LO(p22) + LO(p31);
    const ulong c5 = HI(c4) + HI(p13) + HI(p22) + HI(p31) + LO(p23) + LO(p32);
    const uint c6 = (uint)HI(c5) + (uint)HI(p23) + (uint)HI(p32) + a.s3 * b.s3;
    return (fp128)((uint)c3, (uint)c4, (uint)c5, c6);
}

#ifdef FP128_PTX
/* The magnitude square as PTX carry chains: rows a0 * (a1, a2, a3), a1 * (a2, a3) and
 * a2 * a3 (the off-diagonal products, without the low half of a0 a1, with 2^30 added
 * at column 2) summed, doubled, then the diagonal a1^2, a2^2 and the low half of a3^2
 * added: the same terms as the portable version, so the same bits. */
inline fp128 fp_sqr_u(fp128 a)
{
    uint t2, t3, t4, u3, u4, u5, v5, v6;
    asm("mad.lo.cc.u32  %0, %8, %10, 0x40000000;\n\t"
        "madc.lo.cc.u32 %1, %8, %11, 0;\n\t"
        "addc.u32       %2, 0, 0;\n\t"
        "mad.hi.cc.u32  %0, %8, %9, %0;\n\t"
        "madc.hi.cc.u32 %1, %8, %10, %1;\n\t"
        "madc.hi.u32    %2, %8, %11, %2;\n\t"
        "mul.lo.u32     %3, %9, %10;\n\t"
        "mul.lo.u32     %4, %9, %11;\n\t"
        "mad.hi.cc.u32  %4, %9, %10, %4;\n\t"
        "madc.hi.u32    %5, %9, %11, 0;\n\t"
        "mul.lo.u32     %6, %10, %11;\n\t"
        "mul.hi.u32     %7, %10, %11;\n\t"
        "add.cc.u32     %1, %1, %3;\n\t"
        "addc.cc.u32    %2, %2, %4;\n\t"
        "addc.cc.u32    %5, %5, %6;\n\t"
        "addc.u32       %7, %7, 0;\n\t"
        "add.cc.u32     %0, %0, %0;\n\t"
        "addc.cc.u32    %1, %1, %1;\n\t"
        "addc.cc.u32    %2, %2, %2;\n\t"
        "addc.cc.u32    %5, %5, %5;\n\t"
        "addc.u32       %7, %7, %7;\n\t"
        "mad.lo.cc.u32  %0, %9, %9, %0;\n\t"
        "madc.hi.cc.u32 %1, %9, %9, %1;\n\t"
        "madc.lo.cc.u32 %2, %10, %10, %2;\n\t"
        "madc.hi.cc.u32 %5, %10, %10, %5;\n\t"
        "madc.lo.u32    %7, %11, %11, %7;"
        : "=&r"(t2), "=&r"(t3), "=&r"(t4), "=&r"(u3), "=&r"(u4), "=&r"(u5), "=&r"(v5), "=&r"(v6)
        : "r"(a.s0), "r"(a.s1), "r"(a.s2), "r"(a.s3));
    return (fp128)(t3, t4, u5, v6);
}

#else
/* Magnitude square: the same columns, each symmetric product counted twice. */
inline fp128 fp_sqr_u(fp128 a)
{
    const ulong p02 = (ulong)a.s0 * a.s2, p11 = (ulong)a.s1 * a.s1, p03 = (ulong)a.s0 * a.s3,
                p12 = (ulong)a.s1 * a.s2, p13 = (ulong)a.s1 * a.s3, p22 = (ulong)a.s2 * a.s2,
                p23 = (ulong)a.s2 * a.s3;
    const ulong c2 = 0x80000000UL + 2 * ((ulong)mul_hi(a.s0, a.s1) + LO(p02)) + LO(p11);
    const ulong c3 = HI(c2) + 2 * (HI(p02) + LO(p03) + LO(p12)) + HI(p11);
    const ulong c4 = HI(c3) + 2 * (HI(p03) + HI(p12) + LO(p13)) + LO(p22);
    const ulong c5 = HI(c4) + 2 * (HI(p13) + LO(p23)) + HI(p22);
    const uint c6 = (uint)HI(c5) + 2 * (uint)HI(p23) + a.s3 * a.s3;
    return (fp128)((uint)c3, (uint)c4, (uint)c5, c6);
}

#endif

inline fp128 fp_mul(fp128 a, fp128 b)
{
    return fp_negate_if(fp_mul_u(fp_abs(a), fp_abs(b)), fp_is_neg(a) ^ fp_is_neg(b));
}

inline fp128 fp_sqr(fp128 a) { return fp_sqr_u(fp_abs(a)); }

/* a + b for a turned frame's coordinate (mandel.cl, -DROTATED): exact (fixed point;
 * the coordinates are far inside the 32 integer bits). */
inline fp128 coord_add(fp128 a, fp128 b) { return fp_add(a, b); }

inline double to_double(fp128 a)
{
    return (double)(long)fp_hi(a) * 0x1p-32 + (double)fp_lo(a) * 0x1p-96;
}

/* z(1) = c; returns the first k with |z(k)|^2 > r2, or 0 after max_iter steps.
 * -DDISTANCE: *dz = w(k), w(1) = ds, w(k+1) = 2 z(k) w(k) + ds (ds dz/dc). */
inline uint escape_time(fp128 cr, fp128 ci, uint max_iter, fp128 r2, double ds, double2 *z,
                        double2 *dz)
{
    fp128 x = cr, y = ci;
#ifdef DISTANCE
    double wx = ds, wy = 0.0;
#endif
    for (uint k = 1;; ++k) {
        const fp128 xx = fp_sqr(x), yy = fp_sqr(y);
        const fp128 mag = fp_add(xx, yy);
        if (fp_gt_u(mag, r2)) {
            *z = (double2)(to_double(x), to_double(y));
#ifdef DISTANCE
            *dz = (double2)(wx, wy);
#endif
            return k;
        }
        if (k == max_iter)
            return 0;
#ifdef DISTANCE
        const double zx = to_double(x), zy = to_double(y);
        const double t = 2.0 * (zx * wx - zy * wy) + ds;
        wy = 2.0 * (zx * wy + zy * wx);
        wx = t;
#endif
        const fp128 s = fp_sqr(fp_add(x, y));
        x = fp_add(fp_sub(xx, yy), cr);
        y = fp_add(fp_sub(s, mag), ci);
    }
}
