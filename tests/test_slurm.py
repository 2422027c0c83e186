"""slurm/submit.sh as the README gives it, on a CPU-only cluster (a real one-node Slurm)
and, as the sbatch commands it would run, on a GPU cluster.

The first tests need no Slurm: bad usage, no farm, a Python without the farm and a bad
job each end in one line, exit 2; ``--dry-run`` shows the request for GPU and CPU nodes.
The last two need the Slurm started by .ci/slurm-up (CI runs it before the tests) and are
skipped when `sinfo` does not answer. Its node has 2 CPUs and no GPU: submit.sh finds no
GPU and asks for CPU nodes. One render is interrupted twice (Slurm's early warning, then an
outside requeue), requeued, resumed, and ends identical to a one-process render; the other
is cancelled (it stays cancelled), queued again, and resumes. Then the encode jobs make the
videos.

The batch jobs run this checkout's farm: the environment they inherit from submit.sh has
PYTHONPATH set to the checkout (in CI the venv holds the same code).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import job_text, run_farm

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


needs_slurm = pytest.mark.skipif(not _slurm_up(), reason="no Slurm (start it with .ci/slurm-up)")


@pytest.fixture(autouse=True)
def one_slurm_test_at_a_time():
    """The tests run in several processes (README: pytest -n 2) but share one one-node
    Slurm: a test here waits for the others' jobs to end (a lock file, any process)."""
    import fcntl
    import tempfile

    with open(Path(tempfile.gettempdir()) / "zoomfarm-tests-slurm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def bare_env(**extra: str) -> dict[str, str]:
    """A shell in which no virtual environment is active and no `farm` is on PATH."""
    env = {k: v for k, v in os.environ.items()
           if k != "VIRTUAL_ENV" and not k.startswith(("FARM_", "SBATCH_")) and k != "FARM"}
    path = [d for d in env.get("PATH", "/usr/bin:/bin").split(os.pathsep)
            if d and Path(d).resolve() != BIN.resolve() and not (Path(d) / "farm").exists()]
    env["PATH"] = os.pathsep.join(path)
    env["PYTHONPATH"] = str(ROOT)
    env["FARM_RATES"] = os.environ["FARM_RATES"]
    return {**env, **extra}


def clone(tmp_path: Path, venv: Path | None) -> Path:
    """slurm/ in a clone of its own (with ``venv`` as its .venv); returns its submit.sh."""
    root = tmp_path / "clone"
    shutil.copytree(ROOT / "slurm", root / "slurm")
    if venv is not None:
        (root / ".venv").symlink_to(venv, target_is_directory=True)
    return root / "slurm" / "submit.sh"


def submit(*args: str, cwd: Path, env: dict[str, str], script: Path = ROOT / "slurm" / "submit.sh"):
    return subprocess.run([str(script), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def one_line_error(result, status: int = 2) -> str:
    """The single stderr line of a submit.sh that failed with ``status``."""
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and "JSONDecodeError" not in result.stderr
    return lines[0]


def write_zoom(tmp_path: Path, text: str, name: str = "job") -> Path:
    """A job file whose store and video go to tmp_path/renders."""
    job = tmp_path / f"{name}.toml"
    renders = tmp_path / "renders"
    job.write_text(text + f'[output]\nstore = "{renders / name}.h5"\nvideo = "{renders / name}.mp4"\n')
    return job


# ---------------------------------------------------------------------- without Slurm

def test_no_farm_found_is_one_line(tmp_path):
    """No venv active, none in the clone, no `farm` on PATH: one line saying what to give."""
    job = write_zoom(tmp_path, job_text())
    line = one_line_error(submit(str(job), cwd=tmp_path, env=bare_env(), script=clone(tmp_path, None)))
    assert "no farm found" in line and "--python" in line


def test_python_without_the_farm_is_one_line(tmp_path):
    job = write_zoom(tmp_path, job_text())
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "empty")], check=True)
    empty = tmp_path / "empty" / "bin" / "python"
    env = {**bare_env(), "PYTHONPATH": ""}  # that Python finds no farm anywhere
    line = one_line_error(submit("--python", str(empty), str(job), cwd=tmp_path, env=env))
    assert str(empty) in line and "No module named farm" in line
    line = one_line_error(submit(str(job), cwd=tmp_path, env=bare_env(FARM_PYTHON=str(tmp_path / "nope"))))
    assert line.startswith("submit.sh: FARM_PYTHON: ") and "not an executable" in line


