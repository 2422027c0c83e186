"""The ``farm`` command (also ``python -m farm``).

Every error a user can cause ends with one line ``farm: <what is wrong>`` on
stderr and the exit status of :mod:`farm.errors` (2 for bad input), no traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np

from farm import __version__
from farm.cli import film
from farm.errors import EXIT_INTERRUPTED, EXIT_USAGE, FarmError, UsageError

EPILOG = """exit status: 0 done; 1 render failed; 2 bad input (nothing written);
75 interrupted by a signal (the store keeps every finished tile: `farm resume STORE`)"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


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


def _add_render_options(p: argparse.ArgumentParser) -> None:
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


def _add_color_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("colour (default: the settings stored with the job)")
    g.add_argument("--job", metavar="FILE",
                   help="a job file whose [color] and [output] sections (and animation.fps) win "
                   "over the store's; other sections are ignored")
    g.add_argument("--method", help="shade | histogram | smooth | distance")
    g.add_argument("--palette", help="built-in palette (classic, fire, ice, gray) or gradient "
                   "file (.json, .txt)")
    g.add_argument("--cycles", type=job_key(float, "color.cycles"), help="palette repetitions over the equalised range")
    g.add_argument("--smoothing", type=job_key(int, "color.smoothing"), help="frames on each side whose histograms are averaged")
    g.add_argument("--density", type=job_key(float, "color.density"), help="smooth: palette cycles per e-fold of escape time")
    g.add_argument("--line-width", type=job_key(float, "color.line_width"), help="distance: filament width in output pixels")
    g.add_argument("--light", metavar="AZ,EL", help="shade: light azimuth and elevation, degrees")


