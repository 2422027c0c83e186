"""Colouring: CDFs, temporal smoothing, palettes, and every colour method (numpy)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import reference_de

from farm.color import METHODS, FrameStats, Statistics, Style, cdf, colorize, colour, smoothed_cdfs
from farm.color.distance import estimated_distance, line_cover, shading, slopes
from farm.color.raw import RawFrame
from farm.color.render import TO_LINEAR, encode_linear
from farm.color.stats import last_nonzero, trimmed_cdf
from farm.errors import SpecError
from farm.spec.palettes import LUT_SIZE, STOPS, lut


def test_cdf_over_escaped_pixels():
    h = np.array([100, 1, 2, 3, 0, 4])  # 100 interior pixels are ignored
    c = cdf(h)
    assert c[0] == 0 and c[-1] == 1 and np.all(np.diff(c) >= 0)
    assert np.isclose(c[3], 6 / 10)
    assert not cdf(np.array([5, 0, 0])).any()  # nothing escaped


def test_smoothing_is_a_weighted_average_and_reduces_flicker():
    rng = np.random.default_rng(0)
    base = np.exp(-np.arange(200) / 40.0)
    hists = [np.concatenate([[50], rng.poisson(1000 * base[1:] * rng.uniform(0.5, 1.5))])
             for _ in range(30)]
    raw = [cdf(h) for h in hists]
    none = list(smoothed_cdfs(lambda f: hists[f], 30, 0))
    assert all(np.allclose(a, b) for a, b in zip(none, raw, strict=True))
    smooth = list(smoothed_cdfs(lambda f: hists[f], 30, 3))
    f = 10
    weights = np.array([4 - abs(k) for k in range(-3, 4)], float)
    expected = sum(w * raw[f + k] for w, k in zip(weights, range(-3, 4), strict=True)) / weights.sum()
    assert np.allclose(smooth[f], expected)

    def flicker(cdfs):
        return np.mean([np.abs(cdfs[k + 1] - cdfs[k]).max() for k in range(len(cdfs) - 1)])

    assert flicker(smooth) < 0.5 * flicker(raw)


def test_trimmed_cdfs_average_to_the_full_rows():
    """Frames whose counts end early: their trimmed CDFs, padded, equal the full rows."""
    rng = np.random.default_rng(1)
    hists = []
    for top in (50, 400, 120, 999):
        h = np.zeros(1000, np.int64)
        h[: top + 1] = rng.integers(0, 9, top + 1)
        h[top] = 3
        hists.append(h)
    stats = Statistics(4, 2)
    for f in range(4):
        got = stats.stats(f, lambda g: hists[g]).cdf
        full = sum((3 - abs(f - g)) * cdf(hists[g]) for g in range(max(0, f - 2), min(4, f + 3)))
        full /= sum(3 - abs(f - g) for g in range(max(0, f - 2), min(4, f + 3)))
        assert np.allclose(got, full[: len(got)]) and np.allclose(full[len(got):], 1.0)
    assert len(trimmed_cdf(hists[0])) == 51  # counts 0..50


@pytest.mark.parametrize("length,at", [(0, []), (1, []), (1, [0]), (5, [4]), (700, [3]), (5000, [0, 4488]),
                                       (300_000, [17]), (300_000, [299_999]), (300_000, [])])
def test_last_nonzero_finds_the_last_count_however_far_from_the_end(length, at):
    """The row's last nonzero entry, looked for from the end in growing pieces, is the
    one a whole-row scan finds (-1 for a row of zeros), wherever it lies."""
    row = np.zeros(length, np.int64)
    row[at] = 7
    scan = np.flatnonzero(row)
    assert last_nonzero(row) == (int(scan[-1]) if len(scan) else -1)
    rng = np.random.default_rng(length)
    for _ in range(20):
        cut = int(rng.integers(0, length + 1))
        assert last_nonzero(row[:cut]) == max([i for i in at if i < cut], default=-1)


def legacy_colorize(iterations, fraction, frame_cdf, palette, cycles):
    """The colouring of zoomfarm before colour methods existed (one thread, np.interp):
    the reference the histogram method must match."""
    n = iterations.astype(np.float64)
    mu = np.clip(n + fraction.astype(np.float64), 0.0, len(frame_cdf) - 1)
    t = np.interp(mu, np.arange(len(frame_cdf), dtype=np.float64), frame_cdf)
    table = lut(palette)
    idx = np.floor((t * cycles % 1.0) * len(table)).astype(np.int64) % len(table)
    rgb = table[idx]
    rgb[iterations == 0] = 0
    return rgb


def synthetic_frame(shape=(67, 90), seed=0, top=3000):
    rng = np.random.default_rng(seed)
    it = np.minimum(rng.exponential(300, shape) + 1, top).astype(np.uint32)
    it[rng.random(shape) < 0.1] = 0
    fr = rng.uniform(-1, 3.5, shape).astype(np.float32)
    fr[it == 0] = 0
    return it, fr, np.bincount(it.ravel(), minlength=top + 1).astype(np.int64)


@pytest.mark.parametrize("palette,cycles", [("classic", 3.0), ("fire", 1.0), ("gray", 7.5)])
def test_histogram_method_matches_the_legacy_colours(palette, cycles):
    """Tolerance: at most 1 in 255 per channel (a palette index one entry off where
    float rounding differs); here it is exact."""
    it, fr, hist = synthetic_frame()
    c = cdf(hist)
    want = legacy_colorize(it, fr, c, palette, cycles)
    got = colorize(it, fr, c, palette, cycles)
    assert np.abs(got.astype(int) - want).max() <= 1
    assert (got == want).all(axis=2).mean() >= 0.999
    # the same through the sink's path: trimmed smoothed CDF, bands on threads
    from concurrent.futures import ThreadPoolExecutor

    raw = RawFrame(0, it, fr, hist)
    stats = Statistics(1, 4).stats(0, lambda g: hist)
    style = Style(method="histogram", lut=lut(palette), cycles=cycles)
    with ThreadPoolExecutor(2) as pool:
        banded = colour(raw, stats, style, pool, band_rows=7)
    assert np.abs(banded.astype(int) - want).max() <= 1


def test_colorize_interior_black_and_continuous():
    it = np.array([[0, 1, 2, 3, 4]], np.uint32)
    fr = np.zeros_like(it, dtype=np.float32)
    c = cdf(np.array([1, 1, 1, 1, 1]))
    rgb = colorize(it, fr, c, "classic", 1.0)
    assert rgb.shape == (1, 5, 3) and rgb.dtype == np.uint8
    assert (rgb[0, 0] == 0).all() and rgb[0, 1:].any()
    # continuous mu: pixels at n=2, d=-0.5 and n=1, d=+0.5 get the same colour
    same = colorize(np.array([[2, 1]], np.uint32), np.array([[-0.5, 0.5]], np.float32), c, "fire", 1.0)
    assert (same[0, 0] == same[0, 1]).all()


def test_palettes_are_cyclic():
    for name in STOPS:
        table = lut(name).astype(int)
        assert np.abs(table[0] - table[-1]).max() <= 8, name
        assert np.abs(np.diff(table, axis=0)).max() <= 8, name  # no jumps inside either


# ---------------------------------------------------------------------------- palettes files


def test_gradient_files_text_and_json(tmp_path):
    text = tmp_path / "p.txt"
    text.write_text("# a comment\n#ff0000\n0 255 0   # green\n\n#0000ff\n")
    table = lut(str(text))
    assert table.shape == (LUT_SIZE, 3)
    assert tuple(table[0]) == (255, 0, 0) or tuple(table[0])[0] > 250  # starts red
    assert table[LUT_SIZE // 3 + 5][1] > 245  # green at 1/3
    assert table[-1][0] > 240 and table[-1][2] < 15  # wraps back to red: cyclic
    positioned = tmp_path / "q.json"
    positioned.write_text(json.dumps({"stops": [[0, "#000000"], [0.5, [255, 255, 255]]]}))
    table = lut(str(positioned))
    assert table[LUT_SIZE // 2][0] >= 254 and table[0][0] <= 1 and table[-1][0] <= 2
    listed = tmp_path / "r.json"
    listed.write_text(json.dumps(["#101010", "#f0f0f0"]))
    assert abs(int(lut(str(listed))[LUT_SIZE // 2][0]) - 240) <= 1


@pytest.mark.parametrize("content,message", [
    ("#ff00\n", "not a colour"),
    ("0.5 #ff0000\n0.2 #00ff00\n", "increase"),
    ("0 #ff0000\n#00ff00\n", "every line or on none"),
    ("", "no colour stops"),
])
def test_bad_gradient_files_name_the_field(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(SpecError) as err:
        lut(str(path))
    assert err.value.field == "color.palette" and message in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(SpecError, match="cannot read"):
        lut(str(tmp_path / "missing.json"))


# ---------------------------------------------------------------------------- methods


@pytest.fixture(scope="module")
def seahorse():
    """Seahorse Valley at 160x90 with interior, distances from the dz/dc reference."""
    c = reference_de.pixel_grid((-0.745, 0.113), 0.01, (160, 90))
    raw = reference_de.render(c, 1500, 0.01 / 160)
    assert 0.01 < (raw.iterations == 0).mean() < 0.9
    stats = Statistics(1, 0).stats(0, lambda g: raw.histogram)
    return raw, stats


BRIGHT = "bright.json"


def bright_style(tmp_path, method, **kw):
    """A palette with no dark colour, so that black means interior (or a line)."""
    path = tmp_path / BRIGHT
    path.write_text(json.dumps(["#ff8040", "#40ff80", "#8040ff"]))
    return Style(method=method, lut=lut(str(path)), **kw)


@pytest.mark.parametrize("method", list(METHODS))
def test_interior_and_escaped_keep_their_meaning(tmp_path, seahorse, method):
    """Every method: interior pixels take the interior colour, escaped pixels a palette
    colour (far from the set, exactly the palette's; nearer, shaded or lined but never
    the interior's colour in histogram and smooth)."""
    raw, stats = seahorse
    style = bright_style(tmp_path, method, line_width=1.0)
    rgb = colour(raw, stats, style)
    inside = raw.iterations == 0
    assert (rgb[inside] == 0).all()
    far = ~inside & (np.abs(raw.distance) > 8)
    assert far.sum() > 100
    palette = {tuple(c) for c in style.lut}
    if method == "shade":  # the palette's colours, lit: brightness within 40% of flat
        base = colour(raw, stats, bright_style(tmp_path, "histogram")).astype(float)
        gain = rgb[far].sum(axis=1) / base[far].sum(axis=1)
        assert (gain > 0.6).all() and (gain < 1.4).all()
        assert np.median(np.abs(gain - 1)) < 0.1
    else:
        assert all(tuple(c) in palette for c in rgb[far])
    if method in ("histogram", "smooth"):
        assert (rgb[~inside].max(axis=1) > 60).all()
    without = colour(RawFrame(0, raw.iterations, raw.fraction, raw.histogram), stats, style)
    assert (without[inside] == 0).all()  # the estimated distance keeps the meaning too


def test_distance_lines_have_a_set_width_in_pixels(tmp_path, seahorse):
    raw, stats = seahorse
    for width in (1.0, 3.0):
        style = bright_style(tmp_path, "distance", line_width=width)
        rgb = colour(raw, stats, style)
        base = colour(raw, stats, bright_style(tmp_path, "histogram"))
        d = np.abs(raw.distance)
        escaped = raw.iterations > 0
        on = escaped & (d <= width / 2 - 0.5 + 1e-3)
        off = escaped & (d >= width / 2 + 0.5)
        assert (rgb[on] == 0).all() and on.any()
        assert (rgb[off] == base[off]).all()
    cover = line_cover(np.array([0.0, 0.7, 1.0, 1.5, 2.0, 9.0], np.float32), 2.0)
    assert np.allclose(cover, [1, 0.8, 0.5, 0, 0, 0])


def test_distance_line_width_does_not_depend_on_depth(tmp_path):
    """Around a Misiurewicz point (self-similar), a 1000x deeper view draws about the
    same share of line pixels."""
    centre = (-0.10109636384562, 0.95628651080914)  # M(4,1): tip of a dendrite
    shares = []
    for width in (2e-3, 2e-6):
        c = reference_de.pixel_grid(centre, width, (96, 64))
        raw = reference_de.render(c, 3000, width / 96)
        assert (raw.iterations == 0).mean() < 0.01  # a dendrite: no interior
        cover = line_cover(np.abs(raw.distance), 1.0)
        shares.append(float(cover.mean()))
    assert 0.02 < shares[0] < 0.5
    assert 0.5 < shares[1] / shares[0] < 2.0


def test_estimated_distance_agrees_with_dz_dc(seahorse):
    raw, _ = seahorse
    est = estimated_distance(RawFrame(0, raw.iterations, raw.fraction, raw.histogram))
    true = raw.distance
    m = (raw.iterations > 0) & (np.abs(true) > 1) & (np.abs(true) < 50)
    ratio = np.abs(est[m]) / np.abs(true[m])
    cos = (est[m] * np.conj(true[m])).real / np.abs(est[m]) / np.abs(true[m])
    assert 0.8 < np.median(ratio) < 1.25
    assert np.median(cos) > 0.99
    assert (np.abs(est[raw.iterations == 0]) == 0).all()


def test_shading_lights_slopes_facing_the_light():
    light = Style(method="shade", lut=lut("gray"), light=(0.0, np.radians(45))).light_vector
    def at(d):
        return shading(slopes(RawFrame(0, np.ones(1, np.uint32), np.zeros(1, np.float32),
                                       np.zeros(2, np.int64), np.array([d], np.complex64))),
                       light, 2.0)

    toward, away, flat = at(1.0), at(-1.0), at(1e6)  # downhill towards +x, -x; far
    # the relief rises against the distance direction: a slope falling towards the light
    # faces it
    assert toward[0] > 1.2 and away[0] < 0.5 and abs(flat[0] - 1) < 1e-3


def test_samples_average_in_linear_light(seahorse):
    raw, stats = seahorse
    style = Style(method="shade", lut=lut("classic"))
    one = colour(raw, stats, style)
    twice = RawFrame(0, np.stack([raw.iterations] * 2, -1), np.stack([raw.fraction] * 2, -1),
                     raw.histogram, np.stack([raw.distance] * 2, -1))
    assert np.abs(colour(twice, stats, style).astype(int) - one).max() <= 1
    # half black, half white: linear 0.5 is sRGB 188, not 128
    assert int(encode_linear((TO_LINEAR[0] + TO_LINEAR[255]) / 2)) == 188


def test_samples_use_their_own_data(seahorse):
    """A (H, W, 3) frame whose samples are three different renders averages their
    colours (each coloured on its own)."""
    offsets = [(0.0, 0.0), (0.25, 0.25), (-0.25, 0.25)]
    c = reference_de.pixel_grid((-0.745, 0.113), 0.01, (40, 30), offsets)
    raw = reference_de.render(c, 1500, 0.01 / 40)
    stats = FrameStats.from_cdf(0, cdf(raw.histogram))
    style = Style(method="distance", lut=lut("classic"))
    got = colour(raw, stats, style).astype(np.float32)
    linear = sum(TO_LINEAR[colour(raw.sample(s), stats, style)] for s in range(3)) / 3
    assert np.abs(got - encode_linear(linear)).max() <= 1


# ---------------------------------------------------------------------------- shade, fast


def _flat_patches(shape=(40, 50), seed=5):
    """Constant escape times (no slope) in patches beside interior blocks, ramps, noise:
    every branch of the estimate (flat, next to the interior, one-sided, edges)."""
    rng = np.random.default_rng(seed)
    h, w = shape
    it = (50 + np.arange(w)[None, :] // 3 + 2 * (np.arange(h)[:, None] // 4)).astype(np.uint32)
    fr = rng.uniform(0, 3.6, shape).astype(np.float32)
    fr[5:15, 5:20] = 0.25  # flat
    it[5:15, 5:20] = 70
    it[8:12, 10:14] = 0  # interior inside the flat patch
    it[20:, :7] = 0  # interior on the edge
    it[0, w - 1] = 0  # a lone interior corner
    fr[it == 0] = 0
    return RawFrame(0, it, fr, np.bincount(it.ravel()).astype(np.int64))


@pytest.mark.parametrize("light", [(135.0, 45.0), (0.0, 10.0), (300.0, 80.0), (90.0, 1.0)])
def test_shade_in_few_passes_matches_its_composition(seahorse, light):
    """`shade` without a stored distance (farm.color.relief) gives the colours of its
    readable composition (palette entry, estimated slopes, light, blend): at most 1 in
    255 per channel, at least 99.9% of pixels exact; in bands of any height too."""
    from farm.color.methods import shade, shade_reference

    raw_dz, stats_dz = seahorse
    it, fr, hist = synthetic_frame((45, 70), seed=2)
    frames = [(RawFrame(0, raw_dz.iterations, raw_dz.fraction, raw_dz.histogram), stats_dz),
              (RawFrame(0, it, fr, hist), Statistics(1, 0).stats(0, lambda g: hist))]
    patches = _flat_patches()
    frames.append((patches, Statistics(1, 0).stats(0, lambda g: patches.histogram)))
    for raw, stats in frames:
        for cycles in (1.0, 3.7):
            style = Style(method="shade", lut=lut("classic"), cycles=cycles,
                          light=(np.radians(light[0]), np.radians(light[1])))
            want = shade_reference(raw, stats, style)
            for got in (shade(raw, stats, style), colour(raw, stats, style, band_rows=5)):
                diff = np.abs(got.astype(int) - want)
                assert diff.max() <= 1
                assert (diff.max(axis=2) == 0).mean() >= 0.999


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (6, 1), (2, 2), (3, 9)])
def test_shade_of_tiny_frames(shape):
    from farm.color.methods import shade, shade_reference

    it, fr, hist = synthetic_frame(shape, seed=4, top=60)
    for n in (it, np.zeros_like(it), np.full_like(it, 9)):
        raw = RawFrame(0, n, np.where(n > 0, fr, 0).astype(np.float32), np.bincount(n.ravel()))
        stats = Statistics(1, 0).stats(0, lambda g, raw=raw: raw.histogram)
        style = Style(method="shade", lut=lut("fire"))
        assert np.abs(shade(raw, stats, style).astype(int) - shade_reference(raw, stats, style)).max() <= 1


def test_colours_do_not_depend_on_the_bands(seahorse):
    """Bands (their rows chosen by size, farm/color/render.py band_rows_for) are a way
    of spreading a frame over threads: any bands, on threads or not, give the same
    bytes, for every method."""
    from concurrent.futures import ThreadPoolExecutor

    from farm.color.render import band_rows_for

    raw_dz, stats_dz = seahorse
    raw = RawFrame(0, raw_dz.iterations, raw_dz.fraction, raw_dz.histogram)
    assert band_rows_for(1080, 1920, 2) == 137 and band_rows_for(360, 640, 2) == 180  # by size
    assert band_rows_for(1080, 1920, 32) == 34 and band_rows_for(3, 640, 8) == 1  # a share a thread
    for method in ("shade", "histogram"):
        style = Style(method=method, lut=lut("classic"), cycles=1.0)
        alone = colour(raw, stats_dz, style)
        with ThreadPoolExecutor(2) as pool:
            for rows in (None, 1, 7, raw.shape[0]):
                banded = colour(raw, stats_dz, style, pool, band_rows=rows)
                assert np.array_equal(banded, alone), (method, rows)
