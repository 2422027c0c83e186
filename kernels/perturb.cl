/* perturb.cl: escape time by perturbation against a reference orbit, for any depth.
 *
 * A reference point C (the nucleus of a minibrot near the view, or the view centre;
 * farm/plan/references.py) has the orbit Z(0) = 0, Z(n+1) = Z(n)^2 + C, computed on
 * the host at the depth's precision and rounded to doubles. A pixel c = C + dc follows
 * z(n) = Z(m) + d with
 *     d <- (2 Z(m) + d) d + dc,  m <- m + 1
 * and is rebased (d <- Z(m) + d, m <- 0) whenever |Z(m) + d| < |d|: the pixel then
 * follows the reference from its start again, so one reference serves every pixel
 * without glitch detection (Zhuoran's rebasing). At the orbit's last point the pixel
 * wraps: it goes on from Z(wrap_to) with d <- d + (Z(orbit_len - 1) - Z(wrap_to)), the
 * same point z measured from another point of the orbit. For a nucleus of period p the
 * orbit holds one period, Z(0) .. Z(p) with Z(p) ~ 0, and the wrap (wrap_to = 0) goes
 * to the next period; a Misiurewicz point's orbit holds its preperiod k and laps of its
 * cycle (Z(k + j q + i) = Z(k + i), farm/plan/references.py) and wraps to k; the view
 * centre's orbit wraps to 0 where it ends (a rebase). The count n is the pixel's own:
 * the contract of mandel.cl (first n >= 1 with |z(n)|^2 > R^2, 0 when none up to
 * max_iter).
 *
 * Number formats: Z in doubles (|Z| <= R). d and dc in doubles, or, built with
 * -DPERTURB_FX for pixel spacings below 1e-305 (where pixel offsets stop being normal
 * doubles), in "floatexp": a complex mantissa pair sharing one int exponent, value
 * (m.x + i m.y) * 2^e, with max(|m.x|, |m.y|) in [0.5, 1) (or m = 0), normalised after
 * every step. Exponents are 32-bit ints: deltas to 2^-(2^30), 1e-323000000, far below
 * any depth whose reference orbit a machine can compute. Floatexp builds read Z as a
 * mantissa and an exponent (orbit_e, 0 for points within double's range, where the
 * mantissa is Z itself): an orbit that passes within 1e-308 of 0 (near a deep minibrot)
 * is stepped in floatexp there. Products are written as explicit fma() with
 * contraction off, so that every device (and perturb_lanes.cl) rounds alike.
 *
 * Iteration skipping (both formats): a table of maps (built on the host per frame,
 * farm/numerics/bla.py) takes d at step m to d at step m + 2^j as
 *     A d + B dc + (C d + D dc) d + (E dc) dc        while max(|d.x|, |d.y|) < R
 * plus, in degree-4 maps (farm/numerics/highdegree.py; 0 in quadratic ones, and floatexp
 * loops read only A .. E), F d^3 + G d^2 dc + H d dc^2 + I dc^3 + J d^4 + K d^3 dc +
 * L d^2 dc^2 + M d dc^3 + N dc^4;
 * the loop takes the longest such map that starts at m (m - 1 a multiple of 2^j) and
 * is valid, checks escape where it lands, and otherwise takes one ordinary step.
 * bla_levels = 0 turns skipping off.
 *
 * Interior pixels (a nucleus reference, lam != 0): see "interior" below.
 * -DPERTURB_NO_INTERIOR compiles the test out of both loops here (its state, four
 * doubles a pixel, cost more than it saved on an H200: farm/compute/launch.py).
 *
 * Samples (-DSAMPLES=S > 1, flat tiles): sample k of pixel (col, row) sits at the
 * offset soff[k] from the pixel centre (farm/plan/samples.py, multiples of 2^-16 px,
 * x right, y down), so its dc is the pixel's moved by soff[k] s. The half-spacing
 * coordinate 2 col + kx0 + 2 soff[k].x is exact in a double (an integer below 2^31
 * plus 15 fraction bits), so dc is rounded once, as the centre's is; sample 0 (offset
 * 0) is bitwise the pixel without samples. Samples lie inside the image, so the frame's
 * |dc| bound (farm/compute/perturbation.py: the image corners) covers them and every
 * skip stays valid.
 *
 * Derivative (-DDISTANCE): the reference orbit Z does not depend on the pixel's c, so
 * dz/dc = d(Z(m) + d)/dc = dd/dc: the pixel's full derivative is the derivative of its
 * delta, and no derivative of the reference is needed. It is carried scaled by the
 * pixel spacing s, as in mandel.cl: w = s dz/dc, w = 0 at z = 0, and
 *     step   w <- 2 z w + s,  z = Z(m) + d before the step (d's step differentiated:
 *            d' = (2 Z + d) d + dc gives dd'/dc = 2 (Z + d) dd/dc + 1)
 *     rebase, wrap   nothing: z is the same point, so is its derivative
 *     skip   the map's derivative: d' = A d + B dc + C d^2 + D d dc + E dc^2 gives
 *            w <- (A + 2 C d + D dc) w + (B + D d + 2 E dc) s   (d, dc before the skip;
 *            degree-4 maps add their terms' derivatives: bla_deriv)
 * Error of a skip: the terms a map drops are of degree 3 (5 for degree-4 maps) and
 * more in (d, dc), and its relative error in d is at most eps (farm/numerics/bla.py;
 * an estimate for degree-4 maps, farm/numerics/highdegree.py); along the pixel's own
 * path, where d and dc scale together, a term of degree j contributes j times its size
 * over |dc| to the derivative, so w's relative error from a skip is a few eps (and the
 * maps' dropped quadratic terms, < 2^-64 of the linear ones at the radius, contribute
 * at most twice that): far below the float32 of the stored estimate. Scale: |w| starts
 * at s and ends near |z| ln|z| / (distance in pixels) (about 1e4 / distance at the
 * bailout), so double deltas (s >= 1e-305) keep w in double; floatexp frames carry w
 * in floatexp too (fx2, s below double's range), converted to double at the escape.
 * The smooth offset's extra steps (mandel.cl) go on in double with s rounded to double
 * (0 in floatexp frames: negligible next to w there).
 *
 * Pixel offsets dc (pixel_offset below): a flat tile by default; with -DPOLAR a polar
 * tile of an exponential map (farm/plan/expmap.py), whose pixel (col, row) is the point
 * at radius rho(row) and angle theta(col) around C (the view centre: polar tiles take
 * the centre's reference), dc = rho(row) e^{i theta(col)}. Polar tiles take one sample
 * per pixel and no derivative (the expmap method refuses both).
 *
 * Extensions: cl_khr_fp64.
 *
 * Provides, for mandel.cl: FORMAT_ARGS, FORMAT_ARG_NAMES and escape_pixel (and, with
 * perturb_lanes.cl, escape_lanes). Arguments:
 *   orbit     [orbit_len] double2   Z(0) .. Z(orbit_len - 1), Z(0) = 0, Z(1) = C; in
 *                                  floatexp builds the mantissa where orbit_e != 0
 *   orbit_e   [orbit_len] int        floatexp builds: Z(m) = orbit[m] 2^orbit_e[m] (0 for
 *                                  points in double's range); unread otherwise
 *   orbit_len           uint       >= 2; all |Z(m)|^2 <= R^2
 *   wrap_to             uint       where the pixel goes on after the last point (< orbit_len - 1)
 *   wrap_m, wrap_e  double2, int   Z(orbit_len - 1) - Z(wrap_to) = wrap_m 2^wrap_e, added
 *                                  to the pixel's delta at the wrap
 *   flat tile (default):
 *   kx0, ky0            int        2 x0 + 1 - W and 2 y0 + 1 - H for the tile at (x0, y0)
 *   ref_off             double2    (view centre - C) / h: see pixel_offset()
 *   h_m, h_e          double, int  half the pixel spacing, h = h_m * 2^h_e, h_m in [0.5, 1)
 *   soff      [S]       int2       (SAMPLES > 1 only) sample k's offset from the pixel
 *                                  centre in 2^-16 px, x right, y down; soff[0] = (0, 0)
 *   rot                 double2    (-DROTATED only) (cos, sin) of the frame's angle: each
 *                                  pixel's offset from the view centre is turned by it
 *                                  (pixel_offset; farm/compute/perturbation.py)
 *   polar tile (-DPOLAR) instead:
 *   rho_m     [th]      double     radius mantissa of each tile row
 *   rho_e               int        their shared exponent: rho(row) = rho_m[row] * 2^rho_e
 *   cis       [tw]      double2    (cos theta, sin theta) of each tile column:
 *                                  dc = rho_m[row] cis[col] 2^rho_e
 *   then, for both:
 *   r2                  double     escape radius squared
 *   bla_ab    [14 N]    double2    A .. N of each map (complex), one map a row:
 *                                  the map of level j from step m is row m - 1 + 2^(j-1)
 *   bla_r     [N]       double     its validity radius for max(|d.x|, |d.y|), 0 where
 *                                  there is none (floatexp builds: its log2, or -inf)
 *   bla_rows            uint       N
 *   bla_levels          uint       levels in the table (maps of 2^j steps, j < levels;
 *                                  0 or 1: no skipping)
 *   bla_shift           uint       every map at step m has R <= 2^-(shift+1) max(|Z.x|,|Z.y|)
 *   lam, lam_e      double2, int   lambda' = lam 2^lam_e of a nucleus (lam = 0: no
 *                                  interior test)
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#ifndef SAMPLES
#define SAMPLES 1
#endif

#ifdef ROTATED /* a turned flat tile: (cos, sin) of the frame's angle after its arguments */
#define ROT_ARG , const double2 rot
#define ROT_ARG_NAME , rot
#else
#define ROT_ARG
#define ROT_ARG_NAME
#endif

