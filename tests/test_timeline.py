"""Timing curves: [[animation.keys]] waypoints, animation.duration, and the frame widths on
the curve (farm/spec/keys.py, farm/plan/curve.py), in both methods."""

from __future__ import annotations

import math
import pickle
import textwrap
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from conftest import job_text, render_both_methods, run_farm
from expmap_reference import escape, frame_points

from farm import numerics as num
from farm import spec as specmod
from farm.errors import SpecError
from farm.plan import make_plan
from farm.plan.curve import Curve, frame_widths

HEAD = """
[view]
center = ["-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"]
[image]
size = [64, 36]
[animation]
fps = 10
"""


def keyed(*keys: str, head: str = HEAD, extra: str = "") -> specmod.JobSpec:
    """A spec with ``keys`` (each "time, width-or-zoom-line[, interpolation]")."""
    tables = []
    for key in keys:
        parts = [p.strip() for p in key.split(",")]
        lines = [f"time = {parts[0]}", parts[1]]
        if len(parts) > 2:
            lines.append(f'interpolation = "{parts[2]}"')
        tables.append("[[animation.keys]]\n" + "\n".join(lines))
    return specmod.parse_text(textwrap.dedent(head) + extra + "\n".join(tables) + "\n", name="t")


def logs(spec) -> np.ndarray:
    return np.array([float(mpmath.log(w)) for w in frame_widths(spec)])


def test_frames_at_key_times_have_the_keys_widths_exactly():
    spec = keyed('0, width = "4"', '1.5, width = "3e-7"', '2.3, zoom = "7e9"', '4, width = "0.5"')
    widths = frame_widths(spec)
    assert spec.frames == 41  # up to the last key: round(4 * 10) + 1
    assert widths[0] == num.mpf("4") and widths[15] == num.parse("3e-7", num.WIDTH_BITS)
    with num.workprec(num.WIDTH_BITS):
        assert widths[23] == 4 / num.mpf("7e9")  # time 2.3 is frame 23 exactly (decimal times)
    assert widths[40] == num.mpf("0.5")
    assert spec.view.width == ("4", "5.714285714285714285714285714285714285714e-10")  # widest, deepest


def test_two_cubic_keys_ease_in_and_out():
    """Two keys: the film starts and ends at rest, y = y0 + (y1 - y0)(3 s^2 - 2 s^3)."""
    spec = keyed('0, width = "4"', '2, width = "1e-10"')
    got = logs(spec)
    s = np.arange(21) / 20
    want = math.log(4) + (math.log(1e-10) - math.log(4)) * (3 * s**2 - 2 * s**3)
    assert np.abs(got - want).max() < 1e-12
    step = np.diff(got)
    assert abs(step[0]) < 0.1 * abs(step[10]) and abs(step[-1]) < 0.1 * abs(step[10])


def test_steffen_slopes_keep_every_segment_monotone():
    """Uneven keys zooming in, holding (equal widths), zooming out and in again: log width is
    monotone between keys and never leaves their range (no overshoot), and an interior
    slope is Steffen's."""
    widths = ["4", "1e-3", "2e-9", "2e-9", "1e-5", "3e-6", "1e-12"]
    times = ["0", "0.7", "3.1", "4", "4.4", "6", "9.3"]
    spec = keyed(*(f'{t}, width = "{w}"' for t, w in zip(times, widths, strict=True)))
    y = logs(spec)
    key_frames = [round(float(t) * 10) for t in times]
    for a, b, wa, wb in zip(key_frames, key_frames[1:], widths, widths[1:], strict=False):
        seg = y[a:b + 1]
        lo, hi = sorted((math.log(float(wa)), math.log(float(wb))))
        assert seg.min() >= lo - 1e-12 and seg.max() <= hi + 1e-12
        diffs = np.diff(seg)
        assert (diffs <= 1e-15).all() or (diffs >= -1e-15).all()
        if wa == wb:
            assert np.abs(seg - seg[0]).max() < 1e-15  # a still hold
    curve = Curve(spec.animation.keys)
    t, y_k = [float(v) for v in times], [math.log(float(w)) for w in widths]
    d = [(y_k[i + 1] - y_k[i]) / (t[i + 1] - t[i]) for i in range(6)]
    h = [t[i + 1] - t[i] for i in range(6)]
    p = (d[0] * h[1] + d[1] * h[0]) / (h[0] + h[1])
    assert float(curve.m[1]) == pytest.approx(-2 * min(abs(d[0]), abs(d[1]), abs(p) / 2), rel=1e-12)
    assert curve.m[2] == 0 and curve.m[3] == 0 and curve.m[0] == 0  # flat: hold, turning point, start


