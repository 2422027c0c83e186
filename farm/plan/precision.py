"""Which number format renders a frame: the cheapest one that resolves it.

A format resolves a frame when the frame's pixel spacing ``s = width / W`` is at
least the format's ``MIN_SPACING``. The limits are measured, not guessed: they are
the deepest spacing at which the format still matched a 200-digit mpmath reference
on the test grid of ``benchmarks/precision_limits.py`` (see README, "Precision"),
rounded up by a safety factor of 4.
"""

from __future__ import annotations

# Smallest resolvable pixel spacing per format (complex-plane units per pixel).
MIN_SPACING = {
    "f64": 4e-15,
    "fp128": 4e-27,
    "quad-single": 4e-27,
}
# Cheapest first, by the kernel rates in BENCHMARKS.md (GPU).
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

