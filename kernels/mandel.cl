/* mandel.cl: the per-tile driver shared by every direct number format.
 *
 * Computes, for each pixel of one tile, the escape count of z(k+1) = z(k)^2 + c,
 * z(0) = 0: the smallest n >= 1 with |z(n)|^2 > R^2, or 0 when no n <= max_iter
 * escapes (interior). Also a smooth offset, the tile's count histogram and, when asked
 * for, a distance estimate and more samples per pixel (anti-aliasing).
 *
 * Number format: supplied by the format file compiled in front of this one.
 * A direct format (f64.cl, fp128.cl, qs.cl) defines
 *     COORD_T                     the coordinate type (double, uint4, float4)
 *     COORD_T coord_add(COORD_T a, COORD_T b)   (-DROTATED) a + b
 *     uint escape_time(COORD_T cr, COORD_T ci, uint max_iter, COORD_T r2, double ds,
 *                      double2 *z, double2 *dz)
 *                                 the count n (0: interior) and z(n) as doubles; built
 *                                 with -DDISTANCE also *dz = ds dz/dc at z(n) (ds: the
 *                                 pixel spacing; unused without -DDISTANCE)
 *     double to_double(COORD_T x)
 * and this file adapts it (below). Any other format (perturb.cl) defines instead
 *     FORMAT_ARGS, FORMAT_ARG_NAMES   its leading kernel parameters, and their names
 *     PIXEL_SPACING               (-DDISTANCE) an expression for s, the pixel spacing
 *     uint escape_pixel(FORMAT_ARGS, uint col, uint row, uint k, uint max_iter,
 *                       double2 *z, double2 *c, double2 *dz)
 *                                 the count of sample k of tile pixel (col, row), z(n) and
 *                                 c as doubles, and (-DDISTANCE) *dz = s dz/dc at z(n)
 *
 * Extensions: cl_khr_fp64 (smooth offset); cl_khr_int64_base_atomics when built
 * with -DHIST64 (64-bit histogram counters). Without -DHIST64 the histogram is
 * uint32 per tile (a tile has fewer than 2^32 samples) and the host widens it.
 *
 * Build options: -DLOCAL_BINS=<n> bins kept in a local-memory sub-histogram
 * (32-bit counters, merged into the global histogram once per work-group);
 * -DSAMPLES=<S> samples per pixel (default 1; farm/plan/samples.py places them);
 * -DDISTANCE the distance estimate (without it the kernel computes exactly what it
 * computes without these options: same arguments, same arithmetic); -DROTATED a
 * turned frame (see "Turned frames"; without it, the unturned kernel as it was).
 *
 * Entry point: mandel(FORMAT_ARGS, tw, npix, max_iter, iters, frac, [dist], [s_iters,
 * s_frac, [s_dist]], hist); for a direct format FORMAT_ARGS are
 *   xs     [tw * S]   COORD_T  real part of each (tile column, sample): xs[col * S + k]
 *   ys     [th * S]   COORD_T  imaginary part of each (tile row, sample): ys[row * S + k]
 *   r2                COORD_T  escape radius squared
 *   ds                double   (-DDISTANCE only) the pixel spacing s, complex-plane units
 *   rot               double2  (-DROTATED only) (cos, sin) of the frame's angle
 * (with -DROTATED xs holds [tw * S * 2]: A_re, A_im of (column, sample) q at 2q, 2q + 1,
 * and ys [th * S * 2]: B_re, B_im of (row, sample) q; the sample's c is (A_re + B_re,
 * A_im + B_im): see "Turned frames"),
 * then, for every format (S = SAMPLES; sample 0 is the pixel centre),
 *   tw                uint     tile width in pixels
 *   npix              uint     tile pixels, tw * th; npix * S < 2^32
 *   max_iter          uint     iteration limit, < 2^31
 *   iters  [npix]     uint     out: escape count of sample 0, row-major in the tile
 *   frac   [npix]     float    out: smooth offset d of sample 0; the continuous escape
 *                              time is n + d, d in about (-1, 4]; 0 for interior pixels
 *   dist   [npix]     float2   out (-DDISTANCE): distance estimate of sample 0 in
 *                              pixels, (DEX, DEY) (see "Distance estimate")
 *   s_iters [npix * (S-1)] uint    out (S > 1): counts of samples 1..S-1, element
 *                                  p * (S - 1) + k - 1 for sample k of pixel p
 *   s_frac  [npix * (S-1)] float   out (S > 1): their smooth offsets, same layout
 *   s_dist  [npix * (S-1)] float2  out (S > 1 and -DDISTANCE): their distance estimates
 *   hist   [max_iter+1] long (HIST64) or uint: in/out, hist[n] += samples with count n
 *                              (every sample of every pixel); the host zeroes it first
 *
 * Work assignment: the tile's npix * S (pixel, sample) pairs are numbered q = p * S + k;
 * work-item g of G (the global size) takes q = g, g+G, g+2G, ..., so neighbouring
 * work-items take the samples of one pixel (alike in cost: coherent) and the expensive
 * pixels of a region spread over all work-items. Built with -DPERTURB_LANES
 * (perturbation on CPUs, after perturb_lanes.cl), a work-item keeps several of its
 * (pixel, sample) pairs in flight at once (escape_lanes); each result goes through
 * sample_done, as the loop's own do.
 *
 * Distance estimate (-DDISTANCE): with z = z(N) and z' = dz/dc at the smooth offset's
 * bailout |z(N)| > 2^10 (below), and s the pixel spacing,
 *     dist = conj(z ln|z| / (s z'))        (a complex number, as float2 (re, im))
 * read as a vector (DEX, DEY) in image axes, x to the right (+column), y down (+row):
 * it points away from the set (the direction in which the escape time falls fastest),
 * and |dist| = |z| ln|z| / (|z'| s) estimates the distance to the set in output
 * pixels, within a factor 2 of the true distance as the potential goes to 0 (Koebe's
 * 1/4 theorem; the exterior distance estimate of Kalles Fraktaler and Fraktaler-3,
 * whose DEX + i DEY have this length; the direction is defined here, in image axes).
 * The derivative is carried as w = s dz/dc in double, w(1) = s, w(k+1) = 2 z(k) w(k)
 * + s, so it neither overflows nor underflows at any depth a direct format serves
 * (perturbed frames carry the same w, in floatexp below 1e-305: kernels/perturb.cl).
 * 0 for interior pixels, and where w is not finite (a sample on the set at double's
 * resolution).
 *
 * Turned frames (-DROTATED): the frame shows the view turned by its angle theta
 * (counter-clockwise), c = C + s e^{i theta} (u + i v) for the pixel (sample) at (u, v)
 * pixels from the centre, v up (farm/numerics/__init__.py). A direct format reads
 * each coordinate as the sum of a column term and a row term (coord_add, from the
 * format file: exact in fp128, one rounding in f64 and quad-single;
 * farm/numerics/axes.py); perturb.cl turns each pixel's offset itself (its header).
 * The derivative w = s dz/dc is carried as before, so conj(z ln|z| / w) is the
 * direction in the unturned frame's image axes; the turned frame's image axes are
 * those turned by theta, so distance_px turns the vector by e^{i theta} (rot): in
 * both frames (DEX, DEY) points away from the set in the frame's own image axes.
 * The unturned kernel (no -DROTATED) is the same source as before, untouched.
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

/* hist_t, hist_count and the local sub-histogram: histogram.cl, built in front */

