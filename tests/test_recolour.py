"""Recolouring a finished store keeps what was made (issue 25, items 3 and 6): `farm
encode` with other colours writes beside the render's video, never over it."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import job_text, run_farm
from PIL import Image


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


def _gradient_job(folder: Path, out: Path, palette: str = "pal/warm.txt") -> Path:
    """A job in ``folder`` whose gradient file is ``folder/pal/warm.txt``."""
    (folder / "pal").mkdir(parents=True)
    (folder / "pal" / "warm.txt").write_text("#ff0000\n#00ff00\n0 0 255\n")
    job = folder / "job.toml"
    job.write_text(job_text(size=(32, 24), frames=3, width=("3", "0.5"), tile=(16, 16), max_iter=100,
                            extra=f'[color]\npalette = "{palette}"\n[output]\n'
                            f'store = "{out / "g.h5"}"\nvideo = "{out / "g.mp4"}"\n'))
    return job


def _pngs(folder: Path) -> list[np.ndarray]:
    return [np.asarray(Image.open(p)) for p in sorted(folder.glob("*.png"))]


def test_a_gradient_file_is_read_next_to_the_job_and_kept_in_the_store(tmp_path):
    """color.palette = "pal/warm.txt" is the file beside the job file, whatever the current
    directory; its stops go into the store's spec, so the store recolours from anywhere
    once the file is gone."""
    jobs, out, elsewhere = tmp_path / "jobs", tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    job = _gradient_job(jobs, out)
    for args in (("validate", str(job)), ("render", str(job), "--quiet", "--no-video")):
        result = run_farm(*args, cwd=elsewhere)
        assert result.returncode == 0, result.stderr
    store = out / "g.h5"
    with h5py.File(store) as f:
        assert 'palette = {name = "warm", stops = [[0.0, [255, 0, 0]]' in f.attrs["spec"]
    by_file = run_farm("frames", str(store), "--out", str(tmp_path / "by_file"),
                       "--palette", str(jobs / "pal" / "warm.txt"))
    assert by_file.returncode == 0, by_file.stderr
    shutil.rmtree(jobs / "pal")
    stored = run_farm("frames", str(store), "--out", str(tmp_path / "stored"), cwd=elsewhere)
    assert stored.returncode == 0, stored.stderr
    assert len(_pngs(tmp_path / "stored")) == 3
    assert all((a == b).all() for a, b in zip(_pngs(tmp_path / "stored"), _pngs(tmp_path / "by_file"),
                                              strict=True))
    # a --job file's gradient is relative to that job file's folder, too
    colours = tmp_path / "colours"
    (colours / "pal").mkdir(parents=True)
    (colours / "pal" / "warm.txt").write_text("#ff0000\n#00ff00\n0 0 255\n")
    (colours / "c.toml").write_text('[color]\npalette = "pal/warm.txt"\n')
    again = run_farm("frames", str(store), "--out", str(tmp_path / "job"), "--job",
                     str(colours / "c.toml"), cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    assert all((a == b).all() for a, b in zip(_pngs(tmp_path / "job"), _pngs(tmp_path / "stored"),
                                              strict=True))


def test_a_missing_gradient_file_names_where_it_was_looked_for(tmp_path):
    job = _gradient_job(tmp_path / "jobs", tmp_path / "out", palette="pal/cold.json")
    result = run_farm("validate", str(job), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip()
    assert "\n" not in line and "color.palette" in line
    assert str(tmp_path / "jobs" / "pal" / "cold.json") in line


def test_render_or_resume_of_a_finished_store_leaves_its_video_alone(rendered, tmp_path):
    """Issue 25.6c: a complete store whose video is in place, made with the same
    settings, is not coloured and encoded again; a video that is missing, changed or made
    with other colours is."""
    store, video = rendered
    job = tmp_path / "job.toml"
    before = _fingerprint(video)
    for args in (("resume", str(store)), ("render", str(job))):
        result = run_farm(*args, "--quiet", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "nothing to do" in result.stderr and "wrote" not in result.stderr, result.stderr
        assert _fingerprint(video) == before
    with h5py.File(store) as f:
        assert f["runs"]["video_frames"][:3].tolist() == [4, 0, 0]

    video.unlink()  # missing: made again
    result = run_farm("resume", str(store), "--quiet")
    assert result.returncode == 0 and f"wrote {video}" in result.stderr, result.stderr
    assert video.read_bytes() == before[0]

    video.write_bytes(b"not the video")  # changed: made again
    assert run_farm("resume", str(store), "--quiet").returncode == 0
    assert video.read_bytes() == before[0]

    job.write_text(job.read_text() + '[color]\npalette = "ice"\n')  # other colours: made again
    result = run_farm("render", str(job), "--quiet", cwd=tmp_path)
    assert result.returncode == 0 and f"wrote {video}" in result.stderr, result.stderr
    ice = _fingerprint(video)
    assert ice[0] != before[0]
    # the store's job still says "classic": encode knows the video there is ice
    result = run_farm("encode", str(store))
    assert result.returncode == 0, result.stderr
    assert _fingerprint(video) == ice and (tmp_path / "job.classic.mp4").read_bytes() == before[0]
