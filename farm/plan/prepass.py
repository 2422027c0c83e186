"""``max = "auto"`` from each frame's own escape statistics: a coarse pre-pass on the host.

The depth rule (:func:`farm.plan.auto_max_iter`) knows nothing of what a frame shows:
a frame of a dense region (a cusp, a valley of spirals) has escape counts far beyond
it and comes out black where its pixels would have escaped. So, before anything is
rendered, the frame's view is sampled on a coarse grid and iterated here, in doubles,
with a high limit, and the frame's limit is the count by which ``QUANTILE`` of the
grid's escaping points have escaped (at least the depth rule, and at least the
periods a nucleus reference asks for: farm/plan/auto_limits.py).

What is iterated, per sampled frame:

* the grid: ``GRID_POINTS`` points (about 64 x 36 for 16:9) at the pixel centres of a
  coarse image of the same view (turned by the frame's angle, as its pixels are), so
  its statistics are the frame's;
* directly (z <- z^2 + c in doubles) where doubles resolve the grid
  (``DIRECT_MIN_SPACING``); else as perturbation against the frame's reference orbit
  (its nucleus or the view centre, :mod:`farm.plan.references`), rebased to Z(0) when
  the pixel comes nearer 0 than its delta or the reference ends, as kernels/perturb.cl
  does; frames whose grid spacing is below ``MIN_LOG10_SPACING`` (deltas would leave
  double's range) keep the other rules;
* each point until it escapes (``|z|^2 > R^2``; its count as the kernels define it), is
  found interior (``|dz_n/dz_1|^2 < INTERIOR_DERIVATIVE``: attracted to a cycle), or
  the frame stops: at each power of two K >= ``FIRST_CHECK`` a frame stops when no
  point is undecided, or when the points that escaped in (K/2, K] are at most
  ``1 - QUANTILE`` of all that escaped by K (the escape counts' tail beyond K is then
  about as small: near a boundary it falls like 1/n), or at ``CAP``. Points still
  undecided then (slow interior points near a parabolic boundary, or escapes past
  the stop) are left out of the statistic.

At most ``SAMPLED_FRAMES`` frames are iterated, spread evenly over the frames the
pre-pass takes (all of them together, one numpy loop); the others take the
logarithmic interpolation of their neighbours' statistics. Frames whose limit a
nucleus reference sets are left to it (farm/plan/auto_limits.py ``auto_periods`` is
the same statistic, measured near the nucleus, and their points would take many
periods here). The stop rule sees escapes up to about twice the limit it picks, so
the limit lets roughly 98-99% of the escaping points escape (measured at the dense
frame below: 99% within 46339 iterations, the pre-pass takes 25467).

Why numpy's arithmetic: the pre-pass is part of the plan, and the plan must be the same
on every machine (farm/store/reader.py keeps the stored limits on resume; MPI ranks take
the master's; `farm validate` prints what a render will use), so it runs in IEEE doubles
with one rounding per operation (numpy's real ufuncs; no fused or complex multiplies,
whose roundings vary with the CPU), and farm/plan/ imports no OpenCL. Its cost here is
about the largest limit it certifies times ~15-45 us a step: on the 2-core machine,
loaded, 3.7 s for jobs/demo.toml, 3.3 s for jobs/seahorse.toml, 5.5 s for
jobs/seahorse_expmap.toml, 1.2 s for jobs/deep.toml, 1.6 s for the 1080p minibrot zoom
(its slowest grid alone 0.8 s). A render runs the same steps on its device instead,
in kernels/prepass.cl (farm/compute/prepass.py: the arithmetic operation for
operation, contraction off, so the counts are these bit for bit; 13-39 ms for those
jobs' grids on an H100, 0.06-0.38 s on PoCL's two cores), through :func:`start`,
:meth:`Run.loop` and :meth:`Run.results`. The frames it raises cost the render far
more than the pre-pass (the Seahorse frame at width 6.2e-7: kernel 1.1 s at the depth
rule's 1393, 9.3 s at 21214, 640x360 on PoCL).

Measured at width 6.2e-7 near the Seahorse centre (64x36 grid, iterated to 2^20):
29% of the points escape, 67% are the minibrot's interior; the escape counts' 90th,
95th, 98th, 99th percentiles 4929, 8965, 21214, 46339. At 640x360 the black share is
81.0% at 1393 (the depth rule), 72.7% at 8965, 71.8% at 21214, 71.4% at 46339.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

QUANTILE = 0.99  # the share of a frame's escaping grid points its limit lets escape
GRID_POINTS = 2304  # points of the coarse grid (64 x 36 at 16:9)
SAMPLED_FRAMES = 32  # frames iterated at most; the others interpolate
CAP = 1 << 18  # the pre-pass stops here (a frame still escaping then gets CAP)
FIRST_CHECK = 256  # the first power of two at which a frame may stop
INTERIOR_DERIVATIVE = 1e-12  # |dz_n/dz_1|^2 below this: attracted to a cycle
DIRECT_MIN_SPACING = 1e-12  # grid spacing doubles resolve directly (|c| <= 2)
MIN_LOG10_SPACING = -290.0  # below this grid spacing the deltas leave double's range
CHUNK = 16  # iterations between the interior test and compaction


@dataclass(frozen=True)
class Grid:
    """One sampled frame's points: c = reference + (dr, di) for perturbation against
    ``orbit`` ((L, 2) float64, Z(0) = 0), or c = (dr, di) itself when ``orbit`` is
    [[0, 0], [0, 0]] (direct iteration: every step is a rebase)."""

    frame: int
    orbit: np.ndarray
    dr: np.ndarray
    di: np.ndarray


def grid_shape(size: tuple[int, int]) -> tuple[int, int]:
    """(columns, rows) of the coarse grid for an image of ``size`` (W, H)."""
    w, h = size
    cols = max(1, min(w, round(math.sqrt(GRID_POINTS * w / h))))
    rows = max(1, min(h, round(GRID_POINTS / cols)))
    return cols, rows


def sampled(frames: int) -> list[int]:
    """The frame indices the pre-pass iterates: all, or ``SAMPLED_FRAMES`` spread
    evenly from the first to the last."""
    if frames <= SAMPLED_FRAMES:
        return list(range(frames))
    return sorted({round(k * (frames - 1) / (SAMPLED_FRAMES - 1)) for k in range(SAMPLED_FRAMES)})


def grid_offsets(size: tuple[int, int], width: float,
                 rotation: tuple[float, float] = (1.0, 0.0)) -> tuple[np.ndarray, np.ndarray]:
    """(re, im) offsets from the view centre of the coarse grid's pixel centres, as
    the pixel mapping of DESIGN.md places them (row 0 on top), flattened row-major;
    ``rotation`` = (cos, sin) of a turned frame's angle turns them as its pixels are."""
    cols, rows = grid_shape(size)
    step = width / cols
    xs = (np.arange(cols) + 0.5 - cols / 2) * step
    ys = -(np.arange(rows) + 0.5 - rows / 2) * step
    dr, di = np.meshgrid(xs, ys)
    if rotation != (1.0, 0.0):
        c, s = rotation
        dr, di = dr * c - di * s, dr * s + di * c
    return dr.ravel(), di.ravel()


