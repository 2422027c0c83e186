"""The ``farm`` command's parser: every command, its arguments and its help text."""


from __future__ import annotations

import argparse
from typing import NoReturn

from farm import __version__
from farm.cli.options import (
    FPS,
    FRAMES,
    add_color_options,
    add_location_options,
    add_render_options,
    image_size,
    job_key,
    number,
)
from farm.errors import EXIT_USAGE

EPILOG = """exit status: 0 done; 1 render failed; 2 bad input (nothing written);
75 interrupted by a signal (the store keeps every finished tile: `farm resume STORE`)"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, exit 2. A bad option value names the option first, as every other
        error names its field: ``farm: --size: 0x0: each side from 1 to 32768 pixels``."""
        option, sep, why = message.partition(": ")
        if option.startswith("argument -") and sep:
            self.exit(EXIT_USAGE, f"farm: {option.removeprefix('argument ')}: {why} "
                      f"(see {self.prog} --help)\n")
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


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
    add_render_options(p)
    add_location_options(p)

    p = sub.add_parser("import", help="a job file from a Kalles Fraktaler or Fraktaler-3 location",
                       description="Write a job file (and the location's palette as a gradient "
                       "file beside it) from a Kalles Fraktaler .kfr/.kfp, a Fraktaler-3 .toml, or "
                       "the PNG or EXR images they save. Settings the farm cannot honour are "
                       "named, one line each.")
    p.add_argument("location", metavar="FILE")
    p.add_argument("-o", "--out", metavar="JOB.toml",
                   help="the job file (default: the location's name with .toml, here)")
    p.add_argument("--force", action="store_true", help="replace existing files")
    add_location_options(p)

    p = sub.add_parser("resume", help="continue the render a store holds", epilog=EPILOG,
                       description="Render what STORE lacks, with the job the store holds "
                       "(its colours and video path too), then make the video. A complete "
                       "store whose video is in place, made with the same settings, is left "
                       "as it is. Under `mpiexec -n N`, as `farm render`.")
    p.add_argument("store", metavar="STORE")
    add_render_options(p)

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
    add_color_options(p)

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
    p.add_argument("--crf", type=job_key(int, "output.crf"),
                   help="quality, 0-51, lower is better (default: output.crf)")
    p.add_argument("--preset", help="x264 preset, ultrafast .. veryslow (default: output.preset)")
    p.add_argument("--codec", help="auto | libx264 | h264_nvenc (default: output.codec)")
    p.add_argument("--audio", metavar="TRACK", help="a soundtrack to mux in as AAC, any format "
                   "ffmpeg reads (default: output.audio)")
    p.add_argument("--force", action="store_true",
                   help="replace the video at the default path even when it was made with other settings")
    add_color_options(p)

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
    add_location_options(p)

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
    p.add_argument("--iter-cap", type=number(int, 1, 10_000_000), metavar="N",
                   help="at most N iterations a pixel "
                   "(faster; pixels escaping later turn black)")
    p.add_argument("--device", metavar="SEL", help="auto | gpu | cpu | P:D (env FARM_DEVICE)")
    add_location_options(p)

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
                       "whose width is about --depth (Misiurewicz points lead down to it; below "
                       "--structure, a Misiurewicz point's spiral), or a "
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
                   help="follow Misiurewicz points down to width W only; below, the zoom is "
                   "self-similar: into the point (--misiurewicz), or along its spiral to a "
                   "minibrot at the depth (minutes where the descent takes hours; default "
                   "below 1e-10000: a hundredth of the depth's digits)")
    p.add_argument("--out", metavar="JOB.toml", help="job file to write (not overwritten)")
    p.add_argument("--from-width", default="4", metavar="W", help="the first frame's width (default 4)")
    p.add_argument("--size", type=image_size(16, 16384), default="1920x1080", metavar="WxH",
                   help="image size (default 1920x1080)")
    p.add_argument("--frames", type=FRAMES, default=600, help="frames of the zoom (default 600)")
    p.add_argument("--fps", type=FPS, default=30, help="frames per second (default 30)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
