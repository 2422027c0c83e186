"""`mpiexec -n N farm encode STORE`: every rank colours and encodes a share of a finished
store's video, rank 0 joins (farm/run/mpi_encode.py); here on two nodes emulated on one
machine (FARM_NODE, each node's ranks under `taskset` on a core of their own)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import SLOW, hold_at, run, run_farm, start, wait_for_tiles

from farm.encode.segments import boundaries
from farm.runtime.media import ffmpeg_binary
from farm.synth.quality import ssim

MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
TASKSET = shutil.which("taskset")
pytestmark = pytest.mark.skipif(MPIEXEC is None or TASKSET is None, reason="no mpiexec or taskset")
FRAMES, FPS, SIZE = 60, 30, (96, 54)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A finished 60-frame zoom, and where its videos go."""
    root = tmp_path_factory.mktemp("mpi-encode")
    (root / "z.toml").write_text(f"""
[view]
center = ["-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"]
width = ["3", "1e-3"]
[image]
size = [{SIZE[0]}, {SIZE[1]}]
[animation]
frames = {FRAMES}
fps = {FPS}
[iterations]
max = 300
[output]
store = "{root / 'z.h5'}"
video = "{root / 'z.mp4'}"
""")
    done = run_farm("render", str(root / "z.toml"), "--no-video", "--quiet")
    assert done.returncode == 0, done.stderr
    return root / "z.h5"


def two_nodes_command(*args: str) -> list[str]:
    """`farm ARGS` as 3 ranks: node a (the master and a worker) on core 0, node b on
    core 1 (or core 0 again on a one-core machine)."""
    last = max(os.sched_getaffinity(0))
    farm = [sys.executable, "-m", "farm", *args]
    return [MPIEXEC, "-n", "2", "-env", "FARM_NODE", "a", TASKSET, "-c", "0", *farm, ":",
            "-n", "1", "-env", "FARM_NODE", "b", TASKSET, "-c", str(last), *farm]


def two_nodes(*args: str) -> subprocess.CompletedProcess:
    return run(two_nodes_command(*args), timeout=900)


def frame_table(video: Path) -> list[tuple[int, str]]:
    """Each decoded frame's presentation time (in the stream's time base) and the MD5 of
    its pixels, in order (ffmpeg's framemd5)."""
    text = subprocess.run([ffmpeg_binary(), "-v", "error", "-i", str(video), "-map", "0:v:0",
                           "-f", "framemd5", "-"], capture_output=True, text=True, check=True).stdout
    rows = [line.split(",") for line in text.splitlines() if line and not line.startswith("#")]
    return [(int(r[2]), r[5].strip()) for r in rows]


