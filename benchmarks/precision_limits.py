"""Measure how deep each number format resolves a frame: the limits behind precision="auto".

For each format and width, render a test grid on one device and compare every count
with the 200-digit mpmath reference (tests/reference.py). A format "resolves" a pixel
spacing when at least 99% of the grid's pixels match there and at every shallower
width scanned, on every grid. The printed limit is the smallest such spacing.

The view is the Seahorse Valley Misiurewicz point of tests/test_deep.py (boundary
filaments at every scale, every pixel escapes): a deliberately hard view, so the
limits are conservative. The column "rounded c" is what exact arithmetic achieves on
the coordinates rounded as the format holds them (2^-96 absolute for fp128, four
float32 limbs for quad-single, binary64 for f64): no format of that size can do better.

    python benchmarks/precision_limits.py                # all formats, PoCL or GPU
    python benchmarks/precision_limits.py --formats f64 --device cpu
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import make_spec, render_frame  # noqa: E402
from reference import escape_count, pixel_c, reference_counts  # noqa: E402

from farm.compute.device import candidates  # noqa: E402
from farm.numerics.encode import qs_limbs  # noqa: E402
from farm.plan import make_plan  # noqa: E402

MISIUREWICZ = ("-0.749525718967526899076284369547895600256399088280799332045540",
               "0.135876731345244117600571502360225831462570615468277546381148")
WIDTHS = {
    "f64": ["1e-8", "3e-9", "1e-9", "3e-10", "1e-10", "3e-11", "1e-11", "3e-12", "1e-12"],
    "fp128": ["1e-20", "3e-21", "1e-21", "3e-22", "1e-22", "3e-23", "1e-23", "3e-24", "1e-24"],
    "quad-single": ["1e-20", "1e-21", "1e-22", "1e-23", "3e-24", "1e-24", "3e-25", "1e-25", "3e-26"],
}
GRIDS = [(24, 16), (48, 32)]
MAX_ITER = 2000


def _mpf(q: Fraction) -> mpmath.mpf:
    with mpmath.workprec(600):
        return mpmath.mpf(q.numerator) / q.denominator


def rounded_counts(fmt, width, size):
    """Exact-arithmetic counts at the coordinates rounded to the format's resolution."""
    w, h = size
    out = np.zeros((h, w), np.int64)
    for j in range(h):
        for i in range(w):
            re, im = pixel_c(MISIUREWICZ, width, size, i, j)
            if fmt == "f64":
                re, im = Fraction(float(re)), Fraction(float(im))
            elif fmt == "fp128":
                re, im = (Fraction(round(v * 2**96), 2**96) for v in (re, im))
            else:  # quad-single: the exact sum of the encoder's four float32 limbs
                re, im = (sum(map(Fraction, qs_limbs(_mpf(v))), Fraction(0)) for v in (re, im))
            out[j, i] = escape_count(re, im, MAX_ITER)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="f64,fp128,quad-single")
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    device = candidates(args.device)[0]
    print(f"device: {device[0].describe()}")
    print(f"view: Misiurewicz point {MISIUREWICZ[0][:20]}.. + {MISIUREWICZ[1][:20]}..i, "
          f"max_iter {MAX_ITER}, 99% criterion\n")
    print("| format | grid | width | spacing | match | rounded c |")
    print("|---|---|---|---|---|---|")
    limits = {}
    for fmt in args.formats.split(","):
        holds = {grid: True for grid in GRIDS}
        limit = None
        for width in WIDTHS[fmt]:
            ok_all = True
            for grid in GRIDS:
                want = reference_counts(MISIUREWICZ, width, grid, MAX_ITER)
                plan = make_plan(make_spec(size=grid, center=MISIUREWICZ, width=(width, width),
                                           max_iter=MAX_ITER, tile=(16, 16)),
                                 stored=[(MAX_ITER, fmt)])
                got, _ = render_frame(device, plan)
                match = float((got == want).mean())
                best = float((rounded_counts(fmt, width, grid) == want).mean())
                spacing = float(width) / grid[0]
                print(f"| {fmt} | {grid[0]}x{grid[1]} | {width} | {spacing:.1e} | {match:.4f} "
                      f"| {best:.4f} |", flush=True)
                holds[grid] = holds[grid] and match >= 0.99
                ok_all = ok_all and holds[grid]
            if ok_all:
                limit = max(float(width) / g[0] for g in GRIDS)
        limits[fmt] = limit
    print()
    for fmt, limit in limits.items():
        text = f"{limit:.1e}" if limit else "not reached in the scanned widths"
        print(f"{fmt}: resolves pixel spacings down to {text}")


if __name__ == "__main__":
    main()
