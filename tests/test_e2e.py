"""End to end: `farm render` of a tiny job into an MP4, probed; frames and encode."""

from __future__ import annotations

import json

import h5py
import imageio_ffmpeg
import numpy as np
from conftest import run_farm
from PIL import Image


def _probe_independent(path):
    """Frame count and size through imageio-ffmpeg (not the farm's own probe)."""
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    frames = sum(1 for _ in reader)
    return frames, tuple(meta["size"])


def test_render_to_video(tmp_path, write_job):
    job = write_job(size=(48, 32), frames=6, width=("3", "0.05"), tile=(16, 16), max_iter="auto")
    result = run_farm("render", str(job), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    video = tmp_path / "job.mp4"
    assert _probe_independent(video) == (6, (48, 32))
    from farm.encode import probe

    assert probe(video) == (6, 48, 32)
    with h5py.File(tmp_path / "job.h5") as f:  # the store matches its own histograms
        assert f["done"][...].all() and f["frame_done"][...].all()
        for k in range(6):
            want = np.bincount(f["iterations"][k].ravel(), minlength=f["histogram"].shape[1])
            assert np.array_equal(f["histogram"][k], want)

    status = run_farm("status", str(tmp_path / "job.h5"), "--json")
    info = json.loads(status.stdout)
    assert info["complete"] and info["tiles_done"] == info["tiles_total"] == 6 * 6

    again = run_farm("render", str(job), cwd=tmp_path)  # a finished store: harmless
    assert again.returncode == 0, again.stderr

    out = tmp_path / "frames"
    assert run_farm("frames", str(tmp_path / "job.h5"), "--out", str(out)).returncode == 0
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 6 and Image.open(pngs[0]).size == (48, 32)

    other = tmp_path / "slow.mp4"
    enc = run_farm("encode", str(tmp_path / "job.h5"), "--video", str(other), "--fps", "3")
    assert enc.returncode == 0, enc.stderr
    assert _probe_independent(other) == (6, (48, 32))


def test_odd_size_video_is_cropped_to_even(tmp_path, write_job):
    job = write_job(size=(33, 25), frames=2, tile=(16, 16), max_iter=50)
    result = run_farm("render", str(job), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert _probe_independent(tmp_path / "job.mp4") == (2, (32, 24))


def test_changed_spec_is_refused_unless_restart(tmp_path, write_job):
    job = write_job(size=(32, 16), frames=2, tile=(16, 16), max_iter=50)
    assert run_farm("render", str(job), "--no-video", cwd=tmp_path).returncode == 0
    job.write_text(job.read_text().replace("max = 50", "max = 60"))
    refused = run_farm("render", str(job), "--no-video", cwd=tmp_path)
    assert refused.returncode == 2 and "iterations" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    redone = run_farm("render", str(job), "--no-video", "--restart", cwd=tmp_path)
    assert redone.returncode == 0, redone.stderr
    with h5py.File(tmp_path / "job.h5") as f:
        assert f["frames/max_iter"][0] == 60


def test_a_worker_short_of_memory_for_its_slots_renders_with_those_it_has(tmp_path, write_job, monkeypatch,
                                                                        capsys):
    """run_worker makes the renderer's slots past its first beside the first launches;
    where making one fails (the device's memory), it goes on with those it has: the same
    store as a render with every slot, and one line that says so."""
    from conftest import assert_same_datasets

    from farm import cli
    from farm.compute import render

    job = write_job(size=(48, 32), frames=3, width=("3", "0.05"), tile=(16, 16), max_iter=200)
    full, short = tmp_path / "full.h5", tmp_path / "short.h5"
    assert cli.main(["render", str(job), "--store", str(full), "--no-video", "--quiet"]) == 0
    capsys.readouterr()
    make = render.TileRenderer._new_slot

    def scarce(self):
        if len(getattr(self, "_slots", ())) >= 2:
            raise MemoryError("no memory for another slot")
        return make(self)

    monkeypatch.setattr(render.TileRenderer, "_new_slot", scarce)
    assert cli.main(["render", str(job), "--store", str(short), "--no-video", "--quiet"]) == 0
    assert "farm: 2 tile slots, not" in capsys.readouterr().err
    assert_same_datasets(full, short, ["iterations", "fraction", "histogram", "done", "frame_done"])


def test_a_build_ahead_that_fails_leaves_the_render_as_it_was(tmp_path, write_job, monkeypatch):
    """The programs built while the references are computed are only a head start: a
    failure there is not the render's (the renderer builds them itself)."""
    from farm import cli, run
    from farm.run import early_refs

    class Early:  # references being computed elsewhere (none come: the command makes them)
        def take(self, spec):
            return None

        def cancel(self):
            pass

    tried: list[str] = []

    def failing(device, info, plan, shuffle):
        tried.append(len(plan.frames))
        raise RuntimeError("no build ahead")

    monkeypatch.setattr(early_refs, "begin", lambda job: Early())
    monkeypatch.setattr(run, "render_programs_ahead", failing)
    job = write_job(size=(48, 32), frames=2, tile=(16, 16), max_iter=100)
    assert cli.main(["render", str(job), "--no-video", "--quiet"]) == 0
    assert tried  # the builds were tried while the references were being made
    with h5py.File(tmp_path / "job.h5") as f:
        assert f["done"][...].all()
