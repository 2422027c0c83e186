/* perturb_lanes.cl: the double-delta loop of perturb.cl over LANES pixels at once, for
 * CPU devices.
 *
 * A CPU runs one work-item's pixels one after another, and a pixel's steps form one
 * chain of dependent FP64 operations: the loop waits on latencies. Here a work-item
 * keeps LANES pixels in flight, one per lane of OpenCL vectors (double8: one AVX-512
 * register), and advances them together: the common step (delta, derivative with
 * -DDISTANCE, orbit loads, escape and rebase tests) is vector code; a lane whose pixel
 * ends takes the work-item's next pixel (refill), so lanes stay busy. With -DSAMPLES=S
 * a "pixel" here is one (pixel, sample) pair q = p S + k, as in mandel.cl's loop. The state lives in vector registers; skips, the
 * wrap of a nucleus reference and the end of a pixel, rarer than steps, copy it to
 * arrays and are handled lane by lane with the functions of escape_pixel. Every lane
 * does exactly the arithmetic of escape_pixel (explicit fma, contraction off): counts
 * and offsets are bitwise those of the one-pixel loop built with the same
 * BLA_MIN_LEVEL.
 *
 * Skips shorter than 2^BLA_MIN_LEVEL steps are not taken (render.py: 5 on CPUs): a
 * skip costs a pass through the lane-by-lane code, several times a vector step, so
 * short ones cost more than they save (measured on PoCL, BENCHMARKS.md).
 *
 * Format: double deltas only (floatexp frames use escape_pixel). Extensions:
 * cl_khr_fp64. Build after perturb.cl, before mandel.cl, with -DPERTURB_LANES=n for n
 * in 2, 4, 8, 16 (farm/compute/render.py: CPU devices, n = 8).
 *
 * Provides escape_lanes(FORMAT_ARGS, first, stride, total, tw, max_iter, sink): the
 * (pixel, sample) pairs q = first, first + stride, ... below total (npix * SAMPLES) of
 * a tile tw wide; each result goes to sample_done(sink, q, n, z, c, w), defined by
 * mandel.cl (the count n, 0 for interior, and z(n), c, s dz/dc as doubles, like
 * escape_pixel's).
 */
#ifndef PERTURB_FX

#define LANES PERTURB_LANES
#define VCAT_(a, b) a##b
#define VCAT(a, b) VCAT_(a, b)
#define vdouble VCAT(double, LANES) /* one double per lane */
#define vlong VCAT(long, LANES)     /* one long per lane; comparisons give 0 or -1 */
#define as_vlong VCAT(as_long, LANES)

struct sample_sink;
void sample_done(struct sample_sink *sink, uint q, uint n, double2 z, double2 c, double2 w);

/* Whether any lane of a mask (0 or -1 per lane) is set: OR-folded halves, no branches
 * (any() of the builtin library tests lane after lane). */
inline bool lanes_any(vlong v)
{
#if LANES >= 16
    const long8 v8 = v.lo | v.hi;
#elif LANES == 8
    const long8 v8 = v;
#endif
#if LANES >= 8
    const long4 v4 = v8.lo | v8.hi;
#elif LANES == 4
    const long4 v4 = v;
#endif
#if LANES >= 4
    const long2 v2 = v4.lo | v4.hi;
#else
    const long2 v2 = v;
#endif
    return (v2.lo | v2.hi) < 0;
}

/* Z(m) of every lane: loads at constant lane indices (an index through memory would
 * stall on store forwarding). */
