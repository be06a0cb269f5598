"""What every figure of :mod:`kdflow.reporting.figures` shares: a new figure, its saving as a PNG, a legend below
the panels, panels per row, line styles, the colour-blind safe palette and a metric's axis label.

Figures are built on :class:`matplotlib.figure.Figure` with an Agg canvas of their own, never through pyplot, so
importing this module changes no global matplotlib state. Colours are colour-blind safe: the Okabe-Ito palette
for lines, viridis/cividis for magnitudes and ColorBrewer's RdBu for signed correlations.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 150
MARGIN = 0.05  # inches kept clear beyond what a widened figure draws (constrained layout keeps about 0.04)
WIDEST = 10.0  # inches: 1,500 px, shown at 0.7x or more in the report's pane at 1400 px (about 1,060 px)
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def line_style(number: int) -> dict:
    """Colour and marker of the ``number``-th line; past the palette, the dash pattern changes too."""
    colours = len(OKABE_ITO)
    return {"color": OKABE_ITO[number % colours], "marker": MARKERS[number % len(MARKERS)],
            "linestyle": ("-", "--", ":")[number // colours % 3], "markersize": 4}


def new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained", dpi=DPI)  # laid out at the resolution it is saved
    FigureCanvasAgg(figure)
    return figure


def panel_columns(panels: int, panel_width: float) -> int:
    """How many panels ``panel_width`` inches wide one row holds within :data:`WIDEST` (at least one): more panels
    wrap onto further rows, so that a figure keeps its text readable at the report's width."""
    return max(1, min(panels, int(WIDEST // panel_width)))


def save(figure: Figure, path) -> Path:
    """Write ``figure`` as a PNG with everything it draws on its canvas: a constrained layout fits the axes into the
    figure, not a suptitle or figure-wide legend wider than it, which would be cut in the file itself; such a
    figure is widened (and heightened) until all it draws fits."""
    for _ in range(4):
        beyond = drawn_outside(figure)
        if max(beyond) <= 0.01:
            break
        left, bottom, right, top = (side + MARGIN if side > 0.01 else 0.0 for side in beyond)
        width, height = figure.get_size_inches()
        figure.set_size_inches(width + 2 * max(left, right), height + bottom + top)  # centred items grow both sides
    figure.set_layout_engine("none")  # keep the layout just checked: savefig would compute it again (a quarter of a
    # figure's drawing time), to the same positions, since the figure is laid out at the DPI it is saved at
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI)
    return path


def drawn_outside(figure: Figure) -> tuple[float, float, float, float]:
    """How far (inches) what ``figure`` draws, laid out, reaches past its left, bottom, right and top edges (0 where
    it stays inside)."""
    figure.draw_without_rendering()
    drawn = figure.get_tightbbox(figure.canvas.get_renderer())
    width, height = figure.get_size_inches()
    return max(0.0, -drawn.x0), max(0.0, -drawn.y0), max(0.0, drawn.x1 - width), max(0.0, drawn.y1 - height)


def legend_below(figure: Figure, handles: Sequence, columns: int = 3) -> None:
    """A legend under the panels in at most ``columns`` columns, fewer where that many are wider than the figure."""
    renderer = figure.canvas.get_renderer()
    for count in range(min(columns, len(handles)), 0, -1):
        legend = figure.legend(handles=handles, loc="outside lower center", ncols=count, fontsize="small",
                               frameon=False)
        if count == 1 or legend.get_window_extent(renderer).width <= figure.bbox.width:
            return
        legend.remove()


def metric_label(metric: str) -> str:
    return f"dev {({'mcc': 'MCC', 'f1_micro': 'micro-F1'}).get(metric, metric)} (×100)"
