/* hist_top.cl: the highest count present in a tile's histogram.
 *
 * A deep frame's histogram has up to 10^7 + 1 bins (the depth rule's limit), while
 * its pixels escape within a few thousand counts of each other. The renderer reads
 * back the first HIST_STAGED bins with every tile (farm/compute/render.py) and runs
 * this kernel behind the tile's: the host then looks only at the bins up to `top`,
 * and reads the bins past HIST_STAGED only when `top` lies there.
 *
 * `top` must be 0 before the launch; each work-item strides over the bins (adjacent
 * items read adjacent bins) and raises it once to the last non-zero bin it saw.
 * Build option: -DHIST64 (the counters are 64-bit), as for histogram.cl.
 */

#ifdef HIST64
typedef ulong hist_t;
#else
typedef uint hist_t;
#endif

__kernel void hist_top(__global const hist_t *hist, const uint n, __global uint *top)
{
    uint best = 0;
    for (uint b = get_global_id(0); b < n; b += get_global_size(0))
        if (hist[b] != 0)
            best = b;
    if (best != 0)
        atomic_max(top, best);
}
