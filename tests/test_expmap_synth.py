"""Frames synthesised from exponential-map strips against frames rendered directly.

The measure (farm/synth/quality.py), per frame, against the direct render of the
same frame, with a yardstick: the direct render moved by a quarter pixel (a camera
offset nobody sees), compared with the direct render the same way:

* SSIM of the coloured frames (each coloured by its own histogram, the store's
  rule): at least the quarter-pixel yardstick's minus 0.02;
* interior/exterior agreement: at least the yardstick's minus 0.005;
* continuous escape time mu = n + d on calm pixels (away from chaotic boundary
  pixels: the 3x3 neighbourhood escaped with mu within 0.5): 99th percentile of
  |mu_synth - mu_direct| below 0.02 counts, median below 0.005;
* no flicker: the mean temporal second difference of luma over consecutive frames is
  at most 1.1 times the direct frames'; no seam: where the centre image meets the
  strip, mu errors are no larger than elsewhere.

Two zooms, both shallow enough for float64 (tests/expmap_reference.py renders
strips, centre images and direct frames with one arithmetic): a calm spiral, and a
Seahorse Valley view dense with filaments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from expmap_reference import escape, frame_points, render_centre, render_frame, render_strip

from farm.color import cdf, colorize
from farm.color.raw import RawFrame
from farm.plan.expmap import ExpmapGeometry, make_geometry, zoom_depths
from farm.synth import Raster, frame_log2_radius, synthesize, synthesize_arrays
from farm.synth.quality import agreement, calm_pixels, continuous, luma, ssim


@dataclass
class Zoom:
    name: str
    center: complex
    geom: ExpmapGeometry
    s_min: float
    max_iter: int
    strip: Raster
    centre: Raster

    def direct(self, k: int, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        if not shift:
            return render_frame(self.geom, k, self.center, self.s_min, self.max_iter)
        s = self.s_min * 2.0 ** self.geom.depths[k]
        return escape(frame_points(self.center + s * complex(shift, shift), s, self.geom.width,
                                   self.geom.height), self.max_iter)

    def synth(self, k: int, max_iter: int | None = None) -> dict[str, np.ndarray]:
        return synthesize_arrays(self.geom, k, self.strip, self.centre, max_iter or self.max_iter)


ZOOMS = {  # name: (centre, first width, octaves, max_iter)
    "spiral": (complex(-0.7746806106269039, -0.1374168856037867), 0.01, 5.0, 1200),
    "seahorse": (complex(-0.743643887037158704752191506114774, 0.131825904205311970493132056385139),
                 0.02, 6.0, 800),
}


@pytest.fixture(scope="module", params=list(ZOOMS))
def zoom(request) -> Zoom:
    center, w0, octaves, max_iter = ZOOMS[request.param]
    w, h = 160, 90
    geom = make_geometry(w, h, zoom_depths(int(30 * octaves) + 1, octaves))
    s_min = w0 / 2**octaves / w
    return Zoom(request.param, center, geom, s_min, max_iter,
                render_strip(geom, center, s_min, max_iter), render_centre(geom, center, s_min, max_iter))


def colour(n: np.ndarray, d: np.ndarray, hist: np.ndarray | None = None) -> np.ndarray:
    if hist is None:
        hist = np.bincount(n.ravel(), minlength=int(n.max()) + 1)
    return colorize(n, d, cdf(hist), "classic", 3.0)


def sample_frames(geom: ExpmapGeometry) -> list[int]:
    return sorted(set(range(0, geom.frames, 15)) | set(range(geom.frames - 6, geom.frames)))


def test_synthesised_frames_look_like_direct_renders(zoom):
    rows = []
    for k in sample_frames(zoom.geom):
        direct, yard = zoom.direct(k), zoom.direct(k, shift=0.25)
        s = zoom.synth(k)
        got = agreement(direct, (s["iterations"], s["fraction"]))
        ref = agreement(direct, yard)
        c_direct = colour(*direct)
        sim = ssim(c_direct, colour(s["iterations"], s["fraction"], s["histogram"]))
        sim_ref = ssim(c_direct, colour(*yard))
        rows.append((k, sim, sim_ref, got["class"], ref["class"], got["median"], got["p99"]))
        assert sim >= sim_ref - 0.02, (k, sim, sim_ref)
        assert got["class"] >= ref["class"] - 0.005, (k, got, ref)
        assert got["p99"] < 0.02 and got["median"] < 0.005, (k, got)
    print(f"\n{zoom.name}: frame, SSIM synth/quarter-pixel, class synth/quarter-pixel, mu median, p99")
    for r in rows:
        print("  {:4d}  {:.3f} {:.3f}  {:.4f} {:.4f}  {:.4f} {:.4f}".format(*r))


def test_deepest_frame_centre_is_the_centre_image_bit_for_bit(zoom):
    g = zoom.geom
    k = g.depths.index(0.0)
    n, d = zoom.direct(k)
    s = zoom.synth(k)
    inner = frame_log2_radius(g, k) < g.l_centre - g.blend
    assert inner.sum() > 0.1 * inner.size
    assert np.array_equal(s["iterations"][inner], n[inner])
    assert np.array_equal(s["fraction"][inner], d[inner])


def test_no_seam_where_centre_image_and_strip_meet(zoom):
    """Frames whose blend band lies inside the picture: calm-pixel mu errors inside the
    band are no larger than in the rest of the frame."""
    g = zoom.geom
    band_err, rest_err = [], []
    for k in range(g.frames - 30, g.frames, 3):
        n, d = zoom.direct(k)
        s = zoom.synth(k)
        big_l = frame_log2_radius(g, k)
        err = np.abs(continuous(n, d) - continuous(s["iterations"], s["fraction"]))
        ok = calm_pixels(n, d) & (s["iterations"] > 0)
        band = (big_l > g.l_centre - g.blend - 0.1) & (big_l < g.l_centre + 0.1)
        band_err.append(err[ok & band])
        rest_err.append(err[ok & ~band])
    band_all, rest_all = np.concatenate(band_err), np.concatenate(rest_err)
    assert band_all.size > 100
    assert np.percentile(band_all, 99) <= max(2 * np.percentile(rest_all, 99), 0.005)
    assert np.median(band_all) <= max(2 * np.median(rest_all), 0.001)


def test_no_flicker(zoom):
    """Consecutive frames in the middle of the zoom (strip only) and at its end (centre
    image and strip): the synthesised sequence changes from frame to frame no more
    jerkily than the directly rendered one."""
    g = zoom.geom
    for run in (range(g.frames // 2 - 6, g.frames // 2 + 6), range(g.frames - 12, g.frames)):
        lum_d, lum_s = [], []
        for k in run:
            s = zoom.synth(k)
            lum_d.append(luma(colour(*zoom.direct(k)).astype(np.float64)))
            lum_s.append(luma(colour(s["iterations"], s["fraction"], s["histogram"]).astype(np.float64)))

        def jerk(lum):
            return np.mean([np.abs(lum[i + 1] - 2 * lum[i] + lum[i - 1]).mean()
                            for i in range(1, len(lum) - 1)])
        assert jerk(lum_s) <= 1.1 * jerk(lum_d), (zoom.name, run, jerk(lum_s), jerk(lum_d))


def test_reads_only_the_rows_of_its_frame(zoom):
    g = zoom.geom
    k = g.frames // 3
    first, stop = g.frame_rows(k)
    window = Raster(zoom.strip.iterations[first:stop], zoom.strip.fraction[first:stop], first)
    a, b = synthesize_arrays(g, k, window, zoom.centre, zoom.max_iter), zoom.synth(k)
    assert np.array_equal(a["iterations"], b["iterations"])
    assert np.array_equal(a["fraction"], b["fraction"])
    short = Raster(window.iterations[:-1], window.fraction[:-1], first)
    with pytest.raises(ValueError, match="strip rows"):
        synthesize_arrays(g, k, short, zoom.centre, zoom.max_iter)


def test_a_lower_iteration_limit_counts_late_escapes_as_interior(zoom):
    """The strip is rendered with the largest limit; a frame with a lower one treats
    samples that escaped later as interior, as its direct render does."""
    g, k, low = zoom.geom, zoom.geom.frames // 2, zoom.max_iter // 4
    s = zoom.synth(k, max_iter=low)
    n, _ = render_frame(g, k, zoom.center, zoom.s_min, low)
    spacing = zoom.s_min * 2.0 ** g.depths[k]
    yard, _ = escape(frame_points(zoom.center + spacing * (0.25 + 0.25j), spacing, g.width, g.height),
                     low)
    assert s["iterations"].max() <= low and len(s["histogram"]) == low + 1
    assert ((s["iterations"] > 0) == (n > 0)).mean() >= ((yard > 0) == (n > 0)).mean() - 0.005


def test_raw_frame_and_histogram(zoom):
    k = zoom.geom.frames // 2
    raw = synthesize(zoom.geom, k, zoom.strip, zoom.centre, zoom.max_iter)
    assert isinstance(raw, RawFrame) and raw.index == k and raw.shape == (90, 160)
    assert raw.iterations.dtype == np.uint32 and raw.fraction.dtype == np.float32
    assert np.array_equal(raw.histogram, np.bincount(raw.iterations.ravel(),
                                                     minlength=zoom.max_iter + 1))
    assert (raw.fraction[raw.iterations == 0] == 0).all()
    rgb = colour(raw.iterations, raw.fraction, raw.histogram)
    assert rgb.shape == (90, 160, 3) and (rgb[raw.iterations == 0] == 0).all()


def test_distance_is_resampled_into_output_pixels():
    """A distance field that is one fixed vector in the complex plane (e^{0.3i} s_min)
    is stored in each raster's own sample spacing; every synthesised pixel must read
    it back in its frame's pixels: e^{0.3i} 2**-depth_k."""
    g = make_geometry(48, 27, zoom_depths(61, 2.0))
    vec = np.exp(0.3j)
    rows = np.arange(g.rows)
    spacing = np.exp2([g.row_spacing_log2(r) for r in rows])  # strip spacing / s_min
    ones = np.ones((g.rows, g.angles), np.uint32) * 5
    strip = Raster(ones, np.zeros(ones.shape, np.float32), 0,
                   (vec / spacing[:, None] * np.ones(ones.shape)).astype(np.complex64))
    wc, hc = g.centre_size
    cn = np.ones((hc, wc), np.uint32) * 5
    centre = Raster(cn, np.zeros(cn.shape, np.float32), 0,
                    (vec * g.centre_oversample * np.ones(cn.shape)).astype(np.complex64))
    for k in (0, 30, 55, 60):
        de = synthesize_arrays(g, k, strip, centre, 10)["distance"]
        want = vec * 2.0 ** -g.depths[k]
        assert np.allclose(de, want, rtol=1e-5), (k, de.ravel()[:3], want)


