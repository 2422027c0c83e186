"""Deep formats against the 200-digit mpmath reference in Seahorse Valley.

The view is centred on a Misiurewicz point of Seahorse Valley (preperiod 23, period
2: f^25(0) = f^23(0), found by Newton's method to 60 digits): its neighbourhood has
boundary filaments at every scale, so every depth has structure and every pixel
escapes. At widths 1e-18 and 1e-23 (pixel spacings 4.2e-20 and 4.2e-25 on a 24x16
grid) fp128 and quad-single must give the reference's count for at least 99% of
pixels; the rest are printed. As a control, f64 forced onto the same grid must fail.

Why 1e-23 and not 1e-24: a pixel near the boundary is chaotic, its count changes when
c moves by far less than a pixel. Exact arithmetic on the coordinates rounded to
2^-96 (the best any 96-bit format can do) matches the reference on 99.7% of this grid
at 1e-23 but only 98.2% at 1e-24 (see README, Precision). At the classic point
-0.7436438870371587 + 0.1318259042053120i the same check gives 98.9% already at 1e-18.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compare_counts, make_spec, render_frame

from farm.plan import make_plan

SEAHORSE = ("-0.749525718967526899076284369547895600256399088280799332045540",
            "0.135876731345244117600571502360225831462570615468277546381148")
SIZE = (24, 16)
CASES = [("1e-18", 2000), ("1e-23", 2000)]


def _plan(fmt, width, max_iter):
    spec = make_spec(size=SIZE, center=SEAHORSE, width=(width, width), max_iter=max_iter,
                     tile=(16, 16), precision="auto")
    return make_plan(spec, stored=[(max_iter, fmt)])


@pytest.mark.parametrize("width,max_iter", CASES)
@pytest.mark.parametrize("fmt", ["fp128", "quad-single"])
def test_deep_counts_match_reference(cl_device, reference, fmt, width, max_iter):
    want = reference(SEAHORSE, width, SIZE, max_iter)
    assert (want > 0).mean() >= 0.9, "the view must be mostly escaping pixels"
    got, _ = render_frame(cl_device, _plan(fmt, width, max_iter))
    compare_counts(got, want, min_equal=0.99)


def test_f64_fails_where_deep_formats_hold(cl_device, reference):
    width, max_iter = CASES[0]
    want = reference(SEAHORSE, width, SIZE, max_iter)
    got, _ = render_frame(cl_device, _plan("f64", width, max_iter))
    assert (got == want).mean() < 0.5
    assert len(np.unique(got)) < len(np.unique(want))  # pixels collapse onto few doubles
