"""The farm under mpiexec on PoCL: same store as one process, failures, a killed worker.

These tests start real MPI jobs with the mpiexec next to the Python in use (MPICH's
wheel in CI). Three ranks share the one CPU device (--share-devices).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import SLOW, assert_same_datasets, hold_at, run, run_farm, start, wait_for_tiles

MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")
DATASETS = ("iterations", "fraction", "histogram", "done", "frame_done")


def mpi_start(n: int, *args: str, hold: int) -> subprocess.Popen:
    """``mpiexec -n N python -m farm ARGS`` in the background, slowed by SLOW and held
    once ``hold`` tiles are stored (conftest.hold_at), so that a test can interrupt it
    mid-way."""
    return start([MPIEXEC, "-n", str(n), sys.executable, "-m", "farm", *args],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                 env={**os.environ, **SLOW, **hold_at(hold)})


def mpi_farm(n: int, *args: str, mpi4py: bool = False, env: dict | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
    launcher = ["-m", "mpi4py", "-m", "farm"] if mpi4py else ["-m", "farm"]
    return run([MPIEXEC, "-n", str(n), sys.executable, *launcher, *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def assert_same_store(a: Path, b: Path) -> None:
    assert_same_datasets(a, b, DATASETS)


@pytest.fixture
def job_and_reference(tmp_path, write_job):
    """A small zoom, and its store rendered by one process."""
    job = write_job(size=(64, 40), frames=5, width=("3", "1e-3"), tile=(16, 16), max_iter="auto")
    single = tmp_path / "single.h5"
    result = run_farm("render", str(job), "--store", str(single), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    return job, single


@pytest.mark.parametrize("mpi4py", [False, True], ids=["farm", "python-m-mpi4py"])
def test_mpi_store_is_bitwise_identical_to_one_process(tmp_path, job_and_reference, mpi4py):
    job, single = job_and_reference
    store = tmp_path / "mpi.h5"
    result = mpi_farm(3, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                      "--share-devices", mpi4py=mpi4py)
    assert result.returncode == 0, result.stderr
    assert_same_store(store, single)
    with h5py.File(store) as f:
        assert set(np.unique(f["tiles/rank"][...])) == {1, 2}  # both workers rendered
        run = f["runs"][0]
        assert run["workers"] == 2
        # the timeline: workers' counters crossed MPI, device time matches the tiles'
        assert run["setup_s"] > 0 and run["build_s"] > 0
        assert np.isclose(run["gpu_s"], f["tiles/seconds"][...].astype(np.float64).sum(), rtol=1e-4)
        assert run["process_started"] <= run["started"] <= run["render_ended"] <= run["ended"]


def test_worker_threads_in_one_process_give_the_same_store(tmp_path, job_and_reference):
    """One process with a worker thread per device (two threads on the one CPU device
    here, as two GPUs would have): the same store as one worker."""
    job, single = job_and_reference
    store = tmp_path / "threads.h5"
    result = run_farm("render", str(job), "--store", str(store), "--no-video", "--quiet",
                      "--workers", "2", env={"FARM_TEST_TILE_DELAY": "0.05"})
    assert result.returncode == 0, result.stderr
    assert_same_store(store, single)
    with h5py.File(store) as f:
        assert set(np.unique(f["tiles/rank"][...])) == {0, 1}  # both threads rendered
        assert f["runs"]["workers"][0] == 2


AFFINITY = ("import os; from farm.schedule.transport import mpi_world; c = mpi_world(); "
            "cores = c.gather(len(os.sched_getaffinity(0))); c.Get_rank() or print(cores)")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"),
                    reason="needs two cores and taskset")
def test_ranks_bound_to_one_core_run_on_every_core(tmp_path, job_and_reference):
    """Open MPI binds each of two processes to one core by default (as taskset -c 0 does
    here to both): the farm's ranks take every core they may use, unless
    FARM_KEEP_BINDING is set; the store is the one-process store."""
    cores = len(os.sched_getaffinity(0))
    pinned = ["taskset", "-c", "0", MPIEXEC, "-n", "2", sys.executable]
    seen = run([*pinned, "-c", AFFINITY], capture_output=True, text=True, timeout=120)
    assert seen.returncode == 0, seen.stderr
    assert seen.stdout.strip() == str([cores, cores])
    assert f"run on all {cores}" in seen.stderr
    kept = run([*pinned, "-c", AFFINITY], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "FARM_KEEP_BINDING": "1"})
    assert kept.stdout.strip() == "[1, 1]"
    assert "run on all" not in kept.stderr
    asked = run([*pinned, "-c", AFFINITY], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "OMPI_MCA_hwloc_base_binding_policy": "core"})
    assert asked.stdout.strip() == "[1, 1]"  # as `mpiexec --bind-to core` tells Open MPI's ranks

    job, single = job_and_reference
    store = tmp_path / "pinned.h5"
    result = run([*pinned, "-m", "farm", "render", str(job), "--store", str(store),
                             "--no-video", "--quiet"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert f"run on all {cores}" in result.stderr
    assert_same_store(store, single)


def test_more_workers_than_devices_is_refused(tmp_path, job_and_reference):
    job, _ = job_and_reference
    store = tmp_path / "refused.h5"
    result = mpi_farm(3, "render", str(job), "--store", str(store), "--no-video")
    assert result.returncode == 2
    assert "no device of its own" in result.stderr and "--share-devices" in result.stderr
    assert not store.exists()


def test_failing_worker_is_excluded_and_the_render_completes(tmp_path, job_and_reference):
    job, single = job_and_reference
    store = tmp_path / "fail.h5"
    result = mpi_farm(3, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                      "--share-devices", env={"FARM_TEST_FAIL_RANKS": "2"})
    assert result.returncode == 0, result.stderr
    assert "worker 2 excluded" in result.stderr
    assert "injected failure on rank 2" in result.stderr  # the traceback came back
    assert_same_store(store, single)
    with h5py.File(store) as f:
        assert set(np.unique(f["tiles/rank"][...])) == {1}


def test_every_worker_failing_saves_and_fails(tmp_path, job_and_reference):
    job, _ = job_and_reference
    store = tmp_path / "allfail.h5"
    result = mpi_farm(3, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                      "--share-devices", env={"FARM_TEST_FAIL_RANKS": "1,2"})
    assert result.returncode == 1
    assert "no worker left" in result.stderr


def _rank_pid(rank: int, marker: str) -> int | None:
    """pid of the MPI process with PMI_RANK == rank whose command line has marker."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"PMI_RANK={rank}".encode() in env and marker.encode() in cmd:
            return int(entry.name)
    return None


