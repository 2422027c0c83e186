/* mandel.cl: the per-tile driver shared by every direct number format.
 *
 * Computes, for each pixel of one tile, the escape count of z(k+1) = z(k)^2 + c,
 * z(0) = 0: the smallest n >= 1 with |z(n)|^2 > R^2, or 0 when no n <= max_iter
 * escapes (interior). Also a smooth offset and the tile's count histogram.
 *
 * Number format: supplied by the format file compiled in front of this one.
 * A direct format (f64.cl, fp128.cl, qs.cl) defines
 *     COORD_T                     the coordinate type (double, uint4, float4)
 *     uint escape_time(COORD_T cr, COORD_T ci, uint max_iter, COORD_T r2, double2 *z)
 *                                 the count n (0: interior) and z(n) as doubles
 *     double to_double(COORD_T x)
 * and this file adapts it (below). Any other format (perturb.cl) defines instead
 *     FORMAT_ARGS, FORMAT_ARG_NAMES   its leading kernel parameters, and their names
 *     uint escape_pixel(FORMAT_ARGS, uint col, uint row, uint max_iter,
 *                       double2 *z, double2 *c)
 *                                 the count of tile pixel (col, row), z(n) and c as doubles
 *
 * Extensions: cl_khr_fp64 (smooth offset); cl_khr_int64_base_atomics when built
 * with -DHIST64 (64-bit histogram counters). Without -DHIST64 the histogram is
 * uint32 per tile (a tile has fewer than 2^32 pixels) and the host widens it.
 *
 * Build options: -DLOCAL_BINS=<n> bins kept in a local-memory sub-histogram
 * (32-bit counters, merged into the global histogram once per work-group).
 *
 * Entry point: mandel(FORMAT_ARGS, tw, npix, max_iter, iters, frac, hist); for a direct
 * format FORMAT_ARGS are
 *   xs     [tw]       COORD_T  real part of each tile column's pixel centre
 *   ys     [th]       COORD_T  imaginary part of each tile row's pixel centre
 *   r2                COORD_T  escape radius squared
 * then, for every format,
 *   tw                uint     tile width in pixels
 *   npix              uint     tile pixels, tw * th
 *   max_iter          uint     iteration limit, < 2^31
 *   iters  [npix]     uint     out: escape count per pixel, row-major in the tile
 *   frac   [npix]     float    out: smooth offset d; the continuous escape time is
 *                              n + d, d in about (-1, 4]; 0 for interior pixels
 *   hist   [max_iter+1] long (HIST64) or uint: in/out, hist[n] += pixels with count n;
 *                              the host zeroes it before the launch
 *
 * Work assignment: work-item g of G (the global size) takes pixels g, g+G, g+2G, ...
 * so that the expensive pixels of a region spread over all work-items. Built with
 * -DPERTURB_LANES (perturbation on CPUs, after perturb_lanes.cl), a work-item keeps
 * several of its pixels in flight at once (escape_lanes); each result still goes
 * through pixel_done.
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#ifndef LOCAL_BINS
#define LOCAL_BINS 1024
#endif

#ifdef HIST64
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
typedef long hist_t;
inline void hist_add(__global hist_t *h, uint bin, uint v) { atom_add(h + bin, (long)v); }
#else
typedef uint hist_t;
inline void hist_add(__global hist_t *h, uint bin, uint v) { atomic_add(h + bin, v); }
#endif

#ifndef FORMAT_ARGS /* a direct format: per-column and per-row coordinates */
#define FORMAT_ARGS __global const COORD_T *xs, __global const COORD_T *ys, const COORD_T r2
#define FORMAT_ARG_NAMES xs, ys, r2
inline uint escape_pixel(FORMAT_ARGS, uint col, uint row, uint max_iter, double2 *z, double2 *c)
{
    *c = (double2)(to_double(xs[col]), to_double(ys[row]));
    return escape_time(xs[col], ys[row], max_iter, r2, z);
}
#endif

/* Smooth offset d = mu - n, with mu = N - log2(ln|z_N|^2 / ln B^2) the continuous
 * escape time for bailout B = 2^10: z keeps iterating in double from the escape
 * (|z| > R) until |z_N| > B. mu is continuous across the image where n jumps. */
#define SMOOTH_LN_B2 13.862943611198906 /* ln(2^20) */
inline float smooth_offset(double2 z, double cr, double ci)
{
    double x = z.x, y = z.y, m2 = x * x + y * y;
    int extra = 0;
    while (m2 <= 1048576.0 && extra < 32) {
        const double t = x * x - y * y + cr;
        y = 2.0 * x * y + ci;
        x = t;
        m2 = x * x + y * y;
        ++extra;
    }
    return (float)(extra - log2(log(m2) / SMOOTH_LN_B2));
}

/* Where one pixel's results go: its count, smooth offset and histogram bin. */
struct pixel_sink {
    __global uint *iters;
    __global float *frac;
    __global hist_t *hist;
    __local uint *lh;
    uint nlocal;
};

void pixel_done(struct pixel_sink *sink, uint p, uint n, double2 z, double2 c)
{
    sink->iters[p] = n;
    sink->frac[p] = n ? smooth_offset(z, c.x, c.y) : 0.0f;
    if (n < sink->nlocal)
        atomic_inc(&sink->lh[n]);
    else
        hist_add(sink->hist, n, 1u);
}

__kernel void mandel(FORMAT_ARGS, const uint tw, const uint npix, const uint max_iter,
                     __global uint *iters, __global float *frac, __global hist_t *hist)
{
    __local uint lh[LOCAL_BINS];
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const uint nlocal = min((uint)LOCAL_BINS, max_iter + 1);
    for (uint b = lid; b < nlocal; b += lsz)
        lh[b] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);

    struct pixel_sink sink = {iters, frac, hist, lh, nlocal};
    const uint G = get_global_size(0);
#if defined(PERTURB_LANES) && !defined(PERTURB_FX)
    /* the format keeps several pixels in flight per work-item (perturb_lanes.cl) */
    escape_lanes(FORMAT_ARG_NAMES, get_global_id(0), G, npix, tw, max_iter, &sink);
#else
    for (uint p = get_global_id(0); p < npix; p += G) {
        const uint row = p / tw, col = p - row * tw;
        double2 z = (double2)(0.0, 0.0), c;
        const uint n = escape_pixel(FORMAT_ARG_NAMES, col, row, max_iter, &z, &c);
        pixel_done(&sink, p, n, z, c);
    }
#endif

    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint b = lid; b < nlocal; b += lsz)
        if (lh[b])
            hist_add(hist, b, lh[b]);
}
