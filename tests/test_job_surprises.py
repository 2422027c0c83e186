"""Job files that do something other than the user meant, said in one line (issue 25,
item 6): one frame of a zoom, a gradient file next to the job, a store larger than
its file system can hold."""

from __future__ import annotations

import textwrap
from pathlib import Path

from conftest import run_farm


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
