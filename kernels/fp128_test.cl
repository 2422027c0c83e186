/* fp128_test.cl: test entry points for the fp128 operations (compiled after fp128.cl).
 *
 * Entry point: fp128_ops, one work-item per operand pair i:
 *   a, b   [n] uint4   operands (fp128 words)
 *   k      [n] int     word operand: multiplier for fp_mul_word, shift count & 127
 *   out    [n*10] uint4   out[10*i + op] for op = 0 add, 1 sub, 2 neg(a), 3 abs(a),
 *                         4 inc(a), 5 mul, 6 sqr(a), 7 mul_word(a, k), 8 shl(a, k&127),
 *                         9 shr(a, k&127)
 *   flags  [n] int     bit 0: fp_gt(a, b); bit 1: fp_is_neg(a); bit 2: fp_gt_u(a, b)
 */
#define FP128_NOPS 10

__kernel void fp128_ops(__global const uint4 *a, __global const uint4 *b, __global const int *k,
                        __global uint4 *out, __global int *flags)
{
    const size_t i = get_global_id(0);
    const fp128 x = a[i], y = b[i];
    const int w = k[i];
    __global uint4 *o = out + FP128_NOPS * i;
    o[0] = fp_add(x, y);
    o[1] = fp_sub(x, y);
    o[2] = fp_neg(x);
    o[3] = fp_abs(x);
    o[4] = fp_inc(x);
    o[5] = fp_mul(x, y);
    o[6] = fp_sqr(x);
    o[7] = fp_mul_word(x, w);
    o[8] = fp_shl(x, (uint)w & 127u);
    o[9] = fp_shr(x, (uint)w & 127u);
    flags[i] = fp_gt(x, y) | (fp_is_neg(x) << 1) | (fp_gt_u(x, y) << 2);
}
