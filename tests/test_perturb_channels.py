"""Samples and the distance estimate in perturbed frames (kernels/perturb.cl,
perturb_lanes.cl), against exact references.

The estimate is checked against z and dz/dc iterated from the definitions in MPFR
(as tests/reference.py's distance_estimate in mpmath, ten times faster) at the
centres and off-centre samples of a grid of pixels, at widths 1e-20 and 1e-60 (double
deltas), 1e-22 (a period-8007 nucleus reference: skips of thousands of steps) and
1e-320 (floatexp deltas), with iteration skipping on and off: where the
count matches the reference, the median relative error must be float32's (< 1e-5)
and 95% within 1e-3 (near the set an error of one rounding in dc grows with |dz/dc|,
as it does in the direct formats, tests/test_distance.py). Samples must land where
farm/plan/samples.py puts them (their counts match exact counts at their positions),
sample 0 is the render without samples, the histogram counts every sample, the CPU
lanes give the one-pixel loop bit for bit, and the estimate has no jump where a zoom
enters perturbation. A perturbed zoom with 4 samples and the estimate goes through
`farm render`, `farm frames` (distance and shade), a kill and resume, and MPI, bitwise.
"""

from __future__ import annotations

import functools
import shutil
import signal
import sys
from fractions import Fraction
from pathlib import Path

import h5py
import mpmath
import numpy as np
import pytest
from conftest import assert_same_datasets, job_text, make_spec, render_channels, run_farm, tiles_done
from reference import digits_for, misiurewicz, sample_c

from farm.compute.launch import LaunchConfig
from farm.plan import make_plan
from farm.plan.samples import offsets

SIZE = (24, 16)
N = 4  # samples


@functools.cache
def seahorse_point():
    return misiurewicz(("-0.7495257189675268990762843695478956", "0.1358767313452441176005715023602258"),
                       23, 2, 450)


def distance_mpfr(re: Fraction, im: Fraction, max_iter: int, spacing: Fraction,
                  digits: int) -> tuple[int, complex]:
    """(count, distance in pixels) of c = re + i im from the definitions, in MPFR at
    ``digits`` digits: z <- z^2 + c and z' <- 2 z z' + 1 from 0, the count as in the
    store's contract, and conj(z ln|z| / (spacing z')) at the first |z| > 2^10
    (kernels/mandel.cl); (0, 0j) for interior."""
    import gmpy2

    bits = int(digits * 3.33) + 8
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        c = gmpy2.mpc(gmpy2.mpfr(gmpy2.mpq(re.numerator, re.denominator)),
                      gmpy2.mpfr(gmpy2.mpq(im.numerator, im.denominator)))
        z = dz = gmpy2.mpc(0)
        count = 0
        for k in range(1, max_iter + 34):
            dz = 2 * z * dz + 1
            z = z * z + c
            m2 = gmpy2.norm(z)
            if not count and m2 > 4:
                if k > max_iter:
                    return 0, 0j
                count = k
            if count and m2 > 2 ** 20:
                s = gmpy2.mpfr(gmpy2.mpq(spacing.numerator, spacing.denominator))
                d = z * gmpy2.log(gmpy2.sqrt(m2)) / (dz * s)
                return count, complex(float(d.real), -float(d.imag))
    return 0, 0j


def _spec(center, width, max_iter, samples=N, distance=True, size=SIZE, tile=(16, 16), **kw):
    return make_spec(size=size, center=center, width=(width, width), max_iter=max_iter,
                     tile=tile, precision="perturb", samples=samples, distance=distance, **kw)


_refs: dict = {}


def _references(plan):
    key = (plan.spec.view, plan.frames[0].max_iter)
    if key not in _refs:
        _refs[key] = plan.references()
    return _refs[key]


