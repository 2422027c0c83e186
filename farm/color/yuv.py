"""Video frames as the encoder takes them: 4:2:0 YCbCr in three planes (I420).

H.264 in ``yuv420p`` stores a full-resolution luma plane (Y) and two chroma planes
(Cb, Cr) at half the width and half the height. ffmpeg converts RGB frames to that
itself (swscale, with the BT.601 matrix at limited range when nothing else is asked
for), 0.7 ms of CPU a 640x360 frame and about 5 ms a 1080p frame on the 2-core
machine, beside x264. A colourer that holds a frame's colours before they become
bytes can give these planes directly, at about the cost of the RGB bytes it would
otherwise make (numpy's ``shade``, farm/color/relief.py) or on the device
(kernels/color.cl), and the pipe into ffmpeg then carries half the bytes.

The conversion is the one ffmpeg makes by default: BT.601 at limited range (Y in
16..235, Cb and Cr in 16..240 about 128); a chroma sample from the mean of its two
columns and a 6-row filter of those (:data:`TAPS`), rounded half up. A frame of odd width or
height loses its last column or row, as a ``yuv420p`` video does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

F32 = np.float32

# rows of the BT.601 limited-range matrix, for R, G, B in 0..255 (Y = 16 + KY . rgb, ...)
KY = np.array([65.481, 128.553, 24.966], np.float64) / 255
KU = np.array([-37.797, -74.203, 112.0], np.float64) / 255
KV = np.array([112.0, -93.786, -18.214], np.float64) / 255
Y_GAIN = float(KY.sum())  # 219 / 255: what a grey level g adds to Y (it adds 0 to Cb, Cr)


def even(width: int, height: int) -> tuple[int, int]:
    """The video's size: ``width`` and ``height`` rounded down to even."""
    return width - width % 2, height - height % 2


@dataclass(frozen=True)
class I420:
    """One frame: ``data`` holds the Y plane (``height`` rows of ``width``), then Cb and
    Cr (``height / 2`` rows of ``width / 2`` each), as ffmpeg's ``yuv420p`` raw video.
    ``width`` and ``height`` are even."""

    data: np.ndarray  # uint8, flat, width * height * 3 / 2
    width: int
    height: int

    @classmethod
    def empty(cls, width: int, height: int) -> I420:
        return cls(np.empty(width * height * 3 // 2, np.uint8), width, height)

    @property
    def planes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Views of Y (H, W), Cb and Cr (H/2, W/2)."""
        w, h = self.width, self.height
        n, q = w * h, w * h // 4
        return (self.data[:n].reshape(h, w), self.data[n:n + q].reshape(h // 2, w // 2),
                self.data[n + q:].reshape(h // 2, w // 2))


def palette_planes(planes: np.ndarray) -> np.ndarray:
    """float32 (3, N): a palette's Y - 16, Cb - 128 and Cr - 128 from its red, green and
    blue ``planes`` (float32 (3, N), 0..255)."""
    return np.stack([k @ planes.astype(np.float64) for k in (KY, KU, KV)]).astype(F32)


# the vertical filter of a chroma row: input rows 2k-2 .. 2k+3, in 256ths (a 2:1
# bicubic, Keys' a = -0.75, rounded); horizontally a chroma sample is its two columns'
# mean. Fitted to ffmpeg 9's conversion of the 640x360 zoom's frames: 83% of chroma
# samples equal, the rest mostly one level apart (a 2x2 mean matches 64%, and its
# video came out 1.3% larger)
TAPS = (-13, 32, 109)  # rows 2k-2 and 2k+3, 2k-1 and 2k+2, 2k and 2k+1
REACH = 2  # rows a chroma row reads beyond its own two, on each side


def add_chroma(products: np.ndarray, out: np.ndarray, top: int = 0, bottom: int = 0) -> None:
    """``out`` (uint8 (H, W)) = 128 + ``products`` (float32: a chroma value less 128 at
    each pixel of rows 2k-2 .. 2k+3 around each of out's rows, 2H + 4 rows of at least
    2W columns) filtered down to one sample a 2x2 block, rounded half up. At the
    frame's top and bottom edges ``top`` and ``bottom`` (0 to 2) rows are missing
    from ``products``: its first or last row stands in for them."""
    h, w = out.shape
    pairs = np.add(products[:, 0:2 * w:2], products[:, 1:2 * w:2])
    if top or bottom:
        pairs = np.concatenate([pairs[:1]] * top + [pairs] + [pairs[-1:]] * bottom)
    upper, lower = pairs[0::2], pairs[1::2]  # rows 2k-2, 2k-1 (k = 0 .. H + 1)
    acc = np.add(upper[1:h + 1], lower[1:h + 1])
    acc *= F32(TAPS[2])
    side = np.add(lower[0:h], upper[2:h + 2])
    side *= F32(TAPS[1])
    acc += side
    np.add(upper[0:h], lower[2:h + 2], out=side)
    side *= F32(TAPS[0])
    acc += side
    acc *= F32(1 / 512)  # the taps' sum twice (two columns)
    acc += F32(128.5)
    np.copyto(out, acc, casting="unsafe")


def from_rgb(rgb: np.ndarray) -> I420:
    """The frame of uint8 (H, W, 3) ``rgb`` (cropped to even), as ffmpeg would convert it
    (but for rounding: within one level). For colourers that give RGB; numpy, 1.1-1.25
    ms a 640x360 frame on the 2-core machine, against swscale's 0.7."""
    h, w, _ = rgb.shape
    ew, eh = even(w, h)
    frame = I420.empty(ew, eh)
    y, u, v = frame.planes
    f = rgb[:eh, :ew].astype(F32)

    def dot(k: np.ndarray) -> np.ndarray:  # float32 (H, W): the row k of the matrix . rgb
        acc = f[..., 0] * F32(k[0])
        acc += f[..., 1] * F32(k[1])
        acc += f[..., 2] * F32(k[2])
        return acc

    luma = dot(KY)
    luma += F32(16.5)
    np.copyto(y, luma, casting="unsafe")
    add_chroma(dot(KU), u, REACH, REACH)
    add_chroma(dot(KV), v, REACH, REACH)
    return frame


def to_rgb(frame: I420) -> np.ndarray:
    """uint8 (H, W, 3): the frame back in RGB (chroma repeated over its 2x2 block), for
    tests and pictures."""
    y, u, v = (p.astype(np.float64) for p in frame.planes)
    y = y - 16.0
    u = np.repeat(np.repeat(u - 128.0, 2, 0), 2, 1)
    v = np.repeat(np.repeat(v - 128.0, 2, 0), 2, 1)
    m = np.linalg.inv(np.stack([KY, KU, KV]))
    rgb = np.stack([y, u, v], -1) @ m.T
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


__all__ = ["I420", "KU", "KV", "KY", "REACH", "TAPS", "Y_GAIN", "add_chroma", "even", "from_rgb",
           "palette_planes", "to_rgb"]
