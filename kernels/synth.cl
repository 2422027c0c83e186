/* synth.cl: one video frame resampled from an exponential-map strip and the centre image.
 *
 * Computes, for each pixel of output frame k, its escape count n and smooth offset d
 * (continuous escape time mu = n + d) by bilinear resampling of raw data, and the
 * frame's count histogram; the geometry and the rules are those of farm/plan/expmap.py
 * and the numpy reference farm/synth/__init__.py, which this kernel is tested against:
 *   - pixel (i, j) is (u, v) = (i + 0.5 - W/2, -(j + 0.5 - H/2)) frame pixels from the
 *     centre; with rho = log2 |u + i v|: strip row y = y_off + P rho, strip column
 *     x = A / (2 pi) * (atan2(v, u) mod 2 pi) - 0.5 (wrapping); x and rho are the same
 *     for every frame, so the host computes them once per geometry (the `polar` table,
 *     with the reference's own expressions: positions then agree bit for bit);
 *     centre-image column cx = zoom u + Wc/2 - 0.5, row cy = -zoom v + Hc/2 - 0.5
 *     (clamped at its edges);
 *   - a turned frame (angle theta: rot = (cos, sin), x_shift = A theta / (2 pi))
 *     reads the strip at column x + x_shift and the centre image at (u, v) turned by
 *     theta, (u cos - v sin, u sin + v cos), and turns its distance estimate by
 *     e^(i theta) into its own image axes; rot = (1, 0) skips all three, so an unturned
 *     frame computes what it did before;
 *   - strip weight t = clamp((rho + t_off) * inv_blend, 0, 1): 0 centre image only,
 *     1 strip only, between both with mu mixed as (1 - t) mu_centre + t mu_strip;
 *   - per source: a sample is exterior when 1 <= n <= max_iter; the nearest of the four
 *     samples (fx > 0.5 picks the right one, fy > 0.5 the lower) decides interior or
 *     exterior and gives n; mu is the bilinear mean over exterior samples, moved
 *     towards the nearest sample's mu where the exterior samples' mu spread over more
 *     than SPREAD_SMOOTH counts (fully at SPREAD_POINT); the source with the larger
 *     weight (t >= 0.5: strip) decides where both are read.
 *
 * Number format: positions in double (log2 radii reach thousands of octaves at depth
 * 1e-3000; offsets passed relative to the frame keep every product in range), raw
 * data as stored (uint32 counts, float32 offsets). Extensions: cl_khr_fp64;
 * cl_khr_int64_base_atomics with -DHIST64 (64-bit histogram, as in mandel.cl).
 * Build options: -DLOCAL_BINS=<n> local sub-histogram bins; -DWITH_DISTANCE adds the
 * distance estimate (float2 per sample: DEX + i DEY).
 *
 * Entry point: synth(...), arguments in order:
 *   strip_n   [ring * A] uint    strip counts; global row g lives in ring row g % ring
 *   strip_f   [ring * A] float   strip smooth offsets, same layout
 *   ring                 uint    rows the ring holds (>= 1)
 *   A                    uint    strip columns (angles)
 *   polar     [W * H]    double2 (x, rho) of each output pixel, row-major
 *   y_off                double  (depth_k - l_base) P - 0.5: global strip row at rho = 0
 *   P                    double  rows per octave
 *   row_lo, row_hi       int     global rows present in the ring, row_lo .. row_hi - 1;
 *                                positions outside are clamped into it
 *   centre_n  [Hc * Wc]  uint    centre-image counts, row-major, row 0 at the top
 *   centre_f  [Hc * Wc]  float   centre-image smooth offsets
 *   Wc, Hc               uint    centre-image size
 *   zoom                 double  q 2^depth_k: centre pixels per frame pixel
 *   t_off, inv_blend     double  l_centre... : t = (rho + t_off) inv_blend
 *   rot                  double2 (cos, sin) of the frame's angle ((1, 0): not turned)
 *   x_shift              double  the frame's turn in strip columns (A theta / (2 pi))
 *   W, H                 uint    output size
 *   max_iter             uint    the frame's iteration limit, < 2^31
 *   with -DWITH_DISTANCE, next:
 *     strip_de  [ring * A] float2  distance in strip sample spacings
 *     centre_de [Hc * Wc]  float2  distance in centre pixels
 *     de_off               double  log2 of a strip sample spacing at global row 0 in
 *                                  frame pixels: row g scales by 2^(de_off + g / P)
 *     out_de    [W * H]    float2  out: distance in frame pixels (0 for interior)
 *   iters     [W * H]    uint    out: escape count (0: interior), row-major
 *   frac      [W * H]    float   out: smooth offset d = mu - n (0 for interior)
 *   hist      [max_iter + 1] long (HIST64) or uint: in/out, hist[n] += pixels with
 *                                count n; the host zeroes it first
 *
 * Work assignment: work-item g of G takes pixels g, g + G, ... (as mandel.cl).
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
/* y_off + P rho and the other position arithmetic round as numpy's does (no FMA) */
#pragma OPENCL FP_CONTRACT OFF

