"""The frame sink, `farm encode` and `farm frames`: one code path, clean interruptions,
recolouring without rendering, paths checked before any work, stills as PNG."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import imageio_ffmpeg
import numpy as np
import pytest
from conftest import checkout_env, job_text, run_farm, start
from PIL import Image

from farm import spec as specmod
from farm.encode import VideoSettings, encode_video, open_video_sink, partial_path, write_frames
from farm.encode import ffmpeg as ffmpegmod
from farm.errors import StoreError, UsageError
from farm.store.reader import Store

W, H, FRAMES = 64, 48, 8


def sigint_as_a_terminal_gives_it() -> None:
    """In the child before exec: SIGINT's default action, as a terminal's foreground job
    has it (a job started in the background by a non-interactive shell inherits SIGINT
    ignored, and Python then raises no KeyboardInterrupt: the encode runs to its end)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def decoded(video: Path) -> list[bytes]:
    reader = imageio_ffmpeg.read_frames(str(video))
    next(reader)
    return [bytes(f) for f in reader]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A finished 8-frame store (64x48), made by `farm render --no-video`."""
    d = tmp_path_factory.mktemp("encode")
    job = d / "zoom.toml"
    job.write_text(job_text(size=(W, H), frames=FRAMES, width=("3", "0.02"), tile=(32, 32),
                            max_iter="auto", extra=f'[output]\nstore = "{d / "zoom.h5"}"\n'
                            f'video = "{d / "zoom.mp4"}"\n'))
    result = run_farm("render", str(job), "--no-video", cwd=d)
    assert result.returncode == 0, result.stderr
    return d / "zoom.h5"


@pytest.fixture
def copy(store, tmp_path) -> Path:
    target = tmp_path / "copy.h5"
    shutil.copy(store, target)
    return target


def stored_spec(store: Path) -> specmod.JobSpec:
    with Store(store) as s:
        return s.spec


def test_video_during_the_render_equals_encode_afterwards(store, tmp_path):
    """Frames handed to the sink one at a time, out of order, from another thread (as the
    master's writer thread does) decode to exactly the frames of `encode_video`."""
    spec = stored_spec(store)
    after = encode_video(store, spec.color, VideoSettings(tmp_path / "after.mp4", 10), progress=False)
    sink = open_video_sink(store, spec.color, VideoSettings(tmp_path / "during.mp4", 10))
    order = list(range(FRAMES))
    random.Random(3).shuffle(order)

    def writer_thread() -> None:
        for f in order:
            time.sleep(0.01)
            sink.frame_complete(f)

    t = threading.Thread(target=writer_thread)
    t.start()
    t.join()
    during = sink.finish()
    a, b = decoded(after), decoded(during)
    assert len(a) == FRAMES and a == b
    assert not partial_path(during).exists()


def test_video_made_by_farm_render_equals_farm_encode_afterwards(tmp_path, write_job):
    """`farm render` makes the video while it renders (the master's writer thread hands
    each completed frame to the sink); `farm encode` of the finished store afterwards
    gives a video that decodes to the same frames. The run's timeline counts them."""
    import h5py

    job = write_job(size=(48, 32), frames=6, width=("3", "0.05"), tile=(16, 16), max_iter=300)
    result = run_farm("render", str(job), "--quiet", env={"FARM_TEST_TILE_DELAY": "0.01"})
    assert result.returncode == 0, result.stderr
    during, store = tmp_path / "job.mp4", tmp_path / "job.h5"
    result = run_farm("encode", str(store), "--video", str(tmp_path / "after.mp4"))
    assert result.returncode == 0, result.stderr
    assert decoded(during) == decoded(tmp_path / "after.mp4") and len(decoded(during)) == 6
    with h5py.File(store) as f:
        run = f["runs"][0]
    assert run["video_frames"] == 6 and run["video_ended"] >= run["render_ended"] > 0


def test_sink_waits_for_the_colouring_window(store, tmp_path):
    """Frame 0 is not coloured until frames 0..K are complete (K = smoothing)."""
    spec = stored_spec(store)
    seen: list[int] = []

    def colourer(raw, stats, style):
        seen.append(raw.index)
        return np.zeros((*raw.shape, 3), np.uint8)

    sink = open_video_sink(store, spec.color, VideoSettings(tmp_path / "w.mp4", 10), colourer=colourer)
    for f in range(spec.color.smoothing):  # frames 0..K-1: not enough for frame 0
        sink.frame_complete(f)
    time.sleep(0.3)
    assert seen == []
    sink.frame_complete(spec.color.smoothing)
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [0]
    sink.abort()
    assert not (tmp_path / "w.mp4").exists() and not partial_path(tmp_path / "w.mp4").exists()


def test_finish_with_missing_frames_is_an_error_and_leaves_nothing(store, tmp_path):
    spec = stored_spec(store)
    sink = open_video_sink(store, spec.color, VideoSettings(tmp_path / "m.mp4", 10))
    for f in range(FRAMES - 1):
        sink.frame_complete(f)
    with pytest.raises(StoreError, match="frame 7 is not complete"):
        sink.finish()
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_during_encode_leaves_no_partial_video(store, tmp_path):
    """SIGINT to the command's process group (what a terminal's Ctrl-C does) while it
    encodes: exit 75, neither the video nor its hidden partial file remains."""
    video = tmp_path / "int.mp4"
    env = {**os.environ, "FARM_TEST_FRAME_DELAY": "0.5"}
    proc = start([sys.executable, "-m", "farm", "encode", str(store), "--video", str(video)],
                            env=env, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=sigint_as_a_terminal_gives_it)
    deadline = time.monotonic() + 60
    while not partial_path(video).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert partial_path(video).exists(), "the encoder never started"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err
    assert "interrupted" in err
    assert list(tmp_path.iterdir()) == []


def test_encode_defaults_to_the_jobs_video_and_recolours(store, tmp_path):
    spec = stored_spec(store)
    default = Path(spec.output.video)
    default.unlink(missing_ok=True)
    result = run_farm("encode", str(store))
    assert result.returncode == 0, result.stderr
    assert default.exists() and len(decoded(default)) == FRAMES
    fire = tmp_path / "fire.mp4"
    assert run_farm("encode", str(store), "--video", str(fire), "--palette", "fire",
                    "--method", "histogram").returncode == 0
    job = tmp_path / "colours.toml"
    job.write_text('[color]\nmethod = "histogram"\npalette = "fire"\n'
                   f'[output]\nvideo = "{tmp_path / "job.mp4"}"\n')
    assert run_farm("encode", str(store), "--job", str(job)).returncode == 0
    assert decoded(tmp_path / "job.mp4") == decoded(fire) != decoded(default)


def test_render_after_a_colour_change_recolours_without_rendering(tmp_path, write_job):
    """Issue 10.2: changing palette/cycles (and the video's crf) re-encodes from the stored
    raw data: a new video, no new run in the store."""
    job = write_job(size=(32, 24), frames=4, width=("3", "0.5"), tile=(16, 16), max_iter=100)
    assert run_farm("render", str(job), cwd=tmp_path).returncode == 0
    first = decoded(tmp_path / "job.mp4")
    job.write_text(job.read_text() + '[color]\npalette = "ice"\ncycles = 1.5\n')
    again = run_farm("render", str(job), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert decoded(tmp_path / "job.mp4") != first
    with h5py.File(tmp_path / "job.h5") as f:  # every tile is still the first run's
        assert f["done"][...].all() and (f["tiles/run"][...] == 0).all()


def test_frames_range_and_parallel_pngs(store, tmp_path):
    out = tmp_path / "png"
    result = run_farm("frames", str(store), "--out", str(out), "--frames", "2:5", "--palette", "gray")
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["frame_00002.png", "frame_00003.png", "frame_00004.png"]
    spec = stored_spec(store)
    gray = specmod.Color(**{**spec.color.__dict__, "palette": "gray"})
    paths = write_frames(store, tmp_path / "all", gray, progress=False)
    assert len(paths) == FRAMES
    for name in names:  # the range gives the same pictures as the whole run
        a = np.asarray(Image.open(out / name))
        assert a.shape == (H, W, 3) and (a == np.asarray(Image.open(tmp_path / "all" / name))).all()
    bad = run_farm("frames", str(store), "--out", str(out), "--frames", "6:99")
    assert bad.returncode == 2 and "--frames" in bad.stderr


def test_a_videos_frames_are_coloured_whole_on_their_threads(store, tmp_path, monkeypatch):
    """A video's sink colours each frame on its own frame thread (the band pool's extra
    split cost x264 CPU on small machines), as the video's planes; PNG outputs still
    split a frame over the cores. The video is those planes encoded by plain ffmpeg,
    and they are ffmpeg's own conversion of the PNGs' colours to within a level or
    two (farm/color/yuv.py)."""
    from farm.color import render as rendermod
    from farm.color.yuv import I420

    monkeypatch.setenv("FARM_COLOR_ENGINE", "numpy")
    calls: list[bool] = []
    made: dict[int, I420] = {}
    colour, colour_i420 = rendermod.colour, rendermod.colour_i420

    def spy(raw, stats, style, pool=None, band_rows=None):
        calls.append(pool is not None)
        return colour(raw, stats, style, pool, band_rows)

    def spy_i420(raw, stats, style, pool=None, band_rows=None):
        calls.append(pool is not None)
        made[raw.index] = colour_i420(raw, stats, style, pool, band_rows)
        return made[raw.index]

    monkeypatch.setattr(rendermod, "colour", spy)
    monkeypatch.setattr(rendermod, "colour_i420", spy_i420)
    spec = stored_spec(store)
    video = encode_video(store, spec.color, VideoSettings(tmp_path / "v.mp4", 10), progress=False)
    assert calls == [False] * FRAMES and sorted(made) == list(range(FRAMES))
    assert all(isinstance(m, I420) for m in made.values())
    calls.clear()
    write_frames(store, tmp_path / "png", spec.color, progress=False)
    assert calls == [True] * FRAMES
    ff = ffmpegmod.ffmpeg_binary()
    for f in range(FRAMES):  # ffmpeg's conversion of the PNG, against the farm's planes
        rgb = np.asarray(Image.open(tmp_path / "png" / f"frame_{f:05d}.png"))
        theirs = np.frombuffer(subprocess.run(
            [ff, "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{W}x{H}", "-i", "-",
             "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"], input=rgb.tobytes(), capture_output=True,
            check=True).stdout, np.uint8).astype(int)
        diff = np.abs(made[f].data.astype(int) - theirs)
        assert diff[:W * H].max() <= 1 and diff[W * H:].max() <= 4 and diff[W * H:].mean() < 0.5
    (tmp_path / "planes.yuv").write_bytes(b"".join(made[f].data.tobytes() for f in range(FRAMES)))
    plain = tmp_path / "plain.mp4"
    subprocess.run([ff, "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "yuv420p",
                    "-s", f"{W}x{H}", "-framerate", "10", "-i", str(tmp_path / "planes.yuv"),
                    *ffmpegmod.codec_args("libx264", spec.output.crf, spec.output.preset),
                    "-pix_fmt", "yuv420p", "-y", str(plain)], check=True)
    assert decoded(video) == decoded(plain)


@pytest.mark.parametrize("args,field", [
    (["frames", "{store}", "--out", "/proc/frames"], "--out"),
    (["frames", "{store}", "--out", "{file}"], "--out"),
    (["encode", "{store}", "--video", "/proc/zoom.mp4"], "output.video"),
    (["encode", "{store}", "--video", "{dir}"], "output.video"),
    (["encode", "{store}", "--palette", "nope.json"], "color.palette"),
    (["encode", "{store}", "--light", "45"], "--light"),
    (["encode", "{store}", "--crf", "99"], "output.crf"),
    (["frames", "{unfinished}", "--out", "{dir}/new"], "not rendered yet"),
])
def test_bad_outputs_fail_before_any_work(store, copy, tmp_path, args, field):
    with h5py.File(copy, "r+") as f:
        f["frame_done"][3] = 0
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "dir").mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    subs = {"store": str(store), "unfinished": str(copy), "file": str(tmp_path / "a_file"),
            "dir": str(tmp_path / "dir")}
    result = run_farm(*[a.format(**subs) for a in args])
    assert result.returncode == 2, result.stderr
    assert field in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


def test_a_still_is_a_png(tmp_path, write_job):
    job = write_job(size=(40, 30), frames=1, tile=(16, 16), max_iter=100)
    result = run_farm("render", str(job), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    still = tmp_path / "job.png"
    assert not (tmp_path / "job.mp4").exists()
    assert Image.open(still).size == (40, 30)
    still.unlink()
    assert run_farm("encode", str(tmp_path / "job.h5")).returncode == 0
    assert Image.open(still).size == (40, 30)


def test_nvenc_falls_back_to_libx264(store, tmp_path, monkeypatch, capsys):
    """A machine that looks like it has an NVIDIA GPU but whose NVENC fails: the video is
    made with libx264 and the fallback is said."""
    monkeypatch.setattr(ffmpegmod, "nvidia_present", lambda: True)
    monkeypatch.setattr(ffmpegmod, "has_encoder", lambda name: True)
    real = ffmpegmod.try_codec
    monkeypatch.setattr(ffmpegmod, "try_codec", lambda codec, w, h: "fake encoder failure"
                        if codec == "h264_nvenc" else real(codec, w, h))
    assert ffmpegmod.choose_codec("auto", 64, 48) == "libx264"
    said = capsys.readouterr().err
    assert "fake encoder failure" in said and 'output.codec = "libx264"' in said
    spec = stored_spec(store)
    video = encode_video(store, spec.color, VideoSettings(tmp_path / "fb.mp4", 10, codec="auto"),
                         progress=False)
    assert len(decoded(video)) == FRAMES


def test_nvencs_own_reason_is_the_one_said():
    """What ffmpeg 9.0.2 printed for NVENC on an H200 host (2026-11-26): the reason is
    the encoder's first line, not the last line ffmpeg adds."""
    stderr = (
        "[h264_nvenc @ 0x556f2fb9b240] Driver does not support the required nvenc API version. "
        "Required: 13.1 Found: 13.0\n"
        "[h264_nvenc @ 0x556f2fb9b240] The minimum required Nvidia driver for nvenc is 610.00 or newer\n"
        "[vost#0:0/h264_nvenc @ 0x556f2fb9ad80] [enc:h264_nvenc @ 0x556f2fb9b1c0] Error while opening "
        "encoder - maybe incorrect parameters such as bit_rate, rate, width or height.\n"
        "[vost#0:0/h264_nvenc @ 0x556f2fb9ad80] Task finished with error code: -22 (Invalid argument)\n")
    assert ffmpegmod.codec_problem(stderr, "h264_nvenc", 1) == (
        "Driver does not support the required nvenc API version. Required: 13.1 Found: 13.0")
    other = "[out#0/null @ 0x1] Nothing was written into output file\n"
    assert ffmpegmod.codec_problem(other, "h264_nvenc", 1) == other.strip()
    assert ffmpegmod.codec_problem("", "h264_nvenc", 234) == "exit status 234"
    assert ffmpegmod.last_line("", -11) == "killed by SIGSEGV"


def test_an_ffmpeg_without_nvenc_is_not_asked_to_try_it(monkeypatch, capsys):
    monkeypatch.setattr(ffmpegmod, "nvidia_present", lambda: True)
    monkeypatch.setattr(ffmpegmod, "has_encoder", lambda name: name != "h264_nvenc")
    monkeypatch.setattr(ffmpegmod, "try_codec", lambda *a: pytest.fail("tried a missing codec"))
    assert ffmpegmod.choose_codec("auto", 64, 48) == "libx264"
    assert capsys.readouterr().err == ""


def test_the_wheels_ffmpeg_is_found_without_importing_imageio_ffmpeg(tmp_path, monkeypatch):
    # imageio_ffmpeg.get_ffmpeg_exe() imports the package and runs the binary (0.05 s
    # on the 2-core machine); the farm looks in the wheel's folder itself, for the same file
    monkeypatch.delenv("IMAGEIO_FFMPEG_EXE", raising=False)
    ffmpegmod._wheel_ffmpeg.cache_clear()
    try:
        code = ("import sys; from farm.encode import ffmpeg; print(ffmpeg._wheel_ffmpeg()); "
                "print('imageio_ffmpeg' in sys.modules)")
        env = {k: v for k, v in checkout_env().items() if k != "IMAGEIO_FFMPEG_EXE"}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              check=True)
        found, imported = done.stdout.split()
        assert Path(found).samefile(imageio_ffmpeg.get_ffmpeg_exe())
        assert imported == "False"
        chosen = tmp_path / "my-ffmpeg"  # the user's choice, as imageio-ffmpeg honours it
        monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", str(chosen))
        ffmpegmod._wheel_ffmpeg.cache_clear()
        assert ffmpegmod._wheel_ffmpeg() == str(chosen)
    finally:
        ffmpegmod._wheel_ffmpeg.cache_clear()


def test_the_encoders_pipe_holds_a_megabyte(tmp_path):
    # a 1080p frame (6.2 MB) in a few writes, not a hundred 64 kB ones (farm/runtime/pipes.py)
    import fcntl

    enc = ffmpegmod.VideoEncoder(VideoSettings(tmp_path / "v.mp4", 10, codec="libx264"), 64, 48)
    try:
        assert fcntl.fcntl(enc.proc.stdin.fileno(), fcntl.F_GETPIPE_SZ) == 1 << 20
        enc.write(np.zeros((48, 64, 3), np.uint8))
        assert enc.close().stat().st_size > 0
    finally:
        enc.abort()


def test_an_encoder_failure_is_one_error_and_no_file(store, tmp_path):
    if ffmpegmod.try_codec("h264_nvenc", 64, 48) is None:
        pytest.skip("NVENC works here")
    spec = stored_spec(store)
    with pytest.raises(ffmpegmod.EncodeError, match="h264_nvenc"):
        encode_video(store, spec.color, VideoSettings(tmp_path / "x.mp4", 10, codec="h264_nvenc"),
                     progress=False)
    assert list(tmp_path.iterdir()) == []


def test_farm_encode_does_not_import_the_orbit_libraries(store, tmp_path):
    # mpmath and gmpy2 (40-60 ms of imports) are for reference orbits: a command that
    # only reads a store must not wait for them (farm/plan/references.py)
    code = (f"import sys; from farm.cli import main; "
            f"status = main(['encode', {str(store)!r}, '--video', {str(tmp_path / 'v.mp4')!r}]); "
            f"print(status, [m for m in ('mpmath', 'gmpy2') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], env=checkout_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.stdout.split() == ["0", "[]"], done.stderr
    assert (tmp_path / "v.mp4").stat().st_size > 0


def test_a_video_aborted_while_its_encoder_starts_leaves_nothing_running(tmp_path):
    # prepare() starts ffmpeg on a thread of its own; abort() right after must wait for
    # it and stop the encoder, not leave one starting behind it
    from farm.encode.outputs import VideoOutput

    for _ in range(3):
        out = VideoOutput(VideoSettings(tmp_path / "v.mp4", 10, codec="libx264"), 64, 48)
        out.prepare()
        out.abort()
        assert out.encoder is not None and out.encoder.proc.poll() is not None
        assert list(tmp_path.iterdir()) == []


def test_an_encoder_that_cannot_start_fails_the_first_write(tmp_path, monkeypatch):
    from farm.encode.outputs import VideoOutput

    asked = []
    monkeypatch.setattr(ffmpegmod, "ffmpeg_binary", lambda: asked.append(1) or str(tmp_path / "none"))
    out = VideoOutput(VideoSettings(tmp_path / "v.mp4", 10, codec="libx264"), 64, 48)
    out.prepare()
    with pytest.raises(FileNotFoundError):
        out.write(0, np.zeros((48, 64, 3), np.uint8))
    with pytest.raises(FileNotFoundError):  # the same failure, not a second start
        out.close()
    out.abort()
    assert len(asked) == 1 and list(tmp_path.iterdir()) == []


def test_bad_palette_file_stops_render_before_any_work(tmp_path, write_job):
    job = write_job(size=(16, 16), frames=2, extra='[color]\npalette = "missing.json"\n')
    result = run_farm("render", str(job), cwd=tmp_path)
    assert result.returncode == 2 and "color.palette" in result.stderr
    assert not (tmp_path / "job.h5").exists()


def test_an_interrupted_render_leaves_no_video_and_resume_makes_it(tmp_path, write_job):
    """SIGINT mid-render: exit 75, no video under its name and no partial file (the video
    process is stopped); `farm resume` renders the rest and makes the whole video, equal
    to `farm encode` of the finished store."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import wait_for_tiles

    job = write_job(size=(48, 32), frames=8, width=("3", "0.05"), tile=(16, 16), max_iter=300)
    proc = start([sys.executable, "-m", "farm", "render", str(job), "--quiet"],
                            env={**os.environ, "FARM_TEST_TILE_DELAY": "0.1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store, video = tmp_path / "job.h5", tmp_path / "job.mp4"
    try:
        wait_for_tiles(proc, store, 10)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 75, err
    assert not video.exists() and not partial_path(video).exists()
    result = run_farm("resume", str(store), "--quiet")
    assert result.returncode == 0, result.stderr
    after = run_farm("encode", str(store), "--video", str(tmp_path / "after.mp4"))
    assert after.returncode == 0, after.stderr
    assert decoded(video) == decoded(tmp_path / "after.mp4") and len(decoded(video)) == 8


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (37, 53), (90, 160)])
def test_png_writer_round_trips_through_pillow_and_ffmpeg(tmp_path, shape):
    """The PNG files `farm frames` writes (numpy filter, zlib) decode to the exact
    pixels, with valid chunk CRCs (Pillow's verify), and ffmpeg reads them too."""
    from farm.encode.outputs import save_png

    rgb = np.random.default_rng(sum(shape)).integers(0, 256, (*shape, 3), dtype=np.uint8)
    rgb[: shape[0] // 2] //= 7  # some smooth, some noisy rows
    path = tmp_path / "p.png"
    save_png(rgb, path)
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        assert im.mode == "RGB" and (np.asarray(im) == rgb).all()
    assert [p.name for p in tmp_path.iterdir()] == ["p.png"]  # no partial file left
    out = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
    assert np.frombuffer(out, np.uint8).reshape(rgb.shape).tolist() == rgb.tolist()


# ---------------------------------------------------------------------------- segments


def packets(video: Path) -> list[tuple[int, int]]:
    """(dts, pts) of every packet as stored, in the stream's time base."""
    text = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(video), "-map", "0:v",
                           "-c", "copy", "-f", "framecrc", "-"], capture_output=True, text=True,
                          check=True).stdout
    rows = [line.split(",") for line in text.splitlines() if line and not line.startswith("#")]
    return [(int(r[1]), int(r[2])) for r in rows]


def test_segment_boundaries_keep_timestamps_whole():
    from farm.encode.segments import boundaries, frame_quantum

    # whole microseconds (the segment's start, given to its muxer) and whole 90 kHz ticks
    # (MPEG-TS's clock): 64 frames a second last 15625 us each, 1406.25 ticks
    assert [frame_quantum(f) for f in (24, 25, 30, 60, 7, 64)] == [3, 1, 3, 3, 7, 4]
    for frames in (1, 2, 5, 8, 24, 100, 121):
        for fps in (25, 30, 7):
            for count in (1, 2, 3, 4, 8):
                cuts = boundaries(frames, count, fps)
                sizes = np.diff(cuts)
                assert cuts[0] == 0 and cuts[-1] == frames and (sizes > 0).all()
                assert len(sizes) <= count and (len(sizes) == 1 or sizes.min() >= 3)
                assert all(s % frame_quantum(fps) == 0 for s in sizes[:-1])
    assert boundaries(120, 4, 30) == [0, 30, 60, 90, 120]
    assert boundaries(100, 3, 30) == [0, 33, 66, 100]


def test_segment_count_from_the_environment(monkeypatch):
    import farm.encode.segments as segments
    from farm.encode.segments import segment_count

    monkeypatch.delenv("FARM_ENCODE_SEGMENTS", raising=False)
    monkeypatch.setattr(segments, "usable_cores", lambda: 2)
    assert segment_count(120, 30) == 1  # one encoder on a small machine
    monkeypatch.setattr(segments, "usable_cores", lambda: 16)
    assert segment_count(120, 30) == 16  # 16 on 16 cores (measured faster there)
    assert segment_count(20, 30) == 6  # no segment shorter than 3 frames
    assert segment_count(120, 30, expmap=True) == 1  # strips synthesised per segment: not measured
    monkeypatch.setenv("FARM_ENCODE_SEGMENTS", "1")
    assert segment_count(120, 30) == 1
    monkeypatch.setenv("FARM_ENCODE_SEGMENTS", "3")
    assert segment_count(9, 25) == 3
    assert segment_count(8, 25) == 2  # no segment shorter than 3 frames
    monkeypatch.setenv("FARM_ENCODE_SEGMENTS", "x")
    with pytest.raises(UsageError, match="FARM_ENCODE_SEGMENTS"):
        segment_count(8, 25)


def test_an_ffmpeg_that_cannot_join_segments_encodes_in_one(monkeypatch):
    """An ffmpeg without the join's bitstream filter (before 4.0, first on PATH) gets one
    encoder by default, and a clear error when segments are asked for, not a failed
    join after every frame is encoded."""
    import farm.encode.segments as segments
    from farm.encode import ffmpeg as ff
    from farm.encode.segments import JOIN_FILTER, segment_count

    assert ff.has_bitstream_filter(JOIN_FILTER)  # the ffmpeg the tests use joins
    assert not ff.has_bitstream_filter("no_such_filter")
    monkeypatch.delenv("FARM_ENCODE_SEGMENTS", raising=False)
    monkeypatch.setattr(segments, "usable_cores", lambda: 16)
    assert segment_count(120, 30) == 16
    monkeypatch.setattr(ff, "has_bitstream_filter", lambda name: name != JOIN_FILTER)
    assert segment_count(120, 30) == 1
    monkeypatch.setenv("FARM_ENCODE_SEGMENTS", "1")
    assert segment_count(120, 30) == 1
    monkeypatch.setenv("FARM_ENCODE_SEGMENTS", "4")
    with pytest.raises(UsageError, match="FARM_ENCODE_SEGMENTS: .* cannot join segments .*filter_units"):
        segment_count(120, 30)


@pytest.fixture(scope="module")
def long_store(tmp_path_factory) -> Path:
    """A finished 40-frame store (32x24)."""
    d = tmp_path_factory.mktemp("long")
    job = d / "long.toml"
    job.write_text(job_text(size=(32, 24), frames=40, width=("3", "0.01"), tile=(32, 24), max_iter=400,
                            extra=f'[output]\nstore = "{d / "long.h5"}"\n'))
    result = run_farm("render", str(job), "--no-video", cwd=d)
    assert result.returncode == 0, result.stderr
    return d / "long.h5"


@pytest.mark.parametrize("which,fps,segments", [("store", 25, 2), ("long_store", 30, 2),
                                                ("long_store", 24, 5), ("long_store", 64, 3)])
def test_segments_join_to_the_frames_of_one_encoder(request, tmp_path, which, fps, segments):
    """Encoded in segments and joined, the video decodes to exactly the frames one
    encoder makes (lossless, CRF 0), and at CRF 18 (B-frames) too its packets carry one
    encoder's timestamps: monotonic, one frame apart, nothing shifted at a join (cut
    at 4 frames of 30 fps the joins moved later frames). The segments' files are gone."""
    store = request.getfixturevalue(which)
    spec = stored_spec(store)
    with Store(store) as s:
        frames, (w, h) = s.frames, s.spec.size
    for crf in (0, 18):
        one = encode_video(store, spec.color, VideoSettings(tmp_path / f"one{crf}.mp4", fps, crf=crf),
                           progress=False, segments=1)
        many = encode_video(store, spec.color, VideoSettings(tmp_path / f"many{crf}.mp4", fps, crf=crf),
                            progress=False, segments=segments)
        if crf == 0:
            a, b = decoded(one), decoded(many)
            assert len(a) == frames and a == b
        pa, pb = packets(one), packets(many)
        assert sorted(p for _, p in pa) == sorted(p for _, p in pb)
        dts = [d for d, _ in pb]
        assert all(y > x for x, y in zip(dts, dts[1:], strict=False))
        pts = sorted(p for _, p in pb)
        assert len(set(np.diff(pts))) == 1  # evenly spaced: no gap or overlap at the joins
        assert video_facts(many) == (frames, w, h, fps)
        assert colour_tags(many).startswith("yuv420p(tv, smpte170m")  # the join keeps what the stream says
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many0.mp4", "many18.mp4", "one0.mp4", "one18.mp4"]


def test_the_join_survives_an_ffmpeg_that_its_character_sets_crash(store, tmp_path, monkeypatch):
    """imageio-ffmpeg's static ffmpeg 4.2.2 (its wheels up to 0.5.1) crashes reading
    MPEG-TS on a newer C library as it loads the system's character-set modules
    (Debian 12: a segmentation fault at the join, after every segment was encoded). A
    stand-in crashes the same way unless GCONV_PATH leaves it no modules to load; the
    segments still join into one encoder's frames."""
    real = ffmpegmod.ffmpeg_binary()
    fake = tmp_path / "ffmpeg"
    fake.write_text('#!/bin/sh\ncase " $* " in *" -f mpegts -i "*)\n'
                    '  if [ -z "$GCONV_PATH" ] || [ -e "$GCONV_PATH/gconv-modules" ]; then\n'
                    '    kill -SEGV $$\n  fi;;\n'
                    f'esac\nexec "{real}" "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setattr(ffmpegmod, "ffmpeg_binary", lambda: str(fake))
    monkeypatch.delenv("GCONV_PATH", raising=False)
    spec = stored_spec(store)
    one = encode_video(store, spec.color, VideoSettings(tmp_path / "one.mp4", 25, crf=0), progress=False,
                       segments=1)
    many = encode_video(store, spec.color, VideoSettings(tmp_path / "many.mp4", 25, crf=0), progress=False,
                        segments=2)
    assert decoded(many) == decoded(one) and len(decoded(one)) == FRAMES


def video_facts(video: Path) -> tuple[int, int, int, float]:
    """(frames, width, height, fps) as ffmpeg reads them."""
    import re

    from farm.encode import probe

    text = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", str(video)],
                          capture_output=True, text=True).stderr
    fps = re.search(r"(\d+(?:\.\d+)?) fps", text)
    assert fps is not None
    return (*probe(video), round(float(fps.group(1)), 2))


def colour_tags(video: Path) -> str:
    """What ffmpeg says of the video stream's planes, e.g. ``yuv420p(tv, smpte170m, progressive)``."""
    import re

    text = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", str(video)],
                          capture_output=True, text=True).stderr
    found = re.search(r"yuv420p\([^)]*\)|yuv420p\b", text)
    assert found is not None, text
    return found.group(0)


@pytest.mark.parametrize("i420", [True, False])
def test_the_video_says_which_matrix_its_planes_have(tmp_path, i420):
    """The stream says BT.601 (smpte170m) at limited range, the conversion the farm and
    ffmpeg make, whether the encoder is handed planes or RGB; planes go into x264
    untouched (no conversion on the way: at CRF 0 they decode back bit for bit)."""
    from farm.color.yuv import from_rgb
    from farm.encode.ffmpeg import VideoEncoder

    rgb = np.random.default_rng(3).integers(0, 256, (3, 24, 32, 3), np.uint8)
    planes = [from_rgb(frame) for frame in rgb]
    encoder = VideoEncoder(VideoSettings(tmp_path / "v.mp4", 10, crf=0, codec="libx264"), 32, 24, i420=i420)
    for p, frame in zip(planes, rgb, strict=True):
        encoder.write(p if i420 else frame)
    video = encoder.close()
    assert colour_tags(video).startswith("yuv420p(tv, smpte170m")
    back = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(video), "-f", "rawvideo",
                           "-pix_fmt", "yuv420p", "-"], capture_output=True, check=True).stdout
    assert len(back) == 3 * planes[0].data.nbytes
    if i420:
        assert back == b"".join(p.data.tobytes() for p in planes)