#ifdef POLAR
#if SAMPLES > 1 || defined(DISTANCE) || defined(ROTATED)
#error "polar tiles take one sample per pixel, no distance estimate and no turn"
#endif
#define OFFSET_ARGS __global const double *rho_m, const int rho_e, __global const double2 *cis
#define OFFSET_ARG_NAMES rho_m, rho_e, cis
/* dc of tile pixel (col, row) as a mantissa pair times 2^(*e) (one sample: k = 0) */
inline double2 pixel_offset(OFFSET_ARGS, uint col, uint row, uint k, int *e)
{
    *e = rho_e;
    return rho_m[row] * cis[col];
}
#else
#if SAMPLES > 1
#define SOFF_ARG , __global const int2 *soff
#define SOFF_ARG_NAME , soff
#else
#define SOFF_ARG
#define SOFF_ARG_NAME
#endif
#define OFFSET_ARGS const int kx0, const int ky0, const double2 ref_off, const double h_m, \
                    const int h_e SOFF_ARG ROT_ARG
#define OFFSET_ARG_NAMES kx0, ky0, ref_off, h_m, h_e SOFF_ARG_NAME ROT_ARG_NAME
/* the pixel spacing s = 2 h (-DDISTANCE: the derivative's unit; 0 or subnormal in
 * floatexp frames, where only the smooth offset's last steps use it) */