/* hist_t, hist_count and the local sub-histogram: histogram.cl, built in front */

/* farm/synth/__init__.py: SPREAD_SMOOTH, SPREAD_POINT (counts) */
#define SPREAD_SMOOTH 1.0
#define SPREAD_POINT 2.0

/* One source's bilinear sample: whether the nearest sample escaped, its count, mu. */
typedef struct {
    int exterior;
    uint n;
    double mu;
#ifdef WITH_DISTANCE
    double2 de;
#endif
} sample_t;

/* The four samples at (row a, b) x (column c, d) with fractions fx, fy. `scale_a`,
 * `scale_b`: distance units of rows a and b in frame pixels. */
inline sample_t bilinear(__global const uint *n_buf, __global const float *f_buf,
#ifdef WITH_DISTANCE
                         __global const float2 *de_buf, double scale_a, double scale_b,
#endif
                         uint a, uint b, uint c, uint d, uint stride, double fx, double fy,
                         uint max_iter)
{
    const uint idx[4] = {a * stride + c, a * stride + d, b * stride + c, b * stride + d};
    const double w[4] = {(1.0 - fx) * (1.0 - fy), fx * (1.0 - fy), (1.0 - fx) * fy, fx * fy};
    const int near = (fx > 0.5 ? 1 : 0) + (fy > 0.5 ? 2 : 0);
    double total = 0.0, acc = 0.0, lo = INFINITY, hi = -INFINITY, mu_near = 0.0;
    sample_t s;
#ifdef WITH_DISTANCE
    double2 de = (double2)(0.0, 0.0), de_near = (double2)(0.0, 0.0);
#endif
    for (int q = 0; q < 4; ++q) {
        const uint n = n_buf[idx[q]];
        const int ext = n >= 1 && n <= max_iter;
        const double mu = (double)n + (double)f_buf[idx[q]];
#ifdef WITH_DISTANCE
        const double2 de_q = (q < 2 ? scale_a : scale_b) * convert_double2(de_buf[idx[q]]);
#endif
        if (ext) {
            total += w[q];
            acc += w[q] * mu;
            lo = fmin(lo, mu);
            hi = fmax(hi, mu);
#ifdef WITH_DISTANCE
            de += w[q] * de_q;
#endif
        }
        if (q == near) {
            s.n = n;
            s.exterior = ext;
            mu_near = mu;
#ifdef WITH_DISTANCE
            de_near = de_q;
#endif
        }
    }
    /* chaotic samples (spread over SPREAD_SMOOTH counts): lean to the nearest one */
    const double alpha = clamp((hi - lo - SPREAD_SMOOTH) / (SPREAD_POINT - SPREAD_SMOOTH), 0.0, 1.0);
    s.mu = s.exterior ? (1.0 - alpha) * (acc / total) + alpha * mu_near : 0.0;
#ifdef WITH_DISTANCE
    s.de = s.exterior ? (1.0 - alpha) * (de / total) + alpha * de_near : (double2)(0.0, 0.0);
#endif
    return s;
}

