"""OpenEXR export of the strips in the layout zoomasm reads (farm/synth/exr.py)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from expmap_reference import escape, render_centre, render_strip, strip_points

from farm.errors import UsageError
from farm.plan.expmap import make_geometry, zoom_depths
from farm.synth import Raster
from farm.synth.exr import BIAS, INTERIOR, read_exr, write_segments
from farm.synth.quality import calm_pixels

pytest.importorskip("OpenEXR")

CENTER = complex(-0.7746806106269039, -0.1374168856037867)
MAX_ITER = 1200


@pytest.fixture(scope="module")
def zoom():
    octaves = 2.5
    g = make_geometry(64, 36, zoom_depths(76, octaves))
    s_min = 0.01 / 2**octaves / 64
    return g, s_min, render_strip(g, CENTER, s_min, MAX_ITER), render_centre(g, CENTER, s_min, MAX_ITER)


def reader(strip: Raster):
    def read(a: int, b: int) -> Raster:
        return Raster(strip.iterations[a:b], strip.fraction[a:b], a)
    return read


def test_one_file_per_octave_in_zoom_out_order(zoom, tmp_path):
    g, _, strip, centre = zoom
    paths = write_segments(g, reader(strip), centre, MAX_ITER, tmp_path, stem="zoom")
    inner = int(np.ceil(g.l_base))
    assert len(paths) == inner + g.segments
    assert [p.name for p in paths] == [f"zoom.{m:08d}.exr" for m in range(len(paths))]
    p = g.rows_per_octave
    for m, path in enumerate(paths):
        header, chans = read_exr(path)
        assert set(chans) == {"N", "NF"}
        assert chans["N"].dtype == np.uint32 and chans["NF"].dtype == np.float32
        assert chans["N"].shape == (p, g.angles)
        assert header["Iterations"] == MAX_ITER and header["IterationsBias"] == BIAS
        meta = json.loads(header["zoomfarm"])
        assert meta["file"] == m and meta["segment"] == m - inner
        assert ((chans["NF"] >= 0) & (chans["NF"] < 1)).all()


def test_strip_octaves_hold_the_strip(zoom, tmp_path):
    """File inner + j is strip segment j: N + NF - bias is n + d, interior is
    0xFFFFFFFF, rows no frame needs (beyond the outermost segment's) are N = 0."""
    g, _, strip, centre = zoom
    paths = write_segments(g, reader(strip), None, MAX_ITER, tmp_path)
    assert len(paths) == g.segments
    for j, path in enumerate(paths):
        first, count = g.segment_rows(j)
        _, ch = read_exr(path)
        n = strip.iterations[first:first + count]
        d = strip.fraction[first:first + count]
        big_n, nf = ch["N"][:count], ch["NF"][:count]
        assert np.array_equal(big_n == INTERIOR, n == 0)
        esc = n > 0
        mu = big_n[esc].astype(np.float64) + nf[esc] - BIAS
        assert np.allclose(mu, n[esc] + d[esc].astype(np.float64), atol=1e-4)
        assert (ch["N"][count:] == 0).all()
    assert g.segment_rows(g.segments - 1)[1] < g.rows_per_octave  # the test saw padding


def test_inner_octaves_continue_the_strip_from_the_centre_image(zoom, tmp_path):
    """Below the strip, files resample the centre image onto the same log-polar rows:
    their pixels agree with points rendered directly at those rows and angles."""
    g, s_min, strip, centre = zoom
    paths = write_segments(g, reader(strip), centre, MAX_ITER, tmp_path, inner_octaves=2)
    p = g.rows_per_octave
    for m in (0, 1):
        _, ch = read_exr(paths[m])
        first = (m - 2) * p
        n, d = escape(strip_points(g, CENTER, s_min, first, first + p), MAX_ITER)
        assert ((ch["N"] == INTERIOR) == (n == 0)).mean() > 0.995
        calm = calm_pixels(n, d) & (ch["N"] != INTERIOR)
        assert calm.mean() > 0.5
        mu = ch["N"][calm].astype(np.float64) + ch["NF"][calm] - BIAS
        err = np.abs(mu - (n[calm] + d[calm].astype(np.float64)))
        # the rows are where they should be (median); the tail is the centre image's own
        # resolution: these rows sample it several times more densely than it has pixels
        assert np.median(err) < 0.005 and np.percentile(err, 95) < 0.05


def test_distance_channels(zoom, tmp_path):
    g, _, strip, _ = zoom
    de = (np.arange(strip.iterations.size).reshape(strip.shape) * (1 + 2j)).astype(np.complex64)
    with_de = Raster(strip.iterations, strip.fraction, 0, de)

    def read(a, b):
        return Raster(with_de.iterations[a:b], with_de.fraction[a:b], a, with_de.distance[a:b])
    paths = write_segments(g, read, None, MAX_ITER, tmp_path)
    _, ch = read_exr(paths[0])
    assert {"DEX", "DEY"} <= set(ch)
    esc = strip.iterations[: g.rows_per_octave] > 0
    assert np.array_equal(ch["DEX"][esc], de[: g.rows_per_octave].real[esc])
    assert np.array_equal(ch["DEY"][esc], de[: g.rows_per_octave].imag[esc])
    assert (ch["DEX"][~esc] == 0).all()


def test_missing_binding_is_one_clear_error(zoom, tmp_path, monkeypatch):
    g, _, strip, _ = zoom
    monkeypatch.setitem(sys.modules, "OpenEXR", None)
    with pytest.raises(UsageError, match="pip install"):
        write_segments(g, reader(strip), None, MAX_ITER, tmp_path)
