"""The store is the checkpoint: kills, signals and resumes end bitwise identical.

Each test renders the same small zoom once without interruption (the reference),
then interrupts another render of it (SIGKILL inside each step of the store's write
order, SIGKILL at random moments, SIGTERM/SIGUSR1/SIGINT), resumes, and compares
every dataset with the reference.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest
from conftest import (
    SLOW,
    assert_same_datasets,
    hold_at,
    run_farm,
    tiles_done,
    wait_for_tiles,
)
from conftest import start as start_process

from farm.errors import EXIT_INTERRUPTED

DATASETS = ("iterations", "fraction", "histogram", "done", "frame_done")
TILES = 12 * 24  # with SLOW, an interrupted render of the zoom lasts >= 1.4 s


@pytest.fixture(scope="module")
def zoom(tmp_path_factory):
    """(job path, reference store) of a zoom of 12 frames x 24 tiles."""
    from conftest import job_text

    root = tmp_path_factory.mktemp("zoom")
    job = root / "zoom.toml"
    job.write_text(job_text(size=(96, 64), frames=12, width=("3", "1e-5"), tile=(16, 16),
                            max_iter="auto", center=("-0.7436", "0.1318")))
    ref = root / "reference.h5"
    result = run_farm("render", str(job), "--store", str(ref), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    return job, ref


def assert_same(store: Path, ref: Path) -> None:
    assert_same_datasets(store, ref, DATASETS)


def start(job: Path, store: Path, env: dict | None = None) -> subprocess.Popen:
    """A render slowed by SLOW, to be interrupted."""
    return start_process([sys.executable, "-m", "farm", "render", str(job), "--store", str(store),
                          "--no-video", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, **SLOW, **(env or {})})


@pytest.mark.parametrize("point,count", [("between-datasets", 40), ("before-flags", 20),
                                         ("before-done-flag", 40), ("after-histogram-row", 5)])
def test_killed_inside_a_store_write(tmp_path, zoom, point, count):
    """SIGKILL at the count-th pass of each step of the write order (farm/store/writer.py)."""
    job, ref = zoom
    store = tmp_path / "s.h5"
    killed = run_farm("render", str(job), "--store", str(store), "--no-video", "--quiet",
                      env={"FARM_TEST_CRASH_AT": f"{point}:{count}"})
    assert killed.returncode == -signal.SIGKILL
    kept = tiles_done(store)  # the file opens: HDF5 metadata was never touched
    assert 0 < kept < TILES
    status = run_farm("status", str(store), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["tiles_done"] == kept
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert_same(store, ref)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_killed_at_random_moments(tmp_path, zoom, seed):
    """Two SIGKILLs at random tile counts, then a resume: identical to uninterrupted."""
    job, ref = zoom
    rng = random.Random(seed)
    store = tmp_path / "s.h5"
    for target in sorted(rng.sample(range(5, TILES - 20), 2)):
        proc = start(job, store)
        try:
            wait_for_tiles(proc, store, target)
            time.sleep(rng.uniform(0, 0.05))  # anywhere between two polls, or inside a write
            proc.kill()
        finally:
            proc.wait(timeout=30)
        assert tiles_done(store) < TILES
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert_same(store, ref)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1, signal.SIGINT])
def test_signal_stops_with_resume_status(tmp_path, zoom, sig):
    job, ref = zoom
    store = tmp_path / "s.h5"
    proc = start(job, store, hold_at(30))
    wait_for_tiles(proc, store, 30)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert f"received {signal.Signals(sig).name}" in err and "farm resume" in err
    kept = tiles_done(store)
    assert 30 <= kept < TILES
    with h5py.File(store) as f:  # whatever was stored is complete: flags match data
        assert f["tiles/crc"][...][f["done"][...] == 1].all()
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert_same(store, ref)


def test_resume_of_a_finished_store_is_harmless(tmp_path, zoom):
    job, ref = zoom
    store = tmp_path / "s.h5"
    store.write_bytes(ref.read_bytes())
    for _ in range(2):
        again = run_farm("resume", str(store), "--no-video", "--quiet")
        assert again.returncode == 0, again.stderr
    assert run_farm("render", str(job), "--store", str(store), "--no-video").returncode == 0
    assert_same(store, ref)
    verified = run_farm("resume", str(store), "--no-video", "--verify")
    assert verified.returncode == 0 and "checksum" not in verified.stderr


def test_status_from_a_second_process_while_rendering(tmp_path):
    from conftest import job_text

    job = tmp_path / "long.toml"  # with SLOW, long enough (>= 2.9 s) to be watched a few times
    job.write_text(job_text(size=(96, 64), frames=24, width=("3", "1e-5"), tile=(16, 16),
                            max_iter="auto", center=("-0.7436", "0.1318")))
    store = tmp_path / "s.h5"
    total = 24 * 24
    go_on = tmp_path / "go-on"  # the render waits at 100 tiles until this file exists
    proc = start(job, store, hold_at(100, go_on))
    seen = []
    try:
        wait_for_tiles(proc, store, 1)
        while proc.poll() is None and len(seen) < 5:
            out = run_farm("status", str(store), "--json")
            assert out.returncode == 0, out.stderr
            status = json.loads(out.stdout)
            if status["rendering"] is None and proc.poll() is not None:
                break  # read after the render ended: not a status while rendering
            seen.append(status)
            if len(seen) == 3:
                go_on.touch()
            time.sleep(0.1)
        go_on.touch()
    finally:
        proc.wait(timeout=120)
    assert proc.returncode == 0
    done = [s["tiles_done"] for s in seen]
    assert done == sorted(done) and done[0] < total
    assert all("eta_s" in s["run"] for s in seen if s["tiles_done"])
    final = json.loads(run_farm("status", str(store), "--json").stdout)
    assert final["complete"] and final["rendering"] is None and "eta_s" not in final["run"]
    assert all(s["rendering"]["pid"] == proc.pid for s in seen)  # the render held the store
    text = run_farm("status", str(store)).stdout
    assert "complete" in text and "balance" in text
