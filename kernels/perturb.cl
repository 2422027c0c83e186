/* perturb.cl: escape time by perturbation against a reference orbit, for any depth.
 *
 * The view's centre C has a reference orbit Z(0) = 0, Z(n+1) = Z(n)^2 + C, computed
 * once on the host at the depth's precision (mpmath) and rounded to doubles. A pixel
 * c = C + dc follows z(n) = Z(m) + d with
 *     d <- (2 Z(m) + d) d + dc,  m <- m + 1
 * and is rebased (d <- Z(m) + d, m <- 0) whenever |Z(m) + d| < |d| or the reference
 * ends: the pixel then follows the reference from its start again, so one reference
 * serves every pixel without glitch detection (Zhuoran's rebasing). The count n is
 * the pixel's own: the contract of mandel.cl (first n >= 1 with |z(n)|^2 > R^2).
 *
 * Number formats: Z in doubles (|Z| <= R). d and dc in doubles, or, built with
 * -DPERTURB_FX for pixel spacings below 1e-305 (where pixel offsets stop being normal
 * doubles), in "floatexp": a
 * complex mantissa pair sharing one int exponent, value (m.x + i m.y) * 2^e, with
 * max(|m.x|, |m.y|) in [0.5, 1) (or m = 0), normalised after every step.
 *
 * Iteration skipping (both formats): a bilinear-approximation table (built on the
 * host per frame, farm/numerics/bla.py) maps d at step m to d at step m + 2^j as
 * A d + B dc while |d| < R; the loop takes the longest such map that starts at m
 * (m - 1 a multiple of 2^j) and is valid, checks escape where it lands, and otherwise
 * takes one ordinary step. bla_levels = 0 turns skipping off.
 *
 * Extensions: cl_khr_fp64.
 *
 * Pixel offsets dc (pixel_offset below): a flat tile by default; with -DPOLAR a polar
 * tile of an exponential map (farm/plan/expmap.py), whose pixel (col, row) is the point
 * at radius rho(row) and angle theta(col) around C, dc = rho(row) e^{i theta(col)}.
 *
 * Provides, for mandel.cl: FORMAT_ARGS, FORMAT_ARG_NAMES and escape_pixel. Arguments:
 *   orbit     [orbit_len] double2   Z(0) .. Z(orbit_len - 1), Z(0) = 0, Z(1) = C
 *   orbit_len           uint       >= 2; all |Z(m)|^2 <= R^2
 *   flat tile (default):
 *   kx0, ky0            int        2 x0 + 1 - W and 2 y0 + 1 - H for the tile at (x0, y0):
 *                                  pixel (col, row) has dc = ((kx0 + 2 col) - i (ky0 + 2 row)) h
 *   h_m, h_e          double, int  half the pixel spacing, h = h_m * 2^h_e, h_m in [0.5, 1)
 *   polar tile (-DPOLAR) instead:
 *   rho_m     [th]      double     radius mantissa of each tile row
 *   rho_e               int        their shared exponent: rho(row) = rho_m[row] * 2^rho_e
 *   cis       [tw]      double2    (cos theta, sin theta) of each tile column:
 *                                  dc = rho_m[row] cis[col] 2^rho_e
 *   then, for both:
 *   r2                  double     escape radius squared
 *   bla_ab    [N]       double4    (A.re, A.im, B.re, B.im) of each map
 *   bla_r     [N]       double     its validity radius
 *   bla_off   [levels+1] uint      level j's maps are bla_off[j] .. bla_off[j+1] - 1;
 *                                  map k of level j starts at step 1 + k 2^j
 *   bla_levels          uint       levels in the table (0: no skipping)
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#ifdef POLAR
#define OFFSET_ARGS __global const double *rho_m, const int rho_e, __global const double2 *cis
#define OFFSET_ARG_NAMES rho_m, rho_e, cis
/* dc of tile pixel (col, row) as a mantissa pair times 2^(*e) */
inline double2 pixel_offset(OFFSET_ARGS, uint col, uint row, int *e)
{
    *e = rho_e;
    return rho_m[row] * cis[col];
}
#else
#define OFFSET_ARGS const int kx0, const int ky0, const double h_m, const int h_e
#define OFFSET_ARG_NAMES kx0, ky0, h_m, h_e
inline double2 pixel_offset(OFFSET_ARGS, uint col, uint row, int *e)
{
    *e = h_e;
    return (double2)((double)(kx0 + 2 * (int)col) * h_m, -((double)(ky0 + 2 * (int)row) * h_m));
}
#endif

