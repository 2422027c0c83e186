"""A real one-node Slurm runs slurm/submit.sh: the render is interrupted twice, requeued,
resumed, and ends identical to a one-process render; then the encode job makes the video.

Needs the Slurm started by .ci/slurm-up (CI runs it before the tests); skipped when
`sinfo` does not answer. The node has no GPU: FARM_GPUS=0 and --share-devices put two
CPU workers on PoCL, --overcommit lets three ranks share two cores.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import run_farm

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _slurm_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and bool(re.search(r"idle|mix|alloc", out.stdout))


pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(not _slurm_up(), reason="no Slurm (start it with .ci/slurm-up)")]


def job_field(job: str, field: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout
    match = re.search(rf"\b{field}=(\S+)", out)
    return match.group(1) if match else ""


def wait_for(what: str, check, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def tiles_done(store: Path) -> int:
    if not store.exists():
        return 0
    with h5py.File(store, "r", locking=False) as f:
        return int(f["done"][...].sum())


def node_idle() -> bool:
    out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True).stdout
    return out.strip() == "idle"


def release(job: str) -> None:
    """Slurm delays a requeued job by two minutes; a test starts it as soon as the node
    has cleaned up the previous start (earlier, Slurm revokes the new start's credential)."""
    wait_for("the job to be pending again", lambda: job_field(job, "JobState") == "PENDING")
    wait_for("the node to be idle", node_idle)
    time.sleep(1)
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)


def test_sbatch_requeued_twice_resumes_identical_and_encodes(tmp_path, write_job):
    job = write_job(size=(160, 96), frames=60, width=("3", "1e-5"), tile=(16, 16), max_iter="auto")
    store, video = tmp_path / "job.h5", tmp_path / "job.mp4"
    ref = tmp_path / "reference.h5"
    assert run_farm("render", str(job), "--store", str(ref), "--no-video", "--quiet").returncode == 0
    total = 60 * 60

    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "FARM": f"{sys.executable} -m farm",
           "FARM_LAUNCH": f"{BIN / 'mpiexec'} -n 3", "FARM_GPUS": "0", "FARM_WORKERS": "2",
           "FARM_RENDER_ARGS": "--share-devices --quiet",
           "FARM_TEST_TILE_DELAY": "0.002"}  # >= 3.6 s a render: the polls cannot miss it
    submitted = subprocess.run([str(ROOT / "slurm" / "submit.sh"), str(job), "--overcommit"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    render, encode = re.search(r"render job (\d+), encode job (\d+)", submitted.stdout).groups()
    try:
        # 1: Slurm's early warning before the time limit: the farm saves, the script requeues
        wait_for("a quarter of the tiles", lambda: tiles_done(store) >= total // 4)
        subprocess.run(["scancel", "--batch", "--signal=USR1", render], check=True)
        release(render)
        # 2: an outside requeue (preemption) mid-render
        wait_for("the second start", lambda: job_field(render, "JobState") == "RUNNING")
        wait_for("60% of the tiles", lambda: tiles_done(store) >= 3 * total // 5)
        assert tiles_done(store) < total, "the render finished before the second interruption"
        subprocess.run(["scontrol", "requeue", render], check=True)
        release(render)
        wait_for("the render to complete", lambda: job_field(render, "JobState") == "COMPLETED")
        wait_for("the encode job", lambda: job_field(encode, "JobState") in ("COMPLETED", "FAILED"))
    finally:
        subprocess.run(["scancel", render, encode], capture_output=True)

    log = (tmp_path / f"zoomfarm-{render}.out").read_text()
    assert "start 3" in log and log.count("exited with status 75") >= 1, log
    assert job_field(render, "Restarts") == "2"
    with h5py.File(store) as a, h5py.File(ref) as b:
        for name in ("iterations", "fraction", "histogram", "done", "frame_done"):
            assert np.array_equal(a[name][...], b[name][...]), name
        assert (a["runs"]["started"] > 0).sum() == 3  # three starts, one store
    assert job_field(encode, "JobState") == "COMPLETED", (tmp_path / f"zoomfarm-encode-{encode}.out")
    from farm.encode import probe

    assert probe(video) == (60, 160, 96)


def test_expmap_job_requeued_resumes_identical_and_encodes(tmp_path):
    """The expmap method through the same scripts: interrupted once (Slurm's early
    warning), requeued, resumed; the store equals a one-process render and the encode
    job synthesises every video frame."""
    from test_expmap_units import expmap_text

    job = tmp_path / "zoom.toml"
    store, video = tmp_path / "zoom.h5", tmp_path / "zoom.mp4"
    job.write_text(expmap_text(size=(160, 90), width=("0.02", "0.00015625"), frames=211, max_iter=800,
                               tile=(96, 33), center=("-0.7436438870371587", "0.1318259042053120"))
                   + f'[output]\nstore = "{store}"\nvideo = "{video}"\n')
    ref = tmp_path / "reference.h5"
    assert run_farm("render", str(job), "--store", str(ref), "--no-video", "--quiet").returncode == 0
    with h5py.File(ref) as f:
        total = f["done"].size
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "FARM": f"{sys.executable} -m farm",
           "FARM_LAUNCH": f"{BIN / 'mpiexec'} -n 3", "FARM_GPUS": "0", "FARM_WORKERS": "2",
           "FARM_RENDER_ARGS": "--share-devices --quiet",
           "FARM_TEST_TILE_DELAY": "0.05"}  # >= 4 s a render: the polls cannot miss it
    submitted = subprocess.run([str(ROOT / "slurm" / "submit.sh"), str(job), "--overcommit"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    render, encode = re.search(r"render job (\d+), encode job (\d+)", submitted.stdout).groups()
    try:
        wait_for("a quarter of the tiles", lambda: tiles_done(store) >= total // 4)
        assert tiles_done(store) < total, "the render finished before the interruption"
        subprocess.run(["scancel", "--batch", "--signal=USR1", render], check=True)
        release(render)
        wait_for("the render to complete", lambda: job_field(render, "JobState") == "COMPLETED")
        wait_for("the encode job", lambda: job_field(encode, "JobState") in ("COMPLETED", "FAILED"))
    finally:
        subprocess.run(["scancel", render, encode], capture_output=True)
    assert job_field(render, "Restarts") == "1"
    with h5py.File(store) as a, h5py.File(ref) as b:
        for name in ("iterations", "fraction", "histogram", "done", "frame_done"):
            assert np.array_equal(a[name][...], b[name][...]), name
    assert job_field(encode, "JobState") == "COMPLETED", (tmp_path / f"zoomfarm-encode-{encode}.out")
    from farm.encode import probe

    assert probe(video) == (211, 160, 90)
