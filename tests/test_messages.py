"""What the farm says (issue 25, item 9): status counts that agree, sizes in PB, ranges,
read-only file systems, a store being rendered, and help for every command and flag."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import pytest
from conftest import ROOT, run_farm

from farm import cli
from farm import spec as specmod
from farm.encode.settings import frame_range
from farm.errors import SpecError, UsageError
from farm.run.report import status_text
from farm.store import space
from farm.store.lock import StoreLock


def _status(**changes) -> dict:
    """`farm status`'s data for a 240-frame store, 47 frames rendered, a render running."""
    info = {"store": "z.h5", "method": "frames", "frames": 240, "tiles_per_frame": 1,
            "tiles_done": 47, "tiles_total": 240, "frames_complete": 48,
            "frame_progress": [1.0] * 47 + [0.0] * 193, "runs": 1, "complete": False,
            "rendering": {"pid": 7}, "run": {"index": 0, "workers": 1, "tiles": 47,
                                             "tiles_per_s": 1.0, "elapsed_s": 47.0,
                                             "eta_s": 193.0, "last_tile_age_s": -0.3,
                                             "busy_s": {"0": 47.0}, "busy_share": {"0": 1.0},
                                             "balance_max_over_mean": 1.0}}
    return {**info, **changes}


def test_status_counts_a_frame_only_when_its_tiles_are_done():
    """The frame flags are read after the tile flags while a render writes both: a frame
    completed in between read as "frames 48/240" beside "tiles 47/240"; and a tile
    finished a moment after `now` was taken read as "-0 s ago"."""
    text = status_text(_status())
    assert "frames     47/240 complete" in text and "tiles      47/240" in text
    assert "last tile 0 s ago" in text and "-0 s" not in text
    assert "frames     12/240" in status_text(_status(frames_complete=12))  # histograms behind


def test_sizes_go_up_to_exabytes():
    assert space.human(1.37e16) == "13.7 PB"
    assert space.human(2.5e18) == "2.5 EB"
    assert space.human(8.2e11) == "820 GB"


def test_a_reversed_frame_range_is_called_empty():
    with pytest.raises(UsageError, match=r"--frames: 10:5 is an empty range.*B must be above A"):
        frame_range("10:5", 240)
    with pytest.raises(UsageError, match="outside the store's frames 0..239"):
        frame_range("230:250", 240)
    assert frame_range("5:8", 240) == [5, 6, 7]


def test_a_file_on_a_read_only_file_system_is_not_called_permission_denied(tmp_path, monkeypatch):
    video = tmp_path / "zoom.mp4"
    video.write_bytes(b"")
    read_only = os.statvfs_result((4096,) * 8 + (os.ST_RDONLY, 255))  # f_flag, f_namemax
    monkeypatch.setattr(specmod.os, "access", lambda path, mode: False)
    monkeypatch.setattr(specmod.os, "statvfs", lambda path: read_only)
    with pytest.raises(SpecError, match="cannot write .*zoom.mp4: read-only file system"):
        specmod.check_writable(video, "output.video")
    writable = os.statvfs_result((4096,) * 8 + (0, 255))
    monkeypatch.setattr(specmod.os, "statvfs", lambda path: writable)
    with pytest.raises(SpecError, match="permission denied"):
        specmod.check_writable(video, "output.video")


def test_encode_of_a_store_being_rendered_says_so(tmp_path, write_job):
    job = write_job(size=(32, 24), frames=4, width=("3", "0.5"), tile=(16, 16), max_iter=100)
    assert run_farm("render", str(job), "--no-video", "--quiet").returncode == 0
    store = tmp_path / "job.h5"
    with h5py.File(store, "r+") as f:
        f["frame_done"][2] = 0
    with StoreLock(store):  # as a render holds it
        result = run_farm("encode", str(store))
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert f"being rendered now by pid {os.getpid()}" in line and "farm status" in line, line
    assert "farm resume" not in line
    result = run_farm("encode", str(store))  # nobody renders it: resume it
    assert result.returncode == 2 and f"run `farm resume {store}`" in result.stderr


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_has_a_description_and_every_option_help():
    for name, parser in _subcommands().items():
        assert parser.description, f"farm {name} --help has no description"
        for action in parser._actions:
            if action.option_strings:  # JOB.toml, STORE: the usage line says it
                assert action.help, f"farm {name}: {action.option_strings} has no help"


def test_the_benchmarks_docstrings_show_only_flags_they_have():
    """Every --flag in a benchmark's example command lines is one of its options."""
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        doc = script.read_text().split('"""')[1]
        shown = {flag for line in doc.splitlines() if f"benchmarks/{script.name}" in line
                 for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line.split("#")[0])}
        if not shown:
            continue
        out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                             cwd=Path(ROOT), check=True).stdout
        options = set(re.findall(r"--[a-z][a-z0-9-]*", out.rpartition("options:")[2]))
        assert shown <= options, f"{script.name}: {sorted(shown - options)} are not options"


def test_expmap_validate_says_units_where_it_means_units():
    """An expmap job's references serve render units, not video frames."""
    result = run_farm("validate", str(ROOT / "jobs" / "seahorse_expmap.toml"))
    assert result.returncode == 0, result.stderr
    refs = [line for line in result.stdout.splitlines() if line.startswith("reference")]
    assert refs and all(re.search(r": units \d", line) for line in refs), refs
    assert not any("frames" in line for line in refs)


def test_a_render_with_nothing_to_do_names_no_device(tmp_path, write_job):
    """"rendering on ..." is said when tiles are rendered, not by a render that finds its
    store complete (issue 44.10)."""
    job = write_job(size=(32, 24), frames=2, width=("3", "1"), tile=(16, 16), max_iter=50)
    first = run_farm("render", str(job), "--no-video", "--quiet")
    assert first.returncode == 0 and "farm: rendering on " in first.stderr, first.stderr
    again = run_farm("render", str(job), "--no-video", "--quiet")
    assert again.returncode == 0, again.stderr
    assert "rendering on" not in again.stderr, again.stderr


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc")
def test_a_store_under_proc_says_files_cannot_be_created_there(tmp_path, write_job):
    """Not "no such file or directory in /proc" (issue 44.10)."""
    job = write_job(size=(32, 24), frames=2, width=("3", "1"), tile=(16, 16), max_iter=50)
    result = run_farm("validate", str(job), "--json")
    assert result.returncode == 0, result.stderr
    why = r"cannot write /proc/farm-test/s\.h5: files cannot be created in /proc"
    with pytest.raises(SpecError, match=why):
        specmod.check_writable("/proc/farm-test/s.h5", "output.store")


def test_compiler_messages_go_to_a_log_not_over_the_progress_bar(tmp_path, write_job):
    """An OpenCL compiler's warnings (PoCL: "77 warnings generated.", pyopencl's
    CompilerWarning) go to the cache folder's build.log, not to the terminal (issue 44.10)."""
    job = write_job(size=(32, 24), frames=2, width=("3", "1e-20"), tile=(16, 16), max_iter=200)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "POCL_CACHE_DIR": str(tmp_path / "pocl")}
    result = run_farm("render", str(job), "--no-video", env=env)
    assert result.returncode == 0, result.stderr
    assert "CompilerWarning" not in result.stderr and "warnings generated" not in result.stderr
    log = tmp_path / "cache" / "zoomfarm" / "build.log"
    assert not log.exists() or log.read_text().startswith("== ")
