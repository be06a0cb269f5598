"""The figures of Sučík (2020), the thesis, as PNG files, drawn from kdflow's result tables:

* :func:`teacher_curves` and :func:`teacher_curves_figure`: thesis Fig. 4.2, a teacher's dev score and learning rate
  over fine-tuning;
* :func:`probing_figure`: thesis Figs. 6.1 and 6.2, every probed model;
* :func:`thesis_probing_figure`: thesis Figs. 6.1, 6.2, 6.3 and C.1 as the thesis drew them, its values beside kdflow's;
* :func:`confidence_heatmap` and :func:`mistake_overlap_heatmap`: thesis Figs. 6.5 and C.2;
* :func:`average_confidence_figure`: thesis Fig. 6.6;
* :func:`class_distribution` and :func:`class_distribution_figure`: thesis Fig. A.1, the class distribution of each
  task's labelled splits;
* :func:`exploration_curves_figure`, :func:`explosion_figure`, :func:`learning_rate_figure` and
  :func:`size_heatmaps`: thesis Figs. B.1-B.7, B.8, B.9 and B.10-B.12 (data:
  :mod:`kdflow.reporting.exploration_curves`).

Shared drawing helpers and the palette: :mod:`kdflow.reporting.figures.style`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator

from kdflow.probing.senteval import PROBING_TASKS
from kdflow.reporting.figures.style import (
    OKABE_ITO,
    WIDEST,
    legend_below,
    line_style,
    metric_label,
    new_figure,
    panel_columns,
    save,
)

BASELINES = {"majority": ("majority class", "#7f7f7f", "--"), "morphology": ("morphology guess", "#000000", "-.")}


# --- thesis Fig. 4.2 ---------------------------------------------------------------------------------------------


def teacher_curves(curves: Mapping[str, pd.DataFrame], metrics: Mapping[str, str]) -> pd.DataFrame:
    """Thesis Fig. 4.2's data: every dev evaluation of a teacher's fine-tuning on each task (``curves``: task ->
    its ``curves.parquet``, :mod:`kdflow.training.curves`), in the order given: the epoch, the optimiser step, the
    learning rate of that step and the task's main metric (``metrics``: task -> metric) on dev, ×100."""
    frames = [pd.DataFrame({"task": task, "epoch": curve["epoch"], "step": curve["step"], "lr": curve["lr"],
                            "metric": metrics[task], "dev_score": 100 * curve[f"dev_{metrics[task]}"]})
              for task, curve in curves.items()]
    return pd.concat(frames, ignore_index=True)


def teacher_curves_figure(data: pd.DataFrame, path, teacher: str) -> Path:
    """Thesis Fig. 4.2: one panel per task of ``data`` (:func:`teacher_curves`), the dev score against the optimiser
    step and, on the right axis, the learning rate (the thesis draws the schedule for its Sara teacher only; here
    every task shows its own, measured at the evaluations)."""
    tasks = list(dict.fromkeys(data["task"]))
    if not tasks:
        raise ValueError(f"no learning curves of teacher {teacher} to draw")
    columns = panel_columns(len(tasks), 3.3)
    rows = math.ceil(len(tasks) / columns)
    figure = new_figure(3.3 * columns, 2.8 * rows + 0.6)
    grid = figure.subplots(rows, columns, squeeze=False).ravel()
    score_style = dict(color=OKABE_ITO[0], marker="o", markersize=3, linewidth=1.2)
    lr_style = dict(color=OKABE_ITO[1], linestyle="--", linewidth=1)
    for axes, task in zip(grid, tasks):
        curve = data[data["task"] == task].sort_values("step")
        axes.plot(curve["step"], curve["dev_score"], **score_style)
        axes.set(title=task, xlabel="optimiser step", ylabel=f"dev {curve['metric'].iloc[0]} (×100)")
        axes.grid(alpha=0.3)
        rate = axes.twinx()
        rate.plot(curve["step"], curve["lr"], **lr_style)
        rate.set_ylim(bottom=0)
        rate.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        rate.set_ylabel("learning rate η", color=lr_style["color"])
    for axes in grid[len(tasks):]:
        axes.set_visible(False)
    figure.suptitle(f"{teacher}: dev score and learning rate over fine-tuning")
    legend_below(figure, [Line2D([], [], label="dev score (main metric)", **score_style),
                          Line2D([], [], label="learning rate η (right axis)", **lr_style)])
    return save(figure, path)


