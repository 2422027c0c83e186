"""Job files that do something other than the user meant, said in one line (issue 25,
item 6): one frame of a zoom, a gradient file next to the job, a store larger than
its file system can hold."""

from __future__ import annotations

import errno
import os
import textwrap
from pathlib import Path

import pytest
from conftest import run_farm

from farm import cli
from farm.errors import EXIT_USAGE
from farm.store import layout, space


def _job(path: Path, frames: int, width: tuple[str, str], extra: str = "") -> Path:
    path.write_text(textwrap.dedent(f"""
        [view]
        center = ["-0.75", "0.1"]
        width = ["{width[0]}", "{width[1]}"]
        [image]
        size = [32, 24]
        [animation]
        frames = {frames}
        [iterations]
        max = 100
        [output]
        store = "{path.with_suffix('.h5')}"
        video = "{path.with_suffix('.mp4')}"
        """) + textwrap.dedent(extra))
    return path


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("farm: warning:")]


def test_one_frame_of_a_zoom_is_a_warning_in_validate_and_render(tmp_path):
    """frames = 1 with two widths renders the first width only: validate and render say
    so in one line naming animation.frames, and go on (a one-frame preview of a zoom is
    a fair thing to ask for)."""
    job = _job(tmp_path / "one.toml", 1, ("3", "0.5"))
    for args in (("validate", str(job)), ("render", str(job), "--quiet")):
        result = run_farm(*args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        lines = _warnings(result.stderr)
        assert len(lines) == 1 and "animation.frames = 1" in lines[0], result.stderr
        assert "view.width[1] = 0.5 is not used" in lines[0]
    assert (tmp_path / "one.png").exists()
    still = _job(tmp_path / "still.toml", 1, ("3", "3.0"))  # one width: nothing to say
    zoom = _job(tmp_path / "zoom.toml", 2, ("3", "0.5"))
    for job in (still, zoom):
        result = run_farm("validate", str(job), cwd=tmp_path)
        assert result.returncode == 0 and _warnings(result.stderr) == [], result.stderr


MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /tmp tmpfs rw 0 0
/dev/sdb1 /media/usb\\040stick vfat rw 0 0
"""


def test_the_file_system_holding_a_path_and_its_largest_file(monkeypatch, tmp_path):
    assert space.mount_of(Path("/media/usb stick/z.h5"), MOUNTS) == ("/media/usb stick", "vfat")
    assert space.mount_of(Path("/tmp/a/b/z.h5"), MOUNTS) == ("/tmp", "tmpfs")
    assert space.mount_of(Path("/home/me/z.h5"), MOUNTS) == ("/", "ext4")
    monkeypatch.setattr(space, "mount_of", lambda path: ("/", "ext4"))
    monkeypatch.setattr(space.os, "statvfs", lambda p: os.statvfs_result((4096,) * 11))
    assert space.largest_file(tmp_path / "z.h5") == ("ext4", 16 * 2**40)
    monkeypatch.setattr(space, "mount_of", lambda path: ("/media/usb", "vfat"))
    assert space.largest_file(tmp_path / "z.h5") == ("vfat", 2**32 - 1)


@pytest.fixture
def big_job(tmp_path):
    """A 21.5 TB store (2^28 pixels, 10000 frames)."""
    job = tmp_path / "big.toml"
    job.write_text(textwrap.dedent(f"""
        [view]
        center = ["-0.75", "0.1"]
        width = ["3", "3"]
        [image]
        size = [32768, 8192]
        [animation]
        frames = 10000
        [iterations]
        max = 100
        [output]
        store = "{tmp_path / 'out' / 'big.h5'}"
        """))
    return job


def test_a_store_above_the_largest_file_is_refused_even_ignoring_free_space(
        big_job, tmp_path, monkeypatch, capsys):
    """Issue 25.6d: ext4 holds files up to 16 TiB; a larger store with
    --ignore-free-space ended in a 54-line h5py traceback. Now: one line, exit 2,
    nothing written; validate says so."""
    monkeypatch.setattr(space, "largest_file", lambda path: ("ext4", 16 * 2**40))
    status = cli.main(["render", str(big_job), "--ignore-free-space", "--no-video", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert status == EXIT_USAGE and "\n" not in err.split("farm: rendering on")[-1].strip(), err
    last = err.splitlines()[-1]
    assert "output.store" in last and "is 21.6 TB long" in last and "(ext4) holds is 17.6 TB" in last
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    assert cli.main(["validate", str(big_job)]) == 0
    assert "longer than the largest file of its file system (ext4: 17.6 TB)" in capsys.readouterr().out


def test_a_file_system_that_refuses_a_large_file_is_one_line(big_job, tmp_path, monkeypatch, capsys):
    """A file system whose cap is not known: creating the store fails with EFBIG, said
    in one line (exit 2), nothing left behind."""
    def too_large(path, plan, codec=None):
        raise OSError(errno.EFBIG, "Unable to extend file properly (file too large)")

    monkeypatch.setattr(space, "largest_file", lambda path: None)
    monkeypatch.setattr(layout, "begin", too_large)
    status = cli.main(["render", str(big_job), "--ignore-free-space", "--no-video", "--quiet"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert status == EXIT_USAGE and "more than its file system holds in one file" in last, last
    assert not (tmp_path / "out" / "big.h5").exists()
