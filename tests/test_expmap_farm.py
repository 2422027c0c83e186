"""The expmap method through the real farm: `farm render` of units (polar tiles by
perturbation, centre pieces), frames synthesised by the store reader against the same
zoom rendered frame by frame, kills and resumes, MPI, and the commands.

The measure (farm/synth/quality.py, as in tests/test_expmap_synth.py), per sampled
frame, against the frames method's render of that frame, with a yardstick: the direct
render moved by a quarter pixel (numpy float64, tests/expmap_reference.py, which equals
the farm's f64 kernel on all but chaotic pixels):

* SSIM of the coloured frames at least the yardstick's minus 0.02;
* interior/exterior agreement at least the yardstick's minus 0.005;
* continuous escape time on calm pixels: 99th percentile below 0.02 counts, median
  below 0.005.

Here the strip comes from the perturbation kernel (polar tiles) and the direct frames
from the f64 kernel, so the comparison also checks the polar tiles against another
arithmetic.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest
from conftest import SLOW, assert_same_datasets, run_farm, start, tiles_done, wait_for_tiles
from expmap_reference import escape, frame_points, render_centre, render_strip
from test_expmap_units import expmap_text

from farm.color import cdf, colorize
from farm.errors import StoreError
from farm.plan.units import SEGMENT
from farm.store.reader import Store
from farm.synth.quality import agreement, ssim

CENTER = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
ZOOM = dict(size=(160, 90), center=CENTER, width=("0.02", "0.00015625"), frames=211, max_iter=800)
DATASETS = ("iterations", "fraction", "histogram", "done", "frame_done")


def write(root, name, text):
    path = root / f"{name}.toml"
    out = f'[output]\nstore = "{root / (name + ".h5")}"\nvideo = "{root / (name + ".mp4")}"\n'
    path.write_text(text + out)
    return path, root / f"{name}.h5"


@pytest.fixture(scope="module")
def zoom(tmp_path_factory):
    """(expmap job, its store, frames-method store) of a 7-doubling zoom at 30 frames per
    doubling; units cut into 96x33 tiles (14 slots a unit, some of them filler)."""
    root = tmp_path_factory.mktemp("expmap")
    job, store = write(root, "zoom", expmap_text(tile=(96, 33), **ZOOM))
    direct_job, direct = write(root, "direct", __import__("conftest").job_text(tile=(96, 96), **ZOOM))
    for j in (job, direct_job):
        result = run_farm("render", str(j), "--no-video", "--quiet")
        assert result.returncode == 0, result.stderr
    return job, store, direct


def colour(n, d, hist=None):
    if hist is None:
        hist = np.bincount(n.ravel(), minlength=int(n.max()) + 1)
    return colorize(n, d, cdf(hist), "classic", 3.0)


def test_synthesised_frames_look_like_the_frames_method(zoom):
    _, store, direct = zoom
    center = complex(float(CENTER[0]), float(CENTER[1]))
    rows = []
    with Store(store) as s, Store(direct) as d:
        assert s.frames == d.frames == 211 and s.frame_done().all()
        plan = s.plan()
        for k in sorted(set(range(0, 211, 30)) | {205, 210}):
            n, f = d.iterations(k), d.fraction(k)
            raw = s.raw(k)
            spacing = float(plan.video[k].spacing)
            yard = escape(frame_points(center + spacing * (0.25 + 0.25j), spacing, 160, 90), 800)
            got, ref = agreement((n, f), (raw.iterations, raw.fraction)), agreement((n, f), yard)
            c_direct = colour(n, f, d.histogram(k))
            sim, sim_ref = ssim(c_direct, colour(raw.iterations, raw.fraction, raw.histogram)), \
                ssim(c_direct, colour(*yard))
            rows.append((k, sim, sim_ref, got["class"], ref["class"], got["median"], got["p99"]))
            assert sim >= sim_ref - 0.02, rows[-1]
            assert got["class"] >= ref["class"] - 0.005, rows[-1]
            assert got["p99"] < 0.02 and got["median"] < 0.005, rows[-1]
            assert np.array_equal(raw.histogram[:801], np.bincount(raw.iterations.ravel(), minlength=801))
    print("\nframe, SSIM synth/quarter-pixel, class synth/quarter-pixel, mu median, p99")
    for r in rows:
        print("  {:4d}  {:.3f} {:.3f}  {:.4f} {:.4f}  {:.4f} {:.4f}".format(*r))


def test_units_hold_the_exponential_map(zoom):
    """The stored strip rows and centre image are the points the geometry names: counts
    equal a numpy float64 render of those points except on a few chaotic samples. The
    reader's layout (from the stored frame depths, no mpmath) is the plan's."""
    _, store, _ = zoom
    with Store(store) as s:
        plan = s.plan()
        assert s.layout == plan.layout and s.bins == plan.bins
        g = plan.layout.geom
        center = complex(float(CENTER[0]), float(CENTER[1]))
        s_min = float(plan.s_min)
        strip = s.strip_rows(0, g.rows)
        want = render_strip(g, center, s_min, 800)
        same = strip.iterations == want.iterations
        assert same.mean() > 0.995, same.mean()
        assert np.percentile(np.abs(strip.fraction - want.fraction)[same & (want.iterations > 0)], 99) < 1e-3
        centre, want_c = s.centre_image(), render_centre(g, center, s_min, 800)
        assert (centre.iterations == want_c.iterations).mean() > 0.995
        for u, unit in enumerate(plan.layout.units):  # filler is zero, and counted as such
            data = s.unit("iterations", u)
            stored = np.zeros(data.shape, bool)
            for t in range(plan.grid.count):
                r, tile = plan.layout.region(u, t), plan.grid.tile(t)
                stored[tile.y0:tile.y0 + r.height, tile.x0:tile.x0 + r.width] = True
            assert (data[~stored] == 0).all()
            assert s.file["histogram"][u, 0] == (data == 0).sum()
            if unit.kind == SEGMENT:
                assert stored.all() or unit.number == g.segments - 1  # only the last is partial


def test_commands_on_an_expmap_store(zoom, tmp_path):
    _, store, _ = zoom
    info = json.loads(run_farm("status", str(store), "--json").stdout)
    assert info["method"] == "expmap" and info["complete"] and info["frames_complete"] == 211
    assert info["units_complete"] == info["units"] == len(info["unit_progress"])
    text = run_farm("status", str(store)).stdout
    assert "units" in text and "211/211 ready" in text
    frames = run_farm("frames", str(store), "--out", str(tmp_path / "png"))
    assert frames.returncode == 0, frames.stderr
    assert len(list((tmp_path / "png").glob("*.png"))) == 211
    encoded = run_farm("encode", str(store), "--video", str(tmp_path / "v.mp4"))
    assert encoded.returncode == 0, encoded.stderr
    from farm.encode import probe

    assert probe(tmp_path / "v.mp4") == (211, 160, 90)


def test_export_writes_the_strip_for_zoomasm(zoom, tmp_path):
    pytest.importorskip("OpenEXR")
    from farm.synth.exr import BIAS, INTERIOR, read_exr

    _, store, _ = zoom
    out = run_farm("export", str(store), "--out", str(tmp_path / "exr"), "--stem", "z")
    assert out.returncode == 0, out.stderr
    with Store(store) as s:
        plan = s.plan()
        g = plan.layout.geom
        paths = sorted((tmp_path / "exr").glob("z.*.exr"))
        inner = int(np.ceil(g.l_base))
        assert len(paths) == inner + g.segments
        for j in (0, g.segments - 1):  # file inner + j is segment j, from its unit
            header, ch = read_exr(paths[inner + j])
            unit = plan.layout.unit_of_segment(j)
            _, count = g.segment_rows(j)
            n = s.unit("iterations", unit)[:count]
            assert json.loads(header["zoomfarm"])["segment"] == j
            assert np.array_equal(ch["N"][:count] == INTERIOR, n == 0)
            esc = n > 0
            mu = ch["N"][:count][esc].astype(np.float64) + ch["NF"][:count][esc] - BIAS
            assert np.allclose(mu, n[esc] + s.unit("fraction", unit)[:count][esc], atol=1e-4)
    frames_store = zoom[2]
    refused = run_farm("export", str(frames_store), "--out", str(tmp_path / "no"))
    assert refused.returncode == 2 and "expmap" in refused.stderr and not (tmp_path / "no").exists()


def assert_same(a, b):
    assert_same_datasets(a, b, DATASETS)


@pytest.mark.parametrize("point,count", [("before-done-flag", 135), ("after-histogram-row", 125)])
def test_killed_and_resumed_equals_uninterrupted(zoom, tmp_path, point, count):
    job, ref, _ = zoom
    store = tmp_path / "s.h5"
    # 20 ms a tile: the writer passes the crash point again after `count` flags (154
    # tiles: a busy machine could otherwise batch the rest with the crossing batch)
    killed = run_farm("render", str(job), "--store", str(store), "--no-video", "--quiet",
                      env={"FARM_TEST_CRASH_AT": f"{point}:{count}", "FARM_TEST_TILE_DELAY": "0.02"})
    assert killed.returncode == -signal.SIGKILL
    with Store(store) as s:  # the video frames of the complete units can be read already
        ready = np.flatnonzero(s.frame_done())
        assert np.array_equal(ready, s.plan().frames_ready(s.unit_done()))
        assert 0 < len(ready) < 211  # frame 0 on: the video could be coloured already
        with Store(ref) as r:
            for k in ready[::40]:
                assert np.array_equal(s.raw(int(k)).iterations, r.raw(int(k)).iterations)
        with pytest.raises(StoreError, match="not rendered yet"):
            s.raw(210)
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert_same(store, ref)
    with Store(store) as s, Store(ref) as r:  # this process read the store part-done: what
        for k in (0, 120, 209, 210):          # it kept then must not leak into later frames
            a, b = s.raw(k), r.raw(k)
            assert np.array_equal(a.iterations, b.iterations) and np.array_equal(a.fraction, b.fraction)


def test_killed_at_a_random_moment(zoom, tmp_path):
    job, ref, _ = zoom
    store = tmp_path / "s.h5"
    proc = start([sys.executable, "-m", "farm", "render", str(job), "--store", str(store),
                             "--no-video", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **SLOW})
    try:
        wait_for_tiles(proc, store, 50)
        proc.kill()
    finally:
        proc.wait(timeout=30)
    with h5py.File(ref) as f:
        total = f["done"].size
    assert 50 <= tiles_done(store) < total
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert_same(store, ref)


def test_mpi_store_is_bitwise_identical_to_one_process(zoom, tmp_path):
    from test_mpi import MPIEXEC, mpi_farm

    if MPIEXEC is None:
        pytest.skip("no mpiexec")
    job, ref, _ = zoom
    store = tmp_path / "mpi.h5"
    result = mpi_farm(3, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                      "--share-devices")
    assert result.returncode == 0, result.stderr
    assert_same(store, ref)
    with h5py.File(store) as f:
        assert set(np.unique(f["tiles/rank"][...])) == {1, 2}


def test_engines_agree_through_the_store(zoom):
    """The OpenCL engine (the kernel with its ring of strip rows on the device) and the
    numpy engine (the reference on a host ring) give the same frames bit for bit, and
    each fetches only the rows a frame adds to the window."""
    from farm.compute.synthesis import Synthesis

    _, store, _ = zoom
    with Store(store) as s:
        plan = s.plan()
        host = Synthesis.for_plan(plan, engine="numpy", keep=2)
        dev = Synthesis.for_plan(plan, engine="opencl", keep=2)
        for k in range(0, 211, 3):
            a = host.frame(k, s.strip_rows, s.centre_image)
            b = dev.frame(k, s.strip_rows, s.centre_image)
            for name in ("iterations", "fraction", "histogram"):
                assert np.array_equal(getattr(a, name), getattr(b, name)), (k, name)
        g = plan.layout.geom
        assert host.rows_fetched == dev.rows_fetched < g.rows + max(b - a for a, b in
                                                                    map(g.frame_rows, range(211)))


def recorded_strip(s: Store):
    """(fetched, rows): ``rows(a, b)`` reads strip rows a .. b-1 of the store, and
    ``fetched`` lists each (a, b) it was asked for."""
    fetched: list[tuple[int, int]] = []

    def rows(a: int, b: int):
        fetched.append((a, b))
        return s.strip_rows(a, b)

    return fetched, rows


def segments_read(fetched: list[tuple[int, int]], p: int) -> list[int]:
    """The strip segments (``p`` rows each) the fetches read, once per fetch."""
    return [j for a, b in fetched for j in range(a // p, -(-b // p))]


def test_a_zoom_reads_each_strip_segment_once(zoom):
    """Frames in order read the strip in whole segments (one stored tile high), each
    segment once: a frame adds a few rows, and reading just those decoded every tile
    they cross again, frame after frame."""
    from farm.compute.synthesis import Synthesis

    _, store, _ = zoom
    with Store(store) as s:
        plan = s.plan()
        g = plan.layout.geom
        p = g.rows_per_octave
        fetched, rows = recorded_strip(s)
        syn = Synthesis.for_plan(plan, engine="numpy", keep=2)
        for k in range(s.frames):
            syn.frame(k, rows, s.centre_image)
    assert fetched
    for a, b in fetched:
        assert a % p == 0 and (b % p == 0 or b == g.rows), (a, b, p)
    segments = segments_read(fetched, p)
    assert len(segments) == len(set(segments)), "a segment was read twice"
    assert syn.rows_fetched == sum(b - a for a, b in fetched)


def test_a_zoom_out_reads_each_segment_once_and_synthesises_the_same_frames(tmp_path):
    """A zoom out (frame 0 the deepest) walks the strip outwards: whole segments are
    fetched at the window's top, each once, and the frames equal those of a synthesis
    that starts afresh for every frame (its window filled for that frame alone)."""
    from farm.compute.synthesis import Synthesis

    out = dict(ZOOM, width=ZOOM["width"][::-1])
    job, store = write(tmp_path, "out", expmap_text(tile=(96, 33), **out))
    result = run_farm("render", str(job), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    with Store(store) as s:
        plan = s.plan()
        g = plan.layout.geom
        assert g.depths[0] < g.depths[-1]  # frame 0 the deepest
        p = g.rows_per_octave
        fetched, rows = recorded_strip(s)
        walk = Synthesis.for_plan(plan, engine="numpy", keep=1)
        for k in range(s.frames):
            frame = walk.frame(k, rows, s.centre_image)
            if k % 50 == 0 or k == s.frames - 1:
                fresh = Synthesis.for_plan(plan, engine="numpy", keep=1)
                alone = fresh.frame(k, s.strip_rows, s.centre_image)
                for name in ("iterations", "fraction", "histogram"):
                    assert np.array_equal(getattr(frame, name), getattr(alone, name)), (k, name)
    segments = segments_read(fetched, p)
    assert segments and len(segments) == len(set(segments)), "a segment was read twice"
    assert [a for a, _ in fetched[1:]] == sorted(a for a, _ in fetched[1:])  # outwards


def test_video_segments_keep_their_own_strip_windows(zoom):
    """Two segments of a video coloured at once (FARM_ENCODE_SEGMENTS) read frames at two
    depths in turn. Each sink's reader has its own synthesis, so each reads every strip
    segment at most once; one window shared by both fetched itself anew at every frame
    (a 3180-frame 1080p zoom in 4 segments did not finish within 6 minutes on an H200)."""
    from farm.compute import synthesis as engine

    _, store, _ = zoom
    engine._SHARED.clear()
    with Store(store, own_synthesis=True) as a, Store(store, own_synthesis=True) as b:
        half = a.frames // 2
        for k in range(half):
            a.raw(k)
            b.raw(half + k)
        syn = [a._synthesis(), b._synthesis()]
        rows = a.plan().layout.geom.rows
    assert syn[0] is not syn[1] and not engine._SHARED
    for s in syn:
        assert 0 < s.rows_fetched <= rows
    with Store(store) as c, Store(store) as d:  # other readers share the process's
        assert c._synthesis() is d._synthesis()


def test_an_expmap_video_in_segments_is_the_video_of_one_encoder(zoom, tmp_path):
    """FARM_ENCODE_SEGMENTS on an expmap store: three segments, each synthesising its
    own frames at its own depth at once, join to exactly the frames one encoder makes
    (lossless, CRF 0)."""
    from test_encode import decoded

    from farm.encode import encode_video
    from farm.encode.ffmpeg import VideoSettings

    _, store, _ = zoom
    with Store(store) as s:
        spec, frames = s.spec, s.frames
    videos = [encode_video(store, spec.color, VideoSettings(tmp_path / f"k{k}.mp4", 30, crf=0),
                           progress=False, segments=k) for k in (1, 3)]
    one, three = (decoded(v) for v in videos)
    assert len(one) == frames and one == three


def test_colouring_order_synthesises_each_frame_once(zoom):
    """Colouring reads frame f's histogram when f first enters a smoothing window (f - K)
    and its pixels K frames later, each time through a newly opened store (as the frame
    sink does): the process's synthesis serves the second read from its cache."""
    from farm.compute import synthesis as engine

    _, store, _ = zoom
    engine._SHARED.clear()
    radius, seen = 4, set()
    with Store(store) as s:
        frames, want = s.frames, [s.raw(k).iterations.copy() for k in (0, 100)]
    engine._SHARED.clear()
    for f in range(frames):
        with Store(store) as s:
            for g in range(max(0, f - radius), min(frames, f + radius + 1)):
                if g not in seen:
                    seen.add(g)
                    s.histogram(g)
            raw = s.raw(f)
            if f in (0, 100):
                assert np.array_equal(raw.iterations, want[0 if f == 0 else 1])
    with Store(store) as s:
        synthesis = s._synthesis()
    assert synthesis.synthesised == frames


