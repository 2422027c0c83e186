/* newton_ntt.cl: one step of Newton's orbit, z <- z^2 + c and dz <- 2 z dz + 1 together
 * (farm/numerics/gpu_newton.py drives it). Built after orbit_ntt.cl, whose helpers it
 * uses (the transforms, the carries) and whose constants it takes (B, NF, ND, R_LOG,
 * C_LOG, FREEZE, R_ITEMS, C_ITEMS; farm/numerics/ntt_layout.py).
 *
 * z = x + i y is fixed point as in orbit_ntt.cl. dz is block floating point:
 * dz = D 2^e, D = Dr + i Di two fixed-point numbers (the same ND digits, F = NF*B
 * fraction bits) and e an integer. The buffer ddig holds D as the last step left it
 * (unnormalised); the next step reads it shifted by state[SHIFT] whole digits
 * (digit k of the D it uses is ddig[k + SHIFT], 0 outside), which puts its highest
 * nonzero digit at NF - 1, so |Dr|, |Di| <= 1/2 + 2^-B and max(|Dr|, |Di|) >= 2^-(B+1)
 * (relative precision F - B - 1 bits), unless that would take e below 0 (then D is
 * smaller: |dz| < 2^-B, known to 2^(B-F) absolutely; the +1 makes it about 1 next step).
 * state[EXP] is e for the shifted D. A step:
 *
 *   dz' = 2 z D 2^e + 1 = (z D + 2^-(e+1)) 2^(e+1)
 *
 * z D's coefficients come from the transforms of x, y, Dr and Di (X Dr - Y Di, X Di +
 * Y Dr: at most 2 ND products a coefficient, as for x^2 - y^2, so the layout's bound
 * holds); 2^-(e+1) is one bit, F - e - 1, added to its coefficient before the carries
 * (dropped when e + 1 > F: below half a unit). |z D + 2^-(e+1)| < 17: the integer
 * digit holds it. Five launches a step, every one a no-op once state[STOPPED] is set:
 *
 *   newton_forward    digits (x, y), ddig (shifted) -> mid: column transforms, twiddled
 *   newton_rows       row transforms; X^2 - Y^2, 2 X Y, X Dr - Y Di, X Di + Y Dr (over
 *                     L); inverse row transforms
 *   newton_inverse    inverse column transforms: the four products' coefficients
 *   newton_normalise  digits <- x^2 - y^2 + cr, 2xy + ci; ddig <- z D + 2^-(e+1) (both
 *                     parts); tops[0] <- the highest nonzero digit of Dr and Di
 *   newton_state      one work-item: SHIFT and EXP for the next step from tops[0] (tops
 *                     reset), the count, and the freeze of orbit_ntt.cl's point kernel
 *                     (|x| or |y| >= FREEZE: the orbit escapes)
 *
 * Buffers: digits long[2*ND], cdig long[2*ND], ddig long[2*ND] (Dr then Di), mid
 * ulong[4*L], tw ulong[L], tops int[1], state int[5] (STOPPED, COUNT, SHIFT, EXP, and
 * a spare). After a step the host reads dz = ddig's value 2^(EXP - B*SHIFT).
 */

#define SHIFT 2
#define EXP 3
#define FRAC (NF * B)