#define PIXEL_SPACING ldexp(h_m, h_e + 1)
/* dc of sample k of tile pixel (col, row) as a mantissa pair times 2^(*e): its offset
 * from the reference point is ((kx0 + 2 col + 2 ox + ref_off.x) + i (ref_off.y - (ky0 +
 * 2 row + 2 oy))) h, (ox, oy) = soff[k] 2^-16 (the sums before ref_off are exact in a
 * double; one rounding where ref_off is added). A turned frame (-DROTATED) turns the
 * offset from the view centre, p + i q = (kx0 + 2 col + 2 ox) - i (ky0 + 2 row + 2 oy),
 * by rot = (cos, sin) before ref_off is added: one rounding in each product's fma and
 * one where ref_off is added; at rot = (1, 0) the same numbers as unturned. */
inline double2 pixel_offset(OFFSET_ARGS, uint col, uint row, uint k, int *e)
{
    *e = h_e;
#ifdef ROTATED /* the offset from the view centre (p, q) turned by rot, then ref_off added */
#if SAMPLES > 1
    const int2 o = soff[k];
    const double p = (double)(kx0 + 2 * (int)col) + (double)o.x * 0x1p-15;
    const double q = -((double)(ky0 + 2 * (int)row) + (double)o.y * 0x1p-15);
#else
    const double p = (double)(kx0 + 2 * (int)col), q = -(double)(ky0 + 2 * (int)row);
#endif
    return (double2)(fma(p, rot.x, -(q * rot.y)) + ref_off.x,
                     fma(p, rot.y, q * rot.x) + ref_off.y) * h_m;
#elif SAMPLES > 1
    const int2 o = soff[k];
    const double sx = (double)o.x * 0x1p-15, sy = (double)o.y * 0x1p-15;
    return (double2)(((double)(kx0 + 2 * (int)col) + sx) + ref_off.x,
                     ref_off.y - ((double)(ky0 + 2 * (int)row) + sy)) * h_m;
#else
    return (double2)((double)(kx0 + 2 * (int)col) + ref_off.x,
                     ref_off.y - (double)(ky0 + 2 * (int)row)) * h_m;
#endif
}
#endif

#define FORMAT_ARGS __global const double2 *orbit, __global const int *orbit_e,              \
                    const uint orbit_len, const uint wrap_to, const double2 wrap_m,      \
                    const int wrap_e, OFFSET_ARGS,                                       \
                    const double r2, __global const double2 *bla_ab,                     \
                    __global const double *bla_r, const uint bla_rows,                   \
                    const uint bla_levels, const uint bla_shift, const double2 lam,      \
                    const int lam_e STEPS_ARGS
#define FORMAT_ARG_NAMES orbit, orbit_e, orbit_len, wrap_to, wrap_m, wrap_e, OFFSET_ARG_NAMES, \
                         r2, bla_ab, bla_r, bla_rows, bla_levels, bla_shift, lam, lam_e      \
                         STEPS_ARG_NAMES

/* Built with -DPERTURB_STEPS (benchmarks only): two more arguments, steps_out [npix]
 * uint and steps_tw uint (the tile width), get each pixel's number of loop passes (a
 * step or a skip), the device-independent cost of skipping. */
#ifdef PERTURB_STEPS
#define STEPS_ARGS , __global uint *steps_out, const uint steps_tw
#define STEPS_ARG_NAMES , steps_out, steps_tw
#define STEPS_DECL uint steps = 0
#define COUNT_STEP() (++steps)
#define COUNT_PASS(s) (++(s)->passes)
#define STORE_STEPS(col, row, count) (steps_out[(row) * steps_tw + (col)] = (count))
#else
#define STEPS_ARGS
#define STEPS_ARG_NAMES
#define STEPS_DECL
#define COUNT_STEP()
#define COUNT_PASS(s)
#define STORE_STEPS(col, row, count)
#endif

/* ------------------------------------------------------------------ skip tables */

/* The table's rows (farm/numerics/bla.py, device_layout): the map of 2^j steps (level
 * j >= 1) that starts at step m (m - 1 a multiple of 2^j) is row (m - 1) + 2^(j - 1),
 * the middle of the steps it covers, so every row holds one map; it is valid while
 * max(|d.x|, |d.y|) < bla_r[row] (radius 0, or -inf for log2 radii: absent or never
 * valid). The maps that start at one step lie 1, 2, 4, ... rows apart: the short ones
 * share a cache line. */

#ifndef BLA_MIN_LEVEL
#define BLA_MIN_LEVEL 1 /* the shortest skip taken: 2^BLA_MIN_LEVEL steps */
#endif

/* Whether the map of level j starting at step r + 1 exists, fits the room left and is
 * valid for a delta whose larger part is dmax (log2 of it for log2 radii). */
inline bool bla_valid(__global const double *bla_r, uint bla_rows, uint r, uint j, uint room,
                      double dmax)
{
    const uint row = r + (1u << (j - 1));
    return !(r & ((1u << j) - 1u)) && row < bla_rows && (1u << j) <= room && dmax < bla_r[row];
}

