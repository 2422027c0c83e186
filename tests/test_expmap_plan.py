"""Exponential-map geometry (farm/plan/expmap.py): resolution, coverage, alignment, counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_spec

from farm.plan import make_plan
from farm.plan.expmap import (
    ExpmapGeometry,
    angles_for,
    centre_size_for,
    make_geometry,
    plan_depths,
    zoom_depths,
)
from farm.synth import frame_params, pixel_offsets, strip_coordinates


def geometry_1080p(octaves: float, **kw) -> ExpmapGeometry:
    return make_geometry(1920, 1080, zoom_depths(round(30 * octaves) + 1, octaves), **kw)


def test_strip_is_conformal_and_sharp_at_the_corner():
    for w, h, over in [(1920, 1080, 1.0), (1280, 720, 1.5), (37, 23, 1.0), (1080, 1920, 1.0)]:
        g = make_geometry(w, h, zoom_depths(61, 2.0), oversample=over)
        assert g.angles % 16 == 0 and g.angles == angles_for(w, h, over)
        # square strip pixels: a row's step in ln(radius) equals the angular step, up to
        # rounding rows per octave to an integer
        radial = math.log(2) / g.rows_per_octave
        assert radial == pytest.approx(2 * math.pi / g.angles, rel=0.5 / g.rows_per_octave)
        edges = g.edge_samples()
        assert over <= edges["corner"] < over + 16 / (math.pi * math.hypot(w, h))  # rounding up
        assert edges["left/right edge"] == pytest.approx(edges["corner"] * math.hypot(w, h) / w)
        assert edges["top/bottom edge"] == pytest.approx(edges["corner"] * math.hypot(w, h) / h)


def test_a_tenth_of_the_pixels_at_1080p_and_30_frames_per_doubling():
    """The seahorse example (width 4 to 1e-20) and shorter zooms; below about 11
    doublings the centre image and the extra octave make the share exceed 1/10."""
    deep = geometry_1080p(math.log2(4 / 1e-20))
    assert deep.frame_pixels == deep.frames * 1920 * 1080
    assert deep.pixels / deep.frame_pixels < 0.09
    assert geometry_1080p(12).pixels / geometry_1080p(12).frame_pixels < 0.1
    assert geometry_1080p(4).pixels / geometry_1080p(4).frame_pixels > 0.1


@pytest.mark.parametrize("w,h,q", [(40, 24, 1), (40, 24, 2), (41, 24, 2), (41, 23, 3), (40, 23, 1)])
def test_deepest_frame_pixels_fall_on_centre_samples(w, h, q):
    g = make_geometry(w, h, zoom_depths(31, 1.0), centre_oversample=q,
                      centre_radius=0.5 * math.hypot(w - 1, h - 1) + 1)
    fp = frame_params(g, g.depths.index(0.0))
    u, v = pixel_offsets(w, h)
    wc, hc = g.centre_size
    cx = fp.zoom * u + 0.5 * wc - 0.5
    cy = -fp.zoom * v + 0.5 * hc - 0.5
    assert np.array_equal(cx, np.round(cx)) and np.array_equal(cy, np.round(cy))
    assert cx.min() >= 0 and cx.max() <= wc - 1 and cy.min() >= 0 and cy.max() <= hc - 1


def test_centre_size_holds_the_disc():
    for q in (1, 2):
        wc, hc = centre_size_for(64, 36, 20.3, q)
        assert min(wc, hc) >= 2 * 20.3 * q + 2
        assert wc % 2 == (1 if q == 2 else 0) and hc % 2 == (1 if q == 2 else 0)


def test_every_pixel_of_every_frame_has_its_samples():
    """Each pixel reads strip rows inside frame_rows(k) (and inside the strip), or
    centre-image samples inside the image; frames before the last octave read no
    centre sample beyond their innermost pixels."""
    g = make_geometry(48, 30, zoom_depths(91, 3.0))
    u, v = pixel_offsets(48, 30)
    wc, hc = g.centre_size
    for k in range(g.frames):
        fp = frame_params(g, k)
        x, y, rho = strip_coordinates(g, k, u, v)
        t = np.clip((rho + fp.t_off) * fp.inv_blend, 0, 1)
        first, stop = g.frame_rows(k)
        rows = np.floor(y[t > 0])
        if rows.size:
            assert first <= rows.min() and rows.max() + 1 <= stop - 1 and stop <= g.rows
        cx = fp.zoom * u[t < 1] + 0.5 * wc - 0.5
        cy = -fp.zoom * v[t < 1] + 0.5 * hc - 0.5
        if cx.size:
            assert cx.min() >= 0 and cx.max() <= wc - 1 and cy.min() >= 0 and cy.max() <= hc - 1
        assert g.uses_centre(k) == bool((t < 1).any())
        assert g.uses_strip(k) == bool((t > 0).any())
    assert not g.uses_strip(g.frames - 1) or g.frame_rows(g.frames - 1)[0] == 0


def test_segments_partition_the_rows_and_frames_know_theirs():
    g = make_geometry(64, 36, zoom_depths(100, 3.3))
    spans = [g.segment_rows(j) for j in range(g.segments)]
    assert spans[0][0] == 0 and sum(n for _, n in spans) == g.rows
    assert all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:], strict=False))
    assert all(n == g.rows_per_octave for _, n in spans[:-1])
    with pytest.raises(IndexError):
        g.segment_rows(g.segments)
    first, count = spans[1]
    readers = g.frames_reading(first, first + count)
    for k in range(g.frames):
        a, b = g.frame_rows(k)
        assert (k in readers) == (a < b and a < first + count and first < b)
    assert g.segment_frames(1) == readers
    # log radius grows by exactly one octave per segment, and so does the spacing
    assert g.row_log2_radius(first) - g.row_log2_radius(0) == pytest.approx(1.0)
    assert g.segment_spacing_log2(1) - g.segment_spacing_log2(0) == pytest.approx(1.0)
    # strip samples at the inner edge are finer than the deepest frame's pixels
    assert g.segment_spacing_log2(0) < 0


def test_zoom_depths_and_plan_depths():
    assert zoom_depths(1, 5.0) == [0.0]
    assert zoom_depths(5, 2.0) == [2.0, 1.5, 1.0, 0.5, 0.0]
    assert zoom_depths(5, -2.0) == [0.0, 0.5, 1.0, 1.5, 2.0]  # zoom out: frame 0 deepest
    plan = make_plan(make_spec(size=(32, 18), width=("4", "1e-30"), frames=50, precision="auto",
                               max_iter=100))
    depths = plan_depths(plan)
    assert depths == pytest.approx(zoom_depths(50, math.log2(4e30)), abs=1e-9)
    assert depths[-1] == 0.0


def test_bad_geometry():
    with pytest.raises(ValueError):
        make_geometry(1, 10, [0.0])
    with pytest.raises(ValueError):
        make_geometry(10, 10, [1.0, 0.5])  # no frame at depth 0
    with pytest.raises(ValueError):
        make_geometry(10, 10, [0.0], oversample=0)


def test_a_still_needs_no_strip():
    g = make_geometry(64, 36, [0.0], centre_radius=0.55 * math.hypot(63, 35))
    assert g.rows == 0 and g.segments == 0 and not g.uses_strip(0) and g.frame_rows(0) == (0, 0)