def direct_grid(frame: int, center: Sequence[float], size: tuple[int, int], width: float,
                rotation: tuple[float, float] = (1.0, 0.0)) -> Grid:
    """The grid of a frame that doubles resolve: absolute coordinates."""
    dr, di = grid_offsets(size, width, rotation)
    return Grid(frame, np.zeros((2, 2)), dr + center[0], di + center[1])


def perturbed_grid(frame: int, offset: tuple[float, float], orbit: np.ndarray,
                   size: tuple[int, int], width: float,
                   rotation: tuple[float, float] = (1.0, 0.0)) -> Grid:
    """The grid of a deep frame: offsets from the reference (``offset`` = centre -
    reference, in doubles)."""
    dr, di = grid_offsets(size, width, rotation)
    return Grid(frame, orbit, dr + offset[0], di + offset[1])


# Runs groups of grids elsewhere (other processes), each group's escape_limits in a list
# in the groups' order; ``width`` says into how many groups to deal the grids.
class Runner(Protocol):
    width: int

    def __call__(self, groups: list[list[Grid]], r2: float) -> list[list[int]]: ...


def escape_limits(grids: Sequence[Grid], r2: float, runner: Runner | None = None) -> list[int]:
    """Per grid: the count by which ``QUANTILE`` of its escaping points escape (0
    when none escape; ``CAP`` when they were still escaping there). See the module's
    docstring for the stop rule. With a ``runner``, the grids are dealt round robin into
    its ``width`` groups, iterated apart (each grid's result depends on its own points
    only: the same numbers), and gathered back in order."""
    if runner is None:
        return [max(open_tail, quantile_count(escaped)) for escaped, open_tail in iterate(grids, r2)]
    k = max(1, min(runner.width, len(grids)))
    parts = runner([list(grids[j::k]) for j in range(k)], r2)
    out = [0] * len(grids)
    for j, part in enumerate(parts):
        out[j::k] = part
    return out