def test_ready_frames_are_told_once_in_order_as_units_complete():
    """The master's callback (Plan.frame_notifier): each completed unit tells the sink
    the video frames that became ready, each frame once, frame 0 first; the frames
    method passes frames through."""
    from test_expmap_units import zoom_plan

    plan = zoom_plan()
    told: list[int] = []
    done = np.zeros(len(plan.frames), bool)
    done[:2] = True
    notify = plan.frame_notifier(done, told.append)
    for u in range(2, len(plan.frames)):
        notify(u)
        assert told == list(range(len(told)))
        done[u] = True
        assert told == list(plan.frames_ready(done))
    notify(len(plan.frames) - 1)  # a repeat tells nothing new
    assert told == list(range(211))
    frames_plan = __import__("farm.plan", fromlist=["make_plan"]).make_plan(
        __import__("conftest").make_spec(frames=3))
    assert frames_plan.frame_notifier(np.zeros(3, bool), told.append) == told.append


def test_video_made_during_the_render_equals_encode_afterwards(tmp_path):
    """`farm render` of an expmap job colours video frames as their units complete (the
    writer's completed units become ready frames); `farm encode` afterwards decodes to
    the same frames."""
    from test_encode import decoded

    job, store = write(tmp_path, "v", expmap_text(tile=(96, 33), **{**ZOOM, "frames": 61,
                                                                     "width": ("0.02", "0.005")}))
    result = run_farm("render", str(job), "--quiet", env={"FARM_TEST_TILE_DELAY": "0.01"})
    assert result.returncode == 0, result.stderr
    after = tmp_path / "after.mp4"
    result = run_farm("encode", str(store), "--video", str(after))
    assert result.returncode == 0, result.stderr
    during = decoded(tmp_path / "v.mp4")
    assert len(during) == 61 and during == decoded(after)
    with h5py.File(store) as f:
        assert f["runs"][0]["video_frames"] == 61