/* The longest valid skip at step m, given that level BLA_MIN_LEVEL is valid there: its
 * level. Validity is monotone in the level (a map's radius never exceeds that of its
 * first half, and a map that exists or fits the room implies its halves do), and most
 * skips are short, so the levels are tried upwards. */
inline uint bla_level_above(__global const double *bla_r, uint bla_rows, uint bla_levels, uint m,
                            uint room, double dmax)
{
    uint j = BLA_MIN_LEVEL;
    while (j + 1 < bla_levels && bla_valid(bla_r, bla_rows, m - 1, j + 1, room, dmax))
        ++j;
    return j;
}

/* The longest valid skip at step m >= 1: its level, or 0 when none is. */
inline uint bla_level(__global const double *bla_r, uint bla_rows, uint bla_levels, uint m,
                      uint room, double dmax)
{
    if (bla_levels <= BLA_MIN_LEVEL || !bla_valid(bla_r, bla_rows, m - 1, BLA_MIN_LEVEL, room, dmax))
        return 0;
    return bla_level_above(bla_r, bla_rows, bla_levels, m, room, dmax);
}

/* The map (A, B, C, D, E) of level j starting at step m. */
#define BLA_TERMS 14 /* A .. N: a map's coefficients (complex), a row each */

inline __global const double2 *bla_map(__global const double2 *bla_ab, uint m, uint j)
{
    return bla_ab + BLA_TERMS * ((m - 1) + (1u << (j - 1)));
}

/* The radius of the shortest map (level BLA_MIN_LEVEL) that starts at step m, 0 where
 * none does (m = 0 included). Loaded beside Z(m), it makes the loop's test "can this
 * pixel skip at all?" exact for one load that waits on nothing else (BENCHMARKS.md,
 * "Skipping: one load decides"). */
inline double bla_first_radius(__global const double *bla_r, uint bla_rows, uint m)
{
    const uint r = m - 1, row = r + (1u << (BLA_MIN_LEVEL - 1));
    return !(r & ((1u << BLA_MIN_LEVEL) - 1u)) && row < bla_rows ? bla_r[row] : 0.0;
}

/* The high word of max(|x|, |y|): high words with the sign cleared order like the
 * values, and adding k << 20 to one multiplies its double by 2^k (for the skip
 * pre-checks, integer instructions beside the FP64 ones that bound the loops). */
inline uint high_word_max(double x, double y)
{
    return max(as_uint2(x).y & 0x7fffffffu, as_uint2(y).y & 0x7fffffffu);
}

/* the complex product a b */
inline double2 cmul(double2 a, double2 b)
{
    return (double2)(fma(a.x, b.x, -a.y * b.y), fma(a.x, b.y, a.y * b.x));
}

/* ------------------------------------------------------------------ interior */

/* Interior pixels, for a nucleus reference of period p (lam != 0). Near the minibrot,
 * one period takes the pixel's z at a wrap to z_p + lambda' z^2 (lambda' = prod_{m=1}^
 * {p-1} 2 Z(m), farm/plan/references.py): in the minibrot's own coordinates w =
 * lambda' z, one period is w -> w^2 + c', a copy of the whole set. A pixel starts at
 * z = 0 (w = 0, like a wrap) and its wraps give w_1, w_2, ...; the tests, at each wrap
 * after a run of consecutive ones (a plain rebase breaks the run):
 *
 * model     from three consecutive wraps, c' = w_1 - w_0^2 and the model predicts w_2 =
 *           w_1^2 + c'; where it does (to 2^-24) and c' lies in the copy's main cardioid
 *           (multiplier of the fixed point |1 - sqrt(1 - 4c')| <= 0.9) or its period-2
 *           disc (multiplier of the 2-cycle |4 (c' + 1)| <= 0.9), the critical orbit of
 *           w -> w^2 + c' is attracted to that cycle (every attracting cycle attracts a
 *           critical point): the pixel never escapes.
 * contraction  with a = |w_0| and b = |w_1 - w_0|: if a < 0.45 and b <= (1 - 2a)^2 / 16,
 *           the map sends the disc of radius (1 - 2a) / 4 around w_0 into itself as a
 *           contraction (|2w| <= (1 + 2a) / 2 < 1 on it; the margin 16 instead of 8
 *           covers the quadratic model's error): an attracting fixed point.
 *
 * Such a pixel stops with count 0 (tests/test_skip.py checks that no escaping pixel
 * does, against exact counts). The model test catches most of the main cardioid after
 * two periods; the contraction test the rest as its orbit settles. */
typedef struct {
    double2 w0, w1; /* w at the last two wraps (w1 the last) */
    uint wraps;     /* consecutive wraps behind w1 (the start counts as one) */
} wrap_track;

inline wrap_track wraps_start(void)
{
    wrap_track t;
    t.w0 = t.w1 = (double2)(0.0, 0.0);
    t.wraps = 1;
    return t;
}

/* principal square root */
inline double2 csqrt(double2 a)
{
    const double r = hypot(a.x, a.y);
    return (double2)(sqrt(0.5 * (r + a.x)), copysign(sqrt(0.5 * (r - a.x)), a.y));
}

/* c in the main cardioid or the period-2 disc of the Mandelbrot set, with the
 * multiplier of its attracting cycle at most margin */
inline bool attracting(double2 c, double margin)
{
    const double2 mu = (double2)(1.0, 0.0) - csqrt((double2)(1.0 - 4.0 * c.x, -4.0 * c.y));
    return hypot(mu.x, mu.y) <= margin || 4.0 * hypot(c.x + 1.0, c.y) <= margin;
}