def _add_location_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("a location as the job (Kalles Fraktaler .kfr, Fraktaler-3 .toml, or "
                             "their PNG or EXR images)")
    g.add_argument("--size", type=image_size(), metavar="WxH", help="image size (default: the location's, else 1920x1080)")
    g.add_argument("--frames", type=FRAMES, metavar="N", help="frames of the zoom (default: two "
                   "octaves of zoom per second)")
    g.add_argument("--seconds", type=SECONDS, metavar="S", help="the video's length instead of --frames")
    g.add_argument("--fps", type=FPS, metavar="N", help="frames per second (default 30)")
    g.add_argument("--from-width", metavar="W", help="the first frame's width (default 4): the "
                   "zoom goes from it to the location's view")
    g.add_argument("--max-iter", metavar="M", help="auto (default), source (the location's "
                   "limit) or an integer")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="farm", description="Render deep-zoom Mandelbrot animations on "
                     "OpenCL devices, one process or an MPI farm.", epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"zoomfarm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("render", help="render a job (resumes its store if it exists)",
                       description="Render JOB into its store, then encode the video. Under "
                       "`mpiexec -n N`, rank 0 is the master and ranks 1..N-1 are workers.",
                       epilog=EPILOG)
    p.add_argument("job", metavar="JOB.toml", help="a job file, or a location file (see below)")
    p.add_argument("--store", metavar="P", help="store path (default: output.store of the job)")
    p.add_argument("--restart", action="store_true",
                   help="delete an existing store and render from scratch")
    _add_render_options(p)
    _add_location_options(p)

    p = sub.add_parser("import", help="a job file from a Kalles Fraktaler or Fraktaler-3 location",
                       description="Write a job file (and the location's palette as a gradient "
                       "file beside it) from a Kalles Fraktaler .kfr/.kfp, a Fraktaler-3 .toml, or "
                       "the PNG or EXR images they save. Settings the farm cannot honour are "
                       "named, one line each.")
    p.add_argument("location", metavar="FILE")
    p.add_argument("-o", "--out", metavar="JOB.toml",
                   help="the job file (default: the location's name with .toml, here)")
    p.add_argument("--force", action="store_true", help="replace existing files")
    _add_location_options(p)

    p = sub.add_parser("resume", help="continue the render a store holds", epilog=EPILOG,
                       description="Render what STORE lacks, with the job the store holds "
                       "(its colours and video path too), then make the video. A complete "
                       "store whose video is in place, made with the same settings, is left "
                       "as it is. Under `mpiexec -n N`, as `farm render`.")
    p.add_argument("store", metavar="STORE")
    _add_render_options(p)

    p = sub.add_parser("status", help="progress, rate, ETA and balance of a store",
                       description="Show how far STORE's render is: frames and tiles done, "
                       "who renders it now, the latest run's rate, ETA and per-worker balance, "
                       "where its time went, and a map of the frames. Reads only; safe while "
                       "a render runs.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("frames", help="write frames of a store as PNG files",
                       description="Colour frames of a store (with the store's colour settings, "
                       "or --job's, or the options below) into DIR/frame_NNNNN.png.")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory for the PNG files (created if needed)")
    p.add_argument("--frames", metavar="A:B",
                   help="frames A..B-1 (Python slice: 10:20, 10:, :5) or one frame N (default: all)")
    _add_color_options(p)

    p = sub.add_parser("encode", help="encode a complete store into an MP4 video",
                       description="Colour every frame of a complete store and encode the video "
                       "(a one-frame store: a PNG at the video path with .png). Colour and output "
                       "settings: the store's, then --job's, then the options below. Without "
                       "--video, a video made with other settings is kept: the new one goes "
                       "beside it, named by what changed (seahorse.ice.mp4).")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--video", metavar="P",
                   help="video path, .mp4 (default: output.video of the store's job, or of --job; "
                   "with other colours than the video there, beside it: NAME.ice.mp4)")
    p.add_argument("--fps", type=FPS, help="frames per second (default: animation.fps)")
    p.add_argument("--crf", type=job_key(int, "output.crf"), help="quality, 0-51, lower is better (default: output.crf)")
    p.add_argument("--preset", help="x264 preset, ultrafast .. veryslow (default: output.preset)")
    p.add_argument("--codec", help="auto | libx264 | h264_nvenc (default: output.codec)")
    p.add_argument("--audio", metavar="TRACK", help="a soundtrack to mux in as AAC, any format "
                   "ffmpeg reads (default: output.audio)")
    _add_color_options(p)

    p = sub.add_parser("export", help="write an expmap store's strips as OpenEXR files for zoomasm",
                       description="Write the exponential-map strip of a finished expmap store as "
                       "OpenEXR files in the layout zoomasm reads: one file per octave, "
                       "STEM.00000000.exr the deepest, channels N and NF (and DEX, DEY when the "
                       "store has a distance estimate). Octaves inside the strip's inner edge are "
                       "resampled from the centre image. Needs the OpenEXR package "
                       "(pip install 'zoomfarm[exr]').")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory for the OpenEXR files (created if needed)")
    p.add_argument("--stem", default="expmap", help="file name stem (default: expmap)")
    p.add_argument("--inner-octaves", type=number(int, 0, 4096), metavar="N",
                   help="octaves below the strip from the centre image (default: down to one "
                   "pixel of the deepest frame)")

    p = sub.add_parser("validate", help="check a job spec and print its plan",
                       description="Check JOB and print its plan: frames, formats, iteration "
                       "limits, store size against the free space, and a time bound at the "
                       "rates `farm bench` measured on this machine's device. Writes nothing.")
    p.add_argument("job", metavar="JOB.toml", help="a job file, or a location file (see below)")
    p.add_argument("--device", metavar="SEL", help="device the time estimate is for (env FARM_DEVICE)")
    p.add_argument("--json", action="store_true", help="the plan as JSON (for scripts)")
    _add_location_options(p)

    p = sub.add_parser("preview", help="a contact sheet of a few frames of the timeline, small",
                       description="Render the first frame, the frame at each key (and one "
                       "halfway between keys), and the last, small and with the job's own "
                       "settings, and lay them out in one PNG with each frame's time and width: "
                       "the film's shape before the GPU hours. Writes only the sheet.")
    p.add_argument("job", metavar="JOB.toml", help="a job file, or a location file (see below)")
    p.add_argument("--out", metavar="PNG", help="the sheet (default: the video's path with "
                   ".preview.png)")
    p.add_argument("--width", type=number(int, 16, 4096), default=256, metavar="PX",
                   help="width of each frame in pixels (default 256)")
    p.add_argument("--count", type=number(int, 2, 64), default=6, metavar="N",
                   help="frames shown for a job without keys (default 6)")
    p.add_argument("--iter-cap", type=number(int, 1, 10_000_000), metavar="N", help="at most N iterations a pixel "
                   "(faster; pixels escaping later turn black)")
    p.add_argument("--device", metavar="SEL", help="auto | gpu | cpu | P:D (env FARM_DEVICE)")
    _add_location_options(p)

    p = sub.add_parser("devices", help="list OpenCL devices and the one a render would use",
                       description="List every OpenCL device, mark the candidates a render "
                       "would use for the selector (--device, else FARM_DEVICE, else auto), say "
                       "why a device cannot render (its compiler fails on the kernels: checked "
                       "once per driver in a child process) and what is missing. Exit status: "
                       "0, or the selector's error (2: names no device; 1: no usable device).")
    p.add_argument("--device", metavar="SEL", help="selector to test: auto | gpu | cpu | P:D "
                   "(env FARM_DEVICE)")

    p = sub.add_parser("bench", help="kernel speed per number format, in Giter/s",
                       description="Time the kernels of each number format on one device "
                       "(a fixed all-interior workload, so machines compare) and remember the "
                       "rates for the time bound of `farm validate`.")
    p.add_argument("--device", metavar="SEL", help="device selector (env FARM_DEVICE)")
    p.add_argument("--formats", default="f64,fp128,quad-single,perturb,perturb-fx",
                   help="comma-separated (perturb: double deltas; perturb-fx: floatexp deltas)")
    p.add_argument("--workload", choices=("small", "standard"),
                   help="small (CPU) or standard (GPU); default by device type")
    p.add_argument("--json", action="store_true", help="the rows as JSON (for scripts)")
    _add_find_parser(sub)
    return parser


