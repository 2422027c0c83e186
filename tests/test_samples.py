"""Anti-aliasing: where the samples lie, their coordinates, and the kernels with samples.

Sample positions are checked from their definition (farm/plan/samples.py); the sample
axes against exact Fractions rounded once; the kernels' counts of every sample against
the 200-digit mpmath reference at the sample's exact position; sample 0 against a
render without samples (bitwise: it is the contract's pixel centre); the histogram
against the counts of every sample.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import compare_counts, job_text, make_spec, render_channels, render_frame
from reference import DIGITS, escape_count, sample_c

import farm.numerics as num
from farm.errors import SpecError
from farm.numerics.axes import sample_axis
from farm.numerics.encode import ENCODERS, decode_fp128, decode_qs
from farm.plan import make_plan
from farm.plan.samples import MAX_SAMPLES, UNIT, offsets
from farm.spec import parse_text

COUNTS = [1, 3, 4, 5, 8, 9, 16, 25, 64]
SEAHORSE = ("-0.749525718967526899076284369547895600256399088280799332045540",
            "0.135876731345244117600571502360225831462570615468277546381148")


# ----------------------------------------------------------------------------- positions


@pytest.mark.parametrize("n", COUNTS)
def test_positions_are_centred_distinct_and_inside_the_pixel(n):
    offs = offsets(n)
    assert len(offs) == n and offs[0] == (0, 0)  # sample 0: the contract's pixel centre
    assert len(set(offs)) == n
    assert all(-UNIT // 2 < c < UNIT // 2 for o in offs for c in o)
    assert sum(o[0] for o in offs) == 0 and sum(o[1] for o in offs) == 0  # mean: the centre
    if n > 1:  # spread: no two samples closer than a third of the ideal spacing 1/sqrt(n)
        pts = [(x / UNIT, y / UNIT) for x, y in offs]
        closest = min(math.dist(a, b) for i, a in enumerate(pts) for b in pts[i + 1:])
        assert closest > 0.35 / math.sqrt(n)


@pytest.mark.parametrize("n", [3, 5, 9, 25, 63])
def test_odd_counts_are_stratified_in_each_axis(n):
    """Each axis sees the n stratum midpoints (m + 1/2)/n - 1/2, each once (rounded to
    the 2^-16 grid)."""
    mids = sorted(round((Fraction(2 * m + 1, 2 * n) - Fraction(1, 2)) * UNIT) for m in range(n))
    for axis in (0, 1):
        assert sorted(o[axis] for o in offsets(n)) == mids


def test_four_samples_match_the_pixels_second_moments():
    """Centre plus a triangle of radius sqrt(2)/3: per axis sum(x^2)/4 = 1/12, the box
    filter's variance, and sum(x y) = 0 (to the 2^-16 grid)."""
    pts = [(x / UNIT, y / UNIT) for x, y in offsets(4)]
    assert abs(sum(x * x for x, _ in pts) / 4 - 1 / 12) < 1e-4
    assert abs(sum(y * y for _, y in pts) / 4 - 1 / 12) < 1e-4
    assert abs(sum(x * y for x, y in pts)) < 1e-4


def test_positions_are_a_pure_function_of_the_count():
    offsets.cache_clear()
    first = [offsets(n) for n in COUNTS]
    offsets.cache_clear()
    assert [offsets(n) for n in COUNTS] == first
    # pinned: a change here changes every stored sample (resume would mix patterns)
    assert offsets(4) == ((0, 0), (21845, 21845), (-29841, 7996), (7996, -29841))


@pytest.mark.parametrize("bad,message", [(2, "2 is not allowed"), (0, "out of range"),
                                         (MAX_SAMPLES + 1, "out of range"), ("4", "integer")])
def test_spec_refuses_bad_sample_counts(bad, message):
    text = job_text().replace("size = [24, 16]", f"size = [24, 16]\nsamples = {bad!r}".replace("'", '"'))
    with pytest.raises(SpecError, match=message) as err:
        parse_text(text)
    assert err.value.field == "image.samples"


def test_spec_refuses_tiles_too_large_for_their_samples():
    with pytest.raises(SpecError, match="at most 1 GiB") as err:
        make_spec(size=(4096, 4096), tile=(4096, 4096), samples=64)
    assert err.value.field == "render.tile"
    make_spec(size=(4096, 4096), tile=(1024, 1024), samples=64, distance=True)  # exactly 1 GiB


def test_perturbed_frames_take_samples_and_distance():
    """(Refused until issue 12's second phase; tests/test_perturb_channels.py checks them.)"""
    plan = make_plan(make_spec(width=("1e-20", "1e-20"), precision="perturb", samples=4,
                               distance=True))
    assert plan.frames[0].precision == "perturb"
    assert [c.name for c in plan.channels] == [
        "iterations", "fraction", "distance", "samples/iterations", "samples/fraction",
        "samples/distance"]


# ----------------------------------------------------------------------------- axes


def _exact(center: str, width: str, n: int, i: int, off: int, sign: int) -> Fraction:
    s = Fraction(width) / n
    return Fraction(center) + sign * (i + Fraction(1, 2) + Fraction(off, UNIT) - Fraction(n, 2)) * s


