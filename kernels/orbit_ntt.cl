/* orbit_ntt.cl: one step z <- z^2 + c of a reference orbit at thousands to millions of
 * bits, multiplied by number-theoretic transforms (farm/numerics/gpu_orbit.py drives it;
 * the numbers and the transform's layout are farm/numerics/ntt_layout.py's docstring).
 *
 * Numbers: x, y (z = x + i y) and cr, ci (c) are signed fixed point, value
 * sum_k d[k] 2^(B k) / 2^F, F = NF*B, as ND = NF + 1 balanced digits d[k] (longs,
 * |d| <= 2^(B-1) + 1, least significant first; the top digit is the integer part).
 * Transforms: modulo the prime P = 2^64 - 2^32 + 1, length L = R*C (powers of two),
 * in four steps: R-point transforms down the columns (a[C*j1 + j2], j1 < R), a
 * twiddle w^(j2*k1), C-point transforms along the rows, each in local memory (one
 * work-group a column or a row, a work-item one or more butterflies a stage). Forward transforms are
 * decimation in frequency (natural order in, bit-reversed out), inverse ones decimation
 * in time (bit-reversed in, natural out), so no permutation is ever done: row `pos`
 * of the middle buffer holds frequency k1 = bitrev(pos).
 *
 * A step is five launches, every one a no-op once state[STOPPED] is set:
 *   forward_columns   digits (x, y) -> mid: column transforms, twiddled
 *   rows              mid -> mid: row transforms of X and Y, X*X - Y*Y and 2*X*Y
 *                     (scaled by 1/L), inverse row transforms
 *   inverse_columns   mid -> mid: twiddle back, inverse column transforms, the
 *                     coefficients of x^2 - y^2 and 2xy as signed longs (|.| < P/2)
 *   normalise         mid + c -> digits: the coefficients plus c's digits shifted up
 *                     by F, split into balanced digits by two local carry passes (digit
 *                     k from coefficients k..k-3 alone), the NF lowest dropped; the
 *                     index of x's and y's highest nonzero digit (tops)
 *   point             digits -> points[state[COUNT] - base]: x and y rounded to 53
 *                     bits (correctly: a 4-digit window at the top nonzero digit, the
 *                     digits below as sticky), as signed mantissa integers m (|m| in
 *                     [2^52, 2^53], value m 2^(e-53)) and exponents e (frexp's); counts
 *                     the step, and sets state[STOPPED] once |x| or |y| reaches FREEZE
 *                     (the next square would overflow the integer digit)
 *
 * Compile-time constants (-D): B (digit bits, 22..24), NF, ND, R_LOG, C_LOG, FREEZE,
 * R_ITEMS and C_ITEMS (work-group sizes of the column and row kernels, at most R/2, C/2).
 * Buffers: digits long[2*ND] (x then y), cdig long[2*ND] (cr then ci), mid
 * ulong[2*R*C] (number, row, column), tw ulong[L] (w^k, w a primitive L-th root of
 * unity mod P), state int[2] (STOPPED, COUNT), tops int[2] (-1 between steps), points:
 * mant long[2*batch] and exps int[2*batch] (x, y of each point). No extension is needed (no double arithmetic).
 * kernels/newton_ntt.cl (z with dz/dc, farm/numerics/gpu_newton.py) is built after this
 * file and uses its helpers and constants: keep them in step.
 */

#define P 0xFFFFFFFF00000001UL
#define EPS 0xFFFFFFFFUL            /* 2^64 mod P */
#define R (1 << R_LOG)
#define C (1 << C_LOG)
#define L (R * C)
#define STOPPED 0
#define COUNT 1
#define HALF_DIGIT (1L << (B - 1))
#define DIGIT_MASK ((1L << B) - 1)

inline ulong add_p(ulong a, ulong b)
{
    ulong s = a + b;
    if (s < a)
        s += EPS;                   /* 2^64 = 2^32 - 1 mod P; no overflow here */
    return s >= P ? s - P : s;
}

