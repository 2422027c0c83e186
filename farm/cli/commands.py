"""The ``farm`` commands, one function each (``COMMANDS``): each checks what it was given,
calls the stage that does the work, and says what it wrote. Imports are made inside the
commands, so that ``farm status`` does not load OpenCL and ``farm encode`` no orbit code."""


from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from farm.cli import film
from farm.errors import UsageError


def cmd_find(args: argparse.Namespace) -> int:
    from farm.film.find_cli import run

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


def opencl_begins() -> None:
    """OpenCL finds its platforms on a thread of its own while the render's modules
    are imported and its job is read (farm/compute/clstart.py; a job that is refused
    then waits for that thread at exit, 0.1 s or so, and nothing is written)."""
    from farm.compute import clstart

    clstart.begin()


def cmd_render(args: argparse.Namespace) -> int:
    from farm.run import early_refs

    early = early_refs.begin(args.job)  # the references, beside the rest (farm/run/early_refs.py)
    try:
        opencl_begins()
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
    opencl_begins()
    from farm.run import resume
    from farm.store.reader import Store

    with Store(args.store) as store:
        film.check_audio(store.spec, args.no_video)
    return resume(args.store, video=args.video, options=_render_options(args))


def cmd_validate(args: argparse.Namespace) -> int:
    from farm import spec as specmod
    from farm.color import Style
    from farm.plan import make_plan, structure
    from farm.plan.auto_limits import with_period_limits
    from farm.plan.reference_cost import estimate as estimate_reference
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
    """One process, or under ``mpiexec -n N`` every rank a share of the video
    (farm/run/mpi_encode.py): rank 0 checks and leads, the others follow."""
    import dataclasses

    from farm.encode import VideoSettings, encode_video
    from farm.encode.record import beside_store, recolour_target
    from farm.encode.settings import names_video
    from farm.schedule.transport import mpi_world
    from farm.store.reader import Store

    comm = mpi_world()
    if comm is not None and comm.Get_rank() != 0:
        from farm.run.mpi_encode import follow

        follow(comm)
        return 0
    try:
        with Store(args.store) as store:
            spec = settings_from_args(store.spec, args)
            if args.video is None and not names_video(args.job):
                home = beside_store(args.store, spec.output.video)
                spec = dataclasses.replace(spec, output=dataclasses.replace(spec.output, video=str(home)))
                # never over a video of other colours or another soundtrack without --force
                target = recolour_target(args.store, store.spec, spec, store.frames, args.force)
            else:
                target = Path(spec.output.video)
        film.check_audio(spec)
    except BaseException:
        if comm is not None:
            from farm.run.mpi_encode import decline

            decline(comm)  # bad input: the other ranks go home
        raise
    if comm is not None:
        from farm.run.mpi_encode import lead

        path = lead(comm, args.store, spec.color, VideoSettings.from_spec(spec, target))
    else:
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