inline bool contracts(double a, double b)
{
    const double room = 1.0 - 2.0 * a;
    return a < 0.45 && b * 16.0 <= room * room;
}

/* A wrap at w (minibrot coordinates): whether the pixel is interior. */
inline bool wrap_interior(wrap_track *t, double2 w)
{
    bool inside = contracts(hypot(t->w1.x, t->w1.y), hypot(w.x - t->w1.x, w.y - t->w1.y));
    if (!inside && t->wraps >= 2) {
        const double2 c = t->w1 - cmul(t->w0, t->w0);
        const double2 e = w - (cmul(t->w1, t->w1) + c);
        inside = hypot(e.x, e.y) <= 0x1p-24 * (1.0 + hypot(w.x, w.y)) && attracting(c, 0.9);
    }
    t->w0 = t->w1;
    t->w1 = w;
    t->wraps = min(t->wraps + 1u, 2u);
    return inside;
}

#ifndef PERTURB_FX

/* ------------------------------------------------------------------ double deltas */

/* One perturbation step d <- (2 Z + d) d + dc, two FMAs a part (H200: 2% to 11% faster
 * than mul, fma, add). */
inline double2 delta_step(double2 d, double2 Z, double2 dc)
{
    const double ar = fma(2.0, Z.x, d.x), ai = fma(2.0, Z.y, d.y);
    return (double2)(fma(ar, d.x, fma(-ai, d.y, dc.x)), fma(ar, d.y, fma(ai, d.x, dc.y)));
}

/* A map applied: the polynomial in d whose coefficients are polynomials in dc, each by
 * Horner's rule (14 complex products; the sum term by term took 21, and the 1080p
 * Seahorse frame ran 4-8% slower on an H200):
 *     P0 + (P1 + (P2 + (P3 + J d) d) d) d with
 *     P0 = (B + (E + (I + N dc) dc) dc) dc,  P1 = A + (D + (H + M dc) dc) dc,
 *     P2 = C + (G + L dc) dc,  P3 = F + K dc
 * (F .. N = 0 in a quadratic map). No power of d or dc is formed alone: those could
 * underflow where d and dc are tiny and the coefficients huge. Each Pk is formed just
 * before the step of d's Horner rule that takes it (the same operations as forming the
 * four first: the same bits), so fewer values are live at once: the kernel took 64
 * registers instead of 72 on an H200, and its plain loop ran 7% faster. */
inline double2 bla_apply(__global const double2 *map, double2 d, double2 dc)
{
    double2 t = (map[5] + cmul(map[10], dc)) + cmul(map[9], d);                  /* P3 + J d */
    t = (map[2] + cmul(map[6] + cmul(map[11], dc), dc)) + cmul(t, d);               /* P2 + . d */
    t = (map[0] + cmul(map[3] + cmul(map[7] + cmul(map[12], dc), dc), dc)) + cmul(t, d); /* P1 */
    return cmul(map[1] + cmul(map[4] + cmul(map[8] + cmul(map[13], dc), dc), dc), dc) + cmul(t, d); /* P0 */
}

/* One derivative step w <- 2 z w + s (z = Z + d before d's step; -DDISTANCE), two FMAs
 * a part, as perturb_lanes.cl does it. */
inline double2 deriv_step(double2 w, double2 z, double s)
{
    const double tr = 2.0 * z.x, ti = 2.0 * z.y;
    return (double2)(fma(tr, w.x, fma(-ti, w.y, s)), fma(tr, w.y, ti * w.x));
}

/* A map's derivative applied (-DDISTANCE): a w + b s, with d, dc before the map and
 *     a = A + 2 C d + D dc + 3 F d^2 + 2 G d dc + H dc^2
 *           + 4 J d^3 + 3 K d^2 dc + 2 L d dc^2 + M dc^3      (the map's d/dd)
 *     b = B + D d + 2 E dc + G d^2 + 2 H d dc + 3 I dc^2
 *           + K d^3 + 2 L d^2 dc + 3 M d dc^2 + 4 N dc^3      (its d/ddc) */
inline double2 bla_deriv(__global const double2 *map, double2 d, double2 dc, double2 w, double s)
{
    const double2 fd = cmul(map[5], d), gd = cmul(map[6], d), hd = cmul(map[7], d);
    /* the degree-4 terms' parts */
    const double2 a4 = cmul(cmul(4.0 * cmul(map[9], d) + 3.0 * cmul(map[10], dc), d) +
                            2.0 * cmul(cmul(map[11], dc), dc), d) +
                       cmul(cmul(cmul(map[12], dc), dc), dc);
    const double2 b4 = cmul(cmul(cmul(map[10], d) + 2.0 * cmul(map[11], dc), d), d) +
                       cmul(cmul(3.0 * cmul(map[12], d) + 4.0 * cmul(map[13], dc), dc), dc);
    const double2 a = map[0] + 2.0 * cmul(map[2], d) + cmul(map[3], dc) +
                      cmul(3.0 * fd + 2.0 * cmul(map[6], dc), d) + cmul(cmul(map[7], dc), dc) + a4;
    const double2 b = map[1] + cmul(map[3], d) + 2.0 * cmul(map[4], dc) + cmul(gd, d) +
                      cmul(2.0 * hd + 3.0 * cmul(map[8], dc), dc) + b4;
    return cmul(a, w) + b * s;
}

/* The skip of level j at step m applied to *d (and, with -DDISTANCE, its derivative to
 * *w, s the pixel spacing); returns its length 2^j. */