# --- thesis Figs. 6.1 and 6.2 -----------------------------------------------------------------------------------


def probing_figure(table: pd.DataFrame, path, model_names: Mapping[str, str] | None = None,
                   relative_depth: bool = False) -> Path:
    """Thesis Figs. 6.1/6.2: probing test accuracy per layer (0 = embeddings, "E"), one panel per probing task
    and one line per model, with the majority-class and (Tense, SubjNumber, ObjNumber) morphology-guess
    baselines as horizontal lines. ``table``: ``results/tables/probing.csv`` (:func:`kdflow.reporting.tables.probing_table`).
    ``model_names`` maps the models to show, in order, to their labels (default: all, as named).
    ``relative_depth`` puts layer / number of layers on x, to compare a 24-layer teacher with a 5-layer student."""
    probes = table[table["kind"] == "probe"]
    names = dict(model_names) if model_names else {model: model for model in dict.fromkeys(probes["model"])}
    probes = probes[probes["model"].isin(names)]
    baselines = table[table["kind"] != "probe"].groupby(["task", "kind"], sort=False)["test_accuracy"].mean()
    present = set(probes["task"]) | set(baselines.index.get_level_values("task"))
    tasks = [task for task in PROBING_TASKS if task in present] + sorted(present - set(PROBING_TASKS))
    if not tasks:
        raise ValueError("the probing table has no results to draw")
    depth = probes.groupby("model")["layer"].max().astype(float).clip(lower=1)

    columns = panel_columns(len(tasks), 2.8)
    figure = new_figure(2.8 * columns, 2.5 * math.ceil(len(tasks) / columns) + 0.9)
    grid = figure.subplots(math.ceil(len(tasks) / columns), columns, squeeze=False).ravel()
    handles = {}
    for axes, task in zip(grid, tasks):
        for number, (model, label) in enumerate(names.items()):
            rows = probes[(probes["model"] == model) & (probes["task"] == task)].sort_values("layer")
            if rows.empty:
                continue
            x = rows["layer"].astype(float) / (depth[model] if relative_depth else 1)
            handles[label] = axes.plot(x, rows["test_accuracy"].astype(float), label=label, **line_style(number))[0]
        for kind, (label, colour, dashes) in BASELINES.items():
            if (task, kind) in baselines.index:
                handles[label] = axes.axhline(baselines[task, kind], color=colour, linestyle=dashes, linewidth=1,
                                              label=label)
        axes.set_title(task, fontsize="medium")
        axes.grid(alpha=0.3)
        if relative_depth:
            axes.set_xlim(-0.05, 1.05)
        else:
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
            axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: "E" if x == 0 else f"{x:g}"))
    for axes in grid[len(tasks):]:
        axes.set_visible(False)
    for axes in grid[::columns]:
        axes.set_ylabel("test accuracy (%)")
    for axes in grid[max(len(tasks) - columns, 0) : len(tasks)]:  # the lowest panel of each column
        axes.set_xlabel("layer / layers (0 = embeddings)" if relative_depth else "layer (E = embeddings)")
    figure.suptitle("Probing accuracy per layer (SentEval)")
    legend_below(figure, list(handles.values()), columns=max(2, round(1.4 * columns)))  # ~2 inches per entry
    return save(figure, path)


THESIS_FIGURES = ("6.1", "6.2", "6.3", "C.1")  # the thesis's probing figures (reference/thesis_probing_scores.csv)
DOWNSTREAM_TASKS = ("CoLA", "SST-2", "Sara")  # the thesis's rows; pre-trained models ("none") are drawn in each
NUMBERED_LAYER = r"E|\d+"  # a thesis layer drawn at a position; others (last (BiLSTM), embed.) are one value
# The thesis's reference lines (reference/thesis_probing_baselines.csv), dashed as its other values: majority and
# morphology in the colours of kdflow's own, human and Conneau et al.'s best in palette colours no family takes
# (a thesis figure has at most 4 families).
REFERENCE_STYLES = {"majority": ("majority class (thesis: Conneau et al. 2018)", "#7f7f7f"),
                    "human": ("human (thesis: Conneau et al. 2018)", "#56B4E9"),
                    "conneau_best": ("best model (thesis: Conneau et al. 2018)", "#E69F00"),
                    "morphology": ("morphology guess (thesis)", "#000000")}


