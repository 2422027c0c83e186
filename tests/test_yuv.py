"""The video's planes (farm/color/yuv.py): the farm's own conversion against ffmpeg's,
numpy's `shade` made straight into planes, the encoder taking either kind of frame."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
import reference_de
from test_color import _flat_patches, synthetic_frame

from farm.color import Statistics, Style, colour, yuv
from farm.color.raw import RawFrame
from farm.color.render import colour_i420, gives_i420
from farm.encode import ffmpeg as ffmpegmod
from farm.spec.palettes import lut


def ffmpeg_planes(rgb: np.ndarray) -> np.ndarray:
    """ffmpeg's own conversion of ``rgb`` (cropped to even) to yuv420p, flat."""
    h, w, _ = rgb.shape
    rgb = np.ascontiguousarray(rgb[:h - h % 2, :w - w % 2])
    h, w, _ = rgb.shape
    out = subprocess.run([ffmpegmod.ffmpeg_binary(), "-loglevel", "error", "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-i", "-", "-f", "rawvideo",
                          "-pix_fmt", "yuv420p", "-"], input=rgb.tobytes(), capture_output=True,
                         check=True).stdout
    return np.frombuffer(out, np.uint8)


def picture(shape: tuple[int, int], seed: int) -> np.ndarray:
    """Smooth colour ramps, a few sharp edges and some noise."""
    rng = np.random.default_rng(seed)
    h, w = shape
    yy, xx = np.mgrid[0:h, 0:w]
    rgb = np.stack([255 * xx / max(w - 1, 1), 255 * yy / max(h - 1, 1), 128 + 100 * np.sin(xx / 3.0)], -1)
    rgb[h // 3:h // 2, :] = (250, 10, 30)  # a red band: sharp chroma edges
    rgb += rng.normal(0, 12, rgb.shape)
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("shape", [(37, 53), (48, 64), (91, 160), (120, 214)])
def test_the_conversion_is_ffmpegs_within_a_level_or_two(shape):
    """Y as ffmpeg's within 1 everywhere; chroma (its 6-row filter fitted to ffmpeg's)
    within a few levels on a noisy picture, most samples equal. An odd size loses its
    last row or column, as the video does."""
    rgb = picture(shape, sum(shape))
    frame = yuv.from_rgb(rgb)
    assert (frame.width, frame.height) == yuv.even(shape[1], shape[0])
    assert frame.data.size == frame.width * frame.height * 3 // 2
    diff = np.abs(frame.data.astype(int) - ffmpeg_planes(rgb))
    n = frame.width * frame.height
    assert diff[:n].max() <= 1
    assert diff[n:].max() <= 6 and (diff[n:] == 0).mean() >= 0.5 and diff[n:].mean() < 0.6


@pytest.mark.parametrize("shape", [(2, 2), (3, 5), (2, 9), (7, 4)])
def test_tiny_frames_of_one_colour_convert_as_ffmpeg_does(shape):
    """Frames a few pixels across (where ffmpeg's own filter is not the one fitted):
    a flat colour gives ffmpeg's values exactly but for Y's rounding."""
    for colour_ in ((0, 0, 0), (255, 255, 255), (200, 60, 20), (13, 140, 250)):
        rgb = np.empty((*shape, 3), np.uint8)
        rgb[...] = colour_
        frame = yuv.from_rgb(rgb)
        diff = np.abs(frame.data.astype(int) - ffmpeg_planes(rgb))
        assert diff.max() <= 1


def test_planes_decode_to_the_colours():
    """The planes turned back into RGB (chroma over its 2x2 block) give the picture's
    colours where they are flat (a grey ramp, a flat colour), so the matrix and the
    offsets are the right way round."""
    h, w = 16, 24
    rgb = np.zeros((h, w, 3), np.uint8)
    rgb[:, :, :] = np.linspace(0, 255, w).round().astype(np.uint8)[None, :, None]  # grey ramp
    rgb[8:] = (200, 60, 20)
    back = yuv.to_rgb(yuv.from_rgb(rgb)).astype(int)
    assert np.abs(back[:6] - rgb[:6]).max() <= 2  # grey: Y alone (chroma 128)
    assert np.abs(back[10:] - rgb[10:]).max() <= 2  # flat colour, away from the edge
    y, cb, cr = yuv.from_rgb(rgb).planes
    assert y[0, 0] == 16 and y[0, -1] == 235 and (cb[:3] == 128).all() and (cr[:3] == 128).all()


def frames():
    raw_dz = reference_de.render(reference_de.pixel_grid((-0.745, 0.113), 0.01, (97, 61)), 1500, 0.01 / 97)
    it, fr, hist = synthetic_frame((41, 77), seed=3)
    out = [RawFrame(0, raw_dz.iterations, raw_dz.fraction, raw_dz.histogram), RawFrame(0, it, fr, hist),
           _flat_patches((40, 50))]
    return [(raw, Statistics(1, 0).stats(0, lambda g, raw=raw: raw.histogram)) for raw in out]


@pytest.mark.parametrize("light", [(135.0, 45.0), (300.0, 80.0)])
def test_shade_made_as_planes_is_its_colours_converted(light):
    """numpy's `shade` made straight into planes (relief.shade_i420, from the colours
    before they are bytes) is within a level of converting its RGB bytes, and the same
    in bands of any height, on threads or not (bands of odd heights become even)."""
    from concurrent.futures import ThreadPoolExecutor

    for raw, stats in frames():
        for cycles in (1.0, 3.7):
            style = Style(method="shade", lut=lut("classic"), cycles=cycles,
                          light=(np.radians(light[0]), np.radians(light[1])))
            assert gives_i420(style, raw.samples, raw.distance is not None)
            want = yuv.from_rgb(colour(raw, stats, style))
            got = colour_i420(raw, stats, style)
            assert isinstance(got, yuv.I420) and (got.width, got.height) == (want.width, want.height)
            diff = np.abs(got.data.astype(int) - want.data)
            assert diff.max() <= 1 and (diff == 0).mean() >= 0.8
            with ThreadPoolExecutor(2) as pool:
                for rows in (1, 2, 5, 7, raw.shape[0]):
                    banded = colour_i420(raw, stats, style, pool if rows % 2 else None, band_rows=rows)
                    assert (banded.data == got.data).all(), rows


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (5, 2), (4, 9)])
def test_shade_planes_of_tiny_frames(shape):
    it, fr, hist = synthetic_frame(shape, seed=4, top=60)
    for n in (it, np.zeros_like(it)):
        raw = RawFrame(0, n, np.where(n > 0, fr, 0).astype(np.float32), np.bincount(n.ravel()))
        stats = Statistics(1, 0).stats(0, lambda g, raw=raw: raw.histogram)
        style = Style(method="shade", lut=lut("fire"))
        got = colour_i420(raw, stats, style)
        assert np.abs(got.data.astype(int) - yuv.from_rgb(colour(raw, stats, style)).data).max() <= 1