def _add_find_parser(sub) -> None:
    p = sub.add_parser("find", help="find a deep target near a point and write a job that zooms there",
                       description="From a point near the boundary of the set, find a minibrot "
                       "whose width is about --depth (Misiurewicz points lead down to it), or a "
                       "Misiurewicz point (--misiurewicz), or follow a chain of embedded Julia "
                       "sets (--chain), to as many digits as the depth needs, and write a job "
                       "file that zooms there (to stdout without --out).")
    p.add_argument("re", metavar="RE", help="real part of the start, a decimal string")
    p.add_argument("im", metavar="IM", help="imaginary part of the start")
    p.add_argument("--depth", required=True, metavar="W",
                   help="width of the zoom's last frame, e.g. 1e-10000")
    p.add_argument("--view", default="0.01", metavar="W",
                   help="width around the start that holds some of the set's boundary (default 0.01)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--misiurewicz", action="store_true",
                   help="a Misiurewicz point (its reference orbit is short at any depth)")
    g.add_argument("--chain", action="store_true",
                   help="minibrots on the embedded Julia set of the one before, as Kalles "
                   "Fraktaler's Newton zoom (periods grow fast: practical to about 1e-2000)")
    p.add_argument("--structure", metavar="W",
                   help="with --misiurewicz: follow Misiurewicz points down to width W only "
                   "(below, the zoom is self-similar and the reference orbit shorter); the "
                   "point still has the digits --depth needs")
    p.add_argument("--out", metavar="JOB.toml", help="job file to write (not overwritten)")
    p.add_argument("--from-width", default="4", metavar="W", help="the first frame's width (default 4)")
    p.add_argument("--size", type=image_size(16, 16384), default="1920x1080", metavar="WxH", help="image size (default 1920x1080)")
    p.add_argument("--frames", type=FRAMES, default=600, help="frames of the zoom (default 600)")
    p.add_argument("--fps", type=FPS, default=30, help="frames per second (default 30)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def cmd_find(args: argparse.Namespace) -> int:
    from farm.film.find import run

    return run(args)


def _render_options(args: argparse.Namespace):
    from farm.compute.device import selector_from_env
    from farm.run import RenderOptions
    from farm.schedule.master import MasterOptions

    return RenderOptions(
        device=selector_from_env(args.device), share_devices=args.share_devices,
        workers=args.workers,
        video=not args.no_video, restart=getattr(args, "restart", False), verify=args.verify,
        sync_every=args.sync_every, check_space=not args.ignore_free_space,
        progress=not args.quiet,
        master=MasterOptions(depth=args.depth, max_attempts=args.attempts,
                             timeout=args.worker_timeout, grace=args.grace))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        status = COMMANDS[args.command](args)
    except FarmError as err:
        print(f"farm: {err}", file=sys.stderr)
        status = err.exit_status
    except KeyboardInterrupt:
        print("farm: interrupted", file=sys.stderr)
        status = EXIT_INTERRUPTED
    except BrokenPipeError:  # `farm ... | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 0
    if "mpi4py.MPI" in sys.modules:  # under MPI: every rank takes the master's status
        from farm.schedule.transport import leave

        status = leave(status)
    render = sys.modules.get("farm.compute.render")
    if render is not None and render.kernels_abandoned():  # a stop left kernels running
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)  # without the OpenCL drivers' teardown, which would wait for them
    return status


# ---------------------------------------------------------------------------- commands


def _opencl_begins() -> None:
    """OpenCL finds its platforms on a thread of its own while the render's modules
    are imported and its job is read (farm/compute/clstart.py; a job that is refused
    then waits for that thread at exit, 0.1 s or so, and nothing is written)."""
    from farm.compute import clstart

    clstart.begin()