def test_linear_and_hold_segments():
    spec = keyed('0, width = "1", linear', '2, width = "1e-8", hold', '3, width = "1e-4", cubic',
                 '4, width = "1e-6"')
    y = logs(spec)
    assert np.abs(np.diff(y[:21]) - (math.log(1e-8) / 20)).max() < 1e-12  # constant speed
    assert (y[20:30] == y[20]).all() and y[30] == pytest.approx(math.log(1e-4), abs=1e-12)  # hold, cut
    # the cubic after the hold starts at rest (smoothstep: first step 0.19 of the middle one)
    assert abs(y[31] - y[30]) < 0.25 * abs(y[35] - y[34])


def test_linear_into_cubic_keeps_the_speed_where_it_can():
    spec = keyed('0, width = "1", linear', '1, width = "1e-2"', '3, width = "1e-9"')
    curve = Curve(spec.animation.keys)
    assert float(curve.m[1]) == pytest.approx(math.log(1e-2), rel=1e-12)  # the linear slope
    eps = Fraction(1, 10**9)  # the speed on both sides of the key: no jump
    y = [float(mpmath.log(curve.width(1 + e))) for e in (-eps, 0, eps)]
    assert (y[1] - y[0]) / float(eps) == pytest.approx((y[2] - y[1]) / float(eps), rel=1e-6)


def test_without_keys_the_constant_speed_contract_is_unchanged():
    spec = specmod.parse_text(job_text(width=("4", "1e-20"), frames=30))
    assert frame_widths(spec) == [num.frame_width("4", "1e-20", k, 30) for k in range(30)]
    text = specmod.canonical_text(spec)
    assert "keys" not in text and "audio" not in text and "duration" not in text


def test_existing_jobs_keep_their_canonical_hash():
    """Hashes of the shipped jobs as the code before timelines computed them."""
    want = {"demo": "90a0549d33930ef0", "seahorse": "5921816147438e3f", "deep": "1604715be8085d22",
            "dendrite": "38d293c5933989cc", "seahorse_expmap": "c7562629e887655d"}
    for name, digest in want.items():
        # the demo of those days (to 1e-8) is kept as test data: jobs/demo.toml now ends at 1e-5
        path = "tests/data/demo-2026-11.toml" if name == "demo" else f"jobs/{name}.toml"
        assert specmod.spec_hash(specmod.load(path)) == digest, name


def test_duration_and_frames():
    base = HEAD.replace("[view]", "[view]\nwidth = [\"4\", \"1e-3\"]")
    spec = specmod.parse_text(base + "duration = 2.55\n")
    assert spec.frames == 26 and "duration" not in specmod.canonical_text(spec)
    keys = keyed('0, width = "4"', '3, width = "1e-3"', extra="duration = 5\n")
    assert keys.frames == 50  # the width holds after the last key
    assert frame_widths(keys)[-1] == num.parse("1e-3", num.WIDTH_BITS)
    for text, field in [(base + "duration = 2\nframes = 20\n", "animation.duration"),
                        (base, "animation.frames"), (base + "duration = -1\n", "animation.duration"),
                        (base + 'duration = "song"\n', "animation.duration"),
                        (base + 'duration = "audio"\n', "animation.duration")]:
        with pytest.raises(SpecError) as err:
            specmod.parse_text(text)
        assert err.value.field == field, (text, err.value)


@pytest.mark.parametrize("keys, field, words", [
    (['1, width = "4"', '1, width = "1"'], "animation.keys[1].time", "must be after"),
    (['0, width = "4"\nzoom = "2"'], "animation.keys[0]", "one of them"),
    (['0, width = "4"\nangle = 30', '1, width = "1"'], "animation.keys[1].angle", "is required"),
    (['0, width = "4"\nangle = "30"'], "animation.keys[0].angle", "must be a number of degrees"),
    (['0, width = "4", smooth'], "animation.keys[0].interpolation", "is not one of"),
    (['0, widht = "4"'], "animation.keys[0].widht", "did you mean 'width'"),
    (['0, width = 4'], "animation.keys[0].width", "in a string"),
    (['0, zoom = "1e-9"'], "animation.keys[0].zoom", "absurdly wide"),
    (['-1, width = "4"'], "animation.keys[0].time", "out of range"),
])
def test_bad_keys_name_the_field(keys, field, words):
    with pytest.raises(SpecError) as err:
        keyed(*keys)
    assert err.value.field == field and words in err.value.message, err.value