def render(cl_device, spec, config=None, skipping=True):
    from farm.compute.render import TileRenderer

    plan = make_plan(spec)
    info, dev = cl_device
    renderer = TileRenderer(dev, info, plan, config, references=_references(plan), skipping=skipping)
    w, h = plan.spec.size
    out = {c.name: np.zeros(c.shape(h, w), c.dtype) for c in plan.channels}
    hist = np.zeros(plan.bins, np.int64)
    for tile in plan.grid:
        res = renderer.render(plan.frames[0], tile)
        for name, arr in res.arrays.items():
            out[name][tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = arr
        hist[res.hist_bins] += res.hist_counts
    return out, hist


def _sample(out, name, j, i, k):
    return out[name][j, i] if k == 0 else out["samples/" + name][j, i, k - 1]


CHECKED = [(i, j, k) for j in range(1, SIZE[1], 3) for i in range(0, SIZE[0], 4) for k in (0, 2)]


@functools.cache
def _reference(center, width, max_iter):
    """{(i, j, k): (count, distance)} at the CHECKED samples."""
    spacing = Fraction(width) / SIZE[0]
    digits = digits_for(width, SIZE)
    return {(i, j, k): distance_mpfr(*sample_c(center, width, SIZE, i, j, offsets(N)[k]),
                                     max_iter, spacing, digits)
            for i, j, k in CHECKED}


SEAHORSE = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
CASES = {"seahorse-1e-20": (seahorse_point, "1e-20", 3000),
         "seahorse-8007-1e-22": (lambda: SEAHORSE, "1e-22", 50000),  # skips of 1000s of steps
         "seahorse-1e-60": (seahorse_point, "1e-60", 6000),
         "c=i-1e-320": (lambda: ("0", "1"), "1e-320", 3000)}


@pytest.mark.parametrize("skipping", [True, False], ids=["skip", "noskip"])
@pytest.mark.parametrize("case", list(CASES))
def test_distance_matches_the_reference(cl_device, case, skipping):
    point, width, max_iter = CASES[case]
    center = point()
    out, _ = render(cl_device, _spec(center, width, max_iter), skipping=skipping)
    want = _reference(center, width, max_iter)
    errors, matched, escaped = [], 0, 0
    for (i, j, k), (n, d) in want.items():
        got_n = _sample(out, "iterations", j, i, k)
        got = complex(_sample(out, "distance", j, i, k))
        escaped += n > 0
        if got_n != n:
            continue
        matched += 1
        if n == 0:
            assert got == 0
            continue
        errors.append(abs(got - d) / abs(d))
    assert escaped >= 0.8 * len(want) and matched >= 0.95 * len(want), (escaped, matched)
    err = np.array(errors)
    assert np.median(err) < 1e-5, np.median(err)
    assert np.quantile(err, 0.95) < 1e-3, np.sort(err)[-8:]


def test_sample_counts_match_exact_counts_at_their_positions(cl_device):
    """Every sample of a whole Seahorse frame (nucleus reference, skips of thousands of
    steps) against the direct quad-single format, which places samples by its own exact
    axes (farm/numerics/axes.py): they agree on 98% (the frame is chaotic near the
    period-8007 minibrot); where they differ, MPFR at the sample's exact position
    (tests/reference.py) decides, and perturbation is right at least as often."""
    from reference import escape_count_mpfr

    center, width, max_iter = SEAHORSE, "1e-20", 20000
    got, hist = render(cl_device, _spec(center, width, max_iter))
    plan = make_plan(_spec(center, width, max_iter), stored=[(max_iter, "quad-single")])
    want, want_hist = render_channels(cl_device, plan)

    def stacked(out):
        return np.concatenate([out["iterations"][..., None], out["samples/iterations"]], axis=-1)

    a, b = stacked(got), stacked(want)
    assert (a == b).mean() >= 0.98 and (a > 0).mean() > 0.9 and len(np.unique(a)) > 100
    assert hist.sum() == want_hist.sum() == SIZE[0] * SIZE[1] * N
    right = np.zeros(2, int)
    for j, i, k in np.argwhere(a != b)[:16]:
        exact = escape_count_mpfr(*sample_c(center, width, SIZE, i, j, offsets(N)[k]), max_iter,
                                  digits=digits_for(width, SIZE))
        right += (a[j, i, k] == exact, b[j, i, k] == exact)
    assert right[0] >= right[1], right


def test_sample_zero_is_the_render_without_samples_and_distance_changes_no_count(cl_device):
    center, width, max_iter = SEAHORSE, "1e-22", 50000
    full, hist_full = render(cl_device, _spec(center, width, max_iter))
    plain, hist_plain = render(cl_device, _spec(center, width, max_iter, samples=1, distance=False))
    bare, hist_bare = render(cl_device, _spec(center, width, max_iter, distance=False))
    assert np.array_equal(full["iterations"], plain["iterations"])
    assert np.array_equal(full["fraction"], plain["fraction"])
    for name in ("iterations", "fraction", "samples/iterations", "samples/fraction"):
        assert np.array_equal(full[name], bare[name]), name
    assert np.array_equal(hist_full, hist_bare)
    counts = np.concatenate([full["iterations"].ravel(), full["samples/iterations"].ravel()])
    assert np.array_equal(hist_full, np.bincount(counts, minlength=len(hist_full)))
    assert hist_plain.sum() * N == hist_full.sum()
    escaped = full["samples/iterations"] > 0
    assert np.isfinite(full["samples/distance"]).all()
    assert (np.abs(full["samples/distance"][escaped]) > 0).all()
    assert (full["samples/distance"][~escaped] == 0).all()


@pytest.mark.parametrize("view", ["nucleus-8007", "odd-tile"])
def test_lanes_give_the_one_pixel_loop_bitwise(cl_device, view):
    """kernels/perturb_lanes.cl (8 samples in flight) against escape_pixel, with
    samples and the derivative, both taking skips of 32 steps or more; a tile narrower
    than a vector and lanes left idle in the second view."""
    if view == "nucleus-8007":
        spec = _spec(SEAHORSE, "1e-22", 50000, size=(16, 12), tile=(16, 12))
    else:
        spec = _spec(SEAHORSE, "1e-22", 50000, size=(13, 9), tile=(13, 9), samples=3)
    outs = [render(cl_device, spec, LaunchConfig(4, 1, 2048, lanes, 5))[0] for lanes in (8, 1)]
    for name in outs[0]:
        assert np.array_equal(outs[0][name], outs[1][name], equal_nan=True), name


def test_floatexp_deltas_agree_with_double_deltas(cl_device, monkeypatch):
    """At 1e-200 both variants work: forced floatexp gives the same counts and estimates
    (to float32's rounding)."""
    from farm.plan import precision

    spec = _spec(("0", "1"), "1e-200", 3000)
    plain, _ = render(cl_device, spec)
    monkeypatch.setattr(precision, "PERTURB_FX_BELOW_LOG10", 0.0)
    fx, _ = render(cl_device, spec)
    for name in ("iterations", "samples/iterations"):
        assert np.array_equal(plain[name], fx[name]), name
    for name in ("distance", "samples/distance"):
        rel = np.abs(plain[name] - fx[name]) / np.maximum(np.abs(plain[name]), 1e-30)
        assert np.quantile(rel, 0.99) < 1e-5 and rel.max() < 1e-3, name


def test_no_jump_where_a_zoom_enters_perturbation(cl_device):
    """The frames around the switch from f64 to perturbation (and a deeper one, against
    fp128) rendered in both formats with samples and the estimate: counts agree and
    estimates agree to float32 where they do (f64 at its limit: to 1e-3 at 95%)."""
    center = seahorse_point()[0][:60], seahorse_point()[1][:60]
    spec = make_spec(size=SIZE, center=center, width=("1e-5", "1e-14"), frames=10, max_iter=5000,
                     tile=(16, 16), samples=N, distance=True)
    plan = make_plan(spec)
    fmts = [f.precision for f in plan.frames]
    k = fmts.index("perturb")
    refs = plan.references()
    for frame, other in ((k - 1, "perturb"), (k, "fp128"), (len(fmts) - 1, "fp128")):
        stored = [(f.max_iter, other if i == frame else f.precision) for i, f in enumerate(plan.frames)]
        twin = make_plan(spec, stored=stored)
        a, _ = render_channels(cl_device, plan, frame, references=refs)
        b, _ = render_channels(cl_device, twin, frame, references=twin.references())
        for name in ("iterations", "samples/iterations"):
            assert (a[name] == b[name]).mean() >= 0.99, (frame, name)
        for name in ("distance", "samples/distance"):
            same = (a[name.replace("distance", "iterations")] == b[name.replace("distance", "iterations")])
            same &= np.abs(b[name]) > 0
            rel = np.abs(a[name][same] - b[name][same]) / np.abs(b[name][same])
            assert np.median(rel) < 1e-5 and np.quantile(rel, 0.95) < 1e-3, (frame, name)


def test_plan_accepts_samples_and_distance_for_perturbed_frames_but_not_expmap():
    from farm.errors import SpecError

    plan = make_plan(_spec(SEAHORSE, "1e-30", 1000))
    assert plan.frames[0].precision == "perturb" and plan.samples == N
    assert [c.name for c in plan.channels][2] == "distance"
    expmap = "[animation]\nmethod = \"expmap\"\n"
    for kw in (dict(samples=4), dict(distance=True)):
        with pytest.raises(SpecError):
            make_plan(make_spec(width=("4", "1e-30"), frames=8, max_iter=1000,
                                precision="auto", extra=expmap, **kw))


def test_every_sample_lies_inside_the_frames_offset_bound():
    """The skip tables are built for |dc| up to PerturbedFrame.log2_dc_max: every sample
    of every pixel must lie inside it (exact arithmetic, the corner pixels' samples)."""
    from farm.compute.perturbation import perturbed_frame

    spec = _spec(SEAHORSE, "1e-22", 50000, size=(32, 18), samples=16)
    plan = make_plan(spec)
    refs = _references(plan)
    pf = perturbed_frame(plan, refs, plan.frames[0], skipping=False)
    ref = refs.refs[refs.frame_ref[0]].point  # the reference point C (decimal strings)
    w, h = spec.size
    with mpmath.workdps(80):
        cr, ci = mpmath.mpf(ref.re), mpmath.mpf(ref.im)
        worst = mpmath.mpf(0)
        for i, j in ((0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1)):
            for o in offsets(16):
                re, im = sample_c(SEAHORSE, "1e-22", spec.size, i, j, o)
                dc = mpmath.hypot(mpmath.mpf(re.numerator) / re.denominator - cr,
                                  mpmath.mpf(im.numerator) / im.denominator - ci)
                worst = max(worst, dc)
        assert float(mpmath.log(worst, 2)) < pf.log2_dc_max


# ----------------------------------------------------------------------------- the farm

ZOOM_DATASETS = ("iterations", "fraction", "distance", "samples/iterations", "samples/fraction",
                 "samples/distance", "histogram", "done", "frame_done", "tiles/crc")


@pytest.fixture(scope="module")
def deep_zoom(tmp_path_factory):
    """(job, reference store) of a 3-frame perturbed zoom (1e-14 to 1e-20 into the
    Seahorse Valley Misiurewicz point) with 4 samples and the distance estimate,
    rendered by `farm render`."""
    root = tmp_path_factory.mktemp("perturbed")
    job = root / "zoom.toml"
    job.write_text(job_text(size=(48, 32), frames=3, width=("1e-14", "1e-20"), tile=(16, 16),
                            max_iter="auto", center=tuple(v[:60] for v in seahorse_point()),
                            samples=N, distance=True))
    ref = root / "reference.h5"
    result = run_farm("render", str(job), "--store", str(ref), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    return job, ref


def _assert_same(a: Path, b: Path) -> None:
    assert_same_datasets(a, b, ZOOM_DATASETS)


def test_perturbed_zoom_through_the_farm_and_its_colour_methods(deep_zoom, tmp_path):
    from PIL import Image

    _, ref = deep_zoom
    with h5py.File(ref) as f:
        assert f["frame_done"][...].all()
        assert f["samples/distance"].shape == (3, 32, 48, N - 1)
        for frame in range(3):
            counts = np.concatenate([f["iterations"][frame].ravel(),
                                     f["samples/iterations"][frame].ravel()])
            bins = f["histogram"].shape[1]
            assert np.array_equal(f["histogram"][frame], np.bincount(counts, minlength=bins))
            escaped = f["iterations"][frame] > 0
            assert escaped.mean() > 0.9 and (np.abs(f["distance"][frame][escaped]) > 0).all()
    for method in ("distance", "shade"):
        out = tmp_path / method
        result = run_farm("frames", str(ref), "--out", str(out), "--method", method)
        assert result.returncode == 0, result.stderr
        pngs = sorted(out.glob("*.png"))
        assert len(pngs) == 3
        rgb = np.asarray(Image.open(pngs[-1]).convert("RGB"), dtype=float)
        assert rgb.shape == (32, 48, 3) and rgb.std() > 10  # a picture, not a flat field


def test_killed_perturbed_render_resumes_to_the_same_store(deep_zoom, tmp_path):
    job, ref = deep_zoom
    store = tmp_path / "s.h5"
    killed = run_farm("render", str(job), "--store", str(store), "--no-video", "--quiet",
                      env={"FARM_TEST_CRASH_AT": "between-datasets:6", "FARM_TEST_TILE_DELAY": "0.02"})
    assert killed.returncode == -signal.SIGKILL
    assert 0 < tiles_done(store) < 3 * 6
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    _assert_same(store, ref)


MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")


@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
def test_perturbed_samples_and_distance_are_bitwise_identical_under_mpi(deep_zoom, tmp_path):
    import subprocess

    job, ref = deep_zoom
    store = tmp_path / "mpi.h5"
    result = subprocess.run([str(MPIEXEC), "-n", "3", sys.executable, "-m", "farm", "render", str(job),
                             "--store", str(store), "--no-video", "--quiet", "--share-devices"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    _assert_same(store, ref)