#define FORMAT_ARGS __global const double2 *orbit, const uint orbit_len, OFFSET_ARGS,         \
                    const double r2, __global const double4 *bla_ab, __global const double *bla_r, \
                    __global const uint *bla_off, const uint bla_levels
#define FORMAT_ARG_NAMES orbit, orbit_len, OFFSET_ARG_NAMES, r2, bla_ab, bla_r, bla_off, bla_levels

/* The longest valid skip at step m (>= 1) for a delta of size at most dmax: returns
 * 1 + its level, or 0 when none is valid. Validity is monotone in the level (a map's
 * radius never grows with its level, R = min(R1, ...), and a map that exists or fits
 * the remaining iterations implies its halves do): level 0 first, so a pixel that
 * cannot skip pays one load, then a binary search for the highest valid level. */
inline int bla_valid(__global const double *bla_r, __global const uint *bla_off, uint r, uint j,
                     uint room, double dmax)
{
    const uint idx = bla_off[j] + (r >> j);
    return idx < bla_off[j + 1] && (1u << j) <= room && dmax < bla_r[idx];
}

inline uint bla_level(__global const double *bla_r, __global const uint *bla_off,
                      uint bla_levels, uint m, uint room, double dmax)
{
    const uint r = m - 1;
    if (!bla_valid(bla_r, bla_off, r, 0, room, dmax))
        return 0;
    /* level j starts maps at steps with (m - 1) % 2^j == 0 */
    uint lo = 0, hi = min(popcount((r & (0u - r)) - 1u), bla_levels - 1);
    while (lo < hi) {
        const uint mid = (lo + hi + 1) / 2;
        if (bla_valid(bla_r, bla_off, r, mid, room, dmax))
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo + 1;
}

/* |x + i y| <= sqrt(2) max(|x|, |y|): a bound with no squares, which underflow below
 * 1e-154 */
inline double abs_bound(double x, double y)
{
    return fmax(fabs(x), fabs(y)) * 1.4142135623730951;
}

/* The high word of max(|x|, |y|): high words with the sign cleared order like the
 * values, and adding k << 20 to one multiplies its double by 2^k (for the skip
 * pre-checks, integer instructions beside the FP64 ones that bound the loops). */
inline uint high_word_max(double x, double y)
{
    return max(as_uint2(x).y & 0x7fffffffu, as_uint2(y).y & 0x7fffffffu);
}

/* The map (A.re, A.im, B.re, B.im) of level `level` starting at step m. */
inline double4 bla_map(__global const double4 *bla_ab, __global const uint *bla_off, uint m,
                       uint level)
{
    return bla_ab[bla_off[level] + ((m - 1) >> level)];
}

#ifndef PERTURB_FX

/* The longest valid skip for the pixel with delta (*dr, *di): applies it and returns
 * its length, or returns 0. */
inline uint bla_take(__global const double4 *bla_ab, __global const double *bla_r,
                     __global const uint *bla_off, uint bla_levels, uint m, uint room,
                     double *dr, double *di, double dcr, double dci)
{
    const uint level = bla_level(bla_r, bla_off, bla_levels, m, room, abs_bound(*dr, *di));
    if (!level)
        return 0;
    const double4 ab = bla_map(bla_ab, bla_off, m, level - 1);
    const double nr = ab.x * *dr - ab.y * *di + ab.z * dcr - ab.w * dci;
    *di = ab.x * *di + ab.y * *dr + ab.z * dci + ab.w * dcr;
    *dr = nr;
    return 1u << (level - 1);
}

/* A cheap filter in front of bla_take: a map at step m needs |d| < R <= 2^-52 |Z(m)|
 * (bla.py, EPS = 2^-53), so a skip is impossible unless max(|dr|, |di|) is below about
 * 2^-51 max(|Z.x|, |Z.y|). Most steps fail that, so it is tested on high words
 * (H200: -1% to +6% against the same test in doubles over five workloads,
 * BENCHMARKS.md). */
inline bool bla_worth_trying(double dr, double di, double2 Z)
{
    return high_word_max(dr, di) + (51u << 20) < high_word_max(Z.x, Z.y);
}

inline uint escape_pixel(FORMAT_ARGS, uint col, uint row, uint max_iter, double2 *z, double2 *c)
{
    int e;
    const double2 dm = pixel_offset(OFFSET_ARG_NAMES, col, row, &e);
    const double dcr = ldexp(dm.x, e), dci = ldexp(dm.y, e);
    *c = orbit[1] + (double2)(dcr, dci);
    double dr = 0.0, di = 0.0;
    uint m = 0;
    double2 Z = (double2)(0.0, 0.0); /* Z(m), kept in registers: one orbit load a step */
    for (uint n = 1; n <= max_iter; ++n) {
        uint len = 0;
        if (m >= 1 && bla_levels && bla_worth_trying(dr, di, Z)) {
            len = bla_take(bla_ab, bla_r, bla_off, bla_levels, m, max_iter - n + 1, &dr, &di,
                           dcr, dci);
            n += len ? len - 1 : 0; /* iterations n .. n + len - 1 are done */
        }
        if (!len) {
            const double ar = 2.0 * Z.x + dr, ai = 2.0 * Z.y + di;
            /* written so that contraction gives two FMAs per part (H200: 2% to 11%
             * faster than ar * dr - ai * di + dcr, which compiles to mul, fma, add) */
            const double nr = ar * dr + (dcr - ai * di);
            di = ar * di + (dci + ai * dr);
            dr = nr;
            len = 1;
        }
        m += len;
        Z = orbit[m];
        const double zr = Z.x + dr, zi = Z.y + di;
        const double mag = zr * zr + zi * zi;
        if (mag > r2) {
            *z = (double2)(zr, zi);
            return n;
        }
        /* rebase: the pixel is nearer 0 than its delta, or the reference ends (after a
         * skip |d| is far below |Z|, so only the end can apply) */
        if (mag < dr * dr + di * di || m == orbit_len - 1) {
            dr = zr;
            di = zi;
            m = 0;
            Z = (double2)(0.0, 0.0);
        }
    }
    return 0;
}

#else /* PERTURB_FX: floatexp deltas */

typedef struct {
    double2 m; /* mantissa pair, max |component| in [0.5, 1), or 0 */
    int e;     /* exponent: value = m * 2^e */
} fx2;

#define FX_ZERO_EXP (-1 << 30) /* the exponent of 0: below anything that matters */

inline fx2 fx_norm(double2 m, int e)
{
    const double big = fmax(fabs(m.x), fabs(m.y));
    fx2 r;
    if (big == 0.0) {
        r.m = (double2)(0.0, 0.0);
        r.e = FX_ZERO_EXP;
        return r;
    }
    const int k = ilogb(big) + 1; /* big * 2^-k in [0.5, 1) */
    r.m = (double2)(ldexp(m.x, -k), ldexp(m.y, -k));
    r.e = e + k;
    return r;
}

/* a + b; the smaller operand is shifted, dropped entirely when 60 bits below. */
inline fx2 fx_add(fx2 a, fx2 b)
{
    if (a.e < b.e) {
        const fx2 t = a;
        a = b;
        b = t;
    }
    const int d = a.e - b.e;
    const double2 bm = d > 60 ? (double2)(0.0, 0.0) : (double2)(ldexp(b.m.x, -d), ldexp(b.m.y, -d));
    return fx_norm(a.m + bm, a.e);
}

/* The double value (0 below double's range). */
inline double2 fx_to_double(fx2 a)
{
    return a.e < -1100 ? (double2)(0.0, 0.0) : (double2)(ldexp(a.m.x, a.e), ldexp(a.m.y, a.e));
}

/* An upper bound of |a| as a double: sqrt(2) max(|m.x|, |m.y|) 2^e (0 below double's
 * range, where every skip radius that is not 0 holds it). */
inline double fx_bound(fx2 a)
{
    return a.e < -1100 ? 0.0 : ldexp(abs_bound(a.m.x, a.m.y), a.e);
}

/* The cheap filter of the double loop, on exponents: |d| >= 2^(d.e - 1), and a map at
 * step m needs |d| < R <= 2^-52 |Z(m)| < 2^(-51.5 + E) with E - 1 = floor(log2
 * max(|Z.x|, |Z.y|)), so a skip is impossible unless d.e < E - 50; this passes a little
 * more (d.e < E - 48). E comes from the high words (a subnormal or 0 gives E <= -1022,
 * where nothing passes). */
inline bool fx_bla_worth_trying(fx2 d, double2 Z)
{
    return d.e < (int)(high_word_max(Z.x, Z.y) >> 20) - 1022 - 48;
}

/* the complex product a b */
inline double2 cmul(double2 a, double2 b)
{
    return (double2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

/* a b for a double complex a (any finite size: a map's A reaches 1e300 and beyond) */
inline fx2 fx_mul_d(double2 a, fx2 b)
{
    const fx2 an = fx_norm(a, 0);
    return fx_norm(cmul(an.m, b.m), an.e + b.e);
}

/* The longest valid skip for the pixel with delta *d: applies it (A d + B dc) and
 * returns its length, or returns 0. */
inline uint fx_bla_take(__global const double4 *bla_ab, __global const double *bla_r,
                        __global const uint *bla_off, uint bla_levels, uint m, uint room,
                        fx2 *d, fx2 dc)
{
    const uint level = bla_level(bla_r, bla_off, bla_levels, m, room, fx_bound(*d));
    if (!level)
        return 0;
    const double4 ab = bla_map(bla_ab, bla_off, m, level - 1);
    *d = fx_add(fx_mul_d(ab.xy, *d), fx_mul_d(ab.zw, dc));
    return 1u << (level - 1);
}

inline uint escape_pixel(FORMAT_ARGS, uint col, uint row, uint max_iter, double2 *z, double2 *c)
{
    int e;
    const double2 dm = pixel_offset(OFFSET_ARG_NAMES, col, row, &e);
    const fx2 dc = fx_norm(dm, e);
    *c = orbit[1] + fx_to_double(dc);
    fx2 d = fx_norm((double2)(0.0, 0.0), 0);
    uint m = 0;
    for (uint n = 1; n <= max_iter; ++n) {
        const double2 Zm = orbit[m];
        uint len = 0;
        if (m >= 1 && bla_levels && fx_bla_worth_trying(d, Zm)) {
            len = fx_bla_take(bla_ab, bla_r, bla_off, bla_levels, m, max_iter - n + 1, &d, dc);
            n += len ? len - 1 : 0; /* iterations n .. n + len - 1 are done */
        }
        if (!len) {
            /* d <- (2 Z + d) d + dc, with 2 Z + d in doubles: |d| is then tiny or O(1) */
            const double2 a = 2.0 * Zm + fx_to_double(d);
            d = fx_add(fx_norm(cmul(a, d.m), d.e), dc);
            len = 1;
        }
        m += len;
        const double2 dd = fx_to_double(d);
        const double2 Z = orbit[m];
        const double zr = Z.x + dd.x, zi = Z.y + dd.y;
        const double mag = zr * zr + zi * zi;
        if (mag > r2) {
            *z = (double2)(zr, zi);
            return n;
        }
        if (mag < dot(dd, dd) || m == orbit_len - 1) {
            d = fx_norm((double2)(zr, zi), 0);
            m = 0;
        }
    }
    return 0;
}

#endif