#ifndef SAMPLES
#define SAMPLES 1
#endif

#ifndef ROT_ARG /* (perturb.cl defines them for its own arguments) */
#ifdef ROTATED
#define ROT_ARG , const double2 rot
#define ROT_ARG_NAME , rot
#else
#define ROT_ARG
#define ROT_ARG_NAME
#endif
#endif

#ifndef FORMAT_ARGS /* a direct format: per-(column, sample) and per-(row, sample) coordinates */
#ifdef DISTANCE
#define FORMAT_ARGS __global const COORD_T *xs, __global const COORD_T *ys, const COORD_T r2, \
                    const double ds ROT_ARG
#define FORMAT_ARG_NAMES xs, ys, r2, ds ROT_ARG_NAME
#else
#define FORMAT_ARGS __global const COORD_T *xs, __global const COORD_T *ys, const COORD_T r2 ROT_ARG
#define FORMAT_ARG_NAMES xs, ys, r2 ROT_ARG_NAME
#endif
/* Sample k of tile pixel (col, row): its count, z(n), c and (-DDISTANCE) s dz/dc. */
inline uint escape_sample(FORMAT_ARGS, uint col, uint row, uint k, uint max_iter, double2 *z,
                          double2 *c, double2 *dz)
{
#ifdef ROTATED /* a turned frame: each coordinate is a column term plus a row term */
    const uint a = 2 * (col * SAMPLES + k), b = 2 * (row * SAMPLES + k);
    const COORD_T cr = coord_add(xs[a], ys[b]), ci = coord_add(xs[a + 1], ys[b + 1]);
#else
    const COORD_T cr = xs[col * SAMPLES + k], ci = ys[row * SAMPLES + k];
#endif
    *c = (double2)(to_double(cr), to_double(ci));
#ifdef DISTANCE
    return escape_time(cr, ci, max_iter, r2, ds, z, dz);
#else
    return escape_time(cr, ci, max_iter, r2, 0.0, z, dz);
#endif
}
#else /* perturb.cl: sample k of the pixel, against the frame's reference orbit */
inline uint escape_sample(FORMAT_ARGS, uint col, uint row, uint k, uint max_iter, double2 *z,
                          double2 *c, double2 *dz)
{
    return escape_pixel(FORMAT_ARG_NAMES, col, row, k, max_iter, z, c, dz);
}
#endif
#ifndef PIXEL_SPACING
#define PIXEL_SPACING ds /* a direct format's argument */
#endif

