/* f64.cl: escape time in IEEE double precision, for shallow frames.
 *
 * Number format: binary64. Resolves pixel spacings down to the limit measured in
 * farm/plan/precision.py (about 10 ulps of a coordinate near the set).
 * Extensions: cl_khr_fp64.
 * Provides, for mandel.cl: COORD_T = double, escape_time, to_double.
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define COORD_T double

inline double to_double(double x) { return x; }

/* z(1) = c; returns the first k with |z(k)|^2 > r2, or 0 after max_iter steps. */
inline uint escape_time(double cr, double ci, uint max_iter, double r2, double2 *z)
{
    double x = 0.0, y = 0.0, xx = 0.0, yy = 0.0;
    for (uint k = 1; k <= max_iter; ++k) {
        y = 2.0 * x * y + ci;
        x = xx - yy + cr;
        xx = x * x;
        yy = y * y;
        if (xx + yy > r2) {
            *z = (double2)(x, y);
            return k;
        }
    }
    return 0;
}