inline uint bla_skip(__global const double2 *bla_ab, uint m, uint j, double2 *d, double2 dc,
                     double2 *w, double s)
{
    __global const double2 *map = bla_map(bla_ab, m, j);
#ifdef DISTANCE
    *w = bla_deriv(map, *d, dc, *w, s);
#endif
    *d = bla_apply(map, *d, dc);
    return 1u << j;
}

/* |z|^2 and |d|^2 as the loops compare them */
inline double norm2(double2 z)
{
    return fma(z.x, z.x, z.y * z.y);
}

/* z in the minibrot's coordinates: lambda' z */
inline double2 mini_w(double2 z, double2 lam, int lam_e)
{
    return ldexp(cmul(lam, z), lam_e);
}

/* One pixel's state: the loop's variables, in one place. */
typedef struct {
    double2 d;    /* delta from Z(m) */
    double2 dc;   /* offset of the pixel from the reference point */
    double2 Z;    /* Z(m), kept in registers: one orbit load a step */
    double r1;    /* radius of the shortest skip from step m (0: none), loaded with Z */
    double2 w;    /* s dz/dc (-DDISTANCE) */
#ifndef PERTURB_NO_INTERIOR
    wrap_track wraps; /* the interior test's memory */
#endif
    uint m;       /* reference step */
    uint n;       /* iterations done */
#ifdef PERTURB_STEPS
    uint passes;  /* loop passes: steps and skips */
#endif
} pixel_state;

inline pixel_state pixel_start(FORMAT_ARGS, uint col, uint row, uint k)
{
    pixel_state s;
    int e;
    const double2 dm = pixel_offset(OFFSET_ARG_NAMES, col, row, k, &e);
    s.dc = ldexp(dm, e);
    s.d = s.Z = s.w = (double2)(0.0, 0.0);
    s.r1 = 0.0;
#ifndef PERTURB_NO_INTERIOR
    s.wraps = wraps_start();
#endif
    s.m = s.n = 0;
#ifdef PERTURB_STEPS
    s.passes = 0;
#endif
    return s;
}

/* After a step or a skip has moved the pixel to step m with delta d: escape (returns
 * 1, z set), interior (returns 2), or on (returns 0; rebased or wrapped if due). */
inline int pixel_after(FORMAT_ARGS, pixel_state *s, double2 *z)
{
    s->Z = orbit[s->m];
    s->r1 = bla_first_radius(bla_r, bla_rows, s->m);
    const double2 zz = s->Z + s->d;
    const double mag = norm2(zz);
    if (mag > r2) {
        *z = zz;
        return 1;
    }
    if (s->m == orbit_len - 1) {
        /* the wrap (a nucleus: one period since m = 0, and the interior test; wrap_to =
         * 0, where d + (Z(m) - 0) is the Z(m) + d of a rebase, bit for bit) */
#ifndef PERTURB_NO_INTERIOR
        if ((lam.x != 0.0 || lam.y != 0.0) && wrap_interior(&s->wraps, mini_w(zz, lam, lam_e)))
            return 2;
#endif
        s->d = s->d + ldexp(wrap_m, wrap_e);
        s->m = wrap_to;
        s->Z = orbit[wrap_to];
        s->r1 = bla_first_radius(bla_r, bla_rows, wrap_to);
    } else if (mag < norm2(s->d)) {
        /* rebase: the pixel is nearer 0 than its delta (after a skip |d| is far below
         * |Z|, so only a step gets here) */
        s->d = zz;
        s->m = 0;
        s->Z = (double2)(0.0, 0.0);
        s->r1 = 0.0;
#ifndef PERTURB_NO_INTERIOR
        s->wraps.wraps = 0;
#endif
    }
    return 0;
}

#ifndef STEP_RUN
#define STEP_RUN 8 /* the most ordinary steps in one round (pixel_round) */
#endif
#ifndef SKIP_RUN
#define SKIP_RUN 2 /* the most skips in one round */
#endif

/* Whether the pixel in state s can skip with room iterations left: the shortest skip's
 * test in integer instructions (high words order like the values; equal ones count as
 * too large), as FP64 ones bound the loop. */
#define SKIP_READY(s, room) \
    (high_word_max((s).d.x, (s).d.y) < as_uint2((s).r1).y && (1u << BLA_MIN_LEVEL) <= (room))

/* One round of a pixel's loop: skips while one is valid, at most SKIP_RUN of them,
 * then ordinary steps while none is, at most STEP_RUN. A warp whose pixels diverge
 * (some skip, some step) runs both branches, each with some of its lanes idle; in a
 * round each branch does a run, so the warp runs the skip branch less often than when
 * every pixel took one step or one skip and the warp then went round again. A run of
 * 8 steps brings a pixel that stepped off a skip's start back to the next one (skips
 * start where m - 1 is a multiple of 2^BLA_MIN_LEVEL = 8 on GPUs). The pixel's
 * sequence of steps and skips does not depend on the runs' lengths (BENCHMARKS.md,
 * "The Seahorse target met"). Returns 0 while the pixel goes on, 1 when it escaped
 * (*z set), 2 when it is interior, 3 when it reached max_iter. */
