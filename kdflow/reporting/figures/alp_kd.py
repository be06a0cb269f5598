"""ALP-KD (Passban et al. 2021)'s figures as PNG files, drawn from kdflow's result tables:

* :func:`layer_outputs_figure`: ALP-KD Fig. 4, students' and teacher's layer outputs and their cosine distances.

ALP-KD Fig. 3 (the attention over teacher layers) is drawn with Universal-KD Fig. 3's
(:func:`kdflow.reporting.figures.universal_kd.attention_figure`). Shared drawing helpers and the palette:
:mod:`kdflow.reporting.figures.style`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from kdflow.reporting.figures.style import MARKERS, OKABE_ITO, WIDEST, legend_below, new_figure, save

# --- ALP-KD Fig. 4 ----------------------------------------------------------------------------------------------

# The paper draws the teacher green, ALP red and PKD blue: Okabe-Ito's green, vermillion and blue, then the rest.
TEACHER_COLOUR, STUDENT_COLOURS = OKABE_ITO[2], OKABE_ITO[1:2] + OKABE_ITO[:1] + OKABE_ITO[3:]


def layer_outputs_figure(data: Mapping, path, title: str | None = None) -> Path:
    """ALP-KD Fig. 4 as one image, from :func:`kdflow.analysis.layer_outputs.layer_outputs`: per (student layer,
    teacher layer) pair a column with the examples' outputs on the first two principal components (top, 4a-4b)
    and each student's cosine distance to the teacher's layer per example (bottom, 4c-4d; the legend gives the
    mean)."""
    panels = data["panels"]
    if not panels:
        raise ValueError("no layer pairs to draw")
    figure = new_figure(1 + min(4.2, (WIDEST - 1) / len(panels)) * len(panels), 7.5)
    grid = figure.subplots(2, len(panels), squeeze=False)
    examples = np.arange(1, len(data["idx"]) + 1)
    handles = {}
    for column, entry in enumerate(panels):
        scatter, distance = grid[0, column], grid[1, column]
        share = entry["explained_variance_ratio"]
        points = np.array(entry["teacher"]["pc"])
        handles["teacher"] = scatter.scatter(points[:, 0], points[:, 1], s=14, color=TEACHER_COLOUR, marker="o",
                                             alpha=0.8, label="teacher")
        for number, (name, values) in enumerate(entry["students"].items()):
            colour, marker = STUDENT_COLOURS[number % len(STUDENT_COLOURS)], MARKERS[(number + 1) % len(MARKERS)]
            method = data["models"][name]["method"]
            points = np.array(values["pc"])
            handles[name] = scatter.scatter(points[:, 0], points[:, 1], s=14, color=colour, marker=marker,
                                            alpha=0.8, label=f"{name} ({method})")
            distance.plot(examples, values["cosine_distance"], color=colour, marker=marker, markersize=3,
                          linewidth=1, label=f"{name}: mean {values['mean_cosine_distance']:.3g}")
        scatter.set(xlabel=f"PC1 ({share[0]:.0%} of variance)", ylabel=f"PC2 ({share[1]:.0%} of variance)",
                    title=f"student layer {entry['student_layer']}, teacher layer {entry['teacher_layer']}")
        distance.set(xlabel="example", ylabel=f"cosine distance to teacher layer {entry['teacher_layer']}",
                     ylim=(0, None))
        distance.legend(fontsize="small", frameon=False)
        for axes in (scatter, distance):
            axes.grid(alpha=0.3)
    legend_below(figure, list(handles.values()))
    figure.suptitle(title or f"Layer outputs of students and teacher ({data['task']}, {data['split']}, "
                             f"{len(examples)} examples)")
    return save(figure, path)
