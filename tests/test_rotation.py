"""Rotation: each frame's angle (view.angle, animation.turn, angles in [[animation.keys]]) and
turned frames rendered in every format.

The turned pixel mapping (README, farm/numerics/__init__.py): c = centre + s e^(i theta)
(u + i v), u = i + 1/2 - W/2, v = -(j + 1/2 - H/2). Rendered counts are checked against
tests/reference.py's turned_reference_counts, which maps pixels with its own cos and sin
(mpmath, from theta in radians) and iterates in MPFR; a quarter turn of a square view is
checked bit for bit against the unturned frame turned on the screen (the turned path's
exactness at multiples of 90 degrees).
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from fractions import Fraction

import numpy as np
import pytest
from conftest import compare_counts, make_spec, render_channels
from reference import distance_estimate, turned_reference_counts, turned_sample_c

from farm import spec as specmod
from farm.errors import SpecError
from farm.plan import make_plan
from farm.plan.curve import frame_angles, frame_widths
from farm.plan.samples import offsets

HEAD = """
[view]
center = ["-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"]
{view}
[image]
size = [64, 36]
[animation]
fps = {fps}
{animation}
"""
CLASSIC = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
SEAHORSE = ("-0.749525718967526899076284369547895600256399088280799332045540",
            "0.135876731345244117600571502360225831462570615468277546381148")


def job(view: str = 'width = ["4", "1e-6"]', animation: str = "frames = 21", keys: str = "",
        fps: int = 10) -> specmod.JobSpec:
    return specmod.parse_text(textwrap.dedent(HEAD.format(view=view, animation=animation, fps=fps)) + keys)


def angled_keys(*keys: tuple) -> str:
    """[[animation.keys]] tables from (time, width, angle[, interpolation])."""
    out = []
    for key in keys:
        lines = [f"time = {key[0]}", f'width = "{key[1]}"', f"angle = {key[2]}"]
        if len(key) > 3:
            lines.append(f'interpolation = "{key[3]}"')
        out.append("[[animation.keys]]\n" + "\n".join(lines))
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ the angle of each frame
def test_a_constant_turning_speed():
    spec = job(view='width = ["4", "1e-6"]\nangle = 10', animation="frames = 21\nturn = 7.5")
    assert frame_angles(spec) == [10 + Fraction(3, 4) * k for k in range(21)]  # 7.5 deg/s at 10 fps
    again = specmod.parse_text(specmod.canonical_text(spec))
    assert again == spec and frame_angles(again) == frame_angles(spec)
    assert [f.angle for f in make_plan(spec).frames] == frame_angles(spec)
    # decimal numbers are read as written: 0.1 degree a second is 1/100 of a degree a frame
    tenth = job(animation="frames = 3\nturn = 0.1")
    assert frame_angles(tenth) == [0, Fraction(1, 100), Fraction(2, 100)]
    # fps decides the angles of a turning zoom: a store refuses another
    turning = [job(animation="frames = 21\nturn = 7.5", fps=fps) for fps in (10, 12)]
    diff = specmod.pixel_identity(turning[0]).items() ^ specmod.pixel_identity(turning[1]).items()
    assert {k for k, _ in diff} == {"animation.fps"}
    still = [job(fps=fps) for fps in (10, 12)]  # without a turn or keys, fps is no pixel matter
    assert specmod.pixel_identity(still[0]) == specmod.pixel_identity(still[1])


def test_without_rotation_the_canonical_text_is_unchanged():
    text = specmod.canonical_text(job())
    assert "angle" not in text and "turn" not in text
    assert all(f.angle == 0 and not f.rotated for f in make_plan(job()).frames)
    keys = angled_keys((0, "4", 0), (1, "1e-3", 0)).replace("angle = 0\n", "")
    keyed = job(view="", animation="", keys=keys)
    assert "angle" not in specmod.canonical_text(keyed)


def test_keyed_angles_follow_the_timeline():
    """Angles on the widths' timeline, in plain degrees: key frames at the keys' angles
    exactly, a linear segment at a constant speed, a hold, and cubic segments eased as
    the widths are (two cubic keys: smoothstep), never beyond their keys."""
    spec = job(view="", animation="", keys=angled_keys(
        (0, "4", 0, "linear"), (1, "1e-2", 90), (2, "1e-4", -45, "hold"), (3, "1e-6", 30),
        (4.5, "1e-9", 400)))
    angles = frame_angles(spec)
    assert spec.frames == 46 and spec.view.angle == 0
    assert [angles[k] for k in (0, 10, 20, 30, 45)] == [0, 90, -45, 30, 400]
    assert angles[:11] == [Fraction(9 * k) for k in range(11)]  # linear: 9 degrees a frame
    assert angles[20:30] == [-45] * 10  # hold, then the cut at 3 s
    s = np.arange(16) / 15  # the last cubic segment from rest to rest: smoothstep
    want = 30 + 370 * (3 * s**2 - 2 * s**3)
    assert np.abs(np.array([float(a) for a in angles[30:46]]) - want).max() < 1e-9
    seg = np.array([float(a) for a in angles[10:21]])  # 90 -> -45: monotone, within the keys
    assert (np.diff(seg) <= 0).all() and seg.min() >= -45 and seg.max() <= 90
    assert all(isinstance(a, Fraction) for a in angles)
    # the widths' curve is the one without angles
    plain = job(view="", animation="", keys=angled_keys(
        (0, "4", 0, "linear"), (1, "1e-2", 0), (2, "1e-4", 0, "hold"), (3, "1e-6", 0),
        (4.5, "1e-9", 0)).replace("angle = 0\n", ""))
    assert frame_widths(spec) == frame_widths(plain)
    assert [f.angle for f in make_plan(spec).frames] == angles


@pytest.mark.parametrize("view, animation, keys, field, words", [
    ("", "", angled_keys((0, "4", 0), (1, "1", 30)).replace("angle = 0\n", ""),
     "animation.keys[0].angle", "is required"),
    ("angle = 5", "", angled_keys((0, "4", 0), (1, "1", 30)), "view.angle", "the keys give the angle"),
    ("", "turn = 1", angled_keys((0, "4", 0), (1, "1", 30)), "animation.turn", "the keys give the angle"),
    ('width = "4"\nangle = "30"', "frames = 2", "", "view.angle", "must be a number of degrees"),
    ('width = "4"', "frames = 2\nturn = true", "", "animation.turn", "must be a number of degrees"),
    ('width = "4"\nangle = 1e10', "frames = 2", "", "view.angle", "out of range"),
])
def test_bad_rotation_names_the_field(view, animation, keys, field, words):
    with pytest.raises(SpecError) as err:
        job(view=view, animation=animation, keys=keys)
    assert err.value.field == field and words in err.value.message, err.value


# ------------------------------------------------------------------ turned frames rendered
CASES = [  # format, centre, width, max_iter, angle
    ("f64", ("-0.75", "0.1"), "2.7", 300, 30),
    ("fp128", SEAHORSE, "1e-18", 2000, 117.5),
    ("quad-single", SEAHORSE, "1e-18", 2000, -50),
    ("perturb", SEAHORSE, "1e-30", 3000, 200),
]


def _turned(fmt, center, width, max_iter, angle, size=(24, 16), samples=1, distance=False):
    spec = make_spec(size=size, center=center, width=(width, width), max_iter=max_iter,
                     tile=(16, 16), precision=fmt, samples=samples, distance=distance)
    return make_plan(dataclasses.replace(spec, view=dataclasses.replace(spec.view, angle=float(angle))))


@pytest.mark.parametrize("fmt, center, width, max_iter, angle", CASES, ids=[c[0] for c in CASES])
def test_turned_frames_match_the_reference(cl_device, fmt, center, width, max_iter, angle):
    plan = _turned(fmt, center, width, max_iter, angle)
    assert plan.frames[0].rotated and plan.frames[0].precision == fmt
    refs = plan.references() if fmt == "perturb" else None
    out, _ = render_channels(cl_device, plan, references=refs)
    want = turned_reference_counts(center, width, (24, 16), angle, max_iter)
    assert len(np.unique(want)) > 20, "the view must have structure that a wrong turn would move"
    compare_counts(out["iterations"], want, min_equal=0.99)
    if fmt == "perturb":  # also the GPUs' variant: one pixel a work-item, in 8x4 blocks
        from farm.compute.launch import LaunchConfig

        gpu_like = LaunchConfig(local_size=32, lanes=1, min_skip_level=3, interior=False, pixel_blocks=True)
        out, _ = render_channels(cl_device, plan, config=gpu_like, references=refs)
        compare_counts(out["iterations"], want, min_equal=0.99)


QUARTER = {"f64": (("-0.75", "0.1"), "2.5"), "fp128": (("-0.75", "0.1"), "2.5"),
           "quad-single": (("-0.75", "0.1"), "2.5"), "perturb": (CLASSIC, "1e-10"),
           "perturb-floatexp": (("0", "1"), "1e-320")}  # c = i: structure at any depth


@pytest.mark.parametrize("case", list(QUARTER))
def test_a_quarter_turn_is_the_frame_turned_on_the_screen(cl_device, case):
    """A square view turned by 90 degrees shows the unturned frame turned clockwise, bit
    for bit (the pixel centres' counts and smooth offsets, here with 4 samples a pixel
    for the turned axes' layout), and its distance estimate turned with it (DEX, DEY
    stay in the frame's own image axes)."""
    fmt = case.removesuffix("-floatexp")
    center, width = QUARTER[case]
    args = (fmt, center, width, 1500, 0)
    unturned = _turned(*args, size=(20, 20), samples=4, distance=True)
    turned = _turned(*args[:4], 90, size=(20, 20), samples=4, distance=True)
    refs = [p.references() if fmt == "perturb" else None for p in (unturned, turned)]
    a, _ = render_channels(cl_device, unturned, references=refs[0])
    b, _ = render_channels(cl_device, turned, references=refs[1])
    assert len(np.unique(a["iterations"])) > 10
    for name in ("iterations", "fraction"):
        assert np.array_equal(b[name], np.rot90(a[name], -1)), name
    assert (np.abs(a["distance"]) > 0).mean() > 0.5
    assert np.array_equal(b["distance"], np.rot90(a["distance"], -1) * 1j)  # DEX + i DEY turned by 90


def test_turned_samples_and_distance_match_the_reference(cl_device):
    """Samples sit at their offsets in the turned pixel (they turn with it), and the
    distance estimate points away from the set in the turned frame's image axes:
    e^(i theta) times the unturned axes' conj(z ln|z| / (s dz/dc))."""
    center, width, max_iter, angle = ("-0.743643887037158704752191506114774",
                                      "0.131825904205311970493132056385139"), "1.3e-4", 1200, 33
    plan = _turned("f64", center, width, max_iter, angle, samples=4, distance=True)
    out, _ = render_channels(cl_device, plan)
    spacing = Fraction(width) / 24
    turn = complex(math.cos(math.radians(angle)), math.sin(math.radians(angle)))
    errors, counts = [], []
    for j in range(0, 16, 2):
        for i in range(0, 24, 3):
            for k in (0, 2):
                re, im = turned_sample_c(center, width, (24, 16), angle, i, j, offsets(4)[k])
                n, want = distance_estimate(re, im, max_iter, spacing)
                got_n = out["iterations"][j, i] if k == 0 else out["samples/iterations"][j, i, k - 1]
                got = complex(out["distance"][j, i] if k == 0 else out["samples/distance"][j, i, k - 1])
                counts.append(got_n == n)
                if got_n == n and n:
                    errors.append(abs(got - want * turn) / abs(want))
    assert np.mean(counts) >= 0.95 and len(errors) > 40
    assert np.median(errors) < 1e-5 and np.quantile(errors, 0.95) < 1e-3, np.quantile(errors, [0.5, 0.95])


# ------------------------------------------------------------------ expmap: turned synthesis
def _turned_zoom():
    """A 2-octave zoom into a spiral of 61 frames at 48x27, each frame turned 5 degrees
    further (and one frame a quarter turn), with its strip and centre image (unturned:
    a turn only moves where synthesis reads them)."""
    from expmap_reference import render_centre, render_strip

    from farm.plan.expmap import make_geometry, zoom_depths

    turns = [Fraction(5 * k, 360) for k in range(61)]
    turns[40] = Fraction(1, 4)
    geom = make_geometry(48, 27, zoom_depths(61, 2.0), turns=turns)
    center, s_min, max_iter = complex(-0.7746806106269039, -0.1374168856037867), 0.01 / 4 / 48, 1200
    return geom, center, s_min, max_iter, render_strip(geom, center, s_min, max_iter), \
        render_centre(geom, center, s_min, max_iter)


def test_turned_expmap_frames_look_like_turned_direct_renders():
    """Synthesised turned frames against turned frames rendered directly (numpy float64,
    the same arithmetic as the strip's): as close as a quarter-pixel shift of the direct
    render is to itself, in the strip, the centre image and the band between."""
    from expmap_reference import escape

    from farm.synth import pixel_offsets, synthesize_arrays
    from farm.synth.quality import agreement

    geom, center, s_min, max_iter, strip, centre = _turned_zoom()
    u, v = pixel_offsets(48, 27)
    for k in (0, 20, 40, 52, 60):
        spacing = s_min * 2.0 ** geom.depths[k]
        turn = np.exp(2j * np.pi * float(geom.turn(k)))
        direct = escape(center + spacing * turn * (u + 1j * v), max_iter)
        yard = escape(center + spacing * turn * (u + 0.25 + 1j * (v - 0.25)), max_iter)
        s = synthesize_arrays(geom, k, strip, centre, max_iter)
        got, ref = agreement(direct, (s["iterations"], s["fraction"])), agreement(direct, yard)
        assert got["class"] >= ref["class"] - 0.005, (k, got, ref)
        assert got["median"] < 0.005, (k, got)
        if k:  # the unturned frame is another picture
            unturned = escape(center + spacing * (u + 1j * v), max_iter)
            wrong = agreement(unturned, (s["iterations"], s["fraction"]))
            assert wrong["median"] > 20 * max(got["median"], 0.001), (k, wrong, got)


def test_turned_synthesis_on_the_device_is_the_numpy_reference(cl_device):
    """The OpenCL synthesis of turned frames (strip columns shifted, centre image read
    turned, distance turned) equals the numpy reference: counts and offsets bit for bit,
    distance within float32 rounding (as unturned frames)."""
    from farm.compute.synth import FrameSynthesizer
    from farm.synth import Raster, synthesize_arrays

    geom = _turned_zoom()[0]
    rng = np.random.default_rng(7)
    n = rng.integers(0, 40, (geom.rows, geom.angles)).astype(np.uint32)
    noise = rng.standard_normal(n.shape) + 1j * rng.standard_normal(n.shape)
    strip = Raster(n, rng.random(n.shape, np.float32), 0, noise.astype(np.complex64))
    wc, hc = geom.centre_size
    cn = rng.integers(0, 40, (hc, wc)).astype(np.uint32)
    centre = Raster(cn, rng.random(cn.shape, np.float32), 0,
                    (rng.standard_normal(cn.shape) + 1j * rng.standard_normal(cn.shape)).astype(np.complex64))
    info, dev = cl_device
    syn = FrameSynthesizer(dev, info, geom, 41, distance=True)
    syn.set_centre(centre)
    for k in (0, 17, 40, 60):
        first, stop = geom.frame_rows(k)
        syn.ensure_rows(first, stop, lambda a, b: Raster(n[a:b], strip.fraction[a:b], a, strip.distance[a:b]))
        got, want = syn.synthesize(k, 40), synthesize_arrays(geom, k, strip, centre, 40)
        assert np.array_equal(got["iterations"], want["iterations"]), k
        assert np.array_equal(got["fraction"], want["fraction"]), k
        assert np.allclose(got["distance"], want["distance"], rtol=1e-5, atol=1e-6), k
    # an unturned frame's distance stays in the sources' axes; a turned one's turns with it
    plain = dataclasses.replace(geom, turns=())
    a, b = synthesize_arrays(plain, 40, strip, centre, 40), synthesize_arrays(geom, 40, strip, centre, 40)
    assert not np.array_equal(a["iterations"], b["iterations"])


TURNING_KEYS = angled_keys((0, "0.02", -20), (1.2, "2.5e-4", 100), (1.8, "2.5e-4", 100, "linear"),
                           (2.4, "3e-3", 190))


def test_a_turning_zoom_renders_alike_in_both_methods(tmp_path):
    """The same keyed zoom with keyed angles (turning while zooming in, a still hold,
    then turning at a constant speed while zooming out), rendered by both methods
    through `farm render`: the synthesised frames agree with the directly rendered
    turned frames as a quarter-pixel shift does, held frames are equal, and both
    stores' plans give every video frame its angle."""
    from conftest import render_both_methods
    from expmap_reference import escape

    from farm.store.reader import Store
    from farm.synth import pixel_offsets
    from farm.synth.quality import agreement

    center = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
    stores = render_both_methods(tmp_path, TURNING_KEYS, center)
    u, v = pixel_offsets(48, 27)
    c = complex(float(center[0]), float(center[1]))
    with Store(stores["frames"]) as d, Store(stores["expmap"]) as s:
        assert d.frames == s.frames == 25
        plan = s.plan()
        angles = [f.angle for f in plan.video]
        assert angles == [f.angle for f in d.plan().frames]
        assert (angles[0], angles[12], angles[18], angles[24]) == (-20, 100, 100, 190)
        assert np.array_equal(s.raw(12).fraction, s.raw(17).fraction)  # the still hold
        for k in (0, 6, 12, 15, 21, 24):
            spacing = float(plan.video[k].spacing)
            turn = np.exp(1j * math.radians(float(angles[k])))
            direct = (d.iterations(k), d.fraction(k))
            yard = agreement(direct, escape(c + spacing * turn * (u + 0.25 + 1j * (v - 0.25)), 600))
            raw = s.raw(k)
            got = agreement(direct, (raw.iterations, raw.fraction))
            assert got["class"] >= yard["class"] - 0.005 and got["median"] < 0.01, (k, got, yard)


def test_preview_and_validate_show_the_angles(tmp_path):
    """farm preview renders each picked frame at its angle; farm validate lists them."""
    from conftest import run_farm

    from farm.film.preview import picks, preview_spec

    for spec in (job(view='width = ["4", "1e-3"]\nangle = 10', animation="frames = 31\nturn = 45"),
                 job(view="", animation="", keys=TURNING_KEYS)):
        chosen = picks(spec)
        angles = frame_angles(spec)
        assert [p.angle for p in chosen] == [float(angles[p.frame]) for p in chosen]
        small = preview_spec(spec, chosen, tmp_path)
        assert [float(a) for a in frame_angles(small)] == [p.angle for p in chosen]
    path = tmp_path / "turning.toml"
    path.write_text(textwrap.dedent(HEAD.format(view='width = ["4", "1e-3"]\nangle = 10', fps=10,
                                                animation="frames = 31\nturn = 45")))
    result = run_farm("validate", str(path))
    assert result.returncode == 0, result.stderr
    assert "rotation   10 deg at frame 0, turning 45 deg/s (counter-clockwise) to 145 deg" in result.stdout
    path.write_text(textwrap.dedent(HEAD.format(view="", fps=10, animation="")) + TURNING_KEYS)
    result = run_farm("validate", str(path))
    assert "key 1: 1.2 s (frame 12), width 2.5e-4, angle 100 deg, then cubic" in result.stdout, result.stdout


@pytest.mark.parametrize("up", [True, False])
def test_a_rotated_kf_location_renders_kfs_picture(tmp_path, up):
    """`farm render` of a .kfr with RotateAngle (with and without ImagPointsUp): the last
    frame's counts are those of the points KF puts at the same pixels (its pixel mapping
    transcribed from its sources, tests/test_locations.py), iterated in MPFR."""
    from conftest import run_farm
    from reference import escape_count_mpfr
    from test_locations import source_pixel

    from farm.film import locations
    from farm.store.reader import Store

    re, im, zoom = "-0.7436438870371587", "0.1318259042053120", "3000"
    (tmp_path / "spot.kfr").write_text("\r\n".join([
        f"Re: {re}", f"Im: {im}", f"Zoom: {zoom}", "Iterations: 400", "RotateAngle: 37.5",
        *(["ImagPointsUp: 1"] if up else []), ""]))
    store = tmp_path / "spot.h5"
    result = run_farm("render", str(tmp_path / "spot.kfr"), "--frames", "2", "--size", "32x18",
                      "--max-iter", "source", "--no-video", "--quiet", "--store", str(store))
    assert result.returncode == 0, result.stderr
    with Store(store) as s:
        got = s.iterations(1)
        assert s.spec.view.angle == -37.5
    want = np.array([[escape_count_mpfr(*source_pixel(locations.KF, re, im, zoom, (32, 18), i, j, 37.5, up),
                                        400) for i in range(32)] for j in range(18)])
    assert len(np.unique(want)) > 20
    compare_counts(got, want, min_equal=0.99)


def test_the_prepass_grid_turns_with_the_frame():
    """max = "auto" samples a turned frame's own points (farm/plan/prepass.py)."""
    from farm.plan import prepass

    dr, di = prepass.grid_offsets((64, 36), 0.5)
    qr, qi = prepass.grid_offsets((64, 36), 0.5, (0.0, 1.0))  # a quarter turn: (-di, dr)
    assert np.array_equal(qr, -di) and np.array_equal(qi, dr)
    c, s = math.cos(0.4), math.sin(0.4)
    tr, ti = prepass.grid_offsets((64, 36), 0.5, (c, s))
    assert np.allclose(tr + 1j * ti, (dr + 1j * di) * complex(c, s), rtol=0, atol=1e-16)
