"""The expmap method's plan (farm/plan/units.py): units, their tiles, their limits and
formats, which video frames are ready, the spec keys and `farm validate`."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from conftest import job_text, run_farm

from farm import spec as specmod
from farm.errors import SpecError
from farm.plan import make_plan, precision
from farm.plan.units import CENTRE, EMPTY, SEGMENT, STRIP


def expmap_text(oversample: float | None = None, **kw) -> str:
    line = 'method = "expmap"' + ("" if oversample is None else f"\noversample = {oversample}")
    return job_text(**kw).replace("fps = 10", "fps = 10\n" + line)


def expmap_spec(**kw) -> specmod.JobSpec:
    return specmod.parse_text(expmap_text(**kw), name="test")


def zoom_plan(size=(160, 90), width=("0.02", "0.00015625"), frames=211, tile=(64, 32), **kw):
    return make_plan(expmap_spec(size=size, width=width, frames=frames, tile=tile, **kw))


def test_spec_keys_defaults_and_errors():
    plain = specmod.parse_text(job_text())
    assert plain.animation.method == "frames" and plain.animation.oversample == 1.0
    spec = expmap_spec(oversample=1.5)
    assert spec.animation.method == "expmap" and spec.animation.oversample == 1.5
    assert specmod.parse_text(specmod.canonical_text(spec)) == spec
    assert specmod.pixel_identity(spec) != specmod.pixel_identity(expmap_spec())  # resume refuses
    with pytest.raises(SpecError) as err:
        specmod.parse_text(job_text().replace("fps = 10", 'fps = 10\nmethod = "strips"'))
    assert err.value.field == "animation.method"
    with pytest.raises(SpecError) as err:
        expmap_spec(oversample=0.1)
    assert err.value.field == "animation.oversample"
    with pytest.raises(SpecError) as err:
        make_plan(expmap_spec(precision="fp128"))
    assert err.value.field == "render.precision" and "perturbation" in err.value.message
    with pytest.raises(SpecError) as err:
        make_plan(expmap_spec(size=(1, 40)))
    assert err.value.field == "image.size"


def test_units_cover_the_strip_and_the_centre_image_once():
    plan = zoom_plan()
    layout = plan.layout
    g = layout.geom
    assert len(plan.frames) == layout.count and len(plan.video_frames) == 211
    assert (plan.grid.width, plan.grid.height) == (g.angles, g.rows_per_octave)
    strip = np.zeros((g.rows, g.angles), np.int64)
    centre = np.zeros(g.centre_size[::-1], np.int64)
    for u in range(layout.count):
        assert layout.unit_pixels(u) == sum(layout.region(u, t).pixels for t in range(plan.grid.count))
        for t in range(plan.grid.count):
            r = layout.region(u, t)
            tile = plan.grid.tile(t)
            assert r.width <= tile.width and r.height <= tile.height
            if r.kind == STRIP:
                assert layout.units[u].kind == SEGMENT and r.x0 == tile.x0
                strip[r.y0:r.y0 + r.height, r.x0:r.x0 + r.width] += 1
            elif r.kind == CENTRE:
                centre[r.y0:r.y0 + r.height, r.x0:r.x0 + r.width] += 1
            else:
                assert r.kind == EMPTY and r.pixels == 0
    assert (strip == 1).all() and (centre == 1).all()
    assert plan.pixels == g.strip_pixels + g.centre_pixels
    assert plan.frame_pixels == 211 * 160 * 90


def test_unit_order_limits_and_formats():
    """A zoom in renders its outermost octave first and the centre image last; a unit's
    limit is the largest of the frames reading it; segments are perturbed, the centre
    image is f64 while its spacing allows; spacings halve from segment to segment."""
    plan = make_plan(expmap_spec(size=(96, 54), width=("4", "1e-14"), frames=200, max_iter="auto",
                                 tile=(64, 32)))
    layout = plan.layout
    kinds = [u.kind for u in layout.units]
    segs = [u.number for u in layout.units if u.kind == SEGMENT]
    assert kinds == [SEGMENT] * len(segs) + [CENTRE] * (len(kinds) - len(segs))
    assert segs == sorted(segs, reverse=True) and segs[-1] == 0
    for u, unit in enumerate(plan.frames):
        readers = layout.frames_of_unit(u)
        assert unit.max_iter == max(plan.video[k].max_iter for k in readers)
        f64_ok = unit.log10_spacing >= math.log10(precision.MIN_SPACING["f64"])
        want = "f64" if layout.units[u].kind == CENTRE and f64_ok else "perturb"
        assert unit.precision == want
    spacings = [f.log10_spacing for f, unit in zip(plan.frames, layout.units, strict=True)
                if unit.kind == SEGMENT]
    assert np.allclose(np.diff(spacings), -math.log10(2))
    shallow = zoom_plan()
    assert {f.precision for f, u in zip(shallow.frames, shallow.layout.units, strict=True)
            if u.kind == CENTRE} == {"f64"}
    assert plan.reference_needs() == (max(f.bits for f in plan.frames),
                                      max(f.max_iter for f in plan.frames))


def test_zoom_out_renders_the_centre_first():
    plan = zoom_plan(width=("0.00015625", "0.02"))
    layout = plan.layout
    assert not layout.zoom_in and layout.units[0].kind == CENTRE
    done = np.zeros(layout.count, bool)
    done[list(layout.centre_units) + [layout.unit_of_segment(j) for j in range(7)]] = True
    ready = plan.frames_ready(done)
    assert ready[0] == 0 and np.array_equal(ready, np.arange(len(ready)))


def test_frames_become_ready_in_order_as_units_complete():
    plan = zoom_plan()
    layout = plan.layout
    done = np.zeros(layout.count, bool)
    before = 0
    for u in range(layout.count):
        done[u] = True
        ready = plan.frames_ready(done)
        assert np.array_equal(ready, np.arange(len(ready)))  # a prefix of the video
        assert len(ready) >= before
        before = len(ready)
        for k in ready:  # every unit a ready frame reads is complete
            lo, hi = layout.needs[k]
            assert done[lo:hi].all()
    assert before == 211
    assert plan.frames_ready(np.zeros(layout.count, bool)).size == 0
    # a frame's units: every strip row it reads and, if it reaches it, the centre image
    p = layout.geom.rows_per_octave
    for k in (0, 100, 210):
        lo, hi = layout.needs[k]
        first, stop = layout.geom.frame_rows(k)
        segs = {layout.units[u].number for u in range(lo, hi) if layout.units[u].kind == SEGMENT}
        assert segs == set(range(first // p, (stop - 1) // p + 1))
        assert any(layout.units[u].kind == CENTRE for u in range(lo, hi)) == layout.geom.uses_centre(k)
    # the frames method: a frame is ready when it is complete
    frames = make_plan(specmod.parse_text(job_text(frames=4)))
    assert list(frames.frames_ready(np.array([True, False, True, False]))) == [0, 2]


def test_plan_travels_to_mpi_workers_intact():
    plan = zoom_plan(max_iter="auto", width=("4", "1e-12"), frames=120, size=(64, 36))
    again = pickle.loads(pickle.dumps(plan))
    assert again.frames == plan.frames and again.video == plan.video
    assert again.layout == plan.layout


def test_validate_prints_both_pixel_counts(tmp_path):
    job = tmp_path / "zoom.toml"
    out = f'[output]\nstore = "{tmp_path / "z.h5"}"\nvideo = "{tmp_path / "z.mp4"}"\n'
    job.write_text(expmap_text(size=(320, 180), width=("4", "3.0517578125e-5"), frames=30 * 17 + 1,
                               max_iter="auto", extra=out))
    text = run_farm("validate", str(job))
    assert text.returncode == 0, text.stderr
    assert "method     expmap" in text.stdout and "frame by frame: ratio" in text.stdout
    info = json.loads(run_farm("validate", str(job), "--json").stdout)
    plan = make_plan(specmod.load(job))
    assert info["method"] == "expmap" and info["frames"] == 511
    assert info["pixels"] == plan.pixels and info["frame_pixels"] == 511 * 320 * 180
    assert info["pixel_ratio"] == pytest.approx(plan.pixels / plan.frame_pixels) and info["pixel_ratio"] < 0.1
    assert info["expmap"]["units"] == len(plan.frames)
    assert not (tmp_path / "z.h5").exists()
