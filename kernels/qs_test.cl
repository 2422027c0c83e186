/* qs_test.cl: test entry points for the quad-single arithmetic of qs.cl, compiled
 * after it (programs.build(ctx, ("qs.cl", "qs_test.cl"), options)).
 *
 * Extensions: cl_khr_fp64 (to_double's output), enabled by qs.cl.
 *
 * Entry point: qs_ops, one work-item per operand pair i (global size n)
 *   a    [n]          float4  first operands, quad-single limbs (.s0 most significant)
 *   b    [n]          float4  second operands
 *   out  [n * QS_NOPS] float4 out: out[i * QS_NOPS + op], op:
 *                       0 qs_add_accurate(a, b)    1 qs_add_sloppy(a, b)
 *                       2 qs_sub_accurate(a, b)    3 qs_add_sloppy(a, -b)
 *                       4 qs_mul(a, b)             5 qs_sqr(a)
 *                       6 qs_mul2(a)               7 qs_neg(a)
 *                       8 qs_add(a, b), the variant escape_time uses
 *   cmp  [n * 2]      int     out: cmp[2i] = qs_gt(a, b), cmp[2i + 1] = qs_gt(b, a)
 *   dbl  [n]          double  out: to_double(a)
 *
 * Entry point: qs_fused, one work-item per operand triple i (global size n)
 *   a, b, c [n]       float4  operands
 *   out  [n * 2]      float4  out: out[2i] = qs_mul2_add(a, b, c) (2ab + c),
 *                             out[2i + 1] = qs_sqr_sub_add(a, b, c) (a^2 - b^2 + c)
 *
 * Entry point: qs_escape, one work-item per point i (global size n)
 *   cr, ci [n]        float4  c
 *   max_iter          uint
 *   r2                float4  escape radius squared
 *   iters  [n]        uint    out: escape_time(cr[i], ci[i], max_iter, r2, 0.0, &z, &dz)
 *   z      [n]        double2 out: z(n) as escape_time wrote it; (0, 0) if interior
 */

#define QS_NOPS 9

__kernel void qs_ops(__global const float4 *a, __global const float4 *b,
                     __global float4 *out, __global int *cmp, __global double *dbl)
{
    const size_t i = get_global_id(0);
    const float4 x = a[i], y = b[i];
    __global float4 *o = out + i * QS_NOPS;
    o[0] = qs_add_accurate(x, y);
    o[1] = qs_add_sloppy(x, y);
    o[2] = qs_sub_accurate(x, y);
    o[3] = qs_add_sloppy(x, qs_neg(y));
    o[4] = qs_mul(x, y);
    o[5] = qs_sqr(x);
    o[6] = qs_mul2(x);
    o[7] = qs_neg(x);
    o[8] = qs_add(x, y);
    cmp[2 * i] = qs_gt(x, y);
    cmp[2 * i + 1] = qs_gt(y, x);
    dbl[i] = to_double(x);
}

__kernel void qs_fused(__global const float4 *a, __global const float4 *b,
                       __global const float4 *c, __global float4 *out)
{
    const size_t i = get_global_id(0);
    const float4 x = a[i], y = b[i], z = c[i];
    out[2 * i] = qs_mul2_add(x, y, z);
    out[2 * i + 1] = qs_sqr_sub_add(x, y, z);
}

__kernel void qs_escape(__global const float4 *cr, __global const float4 *ci,
                        const uint max_iter, const float4 r2,
                        __global uint *iters, __global double2 *z)
{
    const size_t i = get_global_id(0);
    double2 zn = (double2)(0.0, 0.0), dz;
    iters[i] = escape_time(cr[i], ci[i], max_iter, r2, 0.0, &zn, &dz);
    z[i] = zn;
}
