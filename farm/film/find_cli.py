"""``farm find`` on the command line: its options checked (a one-line error naming
the option), the search (farm/film/find.py) run, and the job file that zooms to the
target written.
"""

from __future__ import annotations

import re
import textwrap
from decimal import Decimal, InvalidOperation

from farm.errors import UsageError
from farm.film.find import LOG2_10, Target, find, scientific, shortened


def job_text(target: Target, first_width: str, last_width: str, size: tuple[int, int],
             frames: int, fps: int, name: str, note: str) -> str:
    """A job file that zooms from ``first_width`` to ``last_width`` into the target."""
    what = (f"the minibrot of period {target.period} (width {scientific(target.log2_width)})"
            if target.kind == "minibrot" else
            f"the Misiurewicz point of preperiod {target.preperiod}, period {target.period}")
    return textwrap.dedent(f"""\
        # Written by `farm find` ({note}): a zoom into {what}.
        # The centre has {len(target.center[0])} characters: as many digits as the depth needs.
        [view]
        center = ["{target.center[0]}", "{target.center[1]}"]
        width = ["{first_width}", "{last_width}"]
        [image]
        size = [{size[0]}, {size[1]}]
        [animation]
        frames = {frames}
        fps = {fps}
        [output]
        store = "renders/{name}.h5"
        video = "renders/{name}.mp4"
        """)


_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _number(text: str, name: str) -> Decimal:
    """A decimal string as an exact Decimal, or a one-line error naming the option."""
    if not _DECIMAL.fullmatch(text.strip()):
        raise UsageError(f"{name}: {text[:40]!r} is not a decimal number (like \"-0.75\" or \"1e-20\")")
    try:
        return Decimal(text.strip())
    except InvalidOperation:
        raise UsageError(f"{name}: {text[:40]}: its exponent is out of range") from None


def _log2(value: Decimal) -> float:
    return float(value.log10()) * LOG2_10


def run(args) -> int:
    """``farm find`` (farm/cli.py): check the options, find the target, write the job."""
    import sys
    from pathlib import Path

    from farm import spec as specmod

    start = (args.re.strip(), args.im.strip())
    for value, name in ((start[0], "RE"), (start[1], "IM")):
        if abs(_number(value, name)) > 4:
            raise UsageError(f"{name}: {value[:40]} is too far out: the set lies within |c| <= 2")
    depth, view = _number(args.depth, "--depth"), _number(args.view, "--view")
    first = _number(args.from_width, "--from-width")
    for value, name in ((depth, "--depth"), (view, "--view"), (first, "--from-width")):
        if not value > 0:
            raise UsageError(f"{name}: {value} must be > 0")
    if not depth < view:
        raise UsageError(f"--depth: {args.depth} must be below --view ({args.view})")
    if not depth < first:
        raise UsageError(f"--depth: {args.depth} must be below --from-width ({args.from_width})")
    size = args.size  # WxH, checked by the parser (farm/cli.py)
    out = Path(args.out) if args.out else None
    if out is not None:
        if out.suffix != ".toml":
            raise UsageError(f"--out: {out} must end in .toml")
        if out.exists():
            raise UsageError(f"--out: {out} exists (farm find does not overwrite job files)")
        if not out.parent.is_dir():
            raise UsageError(f"--out: the directory {out.parent} does not exist")
    say = (lambda text: None) if args.quiet else (lambda text: print(f"farm: {text}", file=sys.stderr))
    structure = None
    if args.structure is not None:
        if args.chain:
            raise UsageError("--structure: not with --chain (each of its steps is new structure)")
        value = _number(args.structure, "--structure")
        if not 0 < value < view:
            raise UsageError(f"--structure: {args.structure} must be > 0 and below --view ({args.view})")
        structure = _log2(value)
    target = find(start, _log2(view), _log2(depth), args.chain, args.misiurewicz, say, structure)
    name = out.stem if out is not None else "find"
    last = args.depth.strip()
    text = job_text(target, args.from_width.strip() if args.frames > 1 else last, last, size,
                    args.frames, args.fps, name, _command(args))
    specmod.parse_text(text, name=name)  # the job it writes is a valid one
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
        say(f"find: wrote {out}: {describe(target)}")
    return 0


def _command(args) -> str:
    """The ``farm find`` that finds this target again (its search options)."""
    words = ["farm find", args.re, args.im, "--depth", args.depth.strip()]
    if args.view.strip() != "0.01":
        words += ["--view", args.view.strip()]
    words += ["--misiurewicz"] * args.misiurewicz + ["--chain"] * args.chain
    if args.structure is not None:
        words += ["--structure", args.structure.strip()]
    return " ".join(words)


def describe(target: Target) -> str:
    """One line: what the target is."""
    if target.kind == "minibrot":
        return (f"the minibrot of period {target.period}, width {scientific(target.log2_width)}, at "
                f"{shortened(target.center)}")
    return (f"the Misiurewicz point of preperiod {target.preperiod}, period {target.period}, at "
            f"{shortened(target.center)}")