THESIS_PANEL_COLUMNS = 3


def thesis_probing_figure(comparison: pd.DataFrame, probing: pd.DataFrame, figure_id: str, path,
                          reference: pd.DataFrame | None = None) -> Path:
    """Thesis Fig. ``figure_id`` (6.1, 6.2, 6.3 or C.1) with kdflow's results beside the thesis's: the thesis models
    the figure shows (``thesis_figures`` of ``comparison``, :func:`kdflow.reporting.probing_reference.thesis_comparison`),
    a block of panels per downstream task (pre-trained models in every block), one panel per probing task, at most
    :data:`THESIS_PANEL_COLUMNS` a row. Per
    model, in the colour of its family: the thesis's test accuracy per layer (dashed, open markers) and kdflow's
    (solid) over every layer kdflow probed of its counterpart (``probing``: results/tables/probing.csv); a model
    compared at one layer that has no position among encoder layers (LSTM_S's top BiLSTM layer, "embed.") is a
    horizontal line. Majority and morphology baselines as in :func:`probing_figure`; ``reference``
    (:func:`kdflow.reporting.probing_reference.read_reference_lines`): the lines the thesis draws in the figure
    (human performance, majority class, Conneau et al.'s best model, the morphology guess), dashed."""
    if figure_id not in THESIS_FIGURES:
        raise ValueError(f"the thesis's probing figures are {', '.join(THESIS_FIGURES)}, not {figure_id!r}")
    rows = comparison[comparison["thesis_figures"].fillna("").str.split().map(lambda figures: figure_id in figures)]
    if rows.empty:
        raise ValueError(f"no thesis model is drawn in Fig. {figure_id}")
    present = set(rows["downstream_task"])
    downstream = [task for task in DOWNSTREAM_TASKS if task in present] + sorted(present - {*DOWNSTREAM_TASKS, "none"})
    downstream = downstream or ["none"]
    tasks = [task for task in PROBING_TASKS if task in set(rows["task"])]
    families = list(dict.fromkeys(rows["family"]))
    colours = {family: OKABE_ITO[number % len(OKABE_ITO)] for number, family in enumerate(families)}
    probes = probing[probing["kind"] == "probe"]
    baselines = probing[probing["kind"] != "probe"].groupby(["task", "kind"], sort=False)["test_accuracy"].mean()
    lines = {} if reference is None else {(line.task, line.baseline): line.score for line in reference.itertuples()
                                          if figure_id in line.thesis_figures.split()}

    # At most THESIS_PANEL_COLUMNS panels a row (a downstream task's panels wrap onto more rows), so that the figure,
    # shown at the report's width, keeps its text readable: ten side by side made it 3,840 px wide.
    columns = min(len(tasks), THESIS_PANEL_COLUMNS)
    rows_per_task = -(-len(tasks) // columns)
    figure = new_figure(max(2.5 * columns + 0.6, 7.5), 2.2 * rows_per_task * len(downstream) + 1.6)
    grid = figure.subplots(rows_per_task * len(downstream), columns, squeeze=False)
    for row_number in range(len(downstream)):
        for axes in grid[row_number * rows_per_task:(row_number + 1) * rows_per_task].flat[len(tasks):]:
            axes.set_axis_off()  # the empty places of a downstream task's last row
    handles = {}
    for row_number, downstream_task in enumerate(downstream):
        shown = rows[rows["downstream_task"].isin([downstream_task, "none"])]
        for column, task in enumerate(tasks):
            axes = grid[row_number * rows_per_task + column // columns, column % columns]
            for _, model_rows in shown[shown["task"] == task].groupby("thesis_model", sort=False):
                colour = colours[model_rows["family"].iloc[0]]
                numbered = model_rows["thesis_layer"].str.fullmatch(NUMBERED_LAYER)
                if numbered.all():
                    x = [0 if name == "E" else int(name) for name in model_rows["thesis_layer"]]
                    axes.plot(x, model_rows["thesis"], color=colour, linestyle="--", marker="o", markersize=4,
                              markerfacecolor="none", linewidth=1)
                    model = model_rows["model"].dropna()
                    if len(model):
                        kdflow = probes[(probes["model"] == model.iloc[0]) & (probes["task"] == task)].sort_values("layer")
                        axes.plot(kdflow["layer"].astype(float), kdflow["test_accuracy"].astype(float), color=colour,
                                  marker="o", markersize=3, linewidth=1.2)
                else:
                    axes.axhline(model_rows["thesis"].mean(), color=colour, linestyle="--", linewidth=1)
                    if model_rows["kdflow"].notna().any():
                        axes.axhline(model_rows["kdflow"].mean(), color=colour, linewidth=1.2)
            for kind, (label, colour, dashes) in BASELINES.items():
                if (task, kind) in baselines.index:  # dotted, not dashed: dashes are the thesis's here
                    handles[label] = axes.axhline(baselines[task, kind], color=colour, linewidth=0.8, label=label,
                                                  linestyle=":" if dashes == "--" else dashes)
            for baseline, (label, colour) in REFERENCE_STYLES.items():
                if (task, baseline) in lines:
                    handles[label] = axes.axhline(lines[task, baseline], color=colour, linewidth=0.8, label=label,
                                                  linestyle="--")
            axes.grid(alpha=0.3)
            left, right = axes.get_xlim()
            axes.set_xlim(min(left, -0.5), max(right, 1.5))  # a panel of one layer keeps whole-layer ticks
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
            axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: "E" if x == 0 else f"{x:g}"))
            axes.set_title(task if len(downstream) == 1 else f"{downstream_task}: {task}", fontsize="medium")
            if column % columns == 0:
                axes.set_ylabel(f"{downstream_task}\ntest accuracy (%)")
            if column + columns >= len(tasks):  # the lowest panel of its column in this downstream task's rows
                axes.set_xlabel("layer (E = embeddings)")
    # a family is named by the thesis's models and kdflow's counterparts beside them: the demo's tiny BERT stands for
    # the thesis's pre-trained BERT-large, and the legend must not call it that
    counterparts = rows[rows["kdflow"].notna()].groupby("family", sort=False)["model"].unique()
    legend = [Line2D([], [], color=colours[family], linewidth=2,
                     label=f"{family} (kdflow: {', '.join(counterparts[family])})" if family in counterparts
                     else f"{family} (thesis only)") for family in families]
    legend += [Line2D([], [], color="#444444", linewidth=1.2, label="kdflow"),
               Line2D([], [], color="#444444", linestyle="--", marker="o", markerfacecolor="none", linewidth=1,
                      label="thesis (Sučík 2020)"), *handles.values()]
    figure.suptitle(f"Thesis Fig. {figure_id}: probing accuracy per layer\nkdflow (solid) beside the thesis (dashed)")
    legend_below(figure, legend, columns=3 if columns < 4 else 4)
    return save(figure, path)


