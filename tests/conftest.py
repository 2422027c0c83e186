"""Shared fixtures: OpenCL devices, small jobs, and the farm command.

Kernel tests take the ``cl_device`` fixture, parametrised over every OpenCL
device found (PoCL's CPU in CI, the GPU too on a GPU machine), in the manner of
pyopencl's ``pytest_generate_tests_for_pyopencl``. ``FARM_TEST_DEVICES=gpu``
(or ``cpu``) narrows the list.
"""

from __future__ import annotations

import compileall
import contextlib
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

# h5py reads the compressed stores' zstd chunks in any test (hdf5plugin: installed by
# the test extra; the lent GPU machine has no wheel of it)
with contextlib.suppress(ImportError):
    import hdf5plugin  # noqa: F401

from farm import spec as specmod
from farm.compute.device import build_problem
from farm.compute.inventory import list_devices

ROOT = Path(__file__).resolve().parents[1]  # the checkout the tests test

# The checkout's bytecode, written once: where PYTHONDONTWRITEBYTECODE is set (the CI
# machine's kind sets it) every `python -m farm` a test starts would compile the farm
# from source again, 0.3 s of CPU each; compileall writes it whatever that variable says.
compileall.compile_dir(ROOT / "farm", quiet=1)

# `farm bench` remembers kernel rates for `farm validate` (farm/compute/rates.py): keep the
# tests' measurements out of the user's cache.
os.environ.setdefault("FARM_RATES", os.path.join(tempfile.mkdtemp(prefix="farm-rates-"), "rates.json"))
# Frames are prepared on a thread, as on CPUs, also where GPUs would use helper processes
# (farm/compute/prep.py): tests monkeypatch the preparation in this process.
# tests/test_prep.py checks that the helpers build the same bytes.
os.environ.setdefault("FARM_PREP_PROCESSES", "0")


def _devices():
    """Every device that renders, one per kind that is not a GPU (a machine may list
    two PoCL CPU platforms: testing both only doubles the time, and the second is not
    even checked, farm/compute/kernelcheck.py)."""
    want = os.environ.get("FARM_TEST_DEVICES", "").upper()
    devs, kinds = [], set()
    for info, dev in list_devices():
        if info.kind != "GPU" and info.kind in kinds:
            continue
        if not info.fp64 or (want and info.kind != want) or build_problem(info):
            continue
        kinds.add(info.kind)
        devs.append((info, dev))
    return devs


def pytest_generate_tests(metafunc):
    if "cl_device" in metafunc.fixturenames:
        devs = _devices()
        metafunc.parametrize("cl_device", devs, ids=[f"{i.kind}:{i.name[:20]}" for i, _ in devs])


def job_text(size=(24, 16), center=("-0.75", "0.1"), width=("3", "3"), frames=1,
             tile=(16, 16), max_iter=200, precision="auto", extra="", samples=1,
             distance=False) -> str:
    image_keys = f"\n        samples = {samples}" if samples != 1 else ""
    render_keys = "\n        distance = true" if distance else ""
    return textwrap.dedent(f"""
        [view]
        center = ["{center[0]}", "{center[1]}"]
        width = ["{width[0]}", "{width[1]}"]
        [image]
        size = [{size[0]}, {size[1]}]{image_keys}
        [animation]
        frames = {frames}
        fps = 10
        [iterations]
        max = {max_iter if isinstance(max_iter, int) else '"auto"'}
        [render]
        precision = "{precision}"
        tile = [{tile[0]}, {tile[1]}]{render_keys}
        """) + textwrap.dedent(extra)


def make_spec(**kw) -> specmod.JobSpec:
    return specmod.parse_text(job_text(**kw), name="test")


@pytest.fixture
def write_job(tmp_path: Path):
    """Write a job file whose outputs go into tmp_path; returns its path."""

    def write(name="job", **kw) -> Path:
        extra = kw.pop("extra", "")
        out = f"""
        [output]
        store = "{tmp_path / (name + '.h5')}"
        video = "{tmp_path / (name + '.mp4')}"
        """
        path = tmp_path / f"{name}.toml"
        path.write_text(job_text(extra=out + extra, **kw))
        return path

    return write