/* One work-group (R_ITEMS items) a column j2 of x, y, Dr and Di. */
__kernel void newton_forward(__global const long *digits, __global const long *ddig,
                             __global ulong *mid, __global const ulong *tw,
                             __global const int *state)
{
    if (state[STOPPED])
        return;
    __local ulong a[R], b[R], u[R], v[R];
    int lid = get_local_id(0), j2 = get_group_id(0), shift = state[SHIFT];
    for (int j1 = lid; j1 < R; j1 += R_ITEMS) {
        int k = (j1 << C_LOG) + j2, s = k + shift;
        int in = k < ND, din = in && s >= 0 && s < ND;
        a[j1] = in ? from_signed(digits[k]) : 0;
        b[j1] = in ? from_signed(digits[ND + k]) : 0;
        u[j1] = din ? from_signed(ddig[s]) : 0;
        v[j1] = din ? from_signed(ddig[ND + s]) : 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    dif2(a, b, R_LOG, tw, lid, R_ITEMS);
    dif2(u, v, R_LOG, tw, lid, R_ITEMS);
    for (int pos = lid; pos < R; pos += R_ITEMS) {
        ulong w = tw[bitrev(pos, R_LOG) * j2];
        int at = (pos << C_LOG) + j2;
        mid[at] = mul_p(a[pos], w);
        mid[L + at] = mul_p(b[pos], w);
        mid[2 * L + at] = mul_p(u[pos], w);
        mid[3 * L + at] = mul_p(v[pos], w);
    }
}

/* One work-group (C_ITEMS items) a row: the four products over L, transformed forward
 * and back along the row. inv_l = 1/L mod P. */
__kernel void newton_rows(__global ulong *mid, __global const ulong *tw,
                          __global const int *state, ulong inv_l)
{
    if (state[STOPPED])
        return;
    __local ulong a[C], b[C], u[C], v[C];
    int lid = get_local_id(0);
    __global ulong *row = mid + ((size_t)get_group_id(0) << C_LOG);
    for (int i = lid; i < C; i += C_ITEMS) {
        a[i] = row[i];
        b[i] = row[L + i];
        u[i] = row[2 * L + i];
        v[i] = row[3 * L + i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    dif2(a, b, C_LOG, tw, lid, C_ITEMS);
    dif2(u, v, C_LOG, tw, lid, C_ITEMS);
    ulong two_inv_l = add_p(inv_l, inv_l);
    for (int i = lid; i < C; i += C_ITEMS) {
        ulong x = a[i], y = b[i], dr = u[i], di = v[i];
        a[i] = mul_p(sub_p(mul_p(x, x), mul_p(y, y)), inv_l);
        b[i] = mul_p(mul_p(x, y), two_inv_l);
        u[i] = mul_p(sub_p(mul_p(x, dr), mul_p(y, di)), inv_l);
        v[i] = mul_p(add_p(mul_p(x, di), mul_p(y, dr)), inv_l);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    dit2(a, b, C_LOG, tw, lid, C_ITEMS);
    dit2(u, v, C_LOG, tw, lid, C_ITEMS);
    for (int i = lid; i < C; i += C_ITEMS) {
        row[i] = a[i];
        row[L + i] = b[i];
        row[2 * L + i] = u[i];
        row[3 * L + i] = v[i];
    }
}

/* One work-group (R_ITEMS items) a column j2: the four products' coefficients, signed. */
__kernel void newton_inverse(__global ulong *mid, __global const ulong *tw,
                             __global const int *state)
{
    if (state[STOPPED])
        return;
    __local ulong a[R], b[R], u[R], v[R];
    int lid = get_local_id(0), j2 = get_group_id(0);
    for (int pos = lid; pos < R; pos += R_ITEMS) {
        ulong w = tw[(L - bitrev(pos, R_LOG) * j2) & (L - 1)];
        int at = (pos << C_LOG) + j2;
        a[pos] = mul_p(mid[at], w);
        b[pos] = mul_p(mid[L + at], w);
        u[pos] = mul_p(mid[2 * L + at], w);
        v[pos] = mul_p(mid[3 * L + at], w);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    dit2(a, b, R_LOG, tw, lid, R_ITEMS);
    dit2(u, v, R_LOG, tw, lid, R_ITEMS);
    for (int j1 = lid; j1 < R; j1 += R_ITEMS) {
        int at = (j1 << C_LOG) + j2;
        mid[at] = (ulong)to_signed(a[j1]);
        mid[L + at] = (ulong)to_signed(b[j1]);
        mid[2 * L + at] = (ulong)to_signed(u[j1]);
        mid[3 * L + at] = (ulong)to_signed(v[j1]);
    }
}

/* orbit_ntt.cl's first_pass with one addend, `add` at coefficient `at` (-1: none). */
inline long first_pass_one(__global const long *coef, int j, int at, long add)
{
    long t = 0;
    for (int s = 0; s < 3; s++) {
        int i = j - s;
        if (i < 0)
            break;
        long v = coef[i] + (i == at ? add : 0);
        long a0 = low_digit(v), v1 = (v - a0) >> B, a1 = low_digit(v1);
        t += s == 0 ? a0 : s == 1 ? a1 : (v1 - a1) >> B;
    }
    return t;
}

/* Work-item k < ND: digit k of the new x and y (as orbit_ntt.cl's normalise) and of the
 * new Dr and Di, z D + 2^-(e+1) (the bit in Dr only); tops[0] becomes the highest
 * index of a nonzero digit of Dr or Di (-1 before). */
__kernel void newton_normalise(__global const long *mid, __global const long *cdig,
                               __global long *digits, __global long *ddig, __global int *tops,
                               __global const int *state)
{
    int k = get_global_id(0);
    if (state[STOPPED] || k >= ND)
        return;
    int j = NF + k;
    for (int num = 0; num < 2; num++) {
        __global const long *coef = mid + num * L;
        __global const long *c = cdig + num * ND;
        digits[num * ND + k] = second_pass(first_pass(coef, c, j), first_pass(coef, c, j - 1));
    }
    int bit = FRAC - state[EXP] - 1;   /* 2^-(e+1) as a multiple of 2^-F */
    for (int num = 0; num < 2; num++) {
        __global const long *coef = mid + (2 + num) * L;
        int at = num == 0 && bit >= 0 ? NF + bit / B : -1;
        long add = at >= 0 ? 1L << (bit % B) : 0;
        long t = first_pass_one(coef, j, at, add);
        long d = second_pass(t, first_pass_one(coef, j - 1, at, add));
        ddig[num * ND + k] = d;
        if (d && (k == ND - 1 || !second_pass(first_pass_one(coef, j + 1, at, add), t)))
            atomic_max(&tops[0], k);
    }
}

/* One work-item, after newton_normalise: the shift that brings the new D's highest
 * nonzero digit to NF - 1 (down one digit, or up as far as keeps e >= 0), EXP for the
 * shifted D (0 when D = 0), the count, the freeze. */
__kernel void newton_state(__global const long *digits, __global int *tops, __global int *state)
{
    if (state[STOPPED])
        return;
    int top = tops[0], e = state[EXP] + 1, shift = 0;
    tops[0] = -1;
    if (top < 0)
        e = 0;
    else if (top >= NF)
        shift = top - (NF - 1);
    else
        shift = -min(NF - 1 - top, e / B);
    state[SHIFT] = shift;
    state[EXP] = e + B * shift;
    state[COUNT] += 1;
    long ix = digits[ND - 1], iy = digits[2 * ND - 1];
    if (ix >= FREEZE || ix <= -FREEZE || iy >= FREEZE || iy <= -FREEZE)
        state[STOPPED] = 1;
}