def test_other_methods_are_converted_from_their_bytes():
    """Where the method has no planes of its own (histogram, or several samples), the
    planes are its RGB bytes converted, and the sink leaves that to ffmpeg."""
    raw, stats = frames()[0]
    style = Style(method="histogram", lut=lut("classic"))
    assert not gives_i420(style, 1, False)
    assert not gives_i420(Style(method="shade", lut=lut("classic")), 3, False)
    assert not gives_i420(Style(method="shade", lut=lut("classic")), 1, True)
    got = colour_i420(raw, stats, style)
    assert (got.data == yuv.from_rgb(colour(raw, stats, style)).data).all()


def test_the_encoder_takes_planes_or_bytes(tmp_path):
    """An encoder started for planes takes planes as they are and RGB frames converted;
    the video is the same either way. A frame of the wrong size is refused."""
    from farm.encode.ffmpeg import VideoEncoder, VideoSettings

    frames_rgb = [picture((48, 64), s) for s in range(4)]
    videos = []
    for k, mode in enumerate(("planes", "bytes")):
        enc = VideoEncoder(VideoSettings(tmp_path / f"v{k}.mp4", 10, codec="libx264"), 64, 48, i420=True)
        for rgb in frames_rgb:
            enc.write(yuv.from_rgb(rgb) if mode == "planes" else rgb)
        videos.append(enc.close())
    assert videos[0].read_bytes() == videos[1].read_bytes()
    enc = VideoEncoder(VideoSettings(tmp_path / "bad.mp4", 10, codec="libx264"), 64, 48, i420=True)
    with pytest.raises(ValueError, match="32x48"):
        enc.write(yuv.from_rgb(frames_rgb[0][:, :32]))
    enc.abort()
    rgb_enc = VideoEncoder(VideoSettings(tmp_path / "rgb.mp4", 10, codec="libx264"), 64, 48)
    with pytest.raises(ValueError, match="rgb24"):
        rgb_enc.write(yuv.from_rgb(frames_rgb[0]))
    rgb_enc.abort()


def test_the_sink_asks_for_planes_where_they_are_cheaper(monkeypatch):
    """The sink's choice, made before its colourer exists (the encoder starts first):
    numpy's `shade` and every device colourer give planes; numpy's other methods and
    a colourer that does not say it can, RGB."""
    from farm.encode.sink import i420_for

    shade, hist = Style(method="shade", lut=lut("classic")), Style(method="histogram", lut=lut("classic"))
    monkeypatch.setenv("FARM_COLOR_ENGINE", "numpy")
    assert i420_for(None, shade, 1, False) and not i420_for(None, hist, 1, False)
    monkeypatch.setenv("FARM_COLOR_ENGINE", "opencl")
    assert i420_for(None, hist, 1, False) and i420_for(None, shade, 4, True)
    assert not i420_for(lambda raw, stats, style: None, shade, 1, False)
