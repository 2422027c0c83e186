/* f64.cl: escape time in IEEE double precision, for shallow frames.
 *
 * Number format: binary64. Resolves pixel spacings down to the limit measured in
 * farm/plan/precision.py (about 10 ulps of a coordinate near the set).
 * Extensions: cl_khr_fp64.
 * Provides, for mandel.cl: COORD_T = double, escape_time, to_double, coord_add.
 * With -DDISTANCE escape_time also carries w = ds dz/dc in double (see mandel.cl).
 */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define COORD_T double

inline double to_double(double x) { return x; }

/* a + b for a turned frame's coordinate (mandel.cl, -DROTATED): one rounding. */
inline double coord_add(double a, double b) { return a + b; }

/* z(1) = c; returns the first k with |z(k)|^2 > r2, or 0 after max_iter steps.
 * -DDISTANCE: *dz = w(k), w(0) = 0, w(k) = 2 z(k-1) w(k-1) + ds (ds dz/dc). */
inline uint escape_time(double cr, double ci, uint max_iter, double r2, double ds, double2 *z,
                        double2 *dz)
{
    double x = 0.0, y = 0.0, xx = 0.0, yy = 0.0;
#ifdef DISTANCE
    double wx = 0.0, wy = 0.0;
#endif
    for (uint k = 1; k <= max_iter; ++k) {
#ifdef DISTANCE
        const double t = 2.0 * (x * wx - y * wy) + ds;
        wy = 2.0 * (x * wy + y * wx);
        wx = t;
#endif
        y = 2.0 * x * y + ci;
        x = xx - yy + cr;
        xx = x * x;
        yy = y * y;
        if (xx + yy > r2) {
            *z = (double2)(x, y);
#ifdef DISTANCE
            *dz = (double2)(wx, wy);
#endif
            return k;
        }
    }
    return 0;
}
