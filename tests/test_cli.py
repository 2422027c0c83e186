"""The command line: help, validate's plan, devices."""

from __future__ import annotations

import json

from conftest import run_farm


def test_help_lists_commands():
    result = run_farm("--help")
    assert result.returncode == 0
    for command in ("render", "resume", "status", "frames", "encode", "validate", "devices", "bench"):
        assert command in result.stdout


def test_validate_prints_the_plan(tmp_path, write_job):
    job = write_job(size=(64, 48), frames=30, width=("4", "1e-20"), max_iter="auto")
    result = run_farm("validate", str(job))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "frames     30" in out and "64x48" in out
    assert "4 -> 1e-20" in out and "(auto)" in out
    assert "f64 0-" in out and "perturb" in out
    assert "pixels     92.2 k in all" in out and "work       at most" in out
    assert not list(tmp_path.glob("*.h5"))  # validate writes nothing


def test_devices_names_the_chosen_one():
    result = run_farm("devices")
    assert result.returncode == 0
    assert "*" in result.stdout and "one process uses" in result.stdout


def test_bad_device_selector():
    """A selector that names no device: the devices are listed, and one line says what
    is wrong (exit 2); one that is not a selector: one line only."""
    result = run_farm("devices", "--device", "7:9")
    assert result.returncode == 2 and "[0:0]" in result.stdout, result.stderr
    assert result.stderr.startswith("farm: --device: no device 7:9; the devices here are [0:0]")
    for command in ("devices", "bench"):
        result = run_farm(command, "--device", "banana")
        assert result.returncode == 2 and result.stdout == "", result.stderr
        assert result.stderr.count("\n") == 1 and "--device: 'banana' is not auto" in result.stderr


def test_bench_reports_each_format_of_its_workload():
    """`farm bench --json` on the CPU: the small workload, one row per format asked,
    rates consistent with the work and time."""
    result = run_farm("bench", "--device", "cpu", "--formats", "f64,perturb-fx", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["format"] for r in rows] == ["f64", "perturb-fx"]
    for r in rows:
        assert r["workload"] == "small" and r["pixels"] == 256 * 256 and r["seconds"] > 0
        assert abs(r["giters"] - r["pixels"] * r["iterations"] / r["seconds"] / 1e9) < 1e-9 * r["giters"]