#define GATHER_LANE(k) \
    do { const double2 z_ = orbit[m.s##k]; zr.s##k = z_.x; zi.s##k = z_.y; } while (0)
inline void lanes_gather(__global const double2 *orbit, vlong m, vdouble *Zr, vdouble *Zi)
{
    vdouble zr, zi;
    GATHER_LANE(0);
    GATHER_LANE(1);
#if LANES >= 4
    GATHER_LANE(2);
    GATHER_LANE(3);
#endif
#if LANES >= 8
    GATHER_LANE(4);
    GATHER_LANE(5);
    GATHER_LANE(6);
    GATHER_LANE(7);
#endif
#if LANES >= 16
    GATHER_LANE(8);
    GATHER_LANE(9);
    GATHER_LANE(a);
    GATHER_LANE(b);
    GATHER_LANE(c);
    GATHER_LANE(d);
    GATHER_LANE(e);
    GATHER_LANE(f);
#endif
    *Zr = zr;
    *Zi = zi;
}

#define vload_lanes VCAT(vload, LANES)
#define vstore_lanes VCAT(vstore, LANES)

/* The lanes' state between passes lives in vectors (registers: the common step
 * touches nothing else); the rare events copy it into these arrays, one entry per
 * lane, handle the lanes concerned one by one, and load it back. */
typedef struct {
    double dr[LANES], di[LANES];   /* delta */
    double dcr[LANES], dci[LANES]; /* offset of the pixel from the reference point */
    double Zr[LANES], Zi[LANES];   /* Z(m) */
    double wr[LANES], wi[LANES];   /* s dz/dc (-DDISTANCE) */
    long m[LANES], n[LANES];       /* reference step, iterations done */
    long live[LANES];              /* -1: the lane holds a pixel */
    double zr[LANES], zi[LANES], mag[LANES]; /* z after the last step, |z|^2 */
    long flag[LANES], len[LANES];  /* a mask's lanes; skip lengths */
    long runs[LANES];              /* consecutive wraps (wrap_track.wraps) */
    wrap_track track[LANES];       /* the interior test's memory (its wraps: runs) */
    uint pix[LANES];               /* the lane's (pixel, sample) q */
} lanes_cold;

#ifdef DISTANCE
#define W_STORE() do { vstore_lanes(wr, 0, t.wr); vstore_lanes(wi, 0, t.wi); } while (0)
#define W_LOAD() do { wr = vload_lanes(0, t.wr); wi = vload_lanes(0, t.wi); } while (0)
#else
#define W_STORE() do { } while (0)
#define W_LOAD() do { } while (0)
#endif
#define LANES_STORE()                                                                  \
    do {                                                                               \
        W_STORE();                                                                     \
        vstore_lanes(dr, 0, t.dr); vstore_lanes(di, 0, t.di);                          \
        vstore_lanes(dcr, 0, t.dcr); vstore_lanes(dci, 0, t.dci);                      \
        vstore_lanes(Zr, 0, t.Zr); vstore_lanes(Zi, 0, t.Zi);                          \
        vstore_lanes(m, 0, t.m); vstore_lanes(n, 0, t.n); vstore_lanes(live, 0, t.live); \
        vstore_lanes(runs, 0, t.runs);                                                   \
    } while (0)
#define LANES_LOAD()                                                                   \
    do {                                                                               \
        W_LOAD();                                                                      \
        dr = vload_lanes(0, t.dr); di = vload_lanes(0, t.di);                          \
        dcr = vload_lanes(0, t.dcr); dci = vload_lanes(0, t.dci);                      \
        Zr = vload_lanes(0, t.Zr); Zi = vload_lanes(0, t.Zi);                          \
        m = vload_lanes(0, t.m); n = vload_lanes(0, t.n); live = vload_lanes(0, t.live); \
        runs = vload_lanes(0, t.runs);                                                   \
    } while (0)

/* Lane k takes (pixel, sample) q (or goes idle when q >= total). */
inline void lane_load(FORMAT_ARGS, lanes_cold *t, uint k, uint q, uint total, uint tw)
{
    const bool live = q < total;
    const uint p = live ? q / SAMPLES : 0, smp = live ? q - p * SAMPLES : 0;
    const uint row = p / tw, col = p - row * tw;
    int e;
    const double2 dc = ldexp(pixel_offset(OFFSET_ARG_NAMES, col, row, smp, &e), e);
    t->pix[k] = q;
    t->live[k] = live ? -1 : 0;
    t->dcr[k] = dc.x;
    t->dci[k] = dc.y;
    t->dr[k] = t->di[k] = t->Zr[k] = t->Zi[k] = t->wr[k] = t->wi[k] = 0.0;
    t->m[k] = t->n[k] = 0;
    t->track[k] = wraps_start();
    t->runs[k] = t->track[k].wraps;
}

/* The lanes that may skip, a cheap filter on every lane at once: at an m where a map of
 * level BLA_MIN_LEVEL starts ((m - 1) a multiple of 2^BLA_MIN_LEVEL), with a delta below
 * every radius' bound R <= 2^-(shift+1) max(|Z.x|, |Z.y|) (farm/numerics/bla.py), compared
 * on high words (adding k << 20 to one multiplies its double by 2^k). */
inline vlong lanes_try(vdouble dr, vdouble di, vdouble Zr, vdouble Zi, vlong m, vlong live,
                       uint shift)
{
    const vlong hd = max(as_vlong(fabs(dr)), as_vlong(fabs(di))) >> 32;
    const vlong hz = max(as_vlong(fabs(Zr)), as_vlong(fabs(Zi))) >> 32;
    const vlong aligned = ((m - (vlong)1) & (vlong)((1 << BLA_MIN_LEVEL) - 1)) == (vlong)0;
    return live & (m >= (vlong)1) & aligned & (hd + (vlong)((long)shift << 20) < hz);
}

/* The lanes whose map of level BLA_MIN_LEVEL at m is valid for their delta: the
 * first test of bla_level, on every lane (a lane at an m where no such map starts
 * gets 0). */
#define RADIUS_LANE(k) (r1.s##k = bla_first_radius(bla_r, bla_rows, (uint)m.s##k))
inline vlong lanes_can_skip(__global const double *bla_r, uint bla_rows, uint bla_levels,
                            vlong m, vlong n, uint max_iter, vdouble dr, vdouble di)
{
    if (bla_levels <= BLA_MIN_LEVEL)
        return (vlong)0;
    vdouble r1;
    RADIUS_LANE(0);
    RADIUS_LANE(1);
#if LANES >= 4
    RADIUS_LANE(2);
    RADIUS_LANE(3);
#endif
#if LANES >= 8
    RADIUS_LANE(4);
    RADIUS_LANE(5);
    RADIUS_LANE(6);
    RADIUS_LANE(7);
#endif
#if LANES >= 16
    RADIUS_LANE(8);
    RADIUS_LANE(9);
    RADIUS_LANE(a);
    RADIUS_LANE(b);
    RADIUS_LANE(c);
    RADIUS_LANE(d);
    RADIUS_LANE(e);
    RADIUS_LANE(f);
#endif
    const vdouble bound = fmax(fabs(dr), fabs(di));
    return (bound < r1) & (n + (vlong)(1 << BLA_MIN_LEVEL) <= (vlong)max_iter);
}

/* Lane k's skip, for a lane that lanes_can_skip passed (its shortest map is valid):
 * the longest valid one, applied (with the derivative's map for -DDISTANCE, s the pixel
 * spacing); returns its length. */
inline uint lane_skip(FORMAT_ARGS, lanes_cold *t, uint k, uint max_iter, double s)
{
    double2 d = (double2)(t->dr[k], t->di[k]), w = (double2)(t->wr[k], t->wi[k]);
    const uint m = (uint)t->m[k];
    const uint j = bla_level_above(bla_r, bla_rows, bla_levels, m, max_iter - (uint)t->n[k],
                                   fmax(fabs(d.x), fabs(d.y)));
    const uint len = bla_skip(bla_ab, m, j, &d, (double2)(t->dcr[k], t->dci[k]), &w, s);
    t->dr[k] = d.x;
    t->di[k] = d.y;
    t->wr[k] = w.x;
    t->wi[k] = w.y;
    return len;
}

/* The rare events of lane k after its step: escape, the wrap of a nucleus reference
 * (interior test), a plain rebase, the iteration limit (pixel_after of perturb.cl).
 * A pixel that ends goes to sample_done and the lane takes the next pixel. */
inline void lane_after(FORMAT_ARGS, lanes_cold *t, uint k, uint max_iter, uint *next,
                       uint stride, uint total, uint tw, struct sample_sink *sink)
{
    const double2 z = (double2)(t->zr[k], t->zi[k]);
    bool ended = t->mag[k] > r2;
    uint count = (uint)t->n[k];
    if (!ended && t->m[k] == orbit_len - 1) {
        if (lam.x != 0.0 || lam.y != 0.0) {
            t->track[k].wraps = (uint)t->runs[k];
            if (wrap_interior(&t->track[k], mini_w(z, lam, lam_e))) {
                ended = true;
                count = 0;
            }
            t->runs[k] = t->track[k].wraps;
        }
        /* d + (Z(m) - Z(wrap_to)): for wrap_to = 0, z itself, bit for bit */
        const double2 wd = ldexp(wrap_m, wrap_e);
        t->dr[k] += wd.x;
        t->di[k] += wd.y;
        t->m[k] = wrap_to;
        const double2 Zw = orbit[wrap_to];
        t->Zr[k] = Zw.x;
        t->Zi[k] = Zw.y;
    }
    if (!ended && t->n[k] >= max_iter) {
        ended = true;
        count = 0;
    }
    if (ended) {
        sample_done(sink, t->pix[k], count, z, orbit[1] + (double2)(t->dcr[k], t->dci[k]),
                    (double2)(t->wr[k], t->wi[k]));
        lane_load(FORMAT_ARG_NAMES, t, k, *next, total, tw);
        *next += stride;
    }
}

void escape_lanes(FORMAT_ARGS, uint first, uint stride, uint total, uint tw, uint max_iter,
                  struct sample_sink *sink)
{
    lanes_cold t;
    uint next = first;
    for (uint k = 0; k < LANES; ++k, next += stride)
        lane_load(FORMAT_ARG_NAMES, &t, k, next, total, tw);
#ifdef DISTANCE
    const double ds = PIXEL_SPACING;
    vdouble wr, wi;
#else
    const double ds = 0.0;
#endif
    vdouble dr, di, dcr, dci, Zr, Zi;
    vlong m, n, live, runs;
    LANES_LOAD();
    const vlong last = (vlong)(orbit_len - 1), limit = (vlong)max_iter;
    while (lanes_any(live)) {
        /* the step of delta_step, every lane; a lane that takes a skip instead keeps
         * its (skipped) delta. A pass with no skip to try (most passes) has no blends:
         * the CPU runs ahead of the rare branches. */
        const vdouble ar = fma((vdouble)2.0, Zr, dr), ai = fma((vdouble)2.0, Zi, di);
        const vdouble nr = fma(ar, dr, fma(-ai, di, dcr));
        const vdouble ni = fma(ar, di, fma(ai, dr, dci));
#ifdef DISTANCE
        /* deriv_step of perturb.cl: w <- 2 z w + s, z = Z + d before the step */
        const vdouble tr = 2.0 * (Zr + dr), ti = 2.0 * (Zi + di);
        const vdouble nwr = fma(tr, wr, fma(-ti, wi, (vdouble)ds));
        const vdouble nwi = fma(tr, wi, ti * wr);
#endif
        vlong tries = bla_levels ? lanes_try(dr, di, Zr, Zi, m, live, bla_shift) : (vlong)0;
        if (lanes_any(tries))
            tries &= lanes_can_skip(bla_r, bla_rows, bla_levels, m, n, max_iter, dr, di);
        if (lanes_any(tries)) {
            vstore_lanes(dr, 0, t.dr);
            vstore_lanes(di, 0, t.di);
            vstore_lanes(dcr, 0, t.dcr);
            vstore_lanes(dci, 0, t.dci);
            vstore_lanes(m, 0, t.m);
            vstore_lanes(n, 0, t.n);
            vstore_lanes(tries, 0, t.flag);
            W_STORE();
            for (uint k = 0; k < LANES; ++k)
                t.len[k] = t.flag[k] ? lane_skip(FORMAT_ARG_NAMES, &t, k, max_iter, ds) : 0;
            dr = vload_lanes(0, t.dr);
            di = vload_lanes(0, t.di);
            W_LOAD();
            vlong len = vload_lanes(0, t.len);
            const vlong step = len == (vlong)0;
            dr = select(dr, nr, step);
            di = select(di, ni, step);
#ifdef DISTANCE
            wr = select(wr, nwr, step);
            wi = select(wi, nwi, step);
#endif
            len = select(len, (vlong)1, step) & live;
            m += len;
            n += len;
        } else {
            dr = nr;
            di = ni;
#ifdef DISTANCE
            wr = nwr;
            wi = nwi;
#endif
            m -= live; /* live lanes are -1 */
            n -= live;
        }
        lanes_gather(orbit, m, &Zr, &Zi);
        const vdouble zr = Zr + dr, zi = Zi + di;
        const vdouble mag = fma(zr, zr, zi * zi);
        const vlong escaped = mag > (vdouble)r2, wrap = m == last;
        /* the plain rebase of pixel_after, every lane */
        const vlong rebase = ~escaped & ~wrap & (mag < fma(dr, dr, di * di));
        if (lanes_any(rebase)) {
            dr = select(dr, zr, rebase);
            di = select(di, zi, rebase);
            Zr = select(Zr, (vdouble)0.0, rebase);
            Zi = select(Zi, (vdouble)0.0, rebase);
            m = select(m, (vlong)0, rebase);
            runs &= ~rebase; /* a plain rebase ends the run of wraps */
        }
        const vlong rare = live & (escaped | wrap | (n >= limit));
        if (lanes_any(rare)) {
            LANES_STORE();
            vstore_lanes(zr, 0, t.zr);
            vstore_lanes(zi, 0, t.zi);
            vstore_lanes(mag, 0, t.mag);
            vstore_lanes(rare, 0, t.flag);
            for (uint k = 0; k < LANES; ++k)
                if (t.flag[k])
                    lane_after(FORMAT_ARG_NAMES, &t, k, max_iter, &next, stride, total, tw, sink);
            LANES_LOAD();
        }
    }
}

#endif
