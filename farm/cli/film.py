"""Command-line helpers for the film: a job from a job file or a location file, the
soundtrack's check, and the timeline's lines in ``farm validate`` (used by farm/cli.py).
"""

from __future__ import annotations

import argparse
import sys

from farm.errors import UsageError

LOCATION_OPTIONS = ("size", "frames", "seconds", "fps", "from_width", "max_iter")


def job_options(args: argparse.Namespace):
    """The location options as farm.film.locations.job.JobOptions."""
    from farm.film.locations.job import JobOptions

    fps = 30 if args.fps is None else args.fps
    return JobOptions(size=args.size, frames=args.frames, seconds=args.seconds, fps=fps,
                      start_width=args.from_width or "4", max_iter=args.max_iter or "auto")


def load_job(args: argparse.Namespace, palette_beside: str | None = None):
    """The job spec of ``args.job``: a job file, or a location file (farm.film.locations) with
    the location options. For a location with a palette, ``palette_beside`` (a store
    path or a folder) says where its gradient file is written; None: the job uses the
    default palette and nothing is written."""
    from pathlib import Path

    from farm import spec as specmod
    from farm.film import locations
    from farm.film.locations import job as locjob

    if locations.kind_of(args.job) is None:
        given = [name for name in LOCATION_OPTIONS if getattr(args, name, None) is not None]
        if given:
            option = "--" + given[0].replace("_", "-")
            raise UsageError(f"{option}: only for a location file; {args.job} is a job file "
                             "(its [animation], [image] and [iterations] say that)")
        return specmod.load(args.job)
    location = locations.read(args.job)
    if is_master():
        for note in location.notes:
            print(f"farm: note: not honoured: {note}", file=sys.stderr)
    source = Path(args.job)
    name = locjob.default_job_path(source).stem
    palette = None
    if location.colours and palette_beside is not None:
        folder = Path(palette_beside) if palette_beside.endswith("/") else Path(palette_beside).parent
        palette = (folder / f"{name}.palette.txt").absolute()
    text = locjob.job_text(location, job_options(args), source.name,
                           str(palette) if palette is not None else None)
    if palette is not None:  # written first: the job keeps the gradient itself, as from a job file
        specmod.check_writable(palette, "color.palette")
        locjob.write_file(palette, locjob.palette_text(location, source.name))
    return specmod.parse_text(text, name=name, source=args.job, base=source.parent)


def timeline_lines(spec) -> list[str]:
    """``farm validate``'s lines for [[animation.keys]]: each key's frame, time, width
    (and angle); and the rotation of a turning or turned view without angled keys."""
    fps = spec.animation.fps
    lines = []
    for i, key in enumerate(spec.animation.keys):
        frame = round(key.time_exact * fps)
        where = f"frame {frame}" if frame < spec.frames else "after the last frame"
        then = f", then {key.interpolation}" if i + 1 < len(spec.animation.keys) else ""
        angle = f", angle {key.angle:g} deg" if key.angle is not None else ""
        lines.append(f"{'timeline' if i == 0 else '':10} key {i}: {key.time:g} s ({where}), width "
                     f"{key.width_text(4)}{angle}{then}")
    view, turn = spec.view.angle, spec.animation.turn
    if turn:
        last = view + turn * (spec.frames - 1) / fps
        lines.append(f"rotation   {view:g} deg at frame 0, turning {turn:g} deg/s (counter-clockwise) "
                     f"to {last:g} deg at the last frame")
    elif view:
        lines.append(f"rotation   {view:g} deg (counter-clockwise)")
    return lines


def check_audio(spec, no_video: bool = False) -> float | None:
    """The soundtrack's length in seconds (None without one, or without a video); one
    line and exit 2 before any work when it cannot be read (farm/encode/audio.py)."""
    from farm.encode.audio import check

    return None if no_video else check(spec)


def is_master() -> bool:
    """Rank 0 under MPI, or the one process."""
    from farm.schedule.transport import mpi_world

    comm = mpi_world()
    return comm is None or comm.Get_rank() == 0
