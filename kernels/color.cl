/* color.cl: one frame's raw data to RGB, by the colour methods of farm/color/methods.py.
 *
 * Computes, for each output pixel, the colour of each of its S samples by the chosen
 * method (histogram, smooth, distance, shade: see methods.py, the numpy reference this
 * kernel is tested against, at most 1 in 255 per channel apart; distances as in
 * farm/color/distance.py), then their average in
 * linear light (S > 1), as farm/color/render.py does. Interior samples (count 0) take
 * the interior colour.
 *
 * Numbers: escape times and palette positions in double (as the reference); distances,
 * line cover and shading in float (as the reference's float32 arrays). Rounding to
 * bytes with rint (half to even, as numpy's rint).
 * Extensions: cl_khr_fp64.
 *
 * Entry points: colour(...), one work-item per output pixel, global size (W, H);
 * to_i420(...) after it, for a video (at the end of this file).
 * Buffers (row 0 at the top; per-sample arrays are (H, W, S) row-major, sample fastest):
 *   iters    [H*W*S]   uint    escape count n, 0 for interior
 *   frac     [H*W*S]   float   smooth offset d: escape time mu = n + d
 *   dist     [H*W*S]   float2  distance estimate (DEX, DEY) in output pixels, y down;
 *                              read only when has_dist, else the estimate from mu's
 *                              differences (distance.estimated_slopes) is used
 *   cdf      [L]       double  the frame's smoothed CDF at counts 0..L-1 (L >= 2), times
 *                              cycles * 4096 (the palette entry's scale)
 *   lut      [4096]    uchar4  palette: entry k is the colour at position (k + 0.5)/4096
 *   to_lin   [256]     float   sRGB byte -> linear light 0..1
 *   to_srgb  [4096]    uchar   linear light (k + 0.5)/4096 -> sRGB byte
 *   rgb      [H*W*3]   uchar   out: the pixel's colour
 * Scalars: W, H, S, L; method (0 histogram, 1 smooth, 2 distance, 3 shade); has_dist;
 *   density, mu_low (double); half_width = line_width/2 + 0.5 (float; <= 0.5: no
 *   lines); relief, gloss, light (lx, ly, lz, float4), interior and line colours (uchar4).
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define LUT_SIZE 4096
#define LN2 0.6931471805599453

inline double mu_at(__global const uint *iters, __global const float *frac, uint i)
{
    uint n = iters[i];
    return n == 0 ? NAN : (double)n + (double)frac[i];
}

/* d mu / d index between neighbours lo, here, hi (NAN: outside or interior):
 * central where both differences exist, one-sided where one does, else 0. */
inline double slope(double lo, double here, double hi)
{
    double fwd = hi - here, bwd = here - lo;
    bool f = isfinite(fwd), b = isfinite(bwd);
    return f && b ? 0.5 * (fwd + bwd) : f ? fwd : b ? bwd : 0.0;
}

/* Distance D (pixels) and unit direction away from the set (ux, uy), y up: the
 * estimate of distance.estimated_slopes for sample s at (x, y). */
float3 estimate(__global const uint *iters, __global const float *frac,
                uint W, uint H, uint S, uint x, uint y, uint s)
{
    uint i = (y * W + x) * S + s;
    double here = mu_at(iters, frac, i);
    double l = x > 0 ? mu_at(iters, frac, i - S) : NAN;
    double r = x + 1 < W ? mu_at(iters, frac, i + S) : NAN;
    double u = y > 0 ? mu_at(iters, frac, i - W * S) : NAN;
    double d = y + 1 < H ? mu_at(iters, frac, i + W * S) : NAN;
    double gx = slope(l, here, r);
    double gy = -slope(u, here, d); /* rows go down, y goes up */
    double inv = 1.0 / sqrt(gx * gx + gy * gy);
    float3 v = isfinite(inv) ? (float3)((float)(inv / LN2), (float)(-gx * inv), (float)(-gy * inv))
                             : (float3)(1e6f, 1.0f, 0.0f); /* no measurable slope: far */
    bool near = (x > 0 && iters[i - S] == 0) || (x + 1 < W && iters[i + S] == 0)
             || (y > 0 && iters[i - W * S] == 0) || (y + 1 < H && iters[i + W * S] == 0);
    if (near)
        v.x = fmin(v.x, 1.0f);
    return v;
}

/* (D, ux, uy) from a stored distance estimate (distance.slopes): stored in image axes
 * (y down), returned with y up like the light. */
inline float3 stored(float2 v)
{
    float len = length(v);
    float inv = 1.0f / len;
    return len > 0.0f ? (float3)(len, v.x * inv, -v.y * inv) : (float3)(0.0f);
}

inline uint lut_index(double t)
{
    return (uint)((long)((t - floor(t)) * LUT_SIZE) & (LUT_SIZE - 1));
}

/* Palette entry by the histogram method (methods.histogram_index): the scaled CDF
 * interpolated at mu = n + d, floor(mu) and the offset taken from n and d apart. */
inline uint histogram_index(__global const double *scaled, uint L, uint n, float d)
{
    float whole = floor(d);
    float x = d - whole;
    long i = max((long)n + (long)whole, 0L);
    if (i >= (long)(L - 1)) {
        i = L - 2;
        x = 1.0f;
    }
    double lo = scaled[i];
    double pos = lo + (scaled[i + 1] - lo) * (double)x;
    return (uint)((long)pos & (LUT_SIZE - 1));
}