def cmd_render(args: argparse.Namespace) -> int:
    from farm.run import early_refs

    early = early_refs.begin(args.job)  # the references, beside the rest (farm/run/early_refs.py)
    try:
        _opencl_begins()
        from farm import spec as specmod
        from farm.color import Style
        from farm.run import render

        job = film.load_job(args, palette_beside=args.store or "renders/")
        Style.from_settings(job.color)  # a gradient file that cannot be read or parsed: before any work
        _warn(specmod.warnings(job))
        film.check_audio(job, args.no_video)
        return render(job, store=args.store, video=args.video, options=_render_options(args), early=early)
    finally:
        if early is not None:
            early.cancel()  # (taken, or not wanted: a resume, bad input)


def cmd_resume(args: argparse.Namespace) -> int:
    _opencl_begins()
    from farm.run import resume
    from farm.store.reader import Store

    with Store(args.store) as store:
        film.check_audio(store.spec, args.no_video)
    return resume(args.store, video=args.video, options=_render_options(args))


def cmd_validate(args: argparse.Namespace) -> int:
    from farm import spec as specmod
    from farm.color import Style
    from farm.plan import make_plan, structure
    from farm.plan.reference_cost import estimate as estimate_reference
    from farm.plan.references import with_period_limits
    from farm.run.report import plan_info, plan_summary
    from farm.store import layout

    job = film.load_job(args)
    _warn(specmod.warnings(job))
    plan = make_plan(job)
    specmod.check_writable(job.output.store, "output.store")
    layout.check_ours(job.output.store, "output.store")  # render would refuse to touch it
    specmod.check_writable(job.output.video, "output.video")
    Style.from_settings(job.color)  # a gradient file that cannot be read or parsed
    track = film.check_audio(job)
    device = _estimate_device(args.device)
    cost = estimate_reference(plan)  # before the work: what the reference orbit costs
    if cost is not None:
        print(f"farm: {cost.text()}", file=sys.stderr)
    refs = plan.references()  # perturbed frames: their reference points (issue 14)
    plan = with_period_limits(plan, refs)  # max = "auto": a few periods of a nucleus reference
    _warn(structure.check(plan, refs))  # a zoom into nothing (issue 10.5)
    if args.json:
        info = plan_info(plan, args.job, device, refs)
        if track is not None:
            info["audio"] = {"path": job.output.audio, "seconds": track}
        print(json.dumps(info))
    else:
        print(plan_summary(plan, args.job, device, refs))
        for line in film.timeline_lines(job):
            print(line)
        if track is not None:
            print(f"soundtrack {job.output.audio}: {track:.2f} s (the video: "
                  f"{job.frames / job.animation.fps:.2f} s; the longer is cut to the shorter)")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from farm.film import locations
    from farm.film.locations.job import import_files

    location = locations.read(args.location)
    for note in location.notes:
        print(f"farm: note: not honoured: {note}", file=sys.stderr)
    out = Path(args.out) if args.out else None
    paths = import_files(location, film.job_options(args), Path(args.location), out, args.force)
    print(f"farm: wrote {', '.join(map(str, paths))}", file=sys.stderr)
    if location.has_view:
        print(f"farm: render it with: farm render {paths[0]}", file=sys.stderr)
    return 0


def _warn(lines: Sequence[str]) -> None:
    for line in lines:
        print(f"farm: warning: {line}", file=sys.stderr)


def _estimate_device(selector: str | None) -> str | None:
    """The name of the device a render would use, for a time estimate (None without one).
    A selector that names no device is an error, as in `farm render`."""
    from farm.compute.device import candidates, selector_from_env
    from farm.errors import DeviceError

    try:
        return candidates(selector_from_env(selector))[0][0].name
    except DeviceError:
        return None


def cmd_status(args: argparse.Namespace) -> int:
    from farm.run.report import status_text
    from farm.store.reader import Store

    with Store(args.store) as store:
        info = store.status()
    print(json.dumps(info, indent=2) if args.json else status_text(info))
    return 0


def settings_from_args(stored, args: argparse.Namespace):
    """The store's spec with ``--job`` and the colour/output options applied."""
    from farm.encode.settings import light, with_overrides

    color = {"method": args.method, "palette": args.palette, "cycles": args.cycles,
             "smoothing": args.smoothing, "density": args.density, "line_width": args.line_width,
             "light": light(args.light)}
    output = {"video": getattr(args, "video", None), "crf": getattr(args, "crf", None),
              "preset": getattr(args, "preset", None), "codec": getattr(args, "codec", None),
              "audio": getattr(args, "audio", None)}
    animation = {"fps": getattr(args, "fps", None)}
    return with_overrides(stored, args.job, {"color": color, "output": output, "animation": animation})