inline ulong sub_p(ulong a, ulong b)
{
    ulong d = a - b;
    if (a < b)
        d -= EPS;                   /* + P, modulo 2^64 */
    return d;
}

/* a b mod P from the 128-bit product hi 2^64 + lo: 2^64 = 2^32 - 1 and 2^96 = -1. */
inline ulong mul_p(ulong a, ulong b)
{
    ulong lo = a * b, hi = mul_hi(a, b);
    ulong hh = hi >> 32, hl = hi & EPS;
    ulong t = lo - hh;
    if (lo < hh)
        t -= EPS;
    ulong u = hl * EPS;
    ulong r = t + u;
    if (r < u)
        r += EPS;
    return r >= P ? r - P : r;
}

inline ulong from_signed(long d) { return d < 0 ? (ulong)d + P : (ulong)d; }

inline long to_signed(ulong v) { return v > (P >> 1) ? (long)(v - P) : (long)v; }

inline int bitrev(int i, int bits)
{
    int r = 0;
    for (int k = 0; k < bits; k++, i >>= 1)
        r = (r << 1) | (i & 1);
    return r;
}

/* Two n-point forward transforms (n = 2^n_log, natural order in, bit-reversed out),
 * work-item `lid` of `items` doing butterflies lid, lid + items, ... of the n/2 of each
 * stage. Root powers w_n^j = tw[j * L/n]. The caller has put a barrier after filling
 * a and b. */
