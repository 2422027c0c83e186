"""The distance estimate (``[render] distance``) against an mpmath orbit and derivative.

tests/reference.py's distance_estimate iterates z and dz/dc at 200 digits from the
definitions and forms conj(z ln|z| / (s dz/dc)) at the first |z| > 2^10, the kernels'
definition (kernels/mandel.cl). Checked at shallow and deep widths in every direct
format, for the pixel centres and for samples off the centre, on pixels whose count
matches the reference: the median relative error must be float32's (< 1e-5) and 95% of
them within 1e-3 (near the set a pixel's orbit is chaotic: an error of the format's
rounding in c grows with |dz/dc|, as it does for counts). Interior samples are 0;
turning the estimate on changes no count or smooth offset.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from conftest import make_spec, render_channels
from reference import digits_for, distance_estimate, sample_c

from farm.plan import make_plan
from farm.plan.samples import offsets

SEAHORSE = ("-0.749525718967526899076284369547895600256399088280799332045540",
            "0.135876731345244117600571502360225831462570615468277546381148")
CLASSIC = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
SIZE = (24, 16)
CASES = [
    ("f64", ("-0.75", "0.1"), "3", 300),
    ("f64", CLASSIC, "1.3e-4", 1200),
    ("fp128", ("-0.75", "0.1"), "3", 300),
    ("fp128", SEAHORSE, "1e-18", 2000),
    ("fp128", SEAHORSE, "1e-22", 2000),
    ("quad-single", ("-0.75", "0.1"), "3", 300),
    ("quad-single", SEAHORSE, "1e-18", 2000),
    ("quad-single", SEAHORSE, "1e-22", 2000),
]


def _plan(fmt, center, width, max_iter, samples=1, distance=True):
    spec = make_spec(size=SIZE, center=center, width=(width, width), max_iter=max_iter,
                     tile=(16, 16), samples=samples, distance=distance)
    return make_plan(spec, stored=[(max_iter, fmt)])


def _sample(out, name, j, i, k):
    return out[name][j, i] if k == 0 else out["samples/" + name][j, i, k - 1]


@pytest.mark.parametrize("fmt,center,width,max_iter", CASES)
def test_distance_matches_the_reference(cl_device, fmt, center, width, max_iter):
    out, _ = render_channels(cl_device, _plan(fmt, center, width, max_iter, samples=4))
    spacing = Fraction(width) / SIZE[0]
    errors, interior = [], 0
    for j in range(0, SIZE[1], 2):
        for i in range(0, SIZE[0], 3):
            for k in (0, 2):  # the centre and a sample off it
                re, im = sample_c(center, width, SIZE, i, j, offsets(4)[k])
                n, want = distance_estimate(re, im, max_iter, spacing,
                                            digits=digits_for(width, SIZE))
                got_n = _sample(out, "iterations", j, i, k)
                got = complex(_sample(out, "distance", j, i, k))
                if got_n != n:
                    continue
                if n == 0:
                    assert got == 0  # interior: no estimate
                    interior += 1
                    continue
                errors.append(abs(got - want) / abs(want))
    errors_a = np.array(errors)
    assert len(errors_a) >= 100, "most checked samples escape and match the reference's count"
    assert np.median(errors_a) < 1e-5
    assert np.quantile(errors_a, 0.95) < 1e-3, np.sort(errors_a)[-8:]


def test_distance_is_in_pixels_and_points_away_from_the_set(cl_device):
    """Left of the set's tip (-2 on the real axis, the view centred on it), in the middle
    row: the estimate points left (negative DEX) and its length is within a factor 2 of
    the true distance to the tip in pixels (Koebe; 1% slack: the bound holds as the
    potential goes to 0, and at the tip of the antenna the estimate is near 2x), at any
    width of the view. Above the tip it points up: DEY < 0, y runs down the rows."""
    for width in ("1", "1e-3"):
        plan = make_plan(make_spec(size=(41, 21), center=("-2", "0"), width=(width, width),
                                   max_iter=2000, tile=(16, 16), distance=True, precision="auto"),
                         stored=[(2000, "fp128")])
        out, _ = render_channels(cl_device, plan)
        d = out["distance"][10, 0]  # 20 pixels left of the tip, on the axis
        assert d.real < 0 and abs(d.imag) < 1e-3 * abs(d.real)
        assert 20 / 2 <= abs(d) <= 2 * 20 * 1.01
        above = out["distance"][0, 20]  # 10 pixels above the tip
        assert above.imag < 0 and 10 / 2 <= abs(above) <= 2 * 10 * 1.01


@pytest.mark.parametrize("fmt,center,width,max_iter", [CASES[1], CASES[3], CASES[6]])
def test_distance_changes_no_count_or_offset(cl_device, fmt, center, width, max_iter):
    on, hist_on = render_channels(cl_device, _plan(fmt, center, width, max_iter, 4, True))
    off, hist_off = render_channels(cl_device, _plan(fmt, center, width, max_iter, 4, False))
    for name in ("iterations", "fraction", "samples/iterations", "samples/fraction"):
        assert np.array_equal(on[name], off[name]), name
    assert np.array_equal(hist_on, hist_off)
    assert "distance" not in off and "samples/distance" not in off
    escaped = on["iterations"] > 0
    assert escaped.any() and (np.abs(on["distance"][escaped]) > 0).all()
    assert np.isfinite(on["distance"]).all()
    assert (on["distance"][~escaped] == 0).all()


def test_stored_distance_agrees_with_colourings_estimate_from_the_escape_time(cl_device):
    """The kernels' stored estimate and the one colouring derives from the smooth escape
    time's gradient (farm.color.distance) are the same field: same size and, read in the
    same axes, the same direction (a convention mismatch flips half the image's light)."""
    from farm.color.distance import estimated_distance
    from farm.color.raw import RawFrame

    spec = make_spec(size=(160, 120), center=("-0.7436438870", "0.1318259042"),
                     width=("1e-5", "1e-5"), max_iter=2000, tile=(64, 64), distance=True)
    out, hist = render_channels(cl_device, make_plan(spec))
    raw = RawFrame(0, out["iterations"], out["fraction"], hist)
    stored, estimated = out["distance"], estimated_distance(raw)
    calm = (np.abs(stored) > 3) & (np.abs(stored) < 100) & (np.abs(estimated) < 100)
    assert calm.sum() > 500, calm.sum()
    cosine = (stored[calm] * np.conj(estimated[calm])).real / (np.abs(stored[calm]) * np.abs(estimated[calm]))
    ratio = np.abs(estimated[calm]) / np.abs(stored[calm])
    assert np.median(cosine) > 0.95, np.median(cosine)
    assert 0.8 < np.median(ratio) < 1.25, np.median(ratio)
