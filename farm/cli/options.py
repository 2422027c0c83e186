"""The options several commands share (rendering, colour, a location as the job) and the
argparse types that check a value where it is typed: numbers in a range, ``WxH`` sizes, and
values checked by the job key they stand for. A bad value is argparse's one line, exit 2."""


from __future__ import annotations

import argparse


def number(kind: type, lo: float, hi: float):
    """An argparse type: ``kind`` (int or float) from ``lo`` to ``hi``; anything else
    (NaN too) is argparse's one-line error, exit 2."""
    what = "an integer" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text} is out of range: {lo:g} to {hi:g}")
        return value

    return parse


def image_size(lo: int = 1, hi: int | None = None):
    """An argparse type: ``WxH`` in pixels, each side from ``lo`` to ``hi`` (default: the
    job spec's bounds, farm.spec.MAX_SIDE and MAX_PIXELS)."""

    def parse(text: str) -> tuple[int, int]:
        from farm.spec import MAX_PIXELS, MAX_SIDE

        top = MAX_SIDE if hi is None else hi
        parts = text.lower().split("x")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise argparse.ArgumentTypeError(f"{text!r} is not WxH (like 1920x1080)")
        w, h = (int(p) for p in parts)
        if not (lo <= w <= top and lo <= h <= top):
            raise argparse.ArgumentTypeError(f"{text}: each side from {lo} to {top} pixels")
        if w * h > MAX_PIXELS:
            raise argparse.ArgumentTypeError(f"{text} is {w * h} pixels; at most {MAX_PIXELS}")
        return (w, h)

    return parse


def job_key(kind: type, key: str):
    """An argparse type: ``kind`` checked by the job spec's own rule for ``key``
    ("section.name", farm.spec.SCHEMA), so an option and its job key take the same values."""

    def parse(text: str):
        from farm.errors import SpecError
        from farm.spec import SCHEMA

        section, name = key.split(".")
        try:
            return SCHEMA[section][name][0](kind(text), key)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        except SpecError as err:
            raise argparse.ArgumentTypeError(f"{err.message} (as {key})") from None

    return parse


FRAMES = job_key(int, "animation.frames")


FPS = job_key(int, "animation.fps")


SECONDS = number(float, 0.001, 100_000.0)


def add_render_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--video", metavar="P", help="video path (default: output.video of the job)")
    p.add_argument("--no-video", action="store_true", help="render only; encode later")
    p.add_argument("--device", metavar="SEL",
                   help="auto | gpu | cpu | P:D as listed by `farm devices` (env FARM_DEVICE)")
    p.add_argument("--share-devices", action="store_true",
                   help="allow more workers than devices on a node (CPU/PoCL runs)")
    p.add_argument("--workers", type=number(int, 1, 1024), metavar="N",
                   help="worker threads in one process (default: one per GPU, else 1; under "
                   "mpiexec the ranks are the workers)")
    p.add_argument("--verify", action="store_true",
                   help="check every stored tile's checksum before resuming (tiles written "
                   "after the store's last sync are always checked)")
    p.add_argument("--sync-every", type=number(float, 0, 86400), default=10.0, metavar="S",
                   help="seconds between fdatasyncs of the store (default 10): what a power "
                   "loss can cost; a killed process loses nothing written")
    p.add_argument("--ignore-free-space", action="store_true",
                   help="start even when the store's file system has less free space than "
                   "the finished store needs (a full disk then stops the render like an "
                   "interrupt)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    g = p.add_argument_group("scheduling")
    g.add_argument("--depth", type=number(int, 1, 4096), default=32,
                   help="most tiles a worker holds: queued, on its device, being packed (default 32; "
                   "each worker asks for what it can use)")
    g.add_argument("--attempts", type=number(int, 1, 1000), default=3, help="attempts per tile (default 3)")
    g.add_argument("--worker-timeout", type=number(float, 0.01, 86400), default=300.0, metavar="S",
                   help="seconds a busy worker may stay silent (default 300)")
    g.add_argument("--grace", type=number(float, 0, 86400), default=30.0, metavar="S",
                   help="seconds to collect tiles in flight after a signal (default 30)")


def add_color_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("colour (default: the settings stored with the job)")
    g.add_argument("--job", metavar="FILE",
                   help="a job file whose [color] and [output] sections (and animation.fps) win "
                   "over the store's; other sections are ignored")
    g.add_argument("--method", help="shade | histogram | smooth | distance")
    g.add_argument("--palette", help="built-in palette (classic, fire, ice, gray) or gradient "
                   "file (.json, .txt)")
    g.add_argument("--cycles", type=job_key(float, "color.cycles"),
                   help="palette repetitions over the equalised range")
    g.add_argument("--smoothing", type=job_key(int, "color.smoothing"),
                   help="frames on each side whose histograms are averaged")
    g.add_argument("--density", type=job_key(float, "color.density"),
                   help="smooth: palette cycles per e-fold of escape time")
    g.add_argument("--line-width", type=job_key(float, "color.line_width"),
                   help="distance: filament width in output pixels")
    g.add_argument("--light", metavar="AZ,EL", help="shade: light azimuth and elevation, degrees")


def add_location_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("a location as the job (Kalles Fraktaler .kfr, Fraktaler-3 .toml, or "
                             "their PNG or EXR images)")
    g.add_argument("--size", type=image_size(), metavar="WxH",
                   help="image size (default: the location's, else 1920x1080)")
    g.add_argument("--frames", type=FRAMES, metavar="N", help="frames of the zoom (default: two "
                   "octaves of zoom per second)")
    g.add_argument("--seconds", type=SECONDS, metavar="S", help="the video's length instead of --frames")
    g.add_argument("--fps", type=FPS, metavar="N", help="frames per second (default 30)")
    g.add_argument("--from-width", metavar="W", help="the first frame's width (default 4): the "
                   "zoom goes from it to the location's view")
    g.add_argument("--max-iter", metavar="M", help="auto (default), source (the location's "
                   "limit) or an integer")