# --- thesis Figs. 6.5, 6.6 and C.2 ------------------------------------------------------------------------------


def matrix(nested: Mapping, models: Sequence[str]) -> np.ndarray:
    """``nested[row][column]`` as a float array; None becomes NaN."""
    return np.array([[np.nan if nested[a][b] is None else nested[a][b] for b in models] for a in models], dtype=float)


def heatmap(values: np.ndarray, labels: Sequence[str], texts: list[list[str]], colours: str,
            limits: tuple[float, float], colour_label: str) -> tuple[Figure, Axes]:
    """An annotated heatmap of ``values`` (rows and columns both ``labels``) on a figure of its own; NaN cells are
    grey. The axes have no fixed aspect, whose shrinking constrained layout does not foresee (it clipped long tick
    labels); the figure grows with the longest label instead, so that cells stay about square."""
    label = 0.08 * max(map(len, labels))  # a label's length in inches, in the default font size
    figure = new_figure(1.4 + label + 0.9 * len(labels), 0.9 + 0.5 * label + 0.9 * len(labels))
    axes = figure.subplots()
    cmap = matplotlib.colormaps[colours].with_extremes(bad="#dddddd")
    image = axes.imshow(values, cmap=cmap, vmin=limits[0], vmax=limits[1], aspect="auto")
    for (row, column), text in np.ndenumerate(np.array(texts, dtype=object)):
        value = values[row, column]
        red, green, blue, _ = cmap(image.norm(value)) if not np.isnan(value) else (1, 1, 1, 1)
        dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
        axes.text(column, row, text, ha="center", va="center", fontsize="small", color="white" if dark else "black")
    axes.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    axes.set_yticks(range(len(labels)), labels)
    figure.colorbar(image, ax=axes, label=colour_label)
    return figure, axes