def checkout_env(extra: dict | None = None) -> dict:
    """The environment for ``python -m farm`` in a subprocess, with ``extra``: this
    checkout first on PYTHONPATH, so that the farm under test runs whatever the
    subprocess's directory (an installed copy would otherwise win there)."""
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


# Processes a test starts end with the test, pass or fail: `start` and `run` put each in a
# process group of its own and remember it; after every test, whatever is left of them
# (their children too: mpiexec's ranks run in sessions of their own) is killed.
_STARTED: list[subprocess.Popen] = []


def start(cmd, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(cmd, **kwargs)``, ended with the test that started it; its
    standard input is /dev/null unless given (a terminal's Ctrl-C stops a render at
    once: farm/schedule/master.py)."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("start_new_session", True)
    proc = subprocess.Popen(cmd, **kwargs)
    _STARTED.append(proc)
    return proc


def run(cmd, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)``, ended with the test;
    past ``timeout`` (a guard against a hang, not a measure of speed) the whole process
    tree is killed and TimeoutExpired raised."""
    kwargs.pop("capture_output", None)
    kwargs.pop("text", None)
    proc = start(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_process_tree(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc), children first."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def end_process_tree(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``, its process group and every descendant; reap ``proc``."""
    import signal

    for pid in [proc.pid, *_descendants(proc.pid)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.communicate(timeout=30)


@pytest.fixture(autouse=True)
def _end_started_processes():
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None or _descendants(proc.pid):
            end_process_tree(proc)
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, 9)  # a daemonised child left in the group


def run_farm(*args: str, cwd: Path | None = None, env: dict | None = None,
             timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m farm ARGS`` in a subprocess (as a user runs it), from this checkout
    whatever ``cwd`` is (an installed copy of the farm would otherwise win there)."""
    return run([sys.executable, "-m", "farm", *args], cwd=cwd, env=checkout_env(env), timeout=timeout)


def assert_same_datasets(a: Path, b: Path, names) -> None:
    """Stores ``a`` and ``b`` hold bitwise equal datasets ``names`` (the failing one named),
    read by h5py (with hdf5plugin's zstd filter: compressed stores are standard HDF5)."""
    import h5py
    import numpy as np

    with h5py.File(a) as fa, h5py.File(b) as fb:
        for name in names:
            compressed = bool(fa[name]._filters)  # (shuffle, zstd: the pixel channels)
            if compressed and "hdf5plugin" not in sys.modules:  # (the GPU machine has none)
                assert _decoded(a, name) == _decoded(b, name), name
            else:
                assert np.array_equal(fa[name][...], fb[name][...]), name


def _decoded(store: Path, name: str) -> list[bytes]:
    """A compressed pixel channel of every stored unit, decoded by the farm's reader
    (it needs no HDF5 plugin): where h5py cannot read zstd chunks."""
    from farm.store.reader import Store

    with Store(store) as s:
        return [s.read(u, [name])[0].tobytes() for u in range(s.units)]


def render_both_methods(tmp_path: Path, keys: str, center: tuple[str, str]) -> dict[str, Path]:
    """A 48x27 keyed zoom (``keys``: its [[animation.keys]] tables) rendered through
    `farm render --no-video` by each method; the stores, by method."""
    common = job_text(size=(48, 27), center=center, width=("1", "1"), frames=1, max_iter=600,
                      tile=(48, 48)).replace('width = ["1", "1"]\n', "").replace("frames = 1\n", "")
    stores = {}
    for method in ("frames", "expmap"):
        text = common.replace("fps = 10", f'fps = 10\nmethod = "{method}"')
        if method == "expmap":
            text = text.replace("tile = [48, 48]", "tile = [96, 33]")
        job = tmp_path / f"{method}.toml"
        job.write_text(text + keys + f'[output]\nstore = "{tmp_path / method}.h5"\n'
                       f'video = "{tmp_path / method}.mp4"\n')
        result = run_farm("render", str(job), "--no-video", "--quiet")
        assert result.returncode == 0, result.stderr
        stores[method] = tmp_path / f"{method}.h5"
    return stores


def render_frame(cl_device, plan, frame: int = 0, config=None, references=None, skipping=True):
    """(iterations, fraction) of a whole frame, rendered tile by tile on ``cl_device``;
    ``references`` are those of perturbed frames (plan.references())."""
    import numpy as np

    from farm.compute.render import TileRenderer

    info, dev = cl_device
    renderer = TileRenderer(dev, info, plan, config, references=references, skipping=skipping)
    w, h = plan.spec.size
    it = np.zeros((h, w), np.uint32)
    fr = np.zeros((h, w), np.float32)
    for tile in plan.grid:
        res = renderer.render(plan.frames[frame], tile)
        it[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = res.iterations
        fr[tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = res.fraction
    return it, fr


def render_channels(cl_device, plan, frame: int = 0, config=None, references=None):
    """Every channel of a whole frame, tile by tile on ``cl_device``: {name: array of
    shape (H, W) or (H, W, depth)}, and the frame's histogram (int64, plan.bins)."""
    import numpy as np

    from farm.compute.render import TileRenderer

    info, dev = cl_device
    renderer = TileRenderer(dev, info, plan, config, references=references)
    w, h = plan.spec.size
    out = {c.name: np.zeros(c.shape(h, w), c.dtype) for c in plan.channels}
    hist = np.zeros(plan.bins, np.int64)
    for tile in plan.grid:
        res = renderer.render(plan.frames[frame], tile)
        for name, arr in res.arrays.items():
            out[name][tile.y0:tile.y0 + tile.height, tile.x0:tile.x0 + tile.width] = arr
        hist[res.hist_bins] += res.hist_counts
    return out, hist


def compare_counts(got, want, min_equal: float = 0.99) -> float:
    """Share of equal pixels; asserts at least ``min_equal`` and reports the rest."""
    import numpy as np

    want = np.asarray(want)
    equal = got == want
    share = float(equal.mean())
    if share < 1.0:
        bad = np.argwhere(~equal)[:10]
        detail = ", ".join(f"(col {j}, row {i}): {got[i, j]} vs {want[i, j]}" for i, j in bad)
        print(f"{(~equal).sum()} of {equal.size} pixels differ from the reference: {detail}")
    assert share >= min_equal, f"only {share:.4f} of pixels match the reference"
    return share


@pytest.fixture(scope="session")
def reference():
    """``reference(center, width, size, max_iter, mpfr=False)``: mpmath (or MPFR) counts,
    computed once a session."""
    from reference import reference_counts

    cache = {}

    def get(center, width, size, max_iter, mpfr=False):
        key = (tuple(center), width, tuple(size), max_iter)
        if key not in cache:
            cache[key] = reference_counts(center, width, size, max_iter, mpfr=mpfr)
        return cache[key]

    return get


def tiles_done(store: Path) -> int:
    """Tiles marked done in a store (readable while a render writes it)."""
    import h5py

    if not store.exists():
        return 0
    with h5py.File(store, "r", locking=False) as f:
        return int(f["done"][...].sum())


# Renders that a test interrupts: the small test zooms render in well under a second,
# so every worker sleeps 5 ms a tile (farm/schedule/worker.py) and a poll cannot miss
# the render however fast the machine is.
SLOW = {"FARM_TEST_TILE_DELAY": "0.005"}


def hold_at(tiles: int, until: Path | None = None) -> dict:
    """The environment of a render that stops taking results once ``tiles`` are on their
    way to the store, until it gets a stop signal or the file ``until`` exists
    (farm/schedule/master.py): a test then catches it mid-way however fast or slow the
    machine is."""
    return {"FARM_TEST_HOLD_AT": f"{tiles}:{until}" if until else str(tiles)}


def wait_for_tiles(proc: subprocess.Popen, store: Path, at_least: int, timeout: float = 1800) -> int:
    """Wait until the render ``proc`` has stored ``at_least`` tiles; fail if it ends first.
    ``timeout`` only guards against a hang: a slow machine is no failure."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        done = tiles_done(store)
        if done >= at_least:
            return done
        time.sleep(0.02)
    raise AssertionError(f"render ended or stalled before {at_least} tiles: {proc.poll()}")
