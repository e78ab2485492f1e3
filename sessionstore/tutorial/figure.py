"""The figure every picture of the tutorial is (``pictures``, ``sequences``).

Layer: beside the exercises, for the tutorial only. Why not pyplot's: a figure made with
``matplotlib.figure.Figure`` belongs to no global state, so nothing else shows it a second time
at the end of a cell, and it needs no GUI; this one also shows itself in a notebook as a PNG
(``_repr_png_``) whether or not pyplot was ever imported.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure


class Picture(Figure):
    """A Figure that a notebook shows as a PNG whether or not pyplot was ever imported."""

    def _repr_png_(self) -> bytes:
        png = io.BytesIO()
        self.savefig(png, format="png", dpi=100, metadata={"Software": None})
        return png.getvalue()


def bare(ax: Axes, x: tuple[float, float], y: tuple[float, float], title: str, **kw: Any) -> None:
    """A drawing, not a plot: limits, no axes, a title."""
    ax.set_xlim(*x)
    ax.set_ylim(*y)
    ax.axis("off")
    ax.set_title(title, **kw)