def confidence_heatmap(analysis: Mapping, path) -> Path:
    """Thesis Fig. 6.5: Pearson r between every two models' prediction confidences on dev, * for p < 0.05.
    ``analysis``: :func:`kdflow.analysis.prediction_analysis.analyse`'s result."""
    models, correlation = analysis["models"], analysis["confidence_correlation"]
    r, p = matrix(correlation["r"], models), matrix(correlation["p"], models)
    texts = [["—" if np.isnan(r[i, j]) else f"{r[i, j]:.2f}" + ("*" if i != j and p[i, j] < 0.05 else "")
              for j in range(len(models))] for i in range(len(models))]
    figure, _ = heatmap(r, models, texts, "RdBu_r", (-1, 1), "Pearson r")
    task = f"{analysis['task']}: " if analysis.get("task") else ""
    figure.suptitle(f"{task}correlation of confidences (n = {correlation['n']}; * p < 0.05)", fontsize="medium")
    return save(figure, path)


def mistake_overlap_heatmap(analysis: Mapping, path, of: str = "mistakes") -> Path:
    """Thesis Fig. C.2: the share of the row model's mistakes (``of="hits"``: hits) that the column model also
    makes, in % with the count, an asymmetric matrix. ``analysis``:
    :func:`kdflow.analysis.prediction_analysis.analyse`'s result."""
    if of not in ("mistakes", "hits"):
        raise ValueError("of must be 'mistakes' or 'hits'")
    models, overlap = analysis["models"], analysis[f"{of[:-1]}_overlap"]
    share, count = 100 * matrix(overlap["fraction_of_row"], models), matrix(overlap["count"], models)
    texts = [["—" if np.isnan(s) else f"{s:.0f}%\n({c:.0f})" for s, c in zip(shares, counts)]
             for shares, counts in zip(share, count)]
    figure, axes = heatmap(share, models, texts, "viridis", (0, 100), f"% of M1's {of}")
    axes.set(xlabel="M2 (column)", ylabel="M1 (row)")
    task = f"{analysis['task']}: " if analysis.get("task") else ""
    figure.suptitle(f"{task}share of M1's {of} that M2 also makes", fontsize="medium")
    return save(figure, path)


def average_confidence_figure(table: pd.DataFrame, path, task: str | None = None) -> Path:
    """Thesis Fig. 6.6: per model, the average confidence of its dev predictions overall, on hits and on mistakes,
    with standard deviation error bars (none where NaN). ``table``: one row per model and subset with
    ``mean_confidence`` and ``std_confidence``
    (:func:`kdflow.analysis.prediction_analysis.average_confidence_table`)."""
    models, subsets = list(dict.fromkeys(table["model"])), list(dict.fromkeys(table["subset"]))
    figure = new_figure(1.6 + 1.3 * len(models), 3.6)
    axes = figure.subplots()
    width, handles = 0.8 / len(subsets), []
    for number, subset in enumerate(subsets):
        rows = table[table["subset"] == subset].set_index("model").loc[models]
        x = np.arange(len(models)) + (number - (len(subsets) - 1) / 2) * width
        handles.append(axes.bar(x, rows["mean_confidence"], width, yerr=rows["std_confidence"], capsize=3,
                                color=OKABE_ITO[number], label=subset, hatch=("", "//", "xx")[number],
                                edgecolor="white"))
    axes.set_xticks(range(len(models)), models, rotation=15 if len(models) > 3 else 0)
    axes.set(ylabel="average confidence of prediction", ylim=(0, 1.1))
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    legend_below(figure, handles)
    figure.suptitle(f"{task + ': ' if task else ''}average confidence (dev; error bars: std)", fontsize="medium")
    return save(figure, path)


# --- thesis Fig. A.1 (Appendix A) -------------------------------------------------------------------------------


def class_distribution(task: str, labels: Sequence[str], splits: Mapping[str, pd.Series]) -> pd.DataFrame:
    """Thesis Fig. A.1's data for one task: per labelled split (``splits``: name -> its label ids) and class
    (``labels``: the names, in id order), the examples of the class and their share of the split; a class that a
    split lacks counts 0."""
    frames = []
    for split, ids in splits.items():
        counts = ids.value_counts().reindex(range(len(labels)), fill_value=0).to_numpy()
        frames.append(pd.DataFrame({"task": task, "split": split, "label": range(len(labels)), "class": labels,
                                    "count": counts, "proportion": counts / len(ids)}))
    return pd.concat(frames, ignore_index=True)