inline int pixel_round(FORMAT_ARGS, pixel_state *s, uint max_iter, double ds, double2 *z)
{
    uint room = max_iter - s->n;
    for (uint i = 0; i < SKIP_RUN && SKIP_READY(*s, room); ++i) {
        COUNT_PASS(s);
        const uint j = bla_level_above(bla_r, bla_rows, bla_levels, s->m, room,
                                       fmax(fabs(s->d.x), fabs(s->d.y)));
        const uint len = bla_skip(bla_ab, s->m, j, &s->d, s->dc, &s->w, ds);
        s->m += len;
        s->n += len;
        const int end = pixel_after(FORMAT_ARG_NAMES, s, z);
        if (end)
            return end;
        room = max_iter - s->n;
    }
    for (uint i = 0; i < STEP_RUN && room && !SKIP_READY(*s, room); ++i) {
        COUNT_PASS(s);
#ifdef DISTANCE
        s->w = deriv_step(s->w, s->Z + s->d, ds);
#endif
        s->d = delta_step(s->d, s->Z, s->dc);
        s->m += 1;
        s->n += 1;
        const int end = pixel_after(FORMAT_ARG_NAMES, s, z);
        if (end)
            return end;
        room -= 1;
    }
    return room ? 0 : 3;
}

inline uint escape_pixel(FORMAT_ARGS, uint col, uint row, uint k, uint max_iter, double2 *z,
                         double2 *c, double2 *w)
{
    pixel_state s = pixel_start(FORMAT_ARG_NAMES, col, row, k);
    *c = orbit[1] + s.dc;
#ifdef DISTANCE
    const double ds = PIXEL_SPACING;
#else
    const double ds = 0.0;
#endif
    int end;
    while (!(end = pixel_round(FORMAT_ARG_NAMES, &s, max_iter, ds, z)))
        ;
    STORE_STEPS(col, row, s.passes);
    *w = s.w;
    return end == 1 ? s.n : 0;
}

#else /* PERTURB_FX: floatexp deltas */

/* ------------------------------------------------------------------ floatexp deltas */

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

/* The cheap filter of the double loop, on exponents: |d| >= 2^(d.e - 1), and a map at
 * step m needs |d| < R <= 2^-(shift+1) max(|Z.x|, |Z.y|) < 2^(E - shift - 1) with E - 1 =
 * floor(log2 max(|Z.x|, |Z.y|)), so a skip is impossible unless d.e < E - shift; this
 * passes a little more (d.e < E - shift + 3). E comes from the high words (a subnormal
 * or 0 gives E <= -1022, where nothing passes). */
inline bool fx_bla_worth_trying(fx2 d, double2 Z, uint shift)
{
    return d.e < (int)(high_word_max(Z.x, Z.y) >> 20) - 1022 - (int)shift + 3;
}

/* a b for a double complex a (any finite size: a map's A reaches 1e300 and beyond) */
inline fx2 fx_mul_d(double2 a, fx2 b)
{
    const fx2 an = fx_norm(a, 0);
    return fx_norm(cmul(an.m, b.m), an.e + b.e);
}

/* a b */
inline fx2 fx_mul(fx2 a, fx2 b)
{
    return fx_norm(cmul(a.m, b.m), a.e + b.e);
}

/* z in the minibrot's coordinates, lambda' z (inf far from it, 0 below range) */
inline double2 fx_mini_w(fx2 z, double2 lam, int lam_e)
{
    fx2 w = fx_mul_d(lam, z);
    w.e = w.e == FX_ZERO_EXP ? w.e : w.e + lam_e;
    return w.e > 2000 ? (double2)(INFINITY, INFINITY) : fx_to_double(w);
}

/* 2 a */
inline fx2 fx_twice(fx2 a)
{
    a.e = a.e == FX_ZERO_EXP ? a.e : a.e + 1;
    return a;
}

/* |a| < |b| */
inline bool fx_less(fx2 a, fx2 b)
{
    if (a.e < b.e - 4)
        return true; /* (a = 0 included) */
    if (b.e < a.e - 4)
        return false;
    return ldexp(fma(a.m.x, a.m.x, a.m.y * a.m.y), 2 * (a.e - b.e)) < fma(b.m.x, b.m.x, b.m.y * b.m.y);
}

/* The derivative of a map, applied (-DDISTANCE; see "Derivative"): *w <- (A + 2 C d +
 * D dc) *w + (B + D d + 2 E dc) s, with d, dc before the map. */
inline void fx_bla_deriv(__global const double2 *map, bool quad, fx2 d, fx2 dc, fx2 *w, fx2 s)
{
    fx2 a = fx_norm(map[0], 0), b = fx_norm(map[1], 0);
    if (quad) {
        a = fx_add(a, fx_add(fx_twice(fx_mul_d(map[2], d)), fx_mul_d(map[3], dc)));
        b = fx_add(b, fx_add(fx_mul_d(map[3], d), fx_twice(fx_mul_d(map[4], dc))));
    }
    *w = fx_add(fx_mul(a, *w), fx_mul(b, s));
}

/* The longest valid skip for the pixel with delta *d: applies it (and, with -DDISTANCE,
 * its derivative to *dw, s the pixel spacing) and returns its length, or returns 0.
 * Floatexp tables hold log2 radii (farm/numerics/bla.py); max(|d.x|, |d.y|) < 2^d.e
 * bounds the delta on the same scale. */