inline void dif2(__local ulong *a, __local ulong *b, int n_log, __global const ulong *tw, int lid,
                 int items)
{
    for (int h_log = n_log - 1; h_log >= 0; h_log--) {
        int width = 1 << h_log;
        for (int t = lid; t < 1 << (n_log - 1); t += items) {
            int j = t & (width - 1);
            int i = ((t - j) << 1) + j;
            ulong w = tw[j << (R_LOG + C_LOG - h_log - 1)];
            ulong u = a[i], v = a[i + width];
            a[i] = add_p(u, v);
            a[i + width] = mul_p(sub_p(u, v), w);
            u = b[i], v = b[i + width];
            b[i] = add_p(u, v);
            b[i + width] = mul_p(sub_p(u, v), w);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* The inverse of dif2 times n: bit-reversed in, natural out, roots w_n^-j. */
inline void dit2(__local ulong *a, __local ulong *b, int n_log, __global const ulong *tw, int lid,
                 int items)
{
    for (int h_log = 0; h_log < n_log; h_log++) {
        int width = 1 << h_log;
        for (int t = lid; t < 1 << (n_log - 1); t += items) {
            int j = t & (width - 1);
            int i = ((t - j) << 1) + j;
            int k = j << (R_LOG + C_LOG - h_log - 1);
            ulong w = tw[(L - k) & (L - 1)];
            ulong u = a[i], v = mul_p(a[i + width], w);
            a[i] = add_p(u, v);
            a[i + width] = sub_p(u, v);
            u = b[i], v = mul_p(b[i + width], w);
            b[i] = add_p(u, v);
            b[i + width] = sub_p(u, v);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* One work-group (R_ITEMS items) a column j2 of x and y. */
__kernel void forward_columns(__global const long *digits, __global ulong *mid,
                              __global const ulong *tw, __global const int *state)
{
    if (state[STOPPED])
        return;
    __local ulong a[R], b[R];
    int lid = get_local_id(0), j2 = get_group_id(0);
    for (int j1 = lid; j1 < R; j1 += R_ITEMS) {
        int k = (j1 << C_LOG) + j2;
        a[j1] = k < ND ? from_signed(digits[k]) : 0;
        b[j1] = k < ND ? from_signed(digits[ND + k]) : 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    dif2(a, b, R_LOG, tw, lid, R_ITEMS);
    for (int pos = lid; pos < R; pos += R_ITEMS) {
        ulong w = tw[bitrev(pos, R_LOG) * j2];
        mid[(pos << C_LOG) + j2] = mul_p(a[pos], w);
        mid[L + (pos << C_LOG) + j2] = mul_p(b[pos], w);
    }
}

/* One work-group (C_ITEMS items) a row: X, Y -> (X^2 - Y^2) / L, 2 X Y / L, transformed
 * forward and back along the row. inv_l = 1/L mod P. */
__kernel void rows(__global ulong *mid, __global const ulong *tw, __global const int *state,
                   ulong inv_l)
{
    if (state[STOPPED])
        return;
    __local ulong a[C], b[C];
    int lid = get_local_id(0);
    __global ulong *row = mid + ((size_t)get_group_id(0) << C_LOG);
    for (int i = lid; i < C; i += C_ITEMS) {
        a[i] = row[i];
        b[i] = row[L + i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    dif2(a, b, C_LOG, tw, lid, C_ITEMS);
    ulong two_inv_l = add_p(inv_l, inv_l);
    for (int i = lid; i < C; i += C_ITEMS) {
        ulong x = a[i], y = b[i];
        a[i] = mul_p(sub_p(mul_p(x, x), mul_p(y, y)), inv_l);
        b[i] = mul_p(mul_p(x, y), two_inv_l);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    dit2(a, b, C_LOG, tw, lid, C_ITEMS);
    for (int i = lid; i < C; i += C_ITEMS) {
        row[i] = a[i];
        row[L + i] = b[i];
    }
}

/* One work-group (R_ITEMS items) a column j2: twiddled back, transformed back; the
 * column's coefficients (index C*j1 + j2) written in place as signed longs. */
__kernel void inverse_columns(__global ulong *mid, __global const ulong *tw,
                              __global const int *state)
{
    if (state[STOPPED])
        return;
    __local ulong a[R], b[R];
    int lid = get_local_id(0), j2 = get_group_id(0);
    for (int pos = lid; pos < R; pos += R_ITEMS) {
        ulong w = tw[(L - bitrev(pos, R_LOG) * j2) & (L - 1)];
        a[pos] = mul_p(mid[(pos << C_LOG) + j2], w);
        b[pos] = mul_p(mid[L + (pos << C_LOG) + j2], w);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    dit2(a, b, R_LOG, tw, lid, R_ITEMS);
    for (int j1 = lid; j1 < R; j1 += R_ITEMS) {
        mid[(j1 << C_LOG) + j2] = (ulong)to_signed(a[j1]);
        mid[L + (j1 << C_LOG) + j2] = (ulong)to_signed(b[j1]);
    }
}

inline long low_digit(long v) { return ((v + HALF_DIGIT) & DIGIT_MASK) - HALF_DIGIT; }

/* t_j, the digit sum at j after the first carry pass: coefficient j's low B bits,
 * j-1's next B, j-2's top (each coefficient plus c's digit where it has one). */
inline long first_pass(__global const long *coef, __global const long *cdig, int j)
{
    long t = 0;
    for (int s = 0; s < 3; s++) {
        int i = j - s;
        if (i < 0)
            break;
        long v = coef[i] + (i >= NF ? cdig[i - NF] : 0);
        long a0 = low_digit(v), v1 = (v - a0) >> B, a1 = low_digit(v1);
        t += s == 0 ? a0 : s == 1 ? a1 : (v1 - a1) >> B;
    }
    return t;
}

/* The balanced digit at j from the first pass's sums at j and j - 1. */
inline long second_pass(long t, long below)
{
    long low = low_digit(below);
    return low_digit(t) + ((below - low) >> B);
}

/* Work-item k < ND: digit NF + k of x^2 - y^2 + cr and of 2xy + ci, the new x and y.
 * tops[0], tops[1] (-1 before) become the indices of their highest nonzero digits: a
 * work-item whose digit is nonzero and the one above it zero (or the top) takes part
 * in an atomic maximum (few do: no reduction, no barrier). */
__kernel void normalise(__global const long *mid, __global const long *cdig,
                        __global long *digits, __global int *tops, __global const int *state)
{
    int k = get_global_id(0);
    if (state[STOPPED] || k >= ND)
        return;
    for (int num = 0; num < 2; num++) {
        __global const long *coef = mid + num * L;
        __global const long *c = cdig + num * ND;
        int j = NF + k;
        long t = first_pass(coef, c, j);
        long d = second_pass(t, first_pass(coef, c, j - 1));
        digits[num * ND + k] = d;
        if (d && (k == ND - 1 || !second_pass(first_pass(coef, c, j + 1), t)))
            atomic_max(&tops[num], k);
    }
}

/* The sign (-1, 0, 1) of sum_{k <= top} d[k] 2^(Bk): its highest nonzero digit's. */
inline int sign_below(__global const long *d, int top)
{
    for (int k = top; k >= 0; k--)
        if (d[k])
            return d[k] > 0 ? 1 : -1;
    return 0;
}

/* The number d (ND digits) whose highest nonzero digit is d[m], rounded to 53 bits:
 * *mant = +-round(|v| / 2^(e - 53)) in [2^52, 2^53], *e = frexp's exponent. */
inline void round_number(__global const long *d, int m, long *mant, int *e)
{
    if (m < 0) {
        *mant = 0;
        *e = 0;
        return;
    }
    ulong hi = 0, lo = 0;           /* the window W = d[m..m-3], 128-bit two's complement */
    for (int s = 0; s < 4; s++) {
        long v = m - s >= 0 ? d[m - s] : 0;
        hi = (hi << B) | (lo >> (64 - B));
        lo <<= B;
        ulong sum = lo + (ulong)v;
        hi += (v < 0 ? ~0UL : 0) + (sum < lo ? 1 : 0);
        lo = sum;
    }
    int negative = (long)hi < 0;
    if (negative) {
        lo = ~lo + 1;
        hi = ~hi + (lo == 0 ? 1 : 0);
    }
    /* |W| >= 2^(3B - 1.01) > 2^64: hi is nonzero and the top 64 bits are M */
    int lead = 127 - (int)clz(hi);
    int sh = lead - 63;
    ulong top = (hi << (64 - sh)) | (lo >> sh);
    ulong lost = lo & ((1UL << sh) - 1);
    ulong r = top & 0x7FF;
    int up = r > 0x400;
    if (r == 0x400) {               /* a tie, unless what lies below top's last bit says */
        int rest = lost ? 1 : (negative ? -1 : 1) * sign_below(d, m - 4);  /* |W's rest| < 0.51 */
        up = rest > 0 || (rest == 0 && ((top >> 11) & 1));
    }
    long m53 = (long)((top >> 11) + up);
    *mant = negative ? -m53 : m53;
    *e = lead + 1 + B * (m - 3) - NF * B;
}

/* Work-items 0 and 1 (x and y): z's point, tops reset, the count, the freeze. */
__kernel void point(__global const long *digits, __global int *tops, __global long *mant,
                    __global int *exps, __global int *state, int base)
{
    int lid = get_local_id(0);
    if (state[STOPPED])
        return;
    int count = state[COUNT];
    long m;
    int e;
    round_number(digits + lid * ND, tops[lid], &m, &e);
    tops[lid] = -1;
    mant[2 * (count - base) + lid] = m;
    exps[2 * (count - base) + lid] = e;
    barrier(CLK_GLOBAL_MEM_FENCE);  /* both have read state[COUNT] */
    if (lid == 0) {
        long ix = digits[ND - 1], iy = digits[2 * ND - 1];
        state[COUNT] = count + 1;
        if (ix >= FREEZE || ix <= -FREEZE || iy >= FREEZE || iy <= -FREEZE)
            state[STOPPED] = 1;
    }
}