def test_bad_job_and_bad_usage_are_one_line(tmp_path):
    env = bare_env(FARM_PYTHON=sys.executable)
    job = write_zoom(tmp_path, job_text(width=("3", "0")))
    assert one_line_error(submit(str(job), cwd=tmp_path, env=env)).startswith(
        f"farm: {job}: view.width[1]: ")  # the farm's own line, passed on
    assert "usage: slurm/submit.sh" in one_line_error(submit(cwd=tmp_path, env=env))
    assert "--gpus: 'four'" in one_line_error(submit("--gpus", "four", str(job), cwd=tmp_path, env=env))
    assert "FARM_NODES: '0'" in one_line_error(submit(str(job), cwd=tmp_path, env={**env, "FARM_NODES": "0"}))
    assert "sbatch options go after" in one_line_error(submit("-p", "gpu", str(job), cwd=tmp_path, env=env))
    assert not (tmp_path / "renders").exists()


def dry_run(tmp_path: Path, *args: str, job_args: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """The render's and the encode's sbatch commands that ``submit.sh --dry-run`` prints."""
    job = write_zoom(tmp_path, job_text())
    result = submit("--dry-run", *args, str(job), *job_args, cwd=tmp_path,
                    env=bare_env(FARM_PYTHON=sys.executable))
    assert result.returncode == 0, result.stderr
    render, encode = (shlex.split(line) for line in result.stdout.strip().splitlines())
    assert not (tmp_path / "renders").exists()  # a dry run writes nothing
    store = str(tmp_path / "renders" / "job.h5")
    farm = render[render.index(str(ROOT / "slurm" / "farm.sbatch")):]
    assert farm[1:6] == ["--python", sys.executable, str(tmp_path / "job.toml"), "--store", store]
    assert f"--output={tmp_path}/renders/job-render-%j.out" in render
    assert encode[-5:] == ["--python", sys.executable, store, "--video", store[:-3] + ".mp4"]
    assert f"--output={tmp_path}/renders/job-encode-%j.out" in encode
    assert "--dependency=afterok:RENDER_JOBID" in encode and "--kill-on-invalid-dep=yes" in encode
    return render, encode


def test_dry_run_on_gpu_nodes(tmp_path):
    """Two nodes of 4 GPUs: 5 tasks a node (the master shares the first) of 4 CPUs each,
    the GPUs as a generic resource, devices shared where a node has a worker more than
    GPUs; the encode job shares the render's partition and account."""
    render, encode = dry_run(tmp_path, "--gpus", "4", "--nodes", "2",
                             job_args=("-p", "gpu", "--account=proj", "--time=4:00:00"))
    assert {"--nodes=2", "--ntasks-per-node=5", "--gres=gpu:4", "--cpus-per-task=4",
            "--time=4:00:00"} <= set(render)
    assert "--share-devices" in render and "--exclusive" not in render
    assert {"--partition=gpu", "--account=proj"} <= set(encode) and "--time=4:00:00" not in encode
    # the video on every node too: one rank a node, each with the node's cores
    assert {"--nodes=2", "--ntasks-per-node=1", "--exclusive"} <= set(encode)
    (tmp_path / "one").mkdir()
    one, encode_one = dry_run(tmp_path / "one", "--gpus", "4")
    assert not any(a.startswith(("--nodes", "--ntasks-per-node")) for a in encode_one)


def test_dry_run_on_cpu_nodes(tmp_path):
    """No GPU: whole nodes, one worker and the master on a node, no generic resource."""
    render, _ = dry_run(tmp_path, "--gpus", "0")
    assert {"--nodes=1", "--ntasks-per-node=2", "--exclusive"} <= set(render)
    assert not any(a.startswith(("--gres", "--gpus")) for a in render)
    assert "--overcommit" not in render and "--share-devices" not in render


FAKE_SINFO = """#!/bin/sh
# sinfo on a cluster with a CPU partition (the default) and a GPU partition of 4- and
# 8-GPU nodes, in the formats submit.sh asks for (-o '%P|%G|%c', or -p P -o '%G|%c').
case "$*" in
  *"-p gpu"*) printf 'gpu:a100:4(S:0-1)|64\\ngpu:a100:8(S:0-1),shard:8|128+\\n' ;;
  *) printf 'cpu*|(null)|32\\ngpu|gpu:a100:4(S:0-1)|64\\n' ;;
esac
"""


def test_gpus_a_node_counted_with_sinfo(tmp_path):
    """Without --gpus, sinfo's generic resources of the partition say how many GPUs a node
    has (the fewest of its GPU nodes); asking for more than its nodes have, or for GPUs
    where there are none, is one line before anything is queued."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sinfo").write_text(FAKE_SINFO)
    (fake / "sinfo").chmod(0o755)
    env = bare_env(FARM_PYTHON=sys.executable)
    env["PATH"] = f"{fake}{os.pathsep}{env['PATH']}"
    job = write_zoom(tmp_path, job_text())
    result = submit("--dry-run", str(job), "--partition=gpu", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "--gres=gpu:4" in shlex.split(result.stdout.splitlines()[0])
    result = submit("--dry-run", str(job), cwd=tmp_path, env=env)  # the default partition
    assert result.returncode == 0, result.stderr
    assert "--exclusive" in shlex.split(result.stdout.splitlines()[0]) and "no GPUs" in result.stderr
    line = one_line_error(submit("--gpus", "16", str(job), "-p", "gpu", cwd=tmp_path, env=env))
    assert "--gpus: 16 GPU(s) a node" in line and "at most 8" in line
    line = one_line_error(submit(str(job), cwd=tmp_path, env={**env, "FARM_GPUS": "4"}))
    assert "FARM_GPUS: 4 GPU(s) a node, but the default partition has no GPUs" in line
    assert not (tmp_path / "renders").exists()


def test_slurm_logs_are_ignored():
    if not (ROOT / ".git").exists() or not shutil.which("git"):
        pytest.skip("not a git checkout")
    names = ["zoomfarm-12.out", "zoomfarm-encode-13.out", "slurm-14.out", "renders/demo-render-12.out"]
    out = subprocess.run(["git", "check-ignore", *names], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.split() == names


# ---------------------------------------------------------------------- on Slurm

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


def running(job: str) -> bool:
    """The job runs; a job that cannot ever start fails the test at once."""
    state, reason = job_field(job, "JobState"), job_field(job, "Reason")
    assert reason not in ("PartitionConfig", "BadConstraints", "ReqNodeNotAvail"), (state, reason)
    return state == "RUNNING"


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


def queued(result) -> tuple[str, str]:
    assert result.returncode == 0, result.stderr
    return re.search(r"render job (\d+), encode job (\d+)", result.stdout).groups()


def assert_same_store(store: Path, ref: Path) -> None:
    with h5py.File(store) as a, h5py.File(ref) as b:
        for name in ("iterations", "fraction", "histogram", "done", "frame_done"):
            assert np.array_equal(a[name][...], b[name][...]), name


@pytest.mark.slurm
@needs_slurm
def test_readme_command_requeued_twice_resumes_identical_and_encodes(tmp_path):
    """`slurm/submit.sh JOB` from a clone whose .venv holds the farm, nothing activated, no
    FARM_* settings: CPU nodes found, the job runs; logs beside the store, none where it
    was submitted from."""
    job = write_zoom(tmp_path, job_text(size=(160, 96), frames=60, width=("3", "1e-5"), tile=(16, 16),
                                        max_iter="auto"))
    store, video = tmp_path / "renders" / "job.h5", tmp_path / "renders" / "job.mp4"
    ref = tmp_path / "reference.h5"
    assert run_farm("render", str(job), "--store", str(ref), "--no-video", "--quiet").returncode == 0
    total = 60 * 60
    if not (Path(sys.prefix) / "bin" / "python").exists():
        pytest.skip("the tests do not run from a virtual environment")
    here = tmp_path / "here"
    here.mkdir()
    env = bare_env(FARM_TEST_TILE_DELAY="0.002")  # >= 3.6 s a render: the polls cannot miss it
    result = submit(str(job), cwd=here, env=env, script=clone(tmp_path, Path(sys.prefix)))
    render, encode = queued(result)
    assert "no GPUs (sinfo): CPU nodes" in result.stderr
    try:
        wait_for("the render to start", lambda: running(render))
        # 1: Slurm's early warning before the time limit: the farm saves, the script requeues
        wait_for("a quarter of the tiles", lambda: tiles_done(store) >= total // 4)
        subprocess.run(["scancel", "--batch", "--signal=USR1", render], check=True)
        release(render)
        # 2: an outside requeue (preemption) mid-render
        wait_for("the second start", lambda: running(render))
        wait_for("60% of the tiles", lambda: tiles_done(store) >= 3 * total // 5)
        assert tiles_done(store) < total, "the render finished before the second interruption"
        subprocess.run(["scontrol", "requeue", render], check=True)
        release(render)
        wait_for("the render to complete", lambda: job_field(render, "JobState") == "COMPLETED")
        wait_for("the encode job", lambda: job_field(encode, "JobState") in ("COMPLETED", "FAILED"))
    finally:
        subprocess.run(["scancel", render, encode], capture_output=True)

    log = (tmp_path / "renders" / f"job-render-{render}.out").read_text()
    assert "start 3" in log and log.count("exited with status 75") >= 1, log
    assert str(tmp_path / "clone" / ".venv" / "bin" / "python") in log
    assert job_field(render, "Restarts") == "2"
    assert list(here.iterdir()) == []
    assert_same_store(store, ref)
    with h5py.File(store) as f:
        assert (f["runs"]["started"][...] > 0).sum() == 3  # three starts, one store
    encode_log = tmp_path / "renders" / f"job-encode-{encode}.out"
    assert job_field(encode, "JobState") == "COMPLETED", encode_log.read_text()
    from farm.encode import probe

    assert probe(video) == (60, 160, 96)


@pytest.mark.slurm
@needs_slurm
def test_scancel_stays_cancelled_and_resubmit_resumes(tmp_path):
    """An expmap job with two CPU workers on the node's two cores (submit.sh says
    --overcommit and --share-devices): `scancel` stops it for good, and its encode job
    with it; the same command again resumes the store, which ends identical to a
    one-process render, and the new encode job synthesises every video frame."""
    from test_expmap_units import expmap_text

    job = write_zoom(tmp_path, expmap_text(size=(160, 90), width=("0.02", "0.00015625"), frames=211,
                                           max_iter=800, tile=(96, 33),
                                           center=("-0.7436438870371587", "0.1318259042053120")),
                     name="zoom")
    store, video = tmp_path / "renders" / "zoom.h5", tmp_path / "renders" / "zoom.mp4"
    ref = tmp_path / "reference.h5"
    assert run_farm("render", str(job), "--store", str(ref), "--no-video", "--quiet").returncode == 0
    with h5py.File(ref) as f:
        total = f["done"].size
    env = bare_env(FARM_PYTHON=sys.executable, FARM_WORKERS="2", FARM_RENDER_ARGS="--quiet",
                   FARM_TEST_TILE_DELAY="0.05")  # >= 4 s a render: the polls cannot miss it
    result = submit(str(job), cwd=tmp_path, env=env)
    render, encode = queued(result)
    assert "--overcommit" in result.stderr
    try:
        wait_for("the render to start", lambda: running(render))
        wait_for("a quarter of the tiles", lambda: tiles_done(store) >= total // 4)
        assert tiles_done(store) < total, "the render finished before the interruption"
        subprocess.run(["scancel", render], check=True)
        wait_for("the cancelled job to end", lambda: node_idle()
                 and "COMPLETING" not in job_field(render, "JobState"))
        assert (job_field(render, "JobState"), job_field(render, "Restarts")) == ("CANCELLED", "0")
        wait_for("the encode job to go", lambda: job_field(encode, "JobState") == "CANCELLED")
        render, encode = queued(submit(str(job), cwd=tmp_path, env=env))
        wait_for("the render to complete", lambda: job_field(render, "JobState") == "COMPLETED")
        wait_for("the encode job", lambda: job_field(encode, "JobState") in ("COMPLETED", "FAILED"))
    finally:
        subprocess.run(["scancel", render, encode], capture_output=True)
    assert_same_store(store, ref)
    encode_log = tmp_path / "renders" / f"zoom-encode-{encode}.out"
    assert job_field(encode, "JobState") == "COMPLETED", encode_log.read_text()
    from farm.encode import probe

    assert probe(video) == (211, 160, 90)
