"""Which number format renders a frame: the cheapest one that resolves it.

A format resolves a frame when the frame's pixel spacing ``s = width / W`` is at
least the format's ``MIN_SPACING``. The limits are measured, not guessed: the deepest
spacing at which the format still matched a 200-digit mpmath reference on at least 99%
of the pixels of both test grids (24x16 and 48x32) at every width down to it, around a
Seahorse Valley Misiurewicz point (benchmarks/precision_limits.py, 2026-11-21, PoCL;
the arithmetic is bitwise the same on GPUs). Below these spacings pixels near the
boundary turn chaotic: even exact arithmetic on the format's rounded coordinates
misses the reference on more than 1% of them.

quad-single's precision is relative (about 2^-98 |c| here, |c| = 0.76); fp128's is
absolute (2^-96), which is why quad-single goes a decade deeper at this view.
"""

from __future__ import annotations

import math

# Smallest resolvable pixel spacing per format (complex-plane units per pixel).
MIN_SPACING = {
    "f64": 1.3e-11,
    "fp128": 4.2e-25,
    "quad-single": 4.2e-26,
}
# perturb: deltas are relative to the view, so no coordinate format limits it (below
# double's range the kernel switches to floatexp deltas). What bounds depth is the
# deltas' exponent range: 32-bit exponents (kernels/perturb.cl; 0 sits at -2^30), and
# a delta's square must stay within them, so spacings down to 2^-(2^28), about
# 1e-80807124. Far above that, memory and time bound it: the reference orbit at the
# depth's precision (farm/plan/reference_cost.py states both before any work).
PERTURB_MIN_LOG10_SPACING = -(2.0**28) * math.log10(2.0)
# Below this pixel spacing, pixel offsets stop being normal doubles: perturbation runs
# floatexp deltas (kernels/perturb.cl), with the same iteration skipping.
PERTURB_FX_BELOW_LOG10 = -305.0
# Cheapest first, by the kernel rates on GPUs (BENCHMARKS.md).
COST_ORDER = ("f64", "perturb", "fp128", "quad-single")


def min_log10_spacing(fmt: str) -> float:
    if fmt == "perturb":
        return PERTURB_MIN_LOG10_SPACING
    return math.log10(MIN_SPACING[fmt])


def resolves(fmt: str, log10_spacing: float) -> bool:
    """Whether ``fmt`` resolves pixel spacing 10**log10_spacing (logs: spacings go far
    below the range of a double)."""
    return log10_spacing >= min_log10_spacing(fmt)


def choose(log10_spacing: float) -> str | None:
    """The cheapest format that resolves the spacing, or None if none does."""
    return next((fmt for fmt in COST_ORDER if resolves(fmt, log10_spacing)), None)


def deepest() -> tuple[str, float]:
    """The format that goes deepest, and the log10 of its smallest spacing."""
    fmt = min(COST_ORDER, key=min_log10_spacing)
    return fmt, min_log10_spacing(fmt)