def class_distribution_figure(data: pd.DataFrame, path, bars: str = "dev") -> Path:
    """Thesis Fig. A.1: every class of every task side by side, its share of the ``bars`` split as a bar in the
    task's colour, classes in descending order of it within each task (the thesis drew its dev sets so); its share
    of each other labelled split (train, and test where labelled) a black marker, which shows how closely the
    splits agree. ``data``: :func:`class_distribution` of each task."""
    tasks = list(dict.fromkeys(data["task"]))
    shown = data[data["split"] == bars]
    shown = pd.concat([shown[shown["task"] == task].sort_values("proportion", ascending=False, kind="stable")
                       for task in tasks])
    position = {key: x for x, key in enumerate(zip(shown["task"], shown["label"]))}
    figure = new_figure(min(WIDEST, 2 + 0.2 * len(shown)), 6)
    axes = figure.subplots()
    colours = [colour for colour in OKABE_ITO if colour != "#000000"]  # black is the markers'
    axes.bar(range(len(shown)), 100 * shown["proportion"],
             color=[colours[tasks.index(task) % len(colours)] for task in shown["task"]])
    handles = [Patch(color=colours[number % len(colours)], label=f"{task} ({bars})")
               for number, task in enumerate(tasks)]
    for number, split in enumerate(dict.fromkeys(data.loc[data["split"] != bars, "split"])):
        rows = data[data["split"] == split]
        handles += axes.plot([position[key] for key in zip(rows["task"], rows["label"])], 100 * rows["proportion"],
                             linestyle="none", marker=("_", "x", "+", "1")[number % 4], markersize=7,
                             markeredgewidth=1.5, color="black", label=split)
    axes.set_xticks(range(len(shown)), shown["class"], rotation=90, fontsize="small" if len(shown) < 30 else "x-small")
    axes.set(xlim=(-1, len(shown)), ylabel="% of the split's examples")
    axes.grid(axis="y", alpha=0.3)
    axes.set_axisbelow(True)
    legend_below(figure, handles, columns=6)
    figure.suptitle(f"Class distribution per task: bars {bars}, markers the other labelled splits", fontsize="medium")
    return save(figure, path)


# --- thesis Figs. B.1-B.12 (Appendix B) -------------------------------------------------------------------------


def point_styles(labels: Mapping[str, Sequence[str]]) -> dict[str, dict]:
    """Line style of every point of a panel (point -> its value label per axis, in axis order): the colour follows
    the first axis's value, the dash pattern the second's; extra points (one label) take the next colours."""
    first = list(dict.fromkeys(point[0] for point in labels.values()))
    second = list(dict.fromkeys(point[1] for point in labels.values() if len(point) > 1))
    styles = {}
    for name, point in labels.items():
        dashes = ("-", "--", ":", "-.")[second.index(point[1]) % 4] if len(point) > 1 else "-"
        styles[name] = {"color": OKABE_ITO[first.index(point[0]) % len(OKABE_ITO)], "linestyle": dashes,
                        "label": ", ".join(point)}
    return styles


