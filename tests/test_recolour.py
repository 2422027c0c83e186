"""Recolouring a finished store keeps what was made (issue 25, items 3 and 6): `farm
encode` with other colours writes beside the render's video, never over it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_farm


def _fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


@pytest.fixture
def rendered(tmp_path, write_job):
    """A finished 4-frame store and the video its render made (classic palette)."""
    job = write_job(size=(32, 24), frames=4, width=("3", "0.5"), tile=(16, 16), max_iter=100)
    result = run_farm("render", str(job), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path / "job.h5", tmp_path / "job.mp4"


def test_encode_with_another_palette_writes_beside_the_video(rendered, tmp_path):
    store, video = rendered
    before = _fingerprint(video)
    result = run_farm("encode", str(store), "--palette", "ice")
    assert result.returncode == 0, result.stderr
    assert _fingerprint(video) == before  # the render's video is untouched
    ice = tmp_path / "job.ice.mp4"
    assert ice.stat().st_size > 0 and f"wrote {ice}" in result.stderr
    assert "beside" in result.stderr and "--video" in result.stderr

    result = run_farm("encode", str(store), "--palette", "fire", "--method", "histogram",
                      "--cycles", "1.5", "--crf", "30")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "job.histogram.fire.cycles1.5.crf30.mp4").stat().st_size > 0
    assert _fingerprint(video) == before

    named = tmp_path / "mine.mp4"  # --video names the target: written there
    result = run_farm("encode", str(store), "--palette", "ice", "--video", str(named))
    assert result.returncode == 0 and named.read_bytes() == ice.read_bytes(), result.stderr
    video.write_bytes(b"")  # --video over the render's own video too, when asked
    result = run_farm("encode", str(store), "--palette", "ice", "--video", str(video))
    assert result.returncode == 0 and video.read_bytes() == ice.read_bytes(), result.stderr


def test_encode_with_the_same_settings_remakes_the_video_in_place(rendered):
    store, video = rendered
    video.unlink()
    result = run_farm("encode", str(store))
    assert result.returncode == 0, result.stderr
    assert video.stat().st_size > 0 and "beside" not in result.stderr


def test_a_still_is_recoloured_beside_its_png(tmp_path, write_job):
    job = write_job(size=(40, 30), frames=1, tile=(16, 16), max_iter=100)
    assert run_farm("render", str(job), "--quiet", cwd=tmp_path).returncode == 0
    still = tmp_path / "job.png"
    before = _fingerprint(still)
    result = run_farm("encode", str(tmp_path / "job.h5"), "--palette", "gray")
    assert result.returncode == 0, result.stderr
    assert _fingerprint(still) == before
    assert (tmp_path / "job.gray.png").stat().st_size > 0