def test_view_width_with_keys(tmp_path):
    with pytest.raises(SpecError, match=r"view.width: with \[\[animation.keys\]\] the widths come from"):
        keyed('0, width = "4"', '1, width = "1"', head=HEAD.replace("[view]", '[view]\nwidth = ["4", "2"]'))
    job = tmp_path / "job.toml"
    job.write_text(HEAD.replace("[view]", '[view]\nwidth = ["4", "2"]') + '[[animation.keys]]\ntime = 0\n'
                   'width = "4"\nangle = 2\n')
    result = run_farm("validate", str(job))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "view.width: with [[animation.keys]] the widths come from the keys" in result.stderr


def test_same_widths_everywhere():
    """The store's canonical text and the plan sent to MPI workers (pickled as its spec's
    text) give the same widths, bit for bit; with keys, fps is part of the pixels."""
    spec = keyed('0, width = "4"', '1.7, width = "1e-30", linear', '2.2, zoom = "3e12"', '3.9, width = "2"')
    plan = make_plan(spec)
    again = specmod.parse_text(specmod.canonical_text(spec))
    assert again == spec
    assert [f.width for f in make_plan(again).frames] == [f.width for f in plan.frames]
    assert [f.width for f in pickle.loads(pickle.dumps(plan)).frames] == [f.width for f in plan.frames]
    faster = keyed('0, width = "4"', '1.7, width = "1e-30", linear', '2.2, zoom = "3e12"', '3.9, width = "2"',
                   head=HEAD.replace("fps = 10", "fps = 24"), extra="frames = 40\n")
    slower = keyed('0, width = "4"', '1.7, width = "1e-30", linear', '2.2, zoom = "3e12"', '3.9, width = "2"',
                   extra="frames = 40\n")
    diff = specmod.pixel_identity(faster).items() ^ specmod.pixel_identity(slower).items()
    assert {k for k, _ in diff} == {"animation.fps"}


def test_expmap_plan_of_a_zoom_that_holds_and_goes_out():
    spec = keyed('0, width = "0.02"', '1, width = "3e-4"', '1.5, width = "3e-4"', '2.5, width = "0.004"',
                 extra='method = "expmap"\n')
    plan = make_plan(spec)
    depths = plan.layout.geom.depths
    assert depths[10:16] == (0.0,) * 6 and depths[0] > depths[25] > 0  # hold at the deepest
    needs = plan.layout.needs
    assert needs[10] == needs[15] and needs[5] != needs[10]
    assert [float(f.width) for f in plan.video] == [float(w) for w in frame_widths(spec)]


EXPMAP_KEYS = """
[[animation.keys]]
time = 0
width = "0.02"
[[animation.keys]]
time = 1.2
width = "2.5e-4"
[[animation.keys]]
time = 1.8
width = "2.5e-4"
[[animation.keys]]
time = 2.6
width = "3e-3"
interpolation = "linear"
[[animation.keys]]
time = 3
width = "5e-3"
"""


def test_expmap_synthesises_a_zoom_in_hold_and_out_like_the_frames_method(tmp_path):
    """Both methods render the same keyed zoom (in, a still hold, out): the synthesised
    frames agree with the directly rendered ones, and frames of equal width are equal."""
    from farm.store.reader import Store
    from farm.synth.quality import agreement

    center = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
    stores = render_both_methods(tmp_path, EXPMAP_KEYS, center)
    with Store(stores["frames"]) as d, Store(stores["expmap"]) as s:
        assert d.frames == s.frames == 31
        held = [s.raw(k) for k in range(12, 19)]
        for raw in held[1:]:
            assert np.array_equal(raw.iterations, held[0].iterations)
            assert np.array_equal(raw.fraction, held[0].fraction)
        plan = s.plan()
        c = complex(float(center[0]), float(center[1]))
        for k in (0, 6, 12, 21, 27, 30):  # against a quarter-pixel shift (tests/test_expmap_farm.py)
            raw, direct = s.raw(k), (d.iterations(k), d.fraction(k))
            spacing = float(plan.video[k].spacing)
            yard = agreement(direct, escape(frame_points(c + spacing * (0.25 + 0.25j), spacing, 48, 27), 600))
            got = agreement(direct, (raw.iterations, raw.fraction))
            print(k, got["class"], yard["class"], got["median"], yard["median"])
            assert got["class"] >= yard["class"] - 0.005 and got["median"] < 0.01, (k, got, yard)


