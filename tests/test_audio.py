"""The soundtrack: output.audio muxed into the MP4 as AAC (farm/encode/audio.py), the video's
length from the track (animation.duration = "audio"), and bad tracks refused before any work."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import run_farm

from farm.encode import probe
from farm.encode.audio import SoundtrackSink, silent_path
from farm.errors import SpecError
from farm.runtime.media import ffmpeg_binary, track_seconds


def tone(path: Path, seconds: float) -> Path:
    """A 440 Hz sine of ``seconds`` (ffmpeg's lavfi source), encoded as the suffix says."""
    subprocess.run([ffmpeg_binary(), "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                    f"sine=frequency=440:duration={seconds}:sample_rate=44100", "-y", str(path)],
                   check=True)
    return path


def streams(video: Path) -> list[str]:
    """The stream lines ffmpeg prints for a file ("Video: h264 ...", "Audio: aac ...")."""
    text = subprocess.run([ffmpeg_binary(), "-hide_banner", "-i", str(video)], capture_output=True,
                          text=True, check=False).stderr
    return re.findall(r"Stream #\S+.*?: ((?:Video|Audio): \S+)", text)


@pytest.fixture(scope="module")
def tracks(tmp_path_factory):
    root = tmp_path_factory.mktemp("audio")
    return {"flac": tone(root / "tone.flac", 3.0), "wav": tone(root / "short.wav", 1.5)}


def job(tmp_path: Path, name: str, animation: str, audio: str | None) -> Path:
    path = tmp_path / f"{name}.toml"
    sound = f'audio = "{audio}"\n' if audio else ""
    path.write_text(f"""
[view]
center = ["-0.75", "0.1"]
width = ["3", "0.5"]
[image]
size = [32, 18]
[animation]
fps = 10
{animation}
[iterations]
max = 100
[output]
store = "{tmp_path / name}.h5"
video = "{tmp_path / name}.mp4"
{sound}""")
    return path


def test_track_length_and_bad_tracks(tracks, tmp_path):
    assert track_seconds(tracks["flac"]) == pytest.approx(3.0, abs=0.02)
    assert track_seconds(tracks["wav"]) == pytest.approx(1.5, abs=0.02)
    (tmp_path / "noise.flac").write_text("not a sound")
    for path, words in [(tmp_path / "missing.flac", "does not exist"), (tmp_path, "is not a file"),
                        (tmp_path / "noise.flac", "not a sound file ffmpeg can read")]:
        with pytest.raises(SpecError) as err:
            track_seconds(path)
        assert err.value.field == "output.audio" and words in err.value.message
        assert str(err.value).count(path.name) == 1, err.value  # the path once (issue 44.10)


def test_duration_from_the_track_gives_a_video_with_its_sound(tracks, tmp_path):
    path = job(tmp_path, "song", 'duration = "audio"', str(tracks["flac"]))
    result = run_farm("render", str(path), "--quiet")
    assert result.returncode == 0, result.stderr
    video = tmp_path / "song.mp4"
    assert streams(video) == ["Video: h264", "Audio: aac"]
    assert probe(video)[0] == 30  # 3 s at 10 fps
    assert track_seconds(video) == pytest.approx(3.0, abs=0.1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["song.h5", "song.mp4", "song.toml"]
    # farm encode makes the same video again, with another (shorter) track from the options
    again = run_farm("encode", str(tmp_path / "song.h5"), "--video", str(tmp_path / "b.mp4"),
                     "--audio", str(tracks["wav"]))
    assert again.returncode == 0, again.stderr
    assert track_seconds(tmp_path / "b.mp4") == pytest.approx(1.5, abs=0.1)  # the shorter one
    # and the video cut to it, 1.5 s at 10 fps: 15 frames with ffmpeg 9; older ones'
    # -shortest keeps a few more (17 with 4.2.2, 18 with Debian 12's 5.1)
    assert 15 <= probe(tmp_path / "b.mp4")[0] <= 18
    assert streams(tmp_path / "b.mp4") == ["Video: h264", "Audio: aac"]


def test_a_longer_track_is_cut_to_the_video(tracks, tmp_path):
    path = job(tmp_path, "cut", "duration = 2", str(tracks["flac"]))
    result = run_farm("render", str(path), "--quiet")
    assert result.returncode == 0, result.stderr
    assert track_seconds(tmp_path / "cut.mp4") == pytest.approx(2.0, abs=0.1)


@pytest.mark.parametrize("command", ["render", "validate"])
def test_a_bad_track_is_one_line_exit_2_before_any_work(tmp_path, command):
    (tmp_path / "noise.flac").write_text("not a sound")
    for audio, words in [(str(tmp_path / "gone.flac"), "does not exist"),
                         (str(tmp_path / "noise.flac"), "not a sound file")]:
        for animation in ("frames = 5", 'duration = "audio"'):
            path = job(tmp_path, "bad", animation, audio)
            result = run_farm(command, str(path))
            assert result.returncode == 2, result.stderr
            assert result.stderr.count("\n") == 1, result.stderr
            assert "output.audio" in result.stderr and words in result.stderr
            assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml", "noise.flac"]
    still = job(tmp_path, "bad", "frames = 1", str(tmp_path / "noise.flac"))
    result = run_farm(command, str(still))
    assert result.returncode == 2 and "output.audio: a one-frame job is a still" in result.stderr


class _Inner:
    """A sink that "writes" a silent video file, or fails."""

    def __init__(self, path: Path, fail: bool = False):
        self.path, self.fail = path, fail
        self.color_s = self.write_s = 0.0
        self.written = 0

    def frame_complete(self, f: int) -> None:
        pass

    def finish(self) -> Path:
        if self.fail:
            raise RuntimeError("encoder died")
        self.path.write_bytes(b"not a video")
        return self.path

    def abort(self) -> None:
        self.path.unlink(missing_ok=True)


@pytest.mark.parametrize("fail", [True, False])
def test_a_failed_mux_leaves_nothing(tracks, tmp_path, fail):
    """The encoder fails, or ffmpeg cannot mux (the silent file is not a video): the error
    is raised and neither the video, nor the silent or partial file, is left."""
    video = tmp_path / "v.mp4"
    sink = SoundtrackSink(_Inner(silent_path(video), fail), video, tracks["wav"])
    with pytest.raises(Exception, match="encoder died" if fail else "could not add the soundtrack"):
        sink.finish()
    assert list(tmp_path.iterdir()) == []


def test_encode_writes_beside_the_store_and_keeps_a_video_of_other_sound(tracks, tmp_path):
    """`farm encode STORE` run elsewhere writes beside the store, not under the current
    folder; a soundtrack the video there lacks goes beside it, not over it, unless
    --force (issue 44.8)."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "renders").mkdir(parents=True)
    elsewhere.mkdir()
    path = work / "zoom.toml"
    path.write_text(job(tmp_path, "zoom", "frames = 6", None).read_text()
                    .replace(f'"{tmp_path / "zoom"}.h5"', '"renders/zoom.h5"')
                    .replace(f'"{tmp_path / "zoom"}.mp4"', '"renders/zoom.mp4"'))
    assert run_farm("render", "zoom.toml", "--quiet", cwd=work).returncode == 0
    store, silent = work / "renders" / "zoom.h5", work / "renders" / "zoom.mp4"
    made = silent.stat().st_mtime_ns
    recoloured = run_farm("encode", str(store), "--palette", "fire", cwd=elsewhere)
    assert recoloured.returncode == 0, recoloured.stderr
    assert (work / "renders" / "zoom.fire.mp4").is_file() and not (elsewhere / "renders").exists()
    sound = run_farm("encode", str(store), "--audio", str(tracks["wav"]), cwd=elsewhere)
    assert sound.returncode == 0, sound.stderr
    beside = work / "renders" / "zoom.audio-short.mp4"
    assert streams(beside) == ["Video: h264", "Audio: aac"]
    assert silent.stat().st_mtime_ns == made and streams(silent) == ["Video: h264"]
    forced = run_farm("encode", str(store), "--audio", str(tracks["wav"]), "--force", cwd=elsewhere)
    assert forced.returncode == 0, forced.stderr
    assert streams(silent) == ["Video: h264", "Audio: aac"]
