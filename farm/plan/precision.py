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

# Smallest resolvable pixel spacing per format (complex-plane units per pixel).
MIN_SPACING = {
    "f64": 1.3e-11,
    "fp128": 4.2e-25,
    "quad-single": 4.2e-26,
}
# Cheapest first, by the kernel rates on GPUs (BENCHMARKS.md).
COST_ORDER = ("f64", "fp128", "quad-single")


def resolves(fmt: str, spacing: float) -> bool:
    return spacing >= MIN_SPACING[fmt]


def choose(spacing: float) -> str | None:
    """The cheapest format that resolves ``spacing``, or None if none does."""
    for fmt in COST_ORDER:
        if resolves(fmt, spacing):
            return fmt
    return None


def deepest() -> tuple[str, float]:
    fmt = min(MIN_SPACING, key=MIN_SPACING.__getitem__)
    return fmt, MIN_SPACING[fmt]