@pytest.mark.parametrize("fmt,width", [("f64", "3"), ("fp128", "1e-18"), ("quad-single", "1e-18")])
def test_sample_axis_rounds_each_coordinate_once(fmt, width):
    """Every (column, sample) value equals its exact Fraction rounded into the format
    (centres parsed at the frame's precision, as the renderer does); sample 0 is the
    axis without samples, bitwise."""
    n, sign, center = 37, -1, SEAHORSE[1]
    with num.workprec(num.WIDTH_BITS):  # as make_plan computes it
        spacing = num.parse(width, num.WIDTH_BITS) / n
    bits = num.coordinate_bits(spacing)
    offs = [o[1] for o in offsets(9)]
    got = sample_axis(center, spacing, n, offs, sign, bits, fmt)
    plain = ENCODERS[fmt](num.axis(center, spacing, n, 0, n, sign, bits))
    assert np.array_equal(got[::9], plain)
    c_parsed = _mp_fraction(num.parse(center, bits))
    for i in (0, 17, 36):
        for k in range(1, 9):
            exact = _exact("0", width, n, i, offs[k], sign) + c_parsed
            value = got[i * 9 + k]
            if fmt == "f64":
                assert value == float(exact)  # Fraction -> float rounds to nearest
            elif fmt == "fp128":
                assert _mp_fraction(decode_fp128(value)[0]) == Fraction(round(exact * 2**96), 2**96)
            else:  # four float32 limbs hold ~97 bits: within 2^-96 relative
                err = abs(_mp_fraction(decode_qs(value)[0]) - exact)
                assert err <= abs(exact) * Fraction(1, 2**96)


def _mp_fraction(x) -> Fraction:
    sign, man, exp, _ = x._mpf_
    value = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -value if sign else value


# ----------------------------------------------------------------------------- kernels


def _plan(fmt, center, width, max_iter, samples, size=(24, 16), **kw):
    spec = make_spec(size=size, center=center, width=(width, width), max_iter=max_iter,
                     tile=(16, 16), samples=samples, **kw)
    return make_plan(spec, stored=[(max_iter, fmt)])


def _all_samples(out, name):
    if "samples/" + name not in out:
        return out[name][..., None]
    return np.concatenate([out[name][..., None], out["samples/" + name]], axis=2)


CASES = [("f64", ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"),
          "1.3e-4", 1200),
         ("fp128", SEAHORSE, "1e-18", 2000),
         ("quad-single", SEAHORSE, "1e-18", 2000)]


@pytest.mark.parametrize("fmt,center,width,max_iter", CASES)
def test_every_sample_matches_the_reference_at_its_position(cl_device, fmt, center, width,
                                                            max_iter):
    """Counts of all 4 samples of the pixels of every third row against mpmath at the
    sample's exact c."""
    size, n, rows = (20, 12), 4, range(0, 12, 3)
    out, hist = render_channels(cl_device, _plan(fmt, center, width, max_iter, n, size))
    got = _all_samples(out, "iterations")
    assert got.shape == (12, 20, 4)
    got = got[rows]
    want = np.zeros_like(got)
    for row, j in enumerate(rows):
        for i in range(size[0]):
            for k, off in enumerate(offsets(n)):
                re, im = sample_c(center, width, size, i, j, off)
                want[row, i, k] = escape_count(re, im, max_iter, digits=DIGITS)
    compare_counts(got, want, min_equal=0.99)
    # the samples are not copies of the centre: they see different counts
    assert (got[..., 1:] != got[..., :1]).any(axis=2).mean() > 0.3


@pytest.mark.parametrize("fmt,center,width,max_iter", CASES)
def test_sample_zero_is_the_render_without_samples(cl_device, fmt, center, width, max_iter):
    base_it, base_fr = render_frame(cl_device, _plan(fmt, center, width, max_iter, 1))
    out, _ = render_channels(cl_device, _plan(fmt, center, width, max_iter, 9))
    assert np.array_equal(out["iterations"], base_it)
    assert np.array_equal(out["fraction"], base_fr)
    frac = out["samples/fraction"]
    assert (frac[out["samples/iterations"] == 0] == 0).all()  # interior: no offset


@pytest.mark.parametrize("distance", [False, True])
def test_histogram_counts_every_sample(cl_device, distance):
    plan = _plan("f64", ("-0.75", "0.1"), "3", 300, 5, size=(30, 21), distance=distance)
    out, hist = render_channels(cl_device, plan)
    counts = _all_samples(out, "iterations")
    assert hist.sum() == 30 * 21 * 5
    assert np.array_equal(hist, np.bincount(counts.ravel(), minlength=plan.bins))
    assert hist[0] > 0 and hist[1:].sum() > 0  # interior and escaped samples both present


def test_interleaving_does_not_change_samples(cl_device):
    """Work-items take (pixel, sample) pairs q, q + G, ...: any G, and the pixels in
    blocks (pixel_blocks), give the same image."""
    from farm.compute.launch import LaunchConfig

    plan = _plan("f64", ("-0.75", "0.1"), "2.9", 250, 4, size=(37, 23), distance=True)
    base, _ = render_channels(cl_device, plan)
    for config in (LaunchConfig(8, 1), LaunchConfig(64, 64), LaunchConfig(16, 2, pixel_blocks=True)):
        out, _ = render_channels(cl_device, plan, config=config)
        assert all(np.array_equal(out[k], base[k]) for k in base)