def test_segmented_sink_during_a_render_equals_encode(store, tmp_path):
    """Frames handed over one by one, out of order, from another thread, to a sink of
    three segments: the video of `encode_video` with three segments."""
    spec = stored_spec(store)
    settings = VideoSettings(tmp_path / "after.mp4", 25)
    after = encode_video(store, spec.color, settings, progress=False, segments=3)
    sink = open_video_sink(store, spec.color, VideoSettings(tmp_path / "during.mp4", 25), segments=3)
    order = list(range(FRAMES))
    random.Random(5).shuffle(order)
    t = threading.Thread(target=lambda: [sink.frame_complete(f) for f in order])
    t.start()
    t.join()
    during = sink.finish()
    assert decoded(during) == decoded(after) and len(decoded(during)) == FRAMES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["after.mp4", "during.mp4"]


def test_a_segment_is_finished_as_soon_as_its_frames_are_written(long_store, tmp_path):
    # during a render frames complete in order: the first segment's encoder must finish
    # (its lookahead flushed, its stream complete and handed to the join) while the later
    # ones still wait, not in turn at finish(), which made 16 segments of a 1080p zoom take
    # 8.6 s against 4.1
    from farm.encode import probe
    from farm.encode.segments import segment_path

    spec = stored_spec(long_store)
    video = tmp_path / "s.mp4"
    sink = open_video_sink(long_store, spec.color, VideoSettings(video, 25), segments=4)
    for f in range(10 + spec.color.smoothing):  # segment 0 is frames 0..9
        sink.frame_complete(f)
    deadline = time.monotonic() + 60
    while not sink.sinks[0].closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sink.sinks[0].closed, "the first segment was not finished before finish()"
    assert not sink.sinks[3].closed
    first = segment_path(video, 0)  # and the join has taken its stream (and removed it)
    while first.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not first.exists(), "the join did not take the first segment before finish()"
    for f in range(40):
        sink.frame_complete(f)
    assert sink.finish() == video and probe(video)[0] == 40
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.mp4"]


