/* prepass.cl: the escape pre-pass's steps (farm/plan/prepass.py) on a device.
 *
 * farm/plan/prepass.py iterates a coarse grid of each sampled frame in numpy to find
 * the frame's iteration limit (max = "auto"). Its steps are what this file does, one
 * work-item a point, between two of the pre-pass's checks (steps n_from+1 .. n_to);
 * the checks, the counts and the statistics stay on the host
 * (farm/compute/prepass.py). The arithmetic is numpy's, operation for operation: each
 * + - * rounded once in IEEE doubles (OpenCL's double add, subtract and multiply are
 * correctly rounded; FP_CONTRACT OFF forbids fusing a multiply and an add), in the same
 * order, so a point's escape count is the one numpy finds, bit for bit
 * (tests/test_prepass_device.py). No division, square root or library function.
 *
 * A point's state is numpy's rows, each row N doubles (row r of point i at r*N + i):
 *   direct (z <- z^2 + c):   cr ci ur ui x y x2 y2
 *   perturbed (z = Z + d):   cr ci ur ui dr di xr xi mag alive
 * and, for perturbed points, m (index into the joined orbits), base (the point's orbit's
 * first entry) and last (its last entry), as longs. u = dz_n/dz_1 tells interior points.
 * Out: count[i] = the step at which the point escaped, or 0; gone[i] = 1 escaped,
 * 2 interior (|u|^2 < INTERIOR_DERIVATIVE at a multiple of CHUNK), 0 still iterating.
 * A point stops at the first of them, as numpy drops it.
 * Extensions: cl_khr_fp64.
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#define CHUNK 16
#define INTERIOR_DERIVATIVE 1e-12

/* (re, im) <- (tx + i ty)(re + i im): the four products, then their difference and sum
 * (numpy's order; the derivative's u <- 2 z u and the delta's d <- (2 Z + d) d). */
inline void times(double tx, double ty, double *re, double *im)
{
    double a = tx * *re, b = ty * *im, c = tx * *im, d = ty * *re;
    *re = a - b;
    *im = c + d;
}

/* numpy's _Points.interior at a multiple of CHUNK: rescale u where it grew large (only
 * its smallness matters), then the test. */
inline bool interior(double *ur, double *ui)
{
    if (fabs(*ur) + fabs(*ui) > 1e150) {
        *ur *= 1e-150;
        *ui *= 1e-150;
    }
    return *ur * *ur + *ui * *ui < INTERIOR_DERIVATIVE;
}

/* After step n with |z|^2 = mag: 1 escaped (its count, n, written), 2 interior (or
 * ``dead``: escaped before, dropped at the test as numpy drops it), 0 go on. */
inline uchar decided(double mag, long n, double r2, double *ur, double *ui, bool dead,
                     __global long *count)
{
    if (mag > r2) {
        *count = n;
        return 1;
    }
    if (n % CHUNK == 0 && (interior(ur, ui) || dead))
        return 2;
    return 0;
}

__kernel void direct_steps(__global double *f, __global long *count, __global uchar *gone,
                           uint N, long n_from, long n_to, double r2)
{
    uint i = get_global_id(0);
    if (i >= N)
        return;
    double cr = f[i], ci = f[N + i], ur = f[2 * N + i], ui = f[3 * N + i];
    double x = f[4 * N + i], y = f[5 * N + i], x2 = f[6 * N + i], y2 = f[7 * N + i];
    uchar out = 0;
    for (long n = n_from + 1; n <= n_to; ++n) {
        double tx = x + x, ty = y + y;
        times(tx, ty, &ur, &ui); /* u <- 2 z u */
        y = tx * y;
        y = y + ci;
        x = x2 - y2;
        x = x + cr;
        x2 = x * x;
        y2 = y * y;
        out = decided(x2 + y2, n, r2, &ur, &ui, false, count + i);
        if (out)
            break;
    }
    f[2 * N + i] = ur;
    f[3 * N + i] = ui;
    f[4 * N + i] = x;
    f[5 * N + i] = y;
    f[6 * N + i] = x2;
    f[7 * N + i] = y2;
    gone[i] = out;
}

__kernel void perturbed_steps(__global double *f, __global long *index,
                              __global const double *zx, __global const double *zy,
                              __global long *count, __global uchar *gone,
                              uint N, long n_from, long n_to, double r2)
{
    uint i = get_global_id(0);
    if (i >= N)
        return;
    double cr = f[i], ci = f[N + i], ur = f[2 * N + i], ui = f[3 * N + i];
    double dr = f[4 * N + i], di = f[5 * N + i], xr = f[6 * N + i], xi = f[7 * N + i];
    double mag = f[8 * N + i], alive = f[9 * N + i];
    long m = index[i], base = index[N + i], last = index[2 * N + i];
    uchar out = 0;
    for (long n = n_from + 1; n <= n_to; ++n) {
        if (mag < dr * dr + di * di || m == last) { /* rebase to Z(0) */
            dr = xr;
            di = xi;
            m = base;
        }
        double zr = zx[m], zi = zy[m];
        times(xr + xr, xi + xi, &ur, &ui); /* u <- 2 z u */
        times(zr + zr + dr, zi + zi + di, &dr, &di); /* d <- (2 Z + d) d + dc */
        dr = dr + cr;
        di = di + ci;
        m += 1;
        xr = zx[m] + dr;
        xi = zy[m] + di;
        mag = xr * xr + xi * xi;
        out = decided(mag * alive, n, r2, &ur, &ui, alive == 0.0, count + i);
        if (out)
            break;
    }
    f[2 * N + i] = ur;
    f[3 * N + i] = ui;
    f[4 * N + i] = dr;
    f[5 * N + i] = di;
    f[6 * N + i] = xr;
    f[7 * N + i] = xi;
    f[8 * N + i] = mag;
    index[i] = m;
    gone[i] = out;
}
