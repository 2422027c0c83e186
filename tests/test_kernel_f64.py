"""The f64 kernel against the mpmath reference, and the pixel mapping it follows."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compare_counts, make_spec, render_frame
from reference import reference_counts

from farm.compute.launch import LaunchConfig
from farm.plan import make_plan

# Non-square, off-axis views: a wrong orientation, centre or pixel aspect would move
# the set and break the match.
VIEWS = [
    (("-0.75", "0.3"), "2.7", (30, 17), 300),
    (("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"),
     "1.3e-4", (28, 20), 1200),
]


@pytest.mark.parametrize("center,width,size,max_iter", VIEWS)
def test_f64_counts_match_reference(cl_device, center, width, size, max_iter):
    plan = make_plan(make_spec(size=size, center=center, width=(width, width),
                               max_iter=max_iter, tile=(16, 8), precision="f64"))
    got, frac = render_frame(cl_device, plan)
    compare_counts(got, reference_counts(center, width, size, max_iter), min_equal=0.99)
    assert (frac[got == 0] == 0).all()
    assert np.all(frac[got > 0] > -1.0001) and np.all(frac[got > 0] < 8)


def test_smooth_escape_time_is_continuous(cl_device):
    """Along a line of 2000 pixels above the set the count n steps several times, but
    mu = n + d moves by far less than one step between neighbours."""
    plan = make_plan(make_spec(size=(2000, 8), center=("-0.5", "1.15"), width=("3", "3"),
                               max_iter=500, tile=(512, 8), precision="f64"))
    it, frac = render_frame(cl_device, plan)
    n, mu = it[0].astype(np.int64), it[0] + frac[0].astype(np.float64)
    assert (n > 0).all() and np.count_nonzero(np.diff(n)) >= 4
    assert np.abs(np.diff(mu)).max() < 0.05


def test_orientation(cl_device):
    """Row 0 is the top: with the view centred above the real axis, the set (at the
    real axis) lies in the lower rows; column 0 is the left (the set's tail)."""
    size = (40, 20)
    plan = make_plan(make_spec(size=size, center=("-0.6", "0.75"), width=("3", "3"),
                               max_iter=100, tile=(16, 16)))
    it, _ = render_frame(cl_device, plan)
    interior_rows = np.flatnonzero((it == 0).any(axis=1))
    assert interior_rows.min() > 0 and interior_rows.max() == size[1] - 1
    # square pixels: the view spans 3 x 1.5; im range [0, 1.5]: the last row is near im=0.04
    assert (it[-1] == 0).sum() > 5


@pytest.mark.parametrize("config", [LaunchConfig(8, 1), LaunchConfig(16, 2), LaunchConfig(64, 64),
                                    LaunchConfig(8, 1, pixel_blocks=True),
                                    LaunchConfig(64, 64, pixel_blocks=True)])
def test_interleaving_does_not_change_results(cl_device, config):
    """Work-item g of G takes pixels g, g+G, ... (in 8 x 4 blocks with pixel_blocks, here
    with narrower blocks at the right edge and a band of 3 rows at the bottom): any G
    and either order give the same image."""
    plan = make_plan(make_spec(size=(37, 23), center=("-0.75", "0.1"), width=("2.9", "2.9"),
                               max_iter=250, tile=(37, 23)))
    base_it, base_fr = render_frame(cl_device, plan)
    it, fr = render_frame(cl_device, plan, config=config)
    assert np.array_equal(it, base_it) and np.array_equal(fr, base_fr)