def exploration_curves_figure(lines: pd.DataFrame, best: pd.DataFrame, labels: Mapping[str, Mapping[str, Sequence]],
                              path, title: str, unsmoothed: pd.DataFrame | None = None) -> Path:
    """Thesis Figs. B.1-B.7: one panel per study and task, one line per explored value, the mean dev score over
    repeats smoothed over 2 epochs, and × at the best single evaluation of each value. ``lines`` and ``best``:
    :func:`kdflow.reporting.exploration_curves.curve_lines`; ``labels``: per study, point -> its value labels.
    ``unsmoothed``: evaluations of one value's runs drawn raw in a panel above (Fig. B.1's upper plot)."""
    panels = list(dict.fromkeys(zip(lines["study"], lines["task"], lines["task_name"], lines["metric"],
                                    lines["student_label"])))
    columns = panel_columns(len(panels), 5.0)
    rows = math.ceil(len(panels) / columns)
    mosaic = [[f"panel{i}" if i < len(panels) else "." for i in range(row * columns, (row + 1) * columns)]
              for row in range(rows)]
    raw_panel = unsmoothed is not None and len(unsmoothed) > 0
    if raw_panel:
        mosaic.insert(0, ["raw"] + ["."] * (columns - 1))
    figure = new_figure(5.0 * columns, 4.8 * rows + 2.6 * raw_panel)
    axes = figure.subplot_mosaic(mosaic, height_ratios=[1] * raw_panel + [1.8] * rows)
    for number, (study, task, task_name, metric, student) in enumerate(panels):
        panel = axes[f"panel{number}"]
        styles = point_styles(labels[study])
        here = lines[(lines.study == study) & (lines.task == task)]
        for point, style in styles.items():
            curve = here[here.point == point]
            if curve.empty:
                continue
            panel.plot(curve["epoch"], curve["smoothed"], linewidth=1.4, **style)
            mark = best[(best.study == study) & (best.task == task) & (best.point == point)]
            panel.plot(mark["epoch"], mark["dev"], marker="x", markersize=9, markeredgewidth=2, linestyle="none",
                       color=style["color"])
        panel.plot([], [], marker="x", linestyle="none", color="#555555", label="best single evaluation")
        panel.set(title=f"{student} · {task_name}", xlabel="epoch", ylabel=metric_label(metric))
        panel.grid(alpha=0.3)
        panel.legend(fontsize="x-small", ncols=2 if len(styles) > 6 else 1, loc="lower right")
    if "raw" in axes:
        raw = axes["raw"]
        for number, (seed, run) in enumerate(unsmoothed.groupby("seed", sort=True)):
            raw.plot(run["epoch"], run["dev"], linewidth=0.6, color=OKABE_ITO[number % len(OKABE_ITO)],
                     label=f"seed {seed}")
        first = unsmoothed.iloc[0]
        point = ", ".join(labels[first["study"]][first["point"]])
        raw.set(title=f"{first['student_label']} · {first['task_name']}, {point}: every evaluation, unsmoothed",
                xlabel="epoch", ylabel=metric_label(first["metric"]))
        raw.grid(alpha=0.3)
        raw.legend(fontsize="x-small")
    figure.suptitle(title)
    return save(figure, path)


def explosion_figure(curve: pd.DataFrame, path, title: str) -> Path:
    """Thesis Fig. B.8: one run's dev score smoothed over 0.1 epoch (raw evaluations faint), the mean and max
    gradient norms of the steps between evaluations (log scale) and the learning rate, against epochs; the dotted
    line marks the evaluation with the largest gradient norm. ``curve``:
    :func:`kdflow.reporting.exploration_curves.explosion_curve`."""
    figure = new_figure(8, 8)
    score, norms, rate = figure.subplots(3, 1, sharex=True, height_ratios=[2, 1.4, 1])
    score.plot(curve["epoch"], curve["dev"], color="#999999", linewidth=0.5, label="every evaluation")
    score.plot(curve["epoch"], curve["smoothed"], color=OKABE_ITO[0], label="0.1-epoch sliding average")
    score.set(ylabel=metric_label(curve["metric"].iloc[0]))
    norms.plot(curve["epoch"], curve["grad_norm_max"], color=OKABE_ITO[1], label="max over steps")
    norms.plot(curve["epoch"], curve["grad_norm_mean"], color=OKABE_ITO[2], label="mean over steps")
    norms.set(yscale="log", ylabel="gradient norm")
    rate.plot(curve["epoch"], curve["lr"], color=OKABE_ITO[3])
    rate.set(ylabel="learning rate η", xlabel="epoch")
    if curve["grad_norm_max"].notna().any():
        largest = curve.loc[curve["grad_norm_max"].idxmax(), "epoch"]
        for axes in (score, norms, rate):
            axes.axvline(largest, color="#000000", linestyle=":", linewidth=1)
        norms.plot([], [], color="#000000", linestyle=":", label=f"largest gradient norm (epoch {largest:.2f})")
    for axes in (score, norms, rate):
        axes.grid(alpha=0.3)
    score.legend(fontsize="small")
    norms.legend(fontsize="small")
    figure.suptitle(title)
    return save(figure, path)


