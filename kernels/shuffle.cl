/* shuffle.cl: HDF5's byte shuffle of one channel of a rendered tile, on the device.
 *
 * A compressed store keeps each tile's chunk shuffled, then compressed with zstd
 * (farm/store/codec.py): byte plane k holds byte k of every element of the chunk, in
 * element order. Done here, right behind the tile's kernel, the host reads the planes
 * back and compresses them as they are; shuffling on the host cost a 16-core GPU host
 * more CPU than compression itself spares.
 *
 * (The entry point is not called "shuffle": that is an OpenCL built-in.)
 *
 * Number format: bytes; an element is `size` bytes (4: uint counts and float offsets, 8:
 * the distance estimate's float2), `depth` elements per pixel (samples). No extensions.
 *
 * Entry point: byte_planes(in, out, size, depth, rw, rh, tw, th), one work-item per element
 * of the chunk (global size >= tw * th * depth; extra work-items return):
 *   in   [rh * rw * depth * size] uchar  the channel as the tile's kernel wrote it: the
 *                                        region it computed (rw x rh pixels, row-major)
 *   out  [size * n] uchar                the shuffled chunk, n = tw * th * depth: element e
 *                                        of pixel (col, row) of the chunk (tw x th, the
 *                                        region at its top-left, zeros elsewhere: edge
 *                                        tiles and expmap filler) at out[k * n + e]
 *   size, depth, rw, rh, tw, th  uint
 */

__kernel void byte_planes(__global const uchar *in, __global uchar *out, const uint size,
                      const uint depth, const uint rw, const uint rh, const uint tw,
                      const uint th)
{
    const uint e = get_global_id(0);
    const uint n = tw * th * depth;
    if (e >= n)
        return;
    const uint px = e / depth, d = e - px * depth;
    const uint row = px / tw, col = px - row * tw;
    const bool inside = col < rw && row < rh;
    const uint src = ((row * rw + col) * depth + d) * size;
    for (uint k = 0; k < size; ++k)
        out[k * n + e] = inside ? in[src + k] : (uchar)0;
}

/* The inverse, for a reader that colours on the device (farm/compute/color.py): a chunk's
 * byte planes, as a compressed store holds them once zstd has been undone, back to its
 * elements, so the host uploads the planes as they come and shuffles nothing itself.
 *
 * Entry point: element_bytes(in, out, size, n), one work-item per element (global size
 * >= n; extra work-items return):
 *   in   [size * n] uchar   byte k of element e at in[k * n + e]
 *   out  [n * size] uchar   element e's bytes at out[e * size .. e * size + size - 1]
 *   size, n  uint
 */
__kernel void element_bytes(__global const uchar *in, __global uchar *out, const uint size,
                            const uint n)
{
    const uint e = get_global_id(0);
    if (e >= n)
        return;
    for (uint k = 0; k < size; ++k)
        out[e * size + k] = in[k * n + e];
}