def test_a_keyed_zoom_resumes_and_renders_under_mpi_bit_for_bit(tmp_path):
    """The plan is a function of the spec: a killed render resumed, and three MPI ranks,
    give the uninterrupted one-process store bit for bit; a store refuses the same keys
    at another fps (other frame times, other widths)."""
    import shutil
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from conftest import assert_same_datasets

    names = ("iterations", "fraction", "histogram", "done", "frame_done")
    text = job_text(size=(48, 27), width=("1", "1"), frames=1, max_iter=300, tile=(16, 16))
    text = text.replace('width = ["1", "1"]\n', "").replace("frames = 1\n", "") + EXPMAP_KEYS
    job = tmp_path / "keyed.toml"
    job.write_text(text)
    ref, killed, mpi = (tmp_path / f"{n}.h5" for n in ("ref", "killed", "mpi"))
    result = run_farm("render", str(job), "--store", str(ref), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    crash = run_farm("render", str(job), "--store", str(killed), "--no-video", "--quiet",
                     env={"FARM_TEST_CRASH_AT": "before-done-flag:60", "FARM_TEST_TILE_DELAY": "0.01"})
    assert crash.returncode == -signal.SIGKILL
    resumed = run_farm("resume", str(killed), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_datasets(killed, ref, names)
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is not None:
        done = subprocess.run([mpiexec, "-n", "3", sys.executable, "-m", "farm", "render", str(job),
                               "--store", str(mpi), "--no-video", "--quiet", "--share-devices"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert_same_datasets(mpi, ref, names)
    job.write_text(text.replace("fps = 10", "fps = 12"))
    refused = run_farm("render", str(job), "--store", str(ref), "--no-video", "--quiet")
    assert refused.returncode == 2 and "animation.fps" in refused.stderr, refused.stderr


def test_validate_lists_the_keys(tmp_path):
    job = tmp_path / "film.toml"
    job.write_text(HEAD + '[[animation.keys]]\ntime = 0\nwidth = "4"\n[[animation.keys]]\ntime = 1.5\n'
                   'zoom = "1e9"\ninterpolation = "linear"\n[[animation.keys]]\ntime = 9\nwidth = "1"\n')
    result = run_farm("validate", str(job))
    assert result.returncode == 0, result.stderr
    assert "timeline   key 0: 0 s (frame 0), width 4, then cubic" in result.stdout
    assert "key 1: 1.5 s (frame 15), width 4e-9, then linear" in result.stdout
    assert "frames     91 at 10 fps" in result.stdout


def test_a_worker_makes_no_more_slots_than_the_job_has_tiles(write_job, monkeypatch):
    """Each slot is device buffers and pinned memory for a tile and its histogram (100 MB
    at 1080p for a deep frame's 10^7 counts); a worker made eleven on a GPU whatever the
    job, 0.5-0.9 s of a one-frame render's set-up. One tile: one slot; more tiles: up
    to the worker's capacity."""
    from farm import cli
    from farm.compute.render import TileRenderer
    from farm.schedule import worker

    made: list[int] = []  # each renderer's slots when it closes
    close = TileRenderer.close
    monkeypatch.setattr(TileRenderer, "close", lambda self: made.append(self.slot_count) or close(self))
    wanted: list[int] = []  # the slots each worker set out to have (made beside its launches)
    grow = worker._grow
    monkeypatch.setattr(worker, "_grow", lambda renderer, slots, stop: wanted.append(slots) or
                        grow(renderer, slots, stop))
    one = write_job("one", size=(32, 18), frames=1, tile=(32, 32))
    assert cli.main(["render", str(one), "--no-video", "--quiet"]) == 0
    assert made == [1] and wanted == [1]
    many = write_job("many", size=(32, 18), frames=6, tile=(32, 32), width=("3", "1"))
    assert cli.main(["render", str(many), "--no-video", "--quiet"]) == 0
    assert wanted[-1] > 1 and 1 <= made[-1] <= wanted[-1]