/* Smooth offset d = mu - n, with mu = N - log2(ln|z_N|^2 / ln B^2) the continuous
 * escape time for bailout B = 2^10: z keeps iterating in double from the escape
 * (|z| > R) until |z_N| > B. mu is continuous across the image where n jumps.
 * With -DDISTANCE, w = s dz/dc iterates along (w <- 2 z w + s, before z's step) and
 * *z, *w end as z_N, w_N for the distance estimate. */
#define SMOOTH_LN_B2 13.862943611198906 /* ln(2^20) */
inline float smooth_offset(double2 *z, double cr, double ci, double2 *w, double s)
{
    double x = z->x, y = z->y, m2 = x * x + y * y;
    int extra = 0;
    while (m2 <= 1048576.0 && extra < 32) {
#ifdef DISTANCE
        const double wr = 2.0 * (x * w->x - y * w->y) + s;
        w->y = 2.0 * (x * w->y + y * w->x);
        w->x = wr;
#endif
        const double t = x * x - y * y + cr;
        y = 2.0 * x * y + ci;
        x = t;
        m2 = x * x + y * y;
        ++extra;
    }
    *z = (double2)(x, y);
    return (float)(extra - log2(log(m2) / SMOOTH_LN_B2));
}

#ifdef DISTANCE
/* conj(z ln|z| / w) as (DEX, DEY), see the header; w scaled by its largest component
 * first (|w|^2 may overflow where w does not); 0 when w is 0 or not finite. A turned
 * frame (-DROTATED, rot = (cos, sin) of its angle) turns the vector by its angle, from
 * the unturned image axes into its own (see "Distance estimate"). */
inline float2 distance_px(double2 z, double2 w ROT_ARG)
{
    const double m = fmax(fabs(w.x), fabs(w.y));
    if (!(m > 0.0 && m <= DBL_MAX))
        return (float2)(0.0f, 0.0f);
    const double ax = w.x / m, ay = w.y / m;
    const double l = 0.5 * log(z.x * z.x + z.y * z.y) / (m * (ax * ax + ay * ay));
#ifdef ROTATED
    const double dx = (z.x * ax + z.y * ay) * l, dy = -(z.y * ax - z.x * ay) * l;
    const float2 d = (float2)((float)(dx * rot.x - dy * rot.y), (float)(dx * rot.y + dy * rot.x));
#else
    const float2 d = (float2)((float)((z.x * ax + z.y * ay) * l),
                              (float)(-(z.y * ax - z.x * ay) * l));
#endif
    return isfinite(d.x) && isfinite(d.y) ? d : (float2)(0.0f, 0.0f);
}
#define DIST_ARG , __global float2 *dist
#define S_DIST_ARG , __global float2 *s_dist
#else
#define DIST_ARG
#define S_DIST_ARG
#endif

#if SAMPLES > 1
#define SAMPLE_ARGS , __global uint *s_iters, __global float *s_frac S_DIST_ARG
#else
#define SAMPLE_ARGS
#endif

/* Where a sample's results go: the kernel's outputs and its histograms. */
struct sample_sink {
    __global uint *iters;
    __global float *frac;
#ifdef DISTANCE
    __global float2 *dist;
#endif
#if SAMPLES > 1
    __global uint *s_iters;
    __global float *s_frac;
#ifdef DISTANCE
    __global float2 *s_dist;
#endif
#endif
    __global hist_t *hist;
    __local uint *lh;
    uint nlocal;
    double ds; /* the pixel spacing (-DDISTANCE; 0 otherwise) */
#ifdef ROTATED
    double2 rot; /* (cos, sin) of the frame's angle */
#endif
};

