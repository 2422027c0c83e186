"""What a new user hits first: default job files at common sizes, paths that cannot be
written, a store too big for its disk or a disk that fills, two renders of one store,
a device that is not there. Each ends in one line and the documented exit status,
with nothing written where nothing should be."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401 (h5py reads compressed stores)
import numpy as np
import pytest
from conftest import assert_same_datasets, checkout_env, run_farm, start, wait_for_tiles

from farm.compute.inventory import list_devices
from farm.errors import EXIT_INTERRUPTED, EXIT_USAGE


def minimal_job(path: Path, size: tuple[int, int], frames: int = 2, extra: str = "") -> Path:
    """A job file with every optional key left out."""
    path.write_text(textwrap.dedent(f"""
        [view]
        center = ["-0.7436", "0.1318"]
        width = ["3", "0.5"]
        [image]
        size = [{size[0]}, {size[1]}]
        [animation]
        frames = {frames}
        """) + textwrap.dedent(extra))
    return path


def one_line_error(result: subprocess.CompletedProcess, status: int, *words: str) -> None:
    assert result.returncode == status, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("farm: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@contextlib.contextmanager
def small_filesystem(where: Path, size: str, read_only: bool = False):
    """A tmpfs of ``size`` mounted at ``where`` (root only; the test is skipped otherwise)."""
    where.mkdir()
    opts = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)],
                             capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.parametrize("size", [(1280, 720), (640, 480), (321, 241), (2, 2), (1, 1)])
def test_a_job_with_every_default_renders(tmp_path, size):
    """No tile, store, video or iteration keys: the defaults work at any size, smaller
    than a tile included (the default tile is 1024x1024)."""
    job = minimal_job(tmp_path / "plain.toml", size)
    video = size != (1, 1)  # a video needs 2x2 pixels at least
    args = ["render", str(job), "--quiet"] + ([] if video else ["--no-video"])
    result = run_farm(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    store = tmp_path / "renders" / "plain.h5"
    with h5py.File(store) as f:
        assert f["iterations"].shape == (2, size[1], size[0])
        assert f["done"][...].all() and f["frame_done"][...].all()
        counts = f["iterations"][...]
        assert np.array_equal(f["histogram"][0][:counts.max() + 1],
                              np.bincount(counts[0].ravel(), minlength=counts.max() + 1))
    if video:
        assert (tmp_path / "renders" / "plain.mp4").stat().st_size > 0


def test_unwritable_store_and_video_paths_are_refused_before_any_work(tmp_path):
    for key, path in (("store", "/proc/zoom.h5"), ("video", "/proc/zoom.mp4")):
        job = minimal_job(tmp_path / f"{key}.toml", (32, 24), extra=f"""
            [output]
            {key} = "{path}"
            """)
        result = run_farm("render", str(job), "--quiet", cwd=tmp_path)
        one_line_error(result, EXIT_USAGE, f"output.{key}", path)
        assert not (tmp_path / "renders").exists()  # nothing written, not even the other output
    with small_filesystem(tmp_path / "ro", "1m", read_only=True) as ro:
        job = minimal_job(tmp_path / "ro.toml", (32, 24), extra=f"""
            [output]
            store = "{ro / 'sub' / 'z.h5'}"
            """)
        result = run_farm("render", str(job), "--quiet", cwd=tmp_path)
        one_line_error(result, EXIT_USAGE, "output.store", "read-only")


def test_a_store_too_big_for_its_disk_is_refused(tmp_path):
    with small_filesystem(tmp_path / "small", "1m") as small:
        job = minimal_job(tmp_path / "big.toml", (640, 480), frames=4, extra=f"""
            [output]
            store = "{small / 'big.h5'}"
            video = "{small / 'big.mp4'}"
            """)
        validate = run_farm("validate", str(job))
        assert validate.returncode == 0, validate.stderr
        size = re.search(r"store size ([\d.]+) MB when complete \(zstd, estimated: ([\d.]+) MB "
                         r"uncompressed\) .* does not fit", validate.stdout)
        assert size, validate.stdout
        pixels = 4 * 640 * 480 * 8  # iterations and fraction, 4 bytes each
        assert pixels / 1e6 <= float(size.group(2)) <= pixels / 1e6 + 0.5  # + bookkeeping
        assert pixels / 5e6 < float(size.group(1)) < pixels / 2e6  # compressed: an estimate
        result = run_farm("render", str(job), "--quiet")
        one_line_error(result, EXIT_USAGE, "output.store", "needs", "--ignore-free-space")
        # render checks before max = "auto" has looked at the frames (a longer histogram
        # adds a little), so its figure may be a hair under validate's
        said = float(re.search(r"needs ([\d.]+) MB", result.stderr).group(1))
        assert 0.99 * float(size.group(1)) <= said <= float(size.group(1))
        assert list(small.iterdir()) == []


@pytest.mark.parametrize("compression,size,tile", [
    ("none", (256, 128), 64), pytest.param("zstd", (768, 384), 192, marks=pytest.mark.slow)])
def test_a_disk_that_fills_stops_the_render_and_resume_finishes_it(tmp_path, compression, size, tile):
    """A full disk mid-render stops like an interrupt (exit 75, one line), keeps every
    finished tile, and a resume once there is space ends identical to a plain render
    (raw and compressed stores: a compressed one is larger here, so that it fills 3 MB)."""
    extra = f"[render]\ntile = [{tile}, {tile}]\n[output]\ncompression = \"{compression}\"\n"
    tiles = 20 * (size[0] // tile) * (size[1] // tile)
    ref_job = minimal_job(tmp_path / "ref.toml", size, frames=20, extra=extra)
    assert run_farm("render", str(ref_job), "--no-video", "--quiet", cwd=tmp_path).returncode == 0
    with small_filesystem(tmp_path / "disk", "3m") as disk:
        job = minimal_job(tmp_path / "full.toml", size, frames=20, extra=extra.replace(
            "[output]\n", f"[output]\nstore = \"{disk / 'z.h5'}\"\n"))
        result = run_farm("render", str(job), "--no-video", "--quiet", "--ignore-free-space")
        assert result.returncode == EXIT_INTERRUPTED, result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert "is full" in last and "farm resume" in last, result.stderr
        with h5py.File(disk / "z.h5") as f:
            kept = int(f["done"][...].sum())
        assert 0 < kept < tiles
        subprocess.run(["mount", "-o", "remount,size=32m", str(disk)], check=True)
        result = run_farm("resume", str(disk / "z.h5"), "--no-video", "--quiet")
        assert result.returncode == 0, result.stderr
        assert_same_datasets(disk / "z.h5", tmp_path / "renders" / "ref.h5",
                             ("iterations", "fraction", "histogram", "done", "frame_done"))


def test_a_disk_that_fills_while_the_store_is_created(tmp_path):
    """--ignore-free-space on a disk too small even for the new store's bookkeeping (each
    compressed slot's first block is written at creation): one line, nothing left."""
    with small_filesystem(tmp_path / "tiny", "1m") as tiny:
        job = minimal_job(tmp_path / "tiny.toml", (768, 384), frames=2, extra=f"""
            [render]
            tile = [16, 16]
            [output]
            store = "{tiny / 'z.h5'}"
            """)
        result = run_farm("render", str(job), "--no-video", "--quiet", "--ignore-free-space")
        one_line_error(result, EXIT_USAGE, "output.store", "is full", "while the store was created")
        assert list(tiny.iterdir()) == []


