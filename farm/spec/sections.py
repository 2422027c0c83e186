"""A job as data: the frozen :class:`JobSpec` and its sections, one dataclass a
``[section]`` of the job file, each field a key with its default.

The values here are already checked (farm/spec/schema.py) and complete
(farm/spec/derived.py); coordinates stay decimal strings.
"""

from __future__ import annotations

from dataclasses import dataclass

from farm.spec.keys import Key
from farm.spec.palettes import Gradient


@dataclass(frozen=True)
class View:
    center: tuple[str, str]  # decimal strings: real, imaginary
    width: tuple[str, str]  # decimal strings: first and last frame, complex-plane units
    angle: float = 0.0  # degrees, counter-clockwise: the first frame's rotation (farm/spec/keys.py)


@dataclass(frozen=True)
class Image:
    size: tuple[int, int]  # (W, H) pixels
    samples: int = 1  # samples per pixel (anti-aliasing), farm/plan/samples.py


@dataclass(frozen=True)
class Animation:
    frames: int
    fps: int = 30
    # "frames": every frame rendered; "expmap": exponential-map strips plus a centre
    # image, every frame synthesised from them (farm/plan/expmap.py, farm/plan/units.py)
    method: str = "frames"
    # expmap: strip samples per output pixel at a frame's corners (angles A = oversample
    # pi hypot(W, H), rounded up to a multiple of 16)
    oversample: float = 1.0
    # waypoints of the zoom's timeline (farm/spec/keys.py, farm/plan/curve.py); () for the
    # constant zoom speed from view.width[0] to view.width[1]
    keys: tuple[Key, ...] = ()
    # degrees per second: a constant turning speed from view.angle (farm/spec/keys.py)
    turn: float = 0.0


@dataclass(frozen=True)
class Iterations:
    max: int | str = "auto"  # an int, or "auto" (rises with depth, see farm.plan.frames)
    escape_radius: float = 2.0


@dataclass(frozen=True)
class Render:
    precision: str = "auto"
    # (width, height) pixels, the unit of work and the store's chunk; "auto": the image
    # cut into equal tiles of at most 2048x2048 (farm.plan.tiles.TileGrid.auto)
    tile: tuple[int, int] | str = "auto"
    distance: bool = False  # store the distance estimate (channel "distance")


@dataclass(frozen=True)
class Color:
    method: str = "shade"  # see farm.color.methods
    # a built-in name, or a gradient: a file (.json, .txt) read when the job is loaded,
    # kept as its stops (farm/spec/palettes.py)
    palette: str | Gradient = "classic"
    cycles: float = 3.0  # palette repetitions over the equalised range
    smoothing: int = 4  # frames on each side whose CDFs are averaged (0: none)
    density: float = 1.0  # smooth: palette cycles per e-fold of the escape time
    line_width: float = 1.0  # distance: filament lines, output pixels
    light: tuple[float, float] = (135.0, 45.0)  # shade: azimuth, elevation, degrees


@dataclass(frozen=True)
class Output:
    store: str
    video: str
    crf: int = 18
    preset: str = "faster"  # x264 preset (speed against size at the same quality)
    codec: str = "auto"  # auto: h264_nvenc where it works, else libx264
    compression: str = "zstd"  # the store's pixel chunks: zstd (shuffled) or none (farm/store/codec.py)
    compression_level: int = 1  # zstd level: 1 is fast; higher levels gain a few percent
    audio: str | None = None  # a soundtrack muxed into the video as AAC (farm/encode/audio.py)


@dataclass(frozen=True)
class JobSpec:
    view: View
    image: Image
    animation: Animation
    iterations: Iterations
    render: Render
    color: Color
    output: Output

    @property
    def frames(self) -> int:
        return self.animation.frames

    @property
    def size(self) -> tuple[int, int]:
        return self.image.size


# section -> its dataclass
SECTION_CLASSES = {
    "view": View, "image": Image, "animation": Animation, "iterations": Iterations,
    "render": Render, "color": Color, "output": Output,
}