/* Sample k = q % SAMPLES of tile pixel p = q / SAMPLES has count n (0: interior), ends
 * at z = z(n) with (-DDISTANCE) w = s dz/dc there, and has c (doubles): its smooth
 * offset, distance estimate and histogram bin, stored. */
void sample_done(struct sample_sink *o, uint q, uint n, double2 z, double2 c, double2 w)
{
    const uint p = q / SAMPLES, k = q - p * SAMPLES;
    const float f = n ? smooth_offset(&z, c.x, c.y, &w, o->ds) : 0.0f;
#ifdef DISTANCE
#ifdef ROTATED
    const float2 d = n ? distance_px(z, w, o->rot) : (float2)(0.0f, 0.0f);
#else
    const float2 d = n ? distance_px(z, w) : (float2)(0.0f, 0.0f);
#endif
#endif
#if SAMPLES > 1
    const uint e = k ? p * (SAMPLES - 1) + k - 1 : p;
    __global uint *it_out = k ? o->s_iters : o->iters;
    __global float *fr_out = k ? o->s_frac : o->frac;
    it_out[e] = n;
    fr_out[e] = f;
#ifdef DISTANCE
    __global float2 *d_out = k ? o->s_dist : o->dist;
    d_out[e] = d;
#endif
#else
    o->iters[p] = n;
    o->frac[p] = f;
#ifdef DISTANCE
    o->dist[p] = d;
#endif
#endif
    hist_count(o->lh, o->nlocal, o->hist, n);
}

/* The tile pixel that the p-th work slot takes: p itself (row-major), or, built with
 * -DPIXEL_BLOCKS, the tile read in blocks of 8 columns by 4 rows (bands of 4 rows, each
 * read block by block, left to right; narrower blocks at the right edge, a lower band
 * at the bottom): the 32 work-items of a warp then take pixels 8 x 4 rather than 32 x 1,
 * whose costs differ less (a warp waits for its slowest pixel). A bijection of 0 ..
 * npix - 1. */
inline uint pixel_slot(uint p, uint tw, uint npix)
{
#ifdef PIXEL_BLOCKS
    const uint band = p / (4u * tw), i = p - band * 4u * tw;
    const uint bh = min(4u, npix / tw - 4u * band); /* the band's rows */
    const uint full = (tw / 8u) * 8u * bh;          /* its pixels in blocks 8 wide */
    uint col, row;
    if (i < full) {
        const uint c = i / (8u * bh), j = i - c * 8u * bh;
        col = 8u * c + j % 8u;
        row = j / 8u;
    } else {
        const uint cw = tw % 8u, r = i - full;
        col = tw - cw + r % cw;
        row = r / cw;
    }
    return (4u * band + row) * tw + col;
#else
    return p;
#endif
}

__kernel void mandel(FORMAT_ARGS, const uint tw, const uint npix, const uint max_iter,
                     __global uint *iters, __global float *frac DIST_ARG SAMPLE_ARGS,
                     __global hist_t *hist)
{
    __local uint lh[LOCAL_BINS];
    const uint nlocal = hist_local_clear(lh, max_iter);

    const uint G = get_global_size(0);
#ifdef DISTANCE
    const double spacing = PIXEL_SPACING;
#else
    const double spacing = 0.0;
#endif
    struct sample_sink sink = {iters, frac,
#ifdef DISTANCE
                               dist,
#endif
#if SAMPLES > 1
                               s_iters, s_frac,
#ifdef DISTANCE
                               s_dist,
#endif
#endif
                               hist, lh, nlocal, spacing
#ifdef ROTATED
                               , rot
#endif
                               };
#if defined(PERTURB_LANES) && !defined(PERTURB_FX)
    /* perturbation on a CPU: the format keeps several samples in flight per work-item
     * (perturb_lanes.cl) */
    escape_lanes(FORMAT_ARG_NAMES, get_global_id(0), G, npix * SAMPLES, tw, max_iter, &sink);
#else
    for (uint g = get_global_id(0); g < npix * SAMPLES; g += G) {
        const uint slot = g / SAMPLES, k = g - slot * SAMPLES;
        const uint p = pixel_slot(slot, tw, npix), q = p * SAMPLES + k;
        const uint row = p / tw, col = p - row * tw;
        double2 z = (double2)(0.0, 0.0), c, w = (double2)(0.0, 0.0);
        const uint n = escape_sample(FORMAT_ARG_NAMES, col, row, k, max_iter, &z, &c, &w);
        sample_done(&sink, q, n, z, c, w);
    }
#endif

    hist_local_flush(lh, nlocal, hist);
}
