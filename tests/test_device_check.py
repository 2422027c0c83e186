"""Device choice (issue 25, item 7): a compiler that crashes is found in a child process
before a device is chosen, and remembered; selectors that name nothing are one line,
exit 2, wherever they come from."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import run_farm

from farm.compute import device as devmod
from farm.compute import kernelcheck
from farm.compute.inventory import DeviceInfo, list_devices
from farm.errors import EXIT_FAILED, EXIT_USAGE


def _one_line(result, status: int, *words: str) -> str:
    assert result.returncode == status, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("farm: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A verdict cache of this test's own (FARM_DEVICE_CACHE, also for subprocesses)."""
    path = tmp_path / "cache" / "devices.json"
    monkeypatch.setenv("FARM_DEVICE_CACHE", str(path))
    devmod.build_problem.cache_clear()
    yield path
    devmod.build_problem.cache_clear()


def test_the_child_renders_every_case_or_dies_alone(cl_device, cache, monkeypatch):
    """The check renders every kind of kernel on a device that works; a child whose
    compiler aborts (FARM_TEST_KERNEL_CRASH) is a verdict naming the kernel, not the
    end of this process."""
    info, _ = cl_device
    if info.kind == "GPU":
        pytest.skip("GPUs are not checked")
    assert kernelcheck.run_child(info) == (None, True)
    monkeypatch.setenv(kernelcheck.CRASH_KNOB, info.ref)
    problem, final = kernelcheck.run_child(info)
    assert final and problem.startswith("its OpenCL compiler crashed (SIGABRT) on the f64 kernel")


def test_a_render_never_starts_on_a_device_whose_compiler_crashes(tmp_path, write_job, cache):
    """Every device's compiler aborts: `farm render` says so in one line (exit 1) and
    what to do, writes nothing, and the verdicts are remembered for `farm devices`."""
    job = write_job(size=(16, 16), frames=1, tile=(16, 16), max_iter=50)
    env = {kernelcheck.CRASH_KNOB: "*"}
    result = run_farm("render", str(job), "--quiet", "--device", "cpu", env=env)
    line = _one_line(result, EXIT_FAILED, "no OpenCL device can render",
                     "its OpenCL compiler crashed (SIGABRT) on the f64 kernel")
    assert "PoCL" in line  # what to install, or that every PoCL here fails
    assert not (tmp_path / "job.h5").exists()
    verdicts = json.loads(cache.read_text())
    assert verdicts and all("crashed" in v["problem"] for v in verdicts.values())
    shown = run_farm("devices", "--device", "cpu", env=env)
    assert shown.returncode == EXIT_FAILED and "cannot render: its OpenCL compiler crashed" in shown.stdout


def _fake(p: int, kind: str = "CPU", driver: str = "1.0") -> DeviceInfo:
    return DeviceInfo(p, 0, f"platform {p}", f"dev {p}", kind, 2, 1 << 30, True, True,
                      "OpenCL 3.0 PoCL 9.9", "OpenCL 3.0", driver)


def test_verdicts_are_remembered_per_driver_and_device(cache, monkeypatch):
    """One child per driver and device: the verdict is read back from the cache (here
    and by other processes), a new driver is checked again, and an unfinished check (a
    timeout) is not remembered."""
    asked: list[str] = []

    def child(info, timeout=kernelcheck.TIMEOUT_S):
        asked.append(info.ref)
        return ("timed out", False) if info.platform_index == 2 else (
            "crashed" if info.platform_index == 0 else None, True)

    monkeypatch.setattr(kernelcheck, "run_child", child)
    first, second = _fake(0), _fake(1)
    assert [kernelcheck.problem(i) for i in (first, second, first, second)] == ["crashed", None] * 2
    assert asked == ["0:0", "1:0"]
    assert kernelcheck.cached(first) == (True, "crashed") and kernelcheck.cached(second) == (True, None)
    assert kernelcheck.problem(dataclasses.replace(first, driver="2.0")) == "crashed"
    assert asked == ["0:0", "1:0", "0:0"]  # a new driver: checked again
    assert kernelcheck.problem(_fake(2)) == "timed out" and kernelcheck.problem(_fake(2)) == "timed out"
    assert asked[3:] == ["2:0", "2:0"] and kernelcheck.cached(_fake(2)) == (False, None)
    devmod.build_problem.cache_clear()  # a render falls back to the next CPU device
    devs = [(_fake(0), object()), (_fake(1), object())]
    assert [i.ref for i, _ in devmod._usable(devs)] == ["1:0"]


def test_llvm_error_lines_are_made_readable():
    stderr = ("77 warnings generated.\nLLVM ERROR: Cannot select: 0x7fa5dd5a8318: i64 = fma "
              "0x7fa5dd5aa8a8, 0x7fa5dd5a8ee0, 0x7fa5dd5e0138\n  0x7fa5dd5aa8a8: i64,ch = CopyFromReg\n")
    assert kernelcheck._llvm(stderr) == ": LLVM ERROR: Cannot select: i64 = fma"


# ---------------------------------------------------------------------------- selectors


def test_a_selector_that_names_no_device_is_exit_2_in_validate_as_in_render(write_job):
    job = write_job(size=(16, 16), frames=2, width=("3", "1"), tile=(16, 16), max_iter=50)
    for command in ("validate", "render"):
        _one_line(run_farm(command, str(job), "--device", "9:9"), EXIT_USAGE,
                  "--device: no device 9:9", "the devices here are [0:0]")
    line = _one_line(run_farm("render", str(job), env={"FARM_DEVICE": "9:9"}), EXIT_USAGE,
                     "FARM_DEVICE: no device 9:9")
    assert "--device" not in line
    _one_line(run_farm("validate", str(job), env={"FARM_DEVICE": "gpu0"}), EXIT_USAGE,
              "FARM_DEVICE: 'gpu0' is not auto, gpu, cpu or P:D")


@pytest.mark.skipif(any(i.kind == "GPU" for i, _ in list_devices()), reason="this machine has a GPU")
def test_a_missing_gpu_says_what_is_there_not_to_install_pocl():
    result = run_farm("devices", "--device", "gpu")
    line = _one_line(result, EXIT_FAILED, "no OpenCL GPU found (--device gpu)",
                     "the OpenCL devices here are [0:0]")
    assert "pocl" not in line.lower() and "[0:0]" in result.stdout


def test_a_job_file_with_a_byte_order_mark_is_read(write_job):
    job = write_job(size=(16, 16), frames=2, width=("3", "1"), tile=(16, 16), max_iter=50)
    job.write_bytes(b"\xef\xbb\xbf" + job.read_bytes())
    result = run_farm("validate", str(job))
    assert result.returncode == 0, result.stderr