def frame_limits(frames: Sequence, size: tuple[int, int], r2: float, floors: Sequence[int],
                 grid_of: Callable[[int, float], Grid | None], runner: Runner | None = None) -> list[int]:
    """Each frame's limit: its floor, raised to its escape statistic.

    ``frames``: the plan's FramePlans (their ``width``); ``floors[i]``: frame i's limit
    by the other rules; ``grid_of(i, width)``: frame i's grid (:func:`direct_grid` or
    :func:`perturbed_grid`), or None where the pre-pass leaves the frame to its floor.
    The frames with a grid are sampled (:func:`sampled`) and iterated; the others
    with a grid take the logarithmic interpolation of the sampled frames' statistics.
    Frames whose floor is at least ``CAP`` are not iterated; ``runner``: see
    :func:`escape_limits`."""
    made = {i: grid_of(i, float(frames[i].width)) for i in range(len(frames)) if floors[i] < CAP}
    grids = {i: g for i, g in made.items() if g is not None}
    eligible = sorted(grids)
    if not eligible:
        return list(floors)
    picks = [eligible[k] for k in sampled(len(eligible))]
    found = escape_limits([grids[i] for i in picks], r2, runner)
    logs = np.log(np.maximum(np.array(found, dtype=np.float64), 1.0))
    need = np.exp(np.interp(np.array(eligible, dtype=np.float64), np.array(picks, dtype=np.float64), logs))
    out = list(floors)
    for i, x in zip(eligible, need, strict=True):
        out[i] = max(int(floors[i]), math.ceil(x - 1e-9))
    return out


def quantile_count(escaped: np.ndarray) -> int:
    """The smallest count n with at least ``QUANTILE`` of ``escaped`` <= n (0 if
    none escaped)."""
    if len(escaped) == 0:
        return 0
    ordered = np.sort(escaped)
    return int(ordered[max(0, math.ceil(QUANTILE * len(ordered)) - 1)])