def test_an_aborted_segmented_sink_leaves_nothing(store, tmp_path):
    spec = stored_spec(store)
    sink = open_video_sink(store, spec.color, VideoSettings(tmp_path / "a.mp4", 25), segments=3)
    for f in range(FRAMES - 2):  # the first segments finish, the last waits
        sink.frame_complete(f)
    time.sleep(1.0)
    sink.abort()
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_during_a_segmented_encode_leaves_nothing(store, tmp_path):
    video = tmp_path / "int.mp4"
    env = {**os.environ, "FARM_TEST_FRAME_DELAY": "0.5", "FARM_ENCODE_SEGMENTS": "3"}
    proc = start([sys.executable, "-m", "farm", "encode", str(store), "--video", str(video)],
                            env=env, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=sigint_as_a_terminal_gives_it)
    deadline = time.monotonic() + 60
    while not list(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert list(tmp_path.iterdir()), "no encoder started"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 75, err
    assert list(tmp_path.iterdir()) == []


def test_the_shared_frame_pool_colours_the_lowest_frame_first():
    """A segmented video's sinks share a FramePool that runs the lowest frame asked
    for first (the segments in turn); cancelled frames do not run; shutdown waits."""
    from farm.encode.sink import FramePool

    pool = FramePool(1)
    hold, order = threading.Event(), []
    first = pool.submit(lambda f: hold.wait(30), 0)  # keeps the one thread busy
    futures = {f: pool.submit(order.append, f) for f in (50, 7, 31, 2, 90, 12)}
    futures[31].cancel()
    hold.set()
    assert first.result(30) is True
    pool.shutdown(wait=True)
    assert order == [2, 7, 12, 50, 90]
    assert all(futures[f].done() for f in futures)
    with pytest.raises(RuntimeError):
        pool.submit(order.append, 1)


def test_a_join_that_fails_says_so_and_leaves_nothing(tmp_path):
    """Segment streams ffmpeg cannot read: the join raises EncodeError naming the join,
    and neither the video, its partial file nor the segments' streams are left."""
    from farm.encode.ffmpeg import EncodeError
    from farm.encode.segments import join, segment_path

    video = tmp_path / "v.mp4"
    parts = [segment_path(video, k) for k in range(3)]
    for part in parts:
        part.write_bytes(b"not an MPEG-TS stream " * 1000)
    with pytest.raises(EncodeError, match="could not join"):
        join(parts, video, 30)
    assert sorted(tmp_path.iterdir()) == []


def test_weighted_segments_share_the_cost_and_keep_the_join_rules():
    """Segments cut by each frame's cost (farm/run/mpi_encode.py: stored bytes) get about
    equal sums, every segment but the last a whole number of MPEG-TS quanta and none
    shorter than SHORTEST (issue 42)."""
    from farm.encode.segments import SHORTEST, boundaries, frame_quantum

    for frames, count, fps in [(360, 4, 30), (360, 2, 25), (61, 3, 30), (20, 8, 30)]:
        weights = np.linspace(1.0, 4.0, frames) ** 2  # a zoom whose late frames cost more
        cuts = boundaries(frames, count, fps, weights)
        assert cuts[0] == 0 and cuts[-1] == frames and cuts == sorted(set(cuts))
        sizes = np.diff(cuts)
        assert all(n % frame_quantum(fps) == 0 for n in sizes[:-1]) and sizes.min() >= SHORTEST
        even = boundaries(frames, count, fps)
        assert len(cuts) == len(even)
        if len(cuts) > 2:
            share = [weights[a:b].sum() for a, b in zip(cuts, cuts[1:], strict=False)]
            plain = [weights[a:b].sum() for a, b in zip(even, even[1:], strict=False)]
            assert max(share) <= max(plain)
            if frames >= 360:  # room to move the cuts: the shares even out
                assert max(share) < max(plain) and max(share) / min(share) < 1.3


def test_shares_follow_the_cores_each_rank_has():
    """A master and a worker on one node's 4 cores get half of them each; a rank alone
    on 4 cores gets them all (farm/encode/shares.py), and the frames go in proportion."""
    from farm.encode.segments import boundaries
    from farm.encode.shares import capacities

    a, b = frozenset(range(4)), frozenset(range(4, 8))
    capacity = capacities([("a", a), ("a", a), ("b", b)])
    assert capacity == [2.0, 2.0, 4.0]
    cuts = boundaries(360, 3, 30, None, capacity)
    assert cuts == [0, 90, 180, 360]


def test_shares_dealt_in_rounds_give_every_rank_the_whole_film(tmp_path):
    """A render on several nodes deals each rank three segments to and fro (farm/run/mpi.py,
    farm/encode/shares.py cut): every rank gets frames from the start, the middle and
    the end, in proportion to its cores, and the segments still cover the film once."""
    from types import SimpleNamespace

    from farm.encode import VideoSettings
    from farm.encode.shares import cut
    from farm.spec import Color

    store = SimpleNamespace(frames=360, spec=SimpleNamespace(size=(96, 54)))
    shares = cut(store, tmp_path / "s.h5", Color(), VideoSettings(tmp_path / "v.mp4"), [4.0, 4.0, 8.0],
                 None, rounds=3)
    assert shares.segments == 9 and shares.owners == [0, 1, 2, 2, 1, 0, 0, 1, 2]  # to and fro
    assert shares.cuts[0] == 0 and shares.cuts[-1] == 360 and shares.cuts == sorted(set(shares.cuts))
    frames = [sum(shares.cuts[k + 1] - shares.cuts[k] for k in shares.owned(r)) for r in range(3)]
    assert abs(frames[2] - 2 * frames[0]) <= 12 and abs(frames[0] - frames[1]) <= 6, frames
    for r in range(3):
        first, last = shares.owned(r)[0], shares.owned(r)[-1]
        assert shares.cuts[first] < 120 and shares.cuts[last + 1] > 240  # start to end


def test_shares_dealt_to_and_fro_even_out_a_cost_that_grows():
    """Where a frame's cost grows along the film and is not known (an expmap film), the
    segments dealt to and fro give the ranks nearer sums than dealt in turn."""
    from farm.encode.shares import dealt

    for ranks, rounds in ((2, 3), (4, 3), (3, 2)):
        owners = dealt(ranks, rounds)
        assert sorted(owners) == sorted(list(range(ranks)) * rounds)
        cost = range(1, ranks * rounds + 1)  # segment k costs k + 1
        sums = [sum(c for c, r in zip(cost, owners, strict=True) if r == rank) for rank in range(ranks)]
        in_turn = [sum(c for k, c in enumerate(cost) if k % ranks == rank) for rank in range(ranks)]
        assert max(sums) - min(sums) < max(in_turn) - min(in_turn), (ranks, rounds, sums)