def cmd_frames(args: argparse.Namespace) -> int:
    from farm.encode import write_frames
    from farm.encode.settings import frame_range
    from farm.store.reader import Store

    with Store(args.store) as store:
        spec = settings_from_args(store.spec, args)
        frames = frame_range(args.frames, store.frames)
    paths = write_frames(args.store, args.out, spec.color, frames)
    print(f"farm: wrote {len(paths)} PNG file(s) to {args.out}", file=sys.stderr)
    return 0


def cmd_encode(args: argparse.Namespace) -> int:
    from farm.encode.early import begin_colourer

    early = begin_colourer()  # beside the imports and the store (farm/encode/early.py)
    try:
        return _encode(args)
    finally:
        if early is not None:
            early.join()  # at once after a video; after bad input, no OpenCL call left running


def _encode(args: argparse.Namespace) -> int:
    from farm.encode import VideoSettings, encode_video
    from farm.encode.record import recolour_target
    from farm.encode.settings import names_video
    from farm.store.reader import Store

    with Store(args.store) as store:
        spec = settings_from_args(store.spec, args)
        target = Path(spec.output.video)
        if args.video is None and not names_video(args.job):  # never over another colour's video
            target = recolour_target(args.store, store.spec, spec, store.frames)
    film.check_audio(spec)
    path = encode_video(args.store, spec.color, VideoSettings.from_spec(spec, target))
    beside = "" if target == Path(spec.output.video) else (
        f" (beside {spec.output.video}, made with other settings; --video P names the path)")
    print(f"farm: wrote {path}{beside}", file=sys.stderr)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from farm import spec as specmod
    from farm.store.reader import Store
    from farm.synth.exr import openexr, write_segments

    if not args.stem or "/" in args.stem:
        raise UsageError(f"--stem: {args.stem!r} must be a file name without '/'")
    openexr()  # the binding is there before anything is read or written
    with Store(args.store) as store:
        if not store.expmap:
            raise UsageError(f"store {args.store}: method {store.method!r}; export needs an "
                             "expmap store ([animation] method = \"expmap\")")
        missing = np.flatnonzero(~store.unit_done())
        if len(missing):
            raise UsageError(f"store {args.store}: {len(missing)} unit(s) not rendered yet "
                             f"(first: {missing[0]}); run `farm resume {args.store}`")
        specmod.check_directory(args.out, "--out")
        layout = store.layout
        centre = store.centre_image() if layout.centre_units else None
        paths = write_segments(layout.geom, store.strip_rows, centre, store.bins - 1, args.out,
                               stem=args.stem, inner_octaves=args.inner_octaves,
                               metadata={"spec": store.spec_text})
    print(f"farm: wrote {len(paths)} OpenEXR file(s) to {args.out} ({args.stem}.00000000.exr is "
          "the deepest octave)", file=sys.stderr)
    return 0


def cmd_preview(args: argparse.Namespace) -> int:
    import tempfile
    from pathlib import Path

    from farm.compute.device import selector_from_env
    from farm.film.preview import render_preview

    with tempfile.TemporaryDirectory(prefix="farm-preview-palette-") as tmp:
        job = film.load_job(args, palette_beside=tmp + "/")  # a location's palette, while it renders
        out = Path(args.out) if args.out else Path(job.output.video).with_suffix(".preview.png")
        path = render_preview(job, out, Path(args.job).name, device=selector_from_env(args.device),
                              width=args.width, count=args.count, max_iter=args.iter_cap)
    print(f"farm: wrote {path}", file=sys.stderr)
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    from farm.run.report import devices_text

    text, error = devices_text(args.device)
    if text:
        print(text)
    if error is not None:  # after the list: what the selector gives, and the exit status
        raise error
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from farm.compute.bench import run_bench
    from farm.compute.device import selector_from_env

    rows = run_bench(selector_from_env(args.device), args.formats.split(","), args.workload)
    if rows:  # for time estimates in `farm validate` (farm/compute/rates.py)
        from farm.compute import rates

        rates.remember(rows[0].device, {r.format: r.giters for r in rows})
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=2))
    else:
        from farm.run.report import bench_table

        print(bench_table(rows))
    return 0


COMMANDS = {
    "render": cmd_render, "resume": cmd_resume, "status": cmd_status, "frames": cmd_frames,
    "encode": cmd_encode, "validate": cmd_validate, "devices": cmd_devices, "bench": cmd_bench,
    "export": cmd_export, "import": cmd_import, "preview": cmd_preview, "find": cmd_find,
}