inline float3 blend(float3 c, uchar4 to, float cover)
{
    float3 t = convert_float3(to.xyz);
    return rint(c + (t - c) * cover);
}

inline float cover_of(float len, float half_width)
{
    return half_width <= 0.5f ? 0.0f : clamp(half_width - len, 0.0f, 1.0f);
}

/* Lambert's cosine over the flat ground's (distance.shading); v = (D, ux, uy). */
inline float shading(float3 v, float relief, float4 light)
{
    float k = relief / fmax(v.x, relief);
    float lambert = (k * (v.y * light.x + v.z * light.y) + light.z) / sqrt(1.0f + k * k);
    return fmax(lambert, 0.0f) / light.z;
}

__kernel void colour(__global const uint *iters, __global const float *frac,
                     __global const float2 *dist, __global const double *cdf,
                     __global const uchar4 *lut, __global const float *to_lin,
                     __global const uchar *to_srgb, __global uchar *rgb,
                     uint W, uint H, uint S, uint L, uint method, uint has_dist,
                     double density, double mu_low, float half_width,
                     float relief, float gloss, float4 light, uchar4 interior, uchar4 line)
{
    uint x = get_global_id(0), y = get_global_id(1);
    if (x >= W || y >= H)
        return;
    float3 acc = (float3)(0.0f);
    float3 c = (float3)(0.0f);
    for (uint s = 0; s < S; ++s) {
        uint i = (y * W + x) * S + s;
        uint n = iters[i];
        if (n == 0) {
            c = convert_float3(interior.xyz);
        } else {
            uint k = method == 1
                ? lut_index(density * log1p(fmax((double)n + (double)frac[i] - mu_low, 0.0)))
                : histogram_index(cdf, L, n, frac[i]);
            c = convert_float3(lut[k].xyz);
            if (method >= 2) {
                float3 v = has_dist ? stored(dist[i]) : estimate(iters, frac, W, H, S, x, y, s);
                if (method == 3) {
                    float f = shading(v, relief, light);
                    float g = fmax(f - 1.0f, 0.0f) * gloss;
                    c = clamp(rint(c * (fmin(f, 1.0f) - g) + g * 255.0f), 0.0f, 255.0f);
                }
                else
                    c = blend(c, line, cover_of(v.x, half_width));
            }
        }
        if (S > 1)
            acc += (float3)(to_lin[(uint)c.x], to_lin[(uint)c.y], to_lin[(uint)c.z]);
    }
    if (S > 1) {
        acc /= (float)S;
        int3 k = clamp(convert_int3(acc * (float)LUT_SIZE), 0, LUT_SIZE - 1);
        c = (float3)(to_srgb[k.x], to_srgb[k.y], to_srgb[k.z]);
    }
    uint o = (y * W + x) * 3;
    rgb[o] = (uchar)c.x;
    rgb[o + 1] = (uchar)c.y;
    rgb[o + 2] = (uchar)c.z;
}

/* to_i420: the colours as the video's planes, as farm/color/yuv.py's from_rgb: BT.601 at
 * limited range; a chroma sample from its two columns' mean and a filter over rows
 * 2k-2 .. 2k+3 (taps -13, 32, 109, 109, 32, -13 in 256ths; rows past the top or bottom
 * edge repeat the edge row); rounded half up.
 * One work-item per 2x2 block, global size (EW/2, EH/2); EW, EH: the even width and
 * height (an odd frame's last column or row is left out). rgb as colour() wrote it
 * (W pixels a row); out: Y [EH*EW], then Cb and Cr [EH/2 * EW/2] each. */
__kernel void to_i420(__global const uchar *rgb, uint W, uint EW, uint EH, __global uchar *out)
{
    uint bx = get_global_id(0), by = get_global_id(1);
    if (2 * bx >= EW || 2 * by >= EH)
        return;
    const float3 ky = (float3)(65.481f, 128.553f, 24.966f) / 255.0f;
    const float3 ku = (float3)(-37.797f, -74.203f, 112.0f) / 255.0f;
    const float3 kv = (float3)(112.0f, -93.786f, -18.214f) / 255.0f;
    const float taps[6] = {-13.0f, 32.0f, 109.0f, 109.0f, 32.0f, -13.0f};
    float3 sum = (float3)(0.0f);
    for (int r = 0; r < 6; ++r) {
        int y = clamp((int)(2 * by) - 2 + r, 0, (int)EH - 1);
        uint i = ((uint)y * W + 2 * bx) * 3;
        float3 left = (float3)(rgb[i], rgb[i + 1], rgb[i + 2]);
        float3 right = (float3)(rgb[i + 3], rgb[i + 4], rgb[i + 5]);
        if (r == 2 || r == 3) {  /* the block's own rows */
            out[y * EW + 2 * bx] = (uchar)(dot(left, ky) + 16.5f);
            out[y * EW + 2 * bx + 1] = (uchar)(dot(right, ky) + 16.5f);
        }
        sum += taps[r] * (left + right);
    }
    sum *= 1.0f / 512.0f;
    uint q = (EW / 2) * (EH / 2), j = by * (EW / 2) + bx;
    out[EH * EW + j] = (uchar)(dot(sum, ku) + 128.5f);
    out[EH * EW + q + j] = (uchar)(dot(sum, kv) + 128.5f);
}