class _Points:
    """The points still iterating, of every grid at once, for :func:`iterate`: one
    column a point, of ``f`` (float64 rows: c's coordinates or delta ``cr``, ``ci``,
    the derivative u = dz_n/dz_1 ``ur``, ``ui`` that tells interior points, then the
    kind's own rows) and ``i`` (int64 rows: the point's number ``pid``, its grid
    ``grid``, then the kind's own rows). Compacting is one index per array."""

    f: np.ndarray
    i: np.ndarray
    kind: str

    def __init__(self, grids: Sequence[Grid], first: int, float_rows: int, int_rows: int):
        sizes = [len(g.dr) for g in grids]
        total = sum(sizes)
        self.f = np.zeros((4 + float_rows, total))
        self.i = np.zeros((2 + int_rows, total), dtype=np.int64)
        self.f[0] = np.concatenate([g.dr for g in grids])
        self.f[1] = np.concatenate([g.di for g in grids])
        self.f[2] = 1.0  # u(1) = 1
        self.i[0] = first + np.arange(total)
        self.i[1] = np.repeat(np.arange(len(grids)), sizes)

    @property
    def pid(self) -> np.ndarray:
        return self.i[0]

    @property
    def grid(self) -> np.ndarray:
        return self.i[1]

    def keep(self, mask: np.ndarray) -> None:
        self.f = self.f.compress(mask, axis=1)
        self.i = self.i.compress(mask, axis=1)

    def retire(self, mask: np.ndarray) -> None:
        """Drop the points that escaped."""
        self.keep(~mask)

    def interior(self) -> np.ndarray:
        """Points attracted to a cycle (their derivative vanishes); rescales the
        others' where it grows large (only its smallness matters)."""
        ur, ui = self.f[2], self.f[3]
        big = np.abs(ur) + np.abs(ui) > 1e150
        self.f[2:4, big] *= 1e-150
        return ur * ur + ui * ui < INTERIOR_DERIVATIVE

    def orbits(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The joined reference orbits' (re, im) a perturbed kind steps along."""
        return None

    def magnitude(self) -> np.ndarray:
        raise NotImplementedError

    def step(self) -> np.ndarray:
        raise NotImplementedError


class _Direct(_Points):
    """z <- z^2 + c in doubles; float rows 4.. : x, y, x^2, y^2 (z = x + iy)."""

    kind = "direct"  # kernels/prepass.cl's direct_steps does :meth:`step` on a device

    def __init__(self, grids: Sequence[Grid], first: int):
        super().__init__(grids, first, 4, 0)
        self.f[4:6] = self.f[0:2]  # z(1) = c
        self.f[6:8] = self.f[4:6] * self.f[4:6]

    def magnitude(self) -> np.ndarray:
        return self.f[6] + self.f[7]

    def retire(self, mask: np.ndarray) -> None:
        """Points that escaped become z = c = u = 0: they stay there (never escape
        again) and leave with the interior points at the next test (cheaper than
        compacting at every escape)."""
        self.f[:, mask] = 0.0

    def step(self) -> np.ndarray:
        """One iteration (in place); |z|^2 after it."""
        cr, ci, ur, ui, x, y, x2, y2 = self.f
        tx, ty = x + x, y + y
        a, b, c, d = tx * ur, ty * ui, tx * ui, ty * ur  # u <- 2 z u
        np.subtract(a, b, out=ur)
        np.add(c, d, out=ui)
        np.multiply(tx, y, out=y)
        y += ci
        np.subtract(x2, y2, out=x)
        x += cr
        np.multiply(x, x, out=x2)
        np.multiply(y, y, out=y2)
        return x2 + y2


class _Perturbed(_Points):
    """z = Z(m) + d against reference orbits laid end to end (``zx``, ``zy``): float
    rows 4.. : the delta d (dr, di), z itself (xr, xi), |z|^2, and 1 while the point
    has not escaped (0 after: it is left to iterate, uncounted, until the next
    compaction); int rows 2.. : m (into the joined orbits), the index of the point's
    orbit start, and of its last entry."""

    kind = "perturbed"  # kernels/prepass.cl's perturbed_steps

    def __init__(self, grids: Sequence[Grid], first: int):
        super().__init__(grids, first, 6, 3)
        lengths = np.array([len(g.orbit) for g in grids], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        self.zx = np.concatenate([g.orbit[:, 0] for g in grids])
        self.zy = np.concatenate([g.orbit[:, 1] for g in grids])
        self.i[3] = starts[self.i[1]]
        self.i[4] = self.i[3] + lengths[self.i[1]] - 1
        self.i[2] = self.i[3] + 1
        self.f[4:6] = self.f[0:2]  # z(1) = Z(1) + dc
        self.f[6] = self.zx[self.i[2]] + self.f[4]
        self.f[7] = self.zy[self.i[2]] + self.f[5]
        self.f[8] = self.f[6] * self.f[6] + self.f[7] * self.f[7]
        self.f[9] = 1.0

    def orbits(self) -> tuple[np.ndarray, np.ndarray]:
        return self.zx, self.zy

    def magnitude(self) -> np.ndarray:
        return self.f[8]

    def retire(self, mask: np.ndarray) -> None:
        """Points that escaped stop counting (cheaper than compacting at every
        escape); the next interior test drops them."""
        self.f[9, mask] = 0.0
        self.f[2:4, mask] = 0.0

    def interior(self) -> np.ndarray:
        return super().interior() | (self.f[9] == 0.0)

    def step(self) -> np.ndarray:
        """One iteration; |z|^2 after it (0 for points that escaped before). Before
        the step a point is rebased where due (|z| < |d|, or its reference ends), as
        kernels/perturb.cl does."""
        cr, ci, ur, ui, dr, di, xr, xi, mag, alive = self.f
        m, base, last = self.i[2], self.i[3], self.i[4]
        rebase = (mag < dr * dr + di * di) | (m == last)
        if rebase.any():
            np.copyto(dr, xr, where=rebase)
            np.copyto(di, xi, where=rebase)
            np.copyto(m, base, where=rebase)
        zr, zi = self.zx[m], self.zy[m]
        tr, ti = xr + xr, xi + xi  # u <- 2 z u, then d <- (2 Z + d) d + dc
        a, b, c, d = tr * ur, ti * ui, tr * ui, ti * ur
        np.subtract(a, b, out=ur)
        np.add(c, d, out=ui)
        ar, ai = zr + zr + dr, zi + zi + di
        a, b, c, d = ar * dr, ai * di, ar * di, ai * dr
        np.subtract(a, b, out=dr)
        dr += cr
        np.add(c, d, out=di)
        di += ci
        m += 1
        np.add(self.zx[m], dr, out=xr)
        np.add(self.zy[m], di, out=xi)
        np.add(xr * xr, xi * xi, out=mag)
        return mag * alive


def iterate(grids: Sequence[Grid], r2: float) -> list[tuple[np.ndarray, int]]:
    """Per grid: (escape counts of its points that escaped by its stop, and CAP if
    its points were still escaping there, else 0)."""
    run = start(grids, r2)
    with np.errstate(over="ignore", invalid="ignore"):  # escaped points may overflow
        run.loop()
    return run.results()


def start(grids: Sequence[Grid], r2: float) -> Run:
    """The grids' points after their first step (z(1) = c, escapes counted): what
    :meth:`Run.loop` continues, here or on a device (farm/compute/prepass.py, which
    gives the loop its steps between two checks)."""
    direct = [k for k, g in enumerate(grids) if len(g.orbit) == 2 and not g.orbit.any()]
    rest = [k for k in range(len(grids)) if k not in set(direct)]
    parts: list[tuple[_Points, np.ndarray]] = []  # (points, their grids' numbers in grids)
    total = 0
    for kind, which in ((_Direct, direct), (_Perturbed, rest)):
        if which:
            parts.append((kind([grids[k] for k in which], total), np.array(which, dtype=np.int64)))
            total += sum(len(grids[k].dr) for k in which)
    run = Run(parts, total, len(grids), r2)
    with np.errstate(over="ignore", invalid="ignore"):
        for p, _ in run.parts:
            run.escapes(p, p.magnitude(), 1)  # z(1) = c
    return run


class Run:
    """:func:`iterate`'s state: ``parts``, the points still iterating by kind (each
    with the numbers of its grids in the call); per point (``pid``) its escape
    ``count`` (0: none yet) and grid (``owner``); per grid the points ``escaped`` so
    far and by the last check, whether it stopped, and whether it was still escaping
    then."""

    def __init__(self, parts: list[tuple[_Points, np.ndarray]], points: int, grids: int, r2: float):
        self.parts, self.grids, self.r2 = parts, grids, r2
        self.count = np.zeros(points, dtype=np.int64)
        self.owner = np.zeros(points, dtype=np.int64)
        for p, index in parts:
            self.owner[p.pid] = index[p.grid]
        self.escaped = np.zeros(grids, dtype=np.int64)
        self.at_check = np.zeros(grids, dtype=np.int64)
        self.stopped = np.zeros(grids, dtype=bool)
        self.open_tail = np.zeros(grids, dtype=bool)

    def escapes(self, points: _Points, mag: np.ndarray, n: int) -> None:
        out = mag > self.r2
        if out.any():
            gone = points.pid[out]
            self.count[gone] = n
            self.escaped += np.bincount(self.owner[gone], minlength=self.grids)
            points.retire(out)

    def results(self) -> list[tuple[np.ndarray, int]]:
        """:func:`iterate`'s answer, once no point is left."""
        return [(self.count[(self.owner == k) & (self.count > 0)], CAP if self.open_tail[k] else 0)
                for k in range(self.grids)]

    def loop(self, advance: Callable[[_Points, int, int], None] | None = None) -> None:
        """The steps from z(2) on, until every grid has stopped or lost its points: each
        part's steps from one check to the next (``advance(points, n_from, n_to)``:
        steps ``n_from + 1 .. n_to``, escapes counted, stopped points dropped; default
        :meth:`steps`, in numpy; farm/compute/prepass.py's on a device), then the check."""
        advance = advance or self.steps
        n, check = 1, FIRST_CHECK
        while any(p.f.shape[1] for p, _ in self.parts):
            to = min(check, CAP)
            for p, _ in self.parts:
                if p.f.shape[1]:
                    advance(p, n, to)
            n = to
            self.check(n)
            check *= 2

    def steps(self, points: _Points, n_from: int, n_to: int) -> None:
        """Steps ``n_from + 1 .. n_to`` of ``points`` in numpy: escapes counted at each
        step, interior points dropped at each multiple of CHUNK."""
        for n in range(n_from + 1, n_to + 1):
            if not points.f.shape[1]:
                return
            self.escapes(points, points.step(), n)
            if n % CHUNK == 0:
                points.keep(~points.interior())

    def check(self, n: int) -> None:
        """Stop the grids whose escapes have settled (the module's stop rule)."""
        left = np.zeros(self.grids, dtype=np.int64)
        for p, index in self.parts:
            left += np.bincount(index[p.grid], minlength=self.grids)
        late = self.escaped - self.at_check
        settled = (self.escaped > 0) & (late <= (1 - QUANTILE) * self.escaped)
        done = ~self.stopped & ((left == 0) | settled | (n >= CAP))
        self.stopped |= done
        self.open_tail[done] = ~settled[done] & (left[done] > 0)
        for p, index in self.parts:
            p.keep(~self.stopped[index[p.grid]])
        self.at_check = self.escaped.copy()