def decoded(video: Path) -> np.ndarray:
    w, h = SIZE
    raw = subprocess.run([ffmpeg_binary(), "-v", "error", "-i", str(video), "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3)


def test_ranks_on_two_nodes_give_one_encoders_video(store, tmp_path):
    """Lossless (CRF 0): the 3-rank video decodes to exactly the frames and timestamps of
    one process's, every frame once and in order; the segments' streams are gone."""
    one, three = tmp_path / "one.mp4", tmp_path / "three.mp4"
    single = run_farm("encode", str(store), "--video", str(one), "--crf", "0")
    assert single.returncode == 0, single.stderr
    shared = two_nodes("encode", str(store), "--video", str(three), "--crf", "0")
    assert shared.returncode == 0, shared.stderr
    assert shared.stderr.count("farm: wrote") == 1  # rank 0 says it, once
    want, got = frame_table(one), frame_table(three)
    assert len(got) == FRAMES
    pts = [p for p, _ in got]
    assert pts == sorted(set(pts)) and len(set(np.diff(pts))) == 1  # one frame each tick
    assert got == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.mp4", "three.mp4"]


def test_a_join_looks_like_the_frames_beside_it(store, tmp_path):
    """At the default CRF, the frames on both sides of each join are as close to the
    source frames as the frames around them (SSIM against the farm's PNGs)."""
    video, pngs = tmp_path / "v.mp4", tmp_path / "png"
    shared = two_nodes("encode", str(store), "--video", str(video))
    assert shared.returncode == 0, shared.stderr
    assert run_farm("frames", str(store), "--out", str(pngs)).returncode == 0
    from PIL import Image

    source = [np.asarray(Image.open(p).convert("RGB")) for p in sorted(pngs.glob("*.png"))]
    frames = decoded(video)
    assert len(frames) == len(source) == FRAMES
    score = [ssim(a, b) for a, b in zip(frames, source, strict=True)]
    cuts = boundaries(FRAMES, 3, FPS)[1:-1]
    assert len(cuts) == 2
    inside = np.median([s for f, s in enumerate(score) if all(abs(f - c) > 2 for c in cuts)])
    for c in cuts:
        for f in (c - 1, c):
            assert score[f] > inside - 0.02, (f, score[f], inside)


def test_bad_input_under_mpiexec_is_one_line_from_the_master(store, tmp_path):
    shared = two_nodes("encode", str(store), "--video", str(tmp_path / "v.mp4"), "--palette", "nope.json")
    assert shared.returncode == 2, shared.stderr
    assert len(re.findall(r"^farm: ", shared.stderr, re.M)) == 1, shared.stderr
    job = tmp_path / "bad.toml"  # a job every rank reads: rank 0 alone says what is wrong
    job.write_text((store.parent / "z.toml").read_text().replace("frames = ", "frames = -"))
    render = two_nodes("render", str(job), "--share-devices")
    assert render.returncode == 2, render.stderr
    assert re.findall(r"^farm: .*", render.stderr, re.M) == [
        f"farm: {job}: animation.frames: -{FRAMES} is out of range: 1 to 100000"], render.stderr


def test_a_render_on_two_nodes_makes_its_video_on_both(store, tmp_path):
    """`farm render` on ranks of more than one node makes the video on every worker's
    node, a share each, while the frames render (not on the master's host alone): the
    same frames and timestamps as one process's video, at CRF 0."""
    job = tmp_path / "z.toml"
    job.write_text((store.parent / "z.toml").read_text()
                   .replace(str(store.parent / "z.h5"), str(tmp_path / "nodes.h5"))
                   .replace(str(store.parent / "z.mp4"), str(tmp_path / "nodes.mp4"))
                   + "crf = 0\n")
    nodes = two_nodes("render", str(job), "--share-devices")
    assert nodes.returncode == 0, nodes.stderr
    assert "video shares: rank 1" in nodes.stderr and "rank 2" in nodes.stderr, nodes.stderr
    assert "rank 0 frames" not in nodes.stderr  # the master writes; its node's worker encodes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nodes.h5", "nodes.mp4", "z.toml"]
    one = tmp_path / "one.mp4"
    assert run_farm("encode", str(tmp_path / "nodes.h5"), "--video", str(one)).returncode == 0
    assert frame_table(tmp_path / "nodes.mp4") == frame_table(one)
    again = two_nodes("render", str(job), "--share-devices")  # complete, its video in place
    assert again.returncode == 0 and "nothing to do" in again.stderr, again.stderr


def test_an_interrupted_render_on_two_nodes_leaves_no_video_and_resumes(store, tmp_path):
    """Stopped mid-way (SIGUSR1 to mpiexec, the master held once 20 tiles are stored),
    the nodes drop their shares: no video, no segment or partial file beside it. A resume
    on two nodes makes the video, equal to one process's."""
    job = tmp_path / "z.toml"
    job.write_text((store.parent / "z.toml").read_text()
                   .replace(str(store.parent / "z.h5"), str(tmp_path / "nodes.h5"))
                   .replace(str(store.parent / "z.mp4"), str(tmp_path / "nodes.mp4"))
                   + "crf = 0\n")
    proc = start(two_nodes_command("render", str(job), "--share-devices"), stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True, env={**os.environ, **SLOW, **hold_at(20)})
    wait_for_tiles(proc, tmp_path / "nodes.h5", 20)
    assert proc.poll() is None, "the render ended before the signal"
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nodes.h5", "z.toml"]
    resumed = two_nodes("resume", str(tmp_path / "nodes.h5"), "--share-devices")
    assert resumed.returncode == 0, resumed.stderr
    one = tmp_path / "one.mp4"
    assert run_farm("encode", str(tmp_path / "nodes.h5"), "--video", str(one)).returncode == 0
    assert frame_table(tmp_path / "nodes.mp4") == frame_table(one)


def test_a_film_too_short_for_every_node_still_gets_its_video(store, tmp_path):
    """Five frames make one segment (none is shorter than three frames): on two nodes one
    worker has no share of the video, and still answers the master (it used to be left
    out of the master's call for the shares' reports). The video has its five frames."""
    job = tmp_path / "short.toml"
    job.write_text((store.parent / "z.toml").read_text()
                   .replace(str(store.parent / "z.h5"), str(tmp_path / "short.h5"))
                   .replace(str(store.parent / "z.mp4"), str(tmp_path / "short.mp4"))
                   .replace(f"frames = {FRAMES}", "frames = 5"))
    nodes = two_nodes("render", str(job), "--share-devices")
    assert nodes.returncode == 0, nodes.stderr
    assert "video shares: rank 1 5 frames" in nodes.stderr and "rank 2" not in nodes.stderr, nodes.stderr
    assert len(frame_table(tmp_path / "short.mp4")) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["short.h5", "short.mp4", "short.toml"]