def test_interior_is_decided_by_the_nearest_sample():
    g = make_geometry(32, 18, zoom_depths(31, 1.0))
    n = np.full((g.rows, g.angles), 7, np.uint32)
    n[:, : g.angles // 2] = 0  # upper half plane interior (angles 0 .. pi)
    strip = Raster(n, np.full(n.shape, 0.25, np.float32))
    wc, hc = g.centre_size
    cn = np.full((hc, wc), 7, np.uint32)
    cn[: hc // 2 + 1] = 0  # rows above and on the real axis
    centre = Raster(cn, np.full(cn.shape, 0.25, np.float32))
    s = synthesize_arrays(g, 0, strip, centre, 10)
    assert (s["iterations"][:9] == 0).all() and (s["iterations"][9:] == 7).all()
    assert np.allclose(s["fraction"][9:], 0.25)
    assert math.isclose(float(s["histogram"][7]), 9 * 32)


# ---------------------------------------------------------------- the OpenCL kernel
def window_fetch(strip: Raster):
    def fetch(a: int, b: int) -> Raster:
        dist = None if strip.distance is None else strip.distance[a:b]
        return Raster(strip.iterations[a:b], strip.fraction[a:b], a, dist)
    return fetch


def test_kernel_matches_the_numpy_reference(cl_device, zoom):
    """Consecutive frames through the ring of strip rows (each frame uploads only the
    rows it adds), against synthesize_arrays: bit for bit (the host computes each
    pixel's strip column and log radius once, the kernel does IEEE double arithmetic
    without contraction, in the reference's order)."""
    from farm.compute.synth import FrameSynthesizer

    info, dev = cl_device
    g = zoom.geom
    syn = FrameSynthesizer(dev, info, g, zoom.max_iter + 1)
    syn.set_centre(zoom.centre)
    uploaded = []
    for k in list(range(0, g.frames, 7)) + [g.frames - 2, g.frames - 1]:
        uploaded.append(syn.ensure_rows(*g.frame_rows(k), window_fetch(zoom.strip)))
        got, want = syn.synthesize(k, zoom.max_iter), zoom.synth(k)
        for name in ("iterations", "fraction", "histogram"):
            assert np.array_equal(got[name], want[name]), (k, name)
    assert uploaded[0] == np.subtract(*g.frame_rows(0)[::-1])
    assert max(uploaded[1:]) < uploaded[0]  # later frames add rows, never reload the window


def test_kernel_distance_and_lower_limit(cl_device):
    from farm.compute.synth import FrameSynthesizer

    g = make_geometry(48, 27, zoom_depths(61, 2.0))
    rng = np.random.default_rng(5)
    n = rng.integers(0, 40, (g.rows, g.angles)).astype(np.uint32)
    strip = Raster(n, rng.random(n.shape, np.float32), 0,
                   (rng.standard_normal(n.shape) + 1j * rng.standard_normal(n.shape)).astype(np.complex64))
    wc, hc = g.centre_size
    cn = rng.integers(0, 40, (hc, wc)).astype(np.uint32)
    centre = Raster(cn, rng.random(cn.shape, np.float32), 0,
                    (rng.standard_normal(cn.shape) + 1j * rng.standard_normal(cn.shape)).astype(np.complex64))
    info, dev = cl_device
    syn = FrameSynthesizer(dev, info, g, 41, distance=True)
    syn.set_centre(centre)
    for k, limit in ((0, 40), (30, 25), (60, 40)):
        syn.ensure_rows(*g.frame_rows(k), window_fetch(strip))
        got, want = syn.synthesize(k, limit), synthesize_arrays(g, k, strip, centre, limit)
        assert np.array_equal(got["iterations"], want["iterations"])
        assert np.array_equal(got["fraction"], want["fraction"])
        # exp2 of a strip row's spacing may differ in the last bit
        assert np.allclose(got["distance"], want["distance"], rtol=1e-5, atol=1e-6)
        assert got["iterations"].max() <= limit


def test_reference_renderer_is_the_farm_f64_kernel(cl_device):
    """The direct frames these tests compare with (expmap_reference, numpy float64)
    are what the farm renders: counts and smooth offsets equal the f64 kernel's on all
    but chaotic pixels (whose orbits part with a last-bit change of c: the farm rounds
    c once from mpmath, the reference computes centre + spacing * offset)."""
    from conftest import make_spec, render_frame

    from farm.plan import make_plan

    center, w0, _, max_iter = ZOOMS["spiral"]
    plan = make_plan(make_spec(size=(160, 90), center=(repr(center.real), repr(center.imag)),
                               width=(str(w0), str(w0)), max_iter=max_iter, tile=(64, 64),
                               precision="f64"))
    n_k, d_k = render_frame(cl_device, plan)
    n_r, d_r = escape(frame_points(center, w0 / 160, 160, 90), max_iter)
    same = n_k == n_r
    assert same.mean() > 0.999
    assert (np.abs(d_k.astype(np.float64) - d_r)[same] < 1e-4).mean() > 0.999


def test_host_engine_in_bands_is_the_reference(zoom):
    """The store's numpy engine: a ring of strip rows fed a few rows a frame, and the
    frame cut into bands of rows on threads; the same arrays as one synthesize_arrays
    call on the whole strip."""
    from farm.synth.engine import HostEngine

    g = zoom.geom
    banded = HostEngine(g, threads=3)
    banded.set_centre(zoom.centre)
    for k in list(range(0, g.frames, 25)) + [g.frames - 1]:
        banded.ensure_rows(*g.frame_rows(k), window_fetch(zoom.strip))
        got, want = banded.synthesize(k, zoom.max_iter), zoom.synth(k)
        for name in ("iterations", "fraction", "histogram"):
            assert np.array_equal(got[name], want[name]), (k, name)
