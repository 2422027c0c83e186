/* histogram.cl: the count histogram every kernel that writes counts accumulates
 * (mandel.cl for rendered tiles, synth.cl for synthesised frames); built in front of
 * them (farm/compute/programs.py concatenates sources).
 *
 * Counts below `nlocal` (at most LOCAL_BINS, and max_iter + 1) go to a 32-bit
 * sub-histogram in local memory, one per work-group; the group adds it to the global
 * counters once at the end. Larger counts go straight to the global counters.
 *
 * Global counters: `long` with -DHIST64 (needs cl_khr_int64_base_atomics: a frame of
 * many samples can pass 2^32 in one bin), else `uint` (the host then reads them as
 * 32-bit and checks for overflow).
 *
 * Build options: -DLOCAL_BINS=<n> (default 1024; the host chooses at most a quarter of
 * the device's local memory), -DHIST64.
 *
 * Use in a kernel:
 *     __local uint lh[LOCAL_BINS];
 *     const uint nlocal = hist_local_clear(lh, max_iter);   (contains a barrier)
 *     ... hist_count(lh, nlocal, hist, n) for every count n ...
 *     hist_local_flush(lh, nlocal, hist);                  (contains a barrier)
 */

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

/* Zero the group's sub-histogram; returns its length for counts up to max_iter. */
inline uint hist_local_clear(__local uint *lh, const uint max_iter)
{
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    const uint nlocal = min((uint)LOCAL_BINS, max_iter + 1);
    for (uint b = lid; b < nlocal; b += lsz)
        lh[b] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    return nlocal;
}

/* One count n. */
inline void hist_count(__local uint *lh, const uint nlocal, __global hist_t *hist, const uint n)
{
    if (n < nlocal)
        atomic_inc(&lh[n]);
    else
        hist_add(hist, n, 1u);
}

/* Add the group's sub-histogram to the global counters (every work-item calls it). */
inline void hist_local_flush(__local uint *lh, const uint nlocal, __global hist_t *hist)
{
    const uint lid = get_local_id(0), lsz = get_local_size(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint b = lid; b < nlocal; b += lsz)
        if (lh[b])
            hist_add(hist, b, lh[b]);
}