inline uint fx_bla_take(__global const double2 *bla_ab, __global const double *bla_r,
                        uint bla_rows, uint bla_levels, uint m, uint room, fx2 *d, fx2 dc,
                        fx2 *dw, fx2 s)
{
    const uint j = bla_level(bla_r, bla_rows, bla_levels, m, room, (double)d->e);
    if (!j)
        return 0;
    __global const double2 *map = bla_map(bla_ab, m, j);
    fx2 w = fx_add(fx_mul_d(map[0], *d), fx_mul_d(map[1], dc));
    const double2 c = map[2], dd = map[3], e = map[4];
    const bool quad = c.x != 0.0 || c.y != 0.0 || dd.x != 0.0 || dd.y != 0.0 || e.x != 0.0 ||
                      e.y != 0.0;
    if (quad)
        w = fx_add(w, fx_add(fx_mul(fx_add(fx_mul_d(c, *d), fx_mul_d(dd, dc)), *d),
                             fx_mul(fx_mul_d(e, dc), dc)));
#ifdef DISTANCE
    fx_bla_deriv(map, quad, *d, dc, dw, s);
#endif
    *d = w;
    return 1u << j;
}

inline uint escape_pixel(FORMAT_ARGS, uint col, uint row, uint k, uint max_iter, double2 *z,
                         double2 *c, double2 *dz)
{
    int e;
    const double2 dm = pixel_offset(OFFSET_ARG_NAMES, col, row, k, &e);
    const fx2 dc = fx_norm(dm, e);
    *c = ldexp(orbit[1], orbit_e[1]) + fx_to_double(dc);
    fx2 d = fx_norm((double2)(0.0, 0.0), 0);
    fx2 w = d; /* s dz/dc (-DDISTANCE), 0 at z = 0 */
#if defined(DISTANCE) && !defined(POLAR)
    const fx2 s = fx_norm((double2)(h_m, 0.0), h_e + 1); /* the pixel spacing 2 h */
#else
    const fx2 s = w;
#endif
    uint m = 0;
#ifndef PERTURB_NO_INTERIOR
    wrap_track wraps = wraps_start(); /* the interior test's memory */
#endif
    STEPS_DECL;
    for (uint n = 1; n <= max_iter; ++n) {
        COUNT_STEP();
        const double2 Zm = orbit[m];
        const int Ze = orbit_e[m]; /* 0: Zm is Z(m) itself */
        uint len = 0;
        if (m >= 1 && bla_levels && !Ze && fx_bla_worth_trying(d, Zm, bla_shift)) {
            len = fx_bla_take(bla_ab, bla_r, bla_rows, bla_levels, m, max_iter - n + 1, &d, dc,
                              &w, s);
            n += len ? len - 1 : 0; /* iterations n .. n + len - 1 are done */
        }
        if (!len && !Ze && m) {
            /* d <- (2 Z + d) d + dc, with 2 Z + d in doubles: |d| is then far below |Z|
             * (its double may underflow: 2 Z alone) or O(1) */
            const double2 dd = fx_to_double(d);
#ifdef DISTANCE
            /* w <- 2 z w + s, z = Z + d before the step */
            const double2 zn = Zm + dd;
            w = fx_add(fx_norm(cmul(2.0 * zn, w.m), w.e), s);
#endif
            const double2 a = 2.0 * Zm + dd;
            d = fx_add(fx_norm(cmul(a, d.m), d.e), dc);
            len = 1;
        } else if (!len) {
            /* Z(m) below double's range (the orbit passes near 0), or Z(0) = 0 (after a
             * wrap or a rebase: d <- d^2 + dc, where d below 1e-308 still has a square as
             * large as dc near a minibrot deeper than 1e-616): the step in floatexp */
            const fx2 Zf = fx_norm(Zm, Ze);
#ifdef DISTANCE
            w = fx_add(fx_twice(fx_mul(fx_add(Zf, d), w)), s);
#endif
            d = fx_add(fx_mul(fx_add(fx_twice(Zf), d), d), dc);
            len = 1;
        }
        m += len;
        const double2 dd = fx_to_double(d);
        const double2 Z = orbit[m];
        const int ze = orbit_e[m];
        double zr, zi;
        bool nearer; /* |Z + d| < |d|: a rebase */
        fx2 zf = d; /* z = Z + d in floatexp, where Z(m) is below double's range */
        if (!ze) {
            zr = Z.x + dd.x;
            zi = Z.y + dd.y;
            nearer = fma(zr, zr, zi * zi) < fma(dd.x, dd.x, dd.y * dd.y);
        } else {
            zf = fx_add(fx_norm(Z, ze), d);
            const double2 zd = fx_to_double(zf);
            zr = zd.x;
            zi = zd.y;
            nearer = fx_less(zf, d);
        }
        const double mag = fma(zr, zr, zi * zi);
        if (mag > r2) {
            *z = (double2)(zr, zi);
            *dz = w.e > 2000 ? (double2)(INFINITY, INFINITY) : fx_to_double(w);
            STORE_STEPS(col, row, steps);
            return n;
        }
        if (m == orbit_len - 1) {
            /* wrap (see pixel_after), in floatexp: d may be below double's range */
            d = fx_add(d, fx_norm(wrap_m, wrap_e));
#ifndef PERTURB_NO_INTERIOR
            if ((lam.x != 0.0 || lam.y != 0.0) && wrap_interior(&wraps, fx_mini_w(d, lam, lam_e))) {
                STORE_STEPS(col, row, steps);
                return 0;
            }
#endif
            m = wrap_to;
        } else if (nearer) {
            d = ze ? zf : fx_norm((double2)(zr, zi), 0);
            m = 0;
#ifndef PERTURB_NO_INTERIOR
            wraps.wraps = 0;
#endif
        }
    }
    STORE_STEPS(col, row, steps);
    return 0;
}

#endif

#pragma OPENCL FP_CONTRACT ON