def test_two_renders_of_one_store_cannot_run_at_once(tmp_path):
    """The second render (or resume) refuses, naming the first; `farm status` shows who
    renders; a first render killed with SIGKILL leaves nothing that blocks a resume."""
    job = minimal_job(tmp_path / "zoom.toml", (96, 64), frames=12, extra="""
        [render]
        tile = [16, 16]
        """)
    store = tmp_path / "renders" / "zoom.h5"
    # 0.2 s a tile: the first render lasts a minute unless killed, which the test does
    first = start([sys.executable, "-m", "farm", "render", str(job), "--no-video", "--quiet"],
                             cwd=tmp_path, env=checkout_env({"FARM_TEST_TILE_DELAY": "0.2"}),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_tiles(first, store, 3)
        for args in (("render", str(job), "--no-video"), ("resume", str(store), "--no-video")):
            second = run_farm(*args, "--quiet", cwd=tmp_path)
            one_line_error(second, EXIT_USAGE, "being rendered by", f"pid {first.pid}")
        status = run_farm("status", str(store))
        assert status.returncode == 0 and f"rendering  pid {first.pid}" in status.stdout, status.stdout
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    status = run_farm("status", str(store))
    assert "nothing is rendering it" in status.stdout, status.stdout
    assert "ETA" not in status.stdout
    result = run_farm("resume", str(store), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(any(i.kind == "GPU" for i, _ in list_devices()), reason="this machine has a GPU")
def test_asking_for_a_missing_gpu_writes_nothing(tmp_path):
    job = minimal_job(tmp_path / "gpu.toml", (32, 24))
    result = run_farm("render", str(job), "--device", "gpu", "--quiet", cwd=tmp_path)
    assert result.returncode == 1 and "no OpenCL GPU" in result.stderr, result.stderr
    assert not (tmp_path / "renders").exists()


def test_one_cpu_device_is_a_candidate_the_first_that_compiles(monkeypatch):
    """Two CPU platforms drive the same cores: only the first CPU device that compiles is
    a candidate, and the ones after it are never built on (pip's PoCL on a Zen 4 builds
    the lanes kernel into nothing and aborts its process at exit)."""
    from farm.compute import device as devmod

    def fake(p, kind):
        return (devmod.DeviceInfo(p, 0, f"platform {p}", f"dev {p}", kind, 2, 1 << 30, True, True),
                object())

    broken, probed = {0}, []

    def problem(info):
        probed.append(info.platform_index)
        return "no" if info.platform_index in broken else None

    monkeypatch.setattr(devmod, "build_problem", problem)
    devs = [fake(0, "CPU"), fake(1, "CPU"), fake(2, "GPU"), fake(3, "CPU")]
    assert [i.platform_index for i, _ in devmod._usable(devs)] == [1, 2]
    assert probed == [0, 1, 2]  # platform 3's CPU device is not built on
    broken.update({1, 2, 3})
    with pytest.raises(devmod.DeviceError, match="no OpenCL device can render"):
        devmod._usable(devs)


def _validate_and_render(tmp_path: Path, name: str, job_text: str) -> tuple[list[int], Path]:
    """Write the job ``name``.toml, run ``farm validate --json`` and ``farm render
    --no-video`` on it (both must succeed): the frames' iteration limits validate
    shows, and the store's path."""
    import json

    job = tmp_path / f"{name}.toml"
    job.write_text(textwrap.dedent(job_text))
    shown = run_farm("validate", str(job), "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    result = run_farm("render", str(job), "--no-video", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(shown.stdout)["max_iter"], tmp_path / "renders" / f"{name}.h5"


def test_auto_iterations_cover_a_few_periods_of_a_nucleus_reference(tmp_path):
    """A zoom with every optional key left out to the Seahorse centre at 1e-22: the
    depth formula gives its last frames fewer iterations than the period-8007 nucleus
    they are referred to, and every pixel came out interior (a black frame). ``max =
    "auto"`` now gives such frames 4 periods, which `farm validate` shows; the frames
    render with escaping pixels (frames 6 and 7: all of them, most above a period)."""
    limits, store = _validate_and_render(tmp_path, "deep", """
        [view]
        center = ["-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"]
        width = ["3", "1e-22"]
        [image]
        size = [64, 36]
        [animation]
        frames = 8
        """)
    assert limits[-3:] == [4 * 8007] * 3 and limits[0] < 8007
    with h5py.File(store) as f:
        assert list(f["frames"]["max_iter"][-3:]) == [4 * 8007] * 3
        for k in (5, 6, 7):  # auto gave them 4421 to 7133 iterations: all interior
            counts = f["iterations"][k][...]
            assert (counts > 0).mean() > 0.9 and (counts > 7133).mean() > 0.7


NUCLEUS_8007 = ("-0.74364388703715870475219150611477977821525620794818128981688389",
                "0.13182590420531197049313205638514067897295227932891896620912772")


def test_copy_scale_of_a_nucleus_against_mpmath():
    """log2 |lambda' beta| (the scale of the minibrot's own coordinates, beta = dz_p/dc)
    from the double orbit, against the derivative iterated in mpmath at the nucleus."""
    import mpmath

    from farm.plan import make_plan
    from farm.plan.auto_limits import log2_copy_scale
    from farm.spec import parse_text

    spec = parse_text(textwrap.dedent(f"""
        [view]
        center = ["{NUCLEUS_8007[0]}", "{NUCLEUS_8007[1]}"]
        width = ["1e-30", "1e-30"]
        [image]
        size = [32, 18]
        [animation]
        frames = 1
        """))
    refs = make_plan(spec).references()
    ref = refs.refs[refs.frame_ref[0]]
    assert ref.kind == "nucleus" and ref.period == 8007
    with mpmath.workprec(400):
        c = mpmath.mpc(mpmath.mpf(ref.point.re), mpmath.mpf(ref.point.im))
        z, dz, lam = mpmath.mpc(0), mpmath.mpc(0), mpmath.mpc(1)
        for n in range(ref.period):
            if n >= 1:
                lam *= 2 * z
            z, dz = z * z + c, 2 * z * dz + 1
        want = float(mpmath.log(abs(lam * dz), 2))
    assert abs(ref.log2_scale - float(mpmath.log(abs(lam), 2))) < 1e-6
    assert abs(log2_copy_scale(ref) - want) < 1e-3


def test_auto_iterations_show_a_zoom_that_ends_at_a_minibrot(tmp_path):
    """A zoom with every optional key left out that ends centred on the period-8007
    nucleus at width 2e-31 (about ten times the minibrot): with 4 periods, every pixel
    of its last frame came out interior (a black frame, 1280x720). ``max = "auto"`` now
    gives frames more periods the closer they show the minibrot (farm/plan/references.py,
    auto_periods), and nearly every pixel of that frame escapes."""
    limits, store = _validate_and_render(tmp_path, "mini", f"""
        [view]
        center = ["{NUCLEUS_8007[0]}", "{NUCLEUS_8007[1]}"]
        width = ["1e-27", "2e-31"]
        [image]
        size = [64, 36]
        [animation]
        frames = 3
        """)
    assert 4 * 8007 < limits[0] < limits[1] < limits[2] and 10 * 8007 < limits[2] < 20 * 8007
    with h5py.File(store) as f:
        counts = f["iterations"][2][...]
        assert list(f["frames"]["max_iter"]) == limits
    assert (counts > 0).mean() > 0.97 and (counts > 4 * 8007).mean() > 0.5