def learning_rate_figure(curve: pd.DataFrame, knee_index: int, path, title: str) -> Path:
    """Thesis Fig. B.9: the smoothed dev score (0.1 epoch) and the learning rate during warm-up
    (:func:`kdflow.reporting.exploration_curves.warmup_stretch`); dashed lines at the evaluation beyond which
    learning slows (``knee_index``, :func:`kdflow.reporting.exploration_curves.knee`) and at the learning rate there."""
    at = curve.loc[knee_index]
    figure = new_figure(8, 4.8)
    score = figure.subplots()
    rate = score.twinx()
    label = metric_label(curve["metric"].iloc[0])
    score.plot(curve["epoch"], curve["smoothed"], color=OKABE_ITO[0], label=f"{label}, 0.1-epoch average")
    rate.plot(curve["epoch"], curve["lr"], color=OKABE_ITO[1], label="learning rate η")
    score.axvline(at["epoch"], color="#000000", linestyle="--", linewidth=1)
    rate.axhline(at["lr"], color=OKABE_ITO[1], linestyle="--", linewidth=1)
    score.set(xlabel="epoch", ylabel=label)
    rate.set_ylabel("learning rate η")
    handles = score.get_lines()[:1] + rate.get_lines()[:1] + [Line2D(
        [], [], color="#000000", linestyle="--", label=f"learning slows: epoch {at['epoch']:.2f}, η = {at['lr']:.2g}")]
    score.legend(handles=handles, fontsize="small", loc="lower right")
    score.grid(alpha=0.3)
    figure.suptitle(title)
    return save(figure, path)


def parameters_label(count) -> str:
    if count is None or pd.isna(count):
        return ""
    count = float(count)
    return f"{count / 1e6:.3g}M" if count >= 1e6 else f"{count / 1e3:.3g}k" if count >= 1e4 else f"{count:,.0f}"


def size_heatmaps(cells: pd.DataFrame, path, title: str) -> Path:
    """Thesis Figs. B.10-B.12: per study and task, the best dev score (x100) of every student size, width factor W
    across and depth factor D down, with its non-embedding parameters; sizes not run are blank, diverged ones grey.
    ``cells``: :func:`kdflow.reporting.exploration_curves.size_cells`."""
    panels = list(dict.fromkeys(zip(cells["study"], cells["task"], cells["task_name"], cells["metric"],
                                    cells["student_label"])))
    shapes = []
    for study, task, *_ in panels:
        here = cells[(cells.study == study) & (cells.task == task)]
        shapes.append((sorted(set(here["width"]), key=Fraction), sorted(set(here["depth"]), key=Fraction)))
    width = sum(1.6 + 1.05 * len(w) for w, _ in shapes)  # cells about square; wide enough for the title
    figure = new_figure(max(width, 0.11 * len(title) + 0.5), 1.8 + 0.75 * max(len(d) for _, d in shapes))
    grid = figure.subplots(1, len(panels), squeeze=False,
                           width_ratios=[1.6 + 1.05 * len(widths) for widths, _ in shapes])[0]
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#dddddd")
    for axes, (study, task, task_name, metric, student), (widths, depths) in zip(grid, panels, shapes):
        here = cells[(cells.study == study) & (cells.task == task)].set_index(["depth", "width"])
        values = np.full((len(depths), len(widths)), np.nan)
        image = axes.imshow(values, cmap=cmap, aspect="auto")
        for (row, depth), (column, width) in itertools.product(enumerate(depths), enumerate(widths)):
            if (depth, width) in here.index:
                values[row, column] = here.loc[(depth, width), "best_dev"]
        image.set_data(np.ma.masked_invalid(values))
        finite = values[np.isfinite(values)]
        if finite.size:
            image.set_clim(finite.min(), finite.max() if finite.max() > finite.min() else finite.min() + 1)
        for (row, depth), (column, width) in itertools.product(enumerate(depths), enumerate(widths)):
            if (depth, width) not in here.index:
                continue
            cell = here.loc[(depth, width)]
            value = values[row, column]
            text = "diverged" if np.isnan(value) else f"{value:.1f}"
            red, green, blue, _ = cmap(image.norm(value)) if not np.isnan(value) else (1, 1, 1, 1)
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
            axes.text(column, row, f"{text}\n{parameters_label(cell['parameters'])}", ha="center", va="center",
                      fontsize="small", color="white" if dark else "black")
        axes.set_xticks(range(len(widths)), widths)
        axes.set_yticks(range(len(depths)), depths)
        axes.set(xlabel="width factor W", ylabel="depth factor D", title=f"{student} · {task_name}")
        figure.colorbar(image, ax=axes, label=f"best {metric_label(metric)}", shrink=0.8)
    figure.suptitle(title)
    return save(figure, path)