__kernel void synth(__global const uint *strip_n, __global const float *strip_f, const uint ring,
                    const uint A, __global const double2 *polar, const double y_off, const double P,
                    const int row_lo, const int row_hi,
                    __global const uint *centre_n, __global const float *centre_f,
                    const uint Wc, const uint Hc, const double zoom, const double t_off,
                    const double inv_blend, const double2 rot, const double x_shift,
                    const uint W, const uint H, const uint max_iter,
#ifdef WITH_DISTANCE
                    __global const float2 *strip_de, __global const float2 *centre_de,
                    const double de_off, __global float2 *out_de,
#endif
                    __global uint *iters, __global float *frac, __global hist_t *hist)
{
    __local uint lh[LOCAL_BINS];
    const uint nlocal = hist_local_clear(lh, max_iter);

    const uint npix = W * H, G = get_global_size(0);
    const int turned = rot.x != 1.0 || rot.y != 0.0;
    for (uint p = get_global_id(0); p < npix; p += G) {
        const uint j = p / W, i = p - j * W;
        const double u = (double)i + 0.5 - 0.5 * (double)W;
        const double v = -((double)j + 0.5 - 0.5 * (double)H);
        const double2 xr = polar[p];
        const double rho = xr.y;
        const double t = clamp((rho + t_off) * inv_blend, 0.0, 1.0);
        sample_t s, c;
        s.exterior = c.exterior = 0;
        if (t > 0.0) { /* the strip */
            const double x = turned ? xr.x + x_shift : xr.x, y = y_off + P * rho;
            const double x0 = floor(x), y0 = floor(y);
            const int xi = (int)x0;
            const int yi = clamp((int)y0, row_lo, row_hi - 2);
            const uint ca = (uint)((xi % (int)A + (int)A) % (int)A), cb = (ca + 1) % A;
            const uint ra = (uint)yi % ring, rb = (uint)(yi + 1) % ring;
            s = bilinear(strip_n, strip_f,
#ifdef WITH_DISTANCE
                         strip_de, exp2(de_off + (double)yi / P),
                         exp2(de_off + (double)(yi + 1) / P),
#endif
                         ra, rb, ca, cb, A, x - x0, y - y0, max_iter);
        }
        if (t < 1.0) { /* the centre image */
            const double ut = turned ? u * rot.x - v * rot.y : u;
            const double vt = turned ? u * rot.y + v * rot.x : v;
            const double cx = zoom * ut + 0.5 * (double)Wc - 0.5;
            const double cy = -zoom * vt + 0.5 * (double)Hc - 0.5;
            const double x0 = floor(cx), y0 = floor(cy);
            const int xi = (int)x0, yi = (int)y0;
            const uint ca = (uint)clamp(xi, 0, (int)Wc - 1), cb = (uint)clamp(xi + 1, 0, (int)Wc - 1);
            const uint ra = (uint)clamp(yi, 0, (int)Hc - 1), rb = (uint)clamp(yi + 1, 0, (int)Hc - 1);
            c = bilinear(centre_n, centre_f,
#ifdef WITH_DISTANCE
                         centre_de, 1.0 / zoom, 1.0 / zoom,
#endif
                         ra, rb, ca, cb, Wc, cx - x0, cy - y0, max_iter);
        }
        const sample_t dom = t >= 0.5 ? s : c, other = t >= 0.5 ? c : s;
        uint n = 0;
        float d = 0.0f;
#ifdef WITH_DISTANCE
        double2 de = (double2)(0.0, 0.0);
#endif
        if (dom.exterior) {
            double mu = dom.mu;
#ifdef WITH_DISTANCE
            de = dom.de;
#endif
            if (t > 0.0 && t < 1.0 && other.exterior) {
                mu = (1.0 - t) * c.mu + t * s.mu;
#ifdef WITH_DISTANCE
                de = (1.0 - t) * c.de + t * s.de;
#endif
            }
            n = dom.n;
            d = (float)(mu - (double)n);
        }
        iters[p] = n;
        frac[p] = d;
#ifdef WITH_DISTANCE
        if (turned) /* from the sources' unturned axes into the frame's */
            de = (double2)(de.x * rot.x - de.y * rot.y, de.x * rot.y + de.y * rot.x);
        out_de[p] = convert_float2(de);
#endif
        hist_count(lh, nlocal, hist, n);
    }

    hist_local_flush(lh, nlocal, hist);
}