def test_worker_killed_mid_render_loses_nothing(tmp_path, write_job):
    """SIGKILL of a worker: MPICH ends the whole job (documented in README); every tile
    stored before is kept, and `farm resume` completes it identically."""
    job = write_job(size=(96, 64), frames=16, width=("3", "1e-4"), tile=(16, 16), max_iter="auto")
    single = tmp_path / "single.h5"
    assert run_farm("render", str(job), "--store", str(single), "--no-video", "--quiet").returncode == 0
    store = tmp_path / "killed.h5"
    total = 16 * 24
    proc = mpi_start(3, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                     "--share-devices", hold=total // 4)
    try:
        done = wait_for_tiles(proc, store, total // 4)
        pid = _rank_pid(2, str(store))
        assert pid is not None and proc.poll() is None, "the render ended before the kill"
        os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    with h5py.File(store) as f:
        kept = int(f["done"][...].sum())
    assert done <= kept < total, (done, kept)
    resumed = run_farm("resume", str(store), "--no-video", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_store(store, single)


def test_sigusr1_to_mpiexec_interrupts_and_resumes(tmp_path, write_job):
    """mpiexec passes the signal to every rank; workers ignore it, the master collects
    the tiles in flight and every rank exits 75; a resume under MPI completes."""
    job = write_job(size=(96, 64), frames=24, width=("3", "1e-4"), tile=(16, 16), max_iter="auto")
    single = tmp_path / "single.h5"
    assert run_farm("render", str(job), "--store", str(single), "--no-video", "--quiet").returncode == 0
    store = tmp_path / "sig.h5"
    proc = mpi_start(3, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                     "--share-devices", hold=10)
    wait_for_tiles(proc, store, 10)
    assert proc.poll() is None, "the render ended before the signal"
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err
    assert "received SIGUSR1" in err
    resumed = mpi_farm(3, "resume", str(store), "--no-video", "--quiet", "--share-devices")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_store(store, single)


def test_samples_and_distance_are_bitwise_identical_under_mpi(tmp_path, write_job):
    """Every channel (4 samples, distance estimates) and the histograms, over MPI with
    two workers, equal a one-process render bit for bit."""
    job = write_job(size=(48, 32), frames=3, width=("3", "1e-3"), tile=(16, 16),
                    max_iter="auto", samples=4, distance=True)
    single, store = tmp_path / "single.h5", tmp_path / "mpi.h5"
    result = run_farm("render", str(job), "--store", str(single), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    result = mpi_farm(3, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                      "--share-devices")
    assert result.returncode == 0, result.stderr
    names = (*DATASETS, "distance", "samples/iterations", "samples/fraction",
             "samples/distance", "tiles/crc")
    assert_same_datasets(store, single, names)
    with h5py.File(store) as fa:
        assert set(np.unique(fa["tiles/rank"][...])) == {1, 2}


REFERENCE_DATASETS = ("reference/orbits", "reference/starts", "reference/point", "reference/period",
                      "reference/orbit_exp", "reference/wrap", "frames/reference")
NEAR_I = "1." + "0" * 99 + "1"  # 1 + 1e-100


def test_changing_references_are_broadcast_and_resume_under_mpi(tmp_path, write_job):
    """A zoom 1e-100 off c = i whose perturbed frames take the Misiurewicz point i and,
    deeper, the centre's own orbit: the master chooses the references once and
    broadcasts them; two workers render the same store as one process, and an
    interrupted MPI render resumes from the stored references (not chosen again) to
    the same store."""
    job = write_job(size=(48, 32), frames=12, width=("3", "1e-150"), center=("0", NEAR_I),
                    tile=(16, 16), max_iter=3000)  # (not "auto": its pre-pass, not tested
    # here, took 1 min of a 2-core machine in the master, which has no OpenCL device)
    single = tmp_path / "single.h5"
    first = run_farm("render", str(job), "--store", str(single), "--no-video", "--quiet")
    assert first.returncode == 0, first.stderr
    with h5py.File(single) as f:
        assert len(set(f["frames/reference"][...]) - {-1}) >= 2
    store = tmp_path / "mpi.h5"
    proc = mpi_start(3, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                     "--share-devices", hold=20)
    wait_for_tiles(proc, store, 20)
    assert proc.poll() is None, "the render ended before the signal"
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err
    resumed = mpi_farm(3, "resume", str(store), "--no-video", "--quiet", "--share-devices")
    assert resumed.returncode == 0, resumed.stderr
    assert "farm: reference" not in resumed.stderr
    assert_same_store(store, single)
    assert_same_datasets(store, single, REFERENCE_DATASETS)


def test_two_nodes_give_the_one_process_store(tmp_path, job_and_reference):
    """The farm as two "nodes" on this machine (FARM_NODE, farm/schedule/transport.py):
    the master and one worker on node a, two workers on node b; each node binds its
    workers from its first device, all tiles reach the master's writer, and the store is
    the one-process store bit for bit."""
    job, single = job_and_reference
    store = tmp_path / "nodes.h5"
    farm = [sys.executable, "-m", "farm", "render", str(job), "--store", str(store), "--no-video",
            "--share-devices"]
    done = run([MPIEXEC, "-n", "2", "-env", "FARM_NODE", "a", *farm, ":",
                           "-n", "2", "-env", "FARM_NODE", "b", *farm],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "3 worker(s)" in done.stderr
    assert_same_store(store, single)
    with h5py.File(store) as f:  # tiles came from ranks of both nodes
        ranks = set(np.unique(f["tiles/rank"][...]).tolist())
    assert ranks & {1} and ranks & {2, 3}, ranks
    devices = [sys.executable, "-m", "farm", "devices"]
    seen = run([MPIEXEC, "-n", "2", "-env", "FARM_NODE", "a", *devices, ":",
                           "-n", "2", "-env", "FARM_NODE", "b", *devices],
                          capture_output=True, text=True, timeout=300)
    assert seen.returncode == 0, seen.stderr
    text = seen.stdout + seen.stderr
    assert "rank 1 on" in text and "/a" in text and "rank 3 on" in text and "/b" in text, text


def test_five_ranks_sharing_one_device_give_the_one_process_store(tmp_path, job_and_reference):
    """`mpiexec -n 5 --share-devices`: four workers on the one CPU device of a 2-core machine."""
    job, single = job_and_reference
    store = tmp_path / "five.h5"
    result = mpi_farm(5, "render", str(job), "--store", str(store), "--no-video", "--quiet",
                      "--share-devices")
    assert result.returncode == 0, result.stderr
    assert_same_store(store, single)
