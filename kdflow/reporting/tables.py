"""Result tables: tidy CSV for machines, Markdown and HTML pages for people. Scores are x100 as in the papers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import yaml

from kdflow.core import statistics
from kdflow.core.documents import Document, Heading, Paragraph, Table, number, signed
from kdflow.probing.senteval import PROBING_TASKS


def _load(path) -> dict:
    return json.loads(Path(path).read_text())


def teacher_table(jobs, teacher_metrics, head_metrics) -> pd.DataFrame:
    """One row per (teacher, task, component, layer, split, metric): the teacher itself on every labelled
    evaluation split, and each pseudo-head on dev (with its mean distance to the gold label)."""
    rows = []
    for (teacher, task), teacher_path, heads_path in zip(jobs, teacher_metrics, head_metrics):
        report = _load(teacher_path)
        for split, scores in report["scores"].items():
            for metric, value in scores.items():
                rows.append(dict(teacher=teacher, task=task, component="teacher", layer=pd.NA, split=split,
                                 metric=metric, value=100 * value, gold_distance=pd.NA))
        for layer in _load(heads_path)["layers"]:
            for metric in report["scores"]["dev"]:
                rows.append(dict(teacher=teacher, task=task, component="pseudo_head", layer=layer["layer"],
                                 split="dev", metric=metric, value=100 * layer[metric],
                                 gold_distance=layer["gold_distance"]))
    table = pd.DataFrame(rows)
    table["layer"] = table["layer"].astype("Int64")
    return table


def _wide(rows: pd.DataFrame, index: list[str], columns: str) -> pd.DataFrame:
    """Pivot ``value`` to one column per ``columns`` entry, keeping rows and columns in order of appearance."""
    order = list(dict.fromkeys(zip(*(rows[name] for name in index))))
    wide = rows.pivot_table(index=index, columns=columns, values="value").reindex(order)
    return wide[list(dict.fromkeys(rows[columns]))]


def teacher_document(table: pd.DataFrame) -> Document:
    summary = _wide(table[table.component == "teacher"], ["teacher", "task", "metric"], "split")
    document = Document("Teachers", [Table(summary.reset_index())])
    heads = table[table.component == "pseudo_head"]
    for teacher, rows in heads.groupby("teacher", sort=False):
        wide = _wide(rows, ["task", "metric"], "layer")
        wide.columns = [f"L{layer}" for layer in wide.columns]
        document.blocks += [Heading(f"Pseudo-heads of {teacher} (dev, per layer)", level=1), Table(wide.reset_index())]
    return document


def write_table(table: pd.DataFrame, csv_path, markdown_path, html_path=None) -> None:
    table.to_csv(csv_path, index=False, float_format="%.4f")
    teacher_document(table).write(markdown_path, html_path)


COMPARISON = ["compare_to", "difference", "pairs", "p", "p_holm", "ci_low", "ci_high", "detectable", "seeds_needed"]


def experiment_table(selection: dict) -> pd.DataFrame:
    """One row per (task, student, method, split, metric) of the configuration selected on dev, x100
    (``selection`` as written by :func:`kdflow.distillation.selection.select_experiment`): ``headline``, the mean
    over the seeds that chose the point (a paper's best dev score is its like); ``mean``, ``std`` (ddof=1) and
    ``seeds`` over the held-out seeds (NaN and 0 where every seed took part in the choice); the selected point's
    diverged seeds and the number of grid points that have any. Where the experiment names a baseline, the row of
    each other method's main dev metric also holds its test against it (:data:`COMPARISON`, differences x100): the
    difference of the held-out means, the seeds paired, the p-value raw and Holm-adjusted across the experiment's
    comparisons, the 95% interval, the difference the test can detect with 80% power and the seeds it would need
    for a one-point difference."""
    rows = []
    for selection_entry in selection["selections"]:
        key = {name: selection_entry[name] for name in ("task", "student", "method")}
        grid = selection_entry["grid"]
        divergence = dict(diverged_seeds=len(grid[selection_entry["selected"]]["diverged_seeds"]),
                          diverged_points=sum(bool(point["diverged_seeds"]) for point in grid.values()))
        comparison = selection_entry.get("comparison")
        held_out = selection_entry["scores"]
        for split, metrics in selection_entry["headline"].items():
            for metric, headline in metrics.items():
                tested = comparison if comparison and split == "dev" and metric == comparison["metric"] else None
                stats = held_out.get(split, {}).get(metric, {"mean": math.nan, "std": math.nan, "n": 0})
                rows.append(dict(**key, split=split, metric=metric, headline=100 * headline["mean"],
                                 selection_seeds=len(selection_entry["selection_seeds"]), mean=100 * stats["mean"],
                                 std=100 * stats["std"], seeds=stats["n"], selected=selection_entry["selected"],
                                 **divergence, **_comparison_columns(tested)))
    return pd.DataFrame(rows)


def grid_table(selection: dict) -> pd.DataFrame:
    """Every grid point of every (task, student, method) of an experiment, as the selection saw it: the dev main
    metric of each seed, their mean and sample std (x100), the diverged seeds, and whether the point was selected."""
    rows = []
    for entry in selection["selections"]:
        for point, scores in entry["grid"].items():
            rows.append({"task": entry["task"], "student": entry["student"], "method": entry["method"],
                         "point": point, "metric": entry["main_metric"], "selected": point == entry["selected"],
                         "selection_mean": 100 * scores["selection_mean"],
                         "mean": 100 * scores["dev_mean"], "std": 100 * scores["dev_std"],
                         "seeds": len(scores["seeds"]), "diverged_seeds": len(scores["diverged_seeds"]),
                         **{f"seed {seed}": 100 * score for seed, score in scores["dev_by_seed"].items()}})
    frame = pd.DataFrame(rows)
    seeds = sorted((name for name in frame.columns if name.startswith("seed ")), key=lambda name: int(name[5:]))
    return frame[[name for name in frame.columns if not name.startswith("seed ")] + seeds]


def _comparison_columns(comparison: dict | None) -> dict:
    if comparison is None:
        return dict.fromkeys(COMPARISON, math.nan) | {"compare_to": None, "pairs": pd.NA, "seeds_needed": pd.NA}
    return dict(compare_to=comparison["baseline"], difference=100 * comparison["difference"],
                pairs=comparison["pairs"], p=comparison["p"], p_holm=comparison["p_holm"],
                ci_low=100 * comparison["low"], ci_high=100 * comparison["high"],
                detectable=100 * comparison["detectable"],
                seeds_needed=pd.NA if comparison["seeds_needed"] is None else comparison["seeds_needed"])


def _score(mean: float, std: float) -> str:
    if not math.isfinite(mean):
        return "diverged"
    return f"{mean:.1f}" + (f" ± {std:.1f}" if math.isfinite(std) else "")


def grid_blocks(grid: pd.DataFrame) -> list:
    """The grid on the experiment's page: a row per point, its seeds' dev scores, and the selected point marked."""
    seeds = [name for name in grid.columns if name.startswith("seed ")]
    frame = grid[["task", "student", "method", "point", "metric"]].assign(
        selected=grid["selected"].map({True: "✓", False: ""}),
        selection=grid["selection_mean"],
        dev=[_score(mean, std) for mean, std in zip(grid["mean"], grid["std"])],
        **{name: grid[name] for name in seeds},
        diverged=grid["diverged_seeds"],
    )
    return [Heading("Every grid point and seed (dev)"),
            Paragraph("The selection's view of the grid: each point's dev main metric per seed (x100), the mean over "
                      "the selection seeds that chose it (selection), the mean ± sample std over all its seeds, and "
                      "the point selected for the tables above (✓: the best selection mean, an exact tie to the "
                      "first point in name order; a point with a diverged selection seed loses to every point "
                      "without one). Learning curves of every run: the experiment's curves figure beside this "
                      "page."),
            Table(frame, digits=1)]


def experiment_document(name: str, table: pd.DataFrame, grid: pd.DataFrame,
                        exports: pd.DataFrame | None = None) -> Document:
    """The experiment's page; ``exports``: its exported students (:func:`exports_table`), listed after the grid."""
    tested = table[table["compare_to"].notna()]
    table = table.assign(score=[(_score(m, s) + (statistics.marks(p) if isinstance(b, str) else "")) if n else "—"
                                for m, s, n, b, p in zip(table["mean"], table["std"], table["seeds"],
                                                         table["compare_to"], table["p_holm"])],
                         headline_score=[_score(h, math.nan) for h in table["headline"]])
    text = ("Each method's grid point is chosen on the mean dev score of its experiment's selection seeds; the "
            "tables give the mean ± sample standard deviation (ddof=1) over the chosen point's other seeds, held "
            "out of that choice (— where every seed took part in it: add seeds to the experiment). A method "
            "without a grid chooses nothing, and all its seeds are held out. The headline is the selection seeds' "
            "mean at the chosen point, the number a paper's best dev score compares with; it is never tested.")
    if len(tested):
        text += f" Marks on dev against {tested['compare_to'].iloc[0]}: {statistics.LEGEND}"
    document = Document(f"Experiment {name}", [Paragraph(text)])
    for split, rows in table.groupby("split", sort=False):
        for column, title in (("score", f"{split}, held-out seeds"), ("headline_score", f"{split}, headline")):
            if column == "headline_score" and split != "dev":
                continue
            wide = rows.pivot_table(index=["student", "method"], columns=["task", "metric"], values=column,
                                    aggfunc="first", sort=False)
            wide.columns = [f"{task} {metric}" for task, metric in wide.columns]
            document.blocks += [Heading(title), Table(wide.reset_index())]
    if len(tested):
        baseline = tested["compare_to"].iloc[0]
        frame = pd.DataFrame({
            "task": tested["task"], "student": tested["student"], "method": tested["method"],
            "metric": tested["metric"],
            f"difference vs {baseline}": [signed(d) for d in tested["difference"]],
            "seeds paired": tested["pairs"].astype("Int64"),
            "p": [number(p, "{:.3f}") for p in tested["p"]],
            "p (Holm)": [number(p, "{:.3f}") for p in tested["p_holm"]],
            "95% CI": ["—" if not math.isfinite(low) else f"[{signed(low)}, {signed(high)}]"
                       for low, high in zip(tested["ci_low"], tested["ci_high"])],
            "detectable (80% power)": ["—" if not math.isfinite(d) else f"{d:.2f}" for d in tested["detectable"]],
            f"seeds to detect {100 * statistics.PLANNED_GAIN:.0f} point": [
                "—" if pd.isna(n) else str(int(n)) for n in tested["seeds_needed"]],
            "mark": [statistics.marks(p) for p in tested["p_holm"]],
        })
        document.blocks += [Heading(f"Against {baseline} (dev)"), Paragraph(
            statistics.LEGEND + " The verdict uses the Holm-adjusted p. Detectable: the smallest true difference the "
            "test finds with 80% power at the observed spread and the seeds paired; seeds to detect: the paired "
            f"seeds it would need for a {100 * statistics.PLANNED_GAIN:.0f}-point difference (— where no number of "
            "seeds does on this dev set, or the test cannot be made: fewer than two held-out seeds in common)."),
            Table(frame.reset_index(drop=True))]
    diverged = table[table["diverged_points"] > 0].drop_duplicates(["task", "student", "method"])
    if len(diverged):
        counts = diverged[["task", "student", "method", "diverged_points", "diverged_seeds", "seeds"]]
        document.blocks += [Heading("Diverged runs"),
                            Paragraph("A run whose training diverged scores NaN; a grid point with such a seed loses "
                                      "the selection to every point without one. Per student: grid points with a "
                                      "diverged seed, and the diverged seeds of the selected point (of its held-out "
                                      "seeds)."),
                            Table(counts)]
    document.blocks += grid_blocks(grid)
    if exports is not None and len(exports):
        document.blocks += [Heading("Exported students"), Paragraph(
            "Each as a folder that transformers loads without kdflow (docs/export.md), the run the selection stands "
            "for: the selected point's seed with the best dev score. Its model card is this experiment's \"model "
            "card\" entry of the report."), Table(exports)]
    return document


def exports_table(cards: dict[tuple[str, str, str], Path], folders: dict[tuple[str, str, str], str]) -> pd.DataFrame:
    """One row per exported (task, student, method): the folder, and the dev scores its model card's Hub metadata
    states (``model-index``), read from ``cards`` (each card's path)."""
    rows = []
    for key, card in cards.items():
        front = Path(card).read_text().split("---\n")[1]
        metrics = yaml.safe_load(front)["model-index"][0]["results"][0]["metrics"]
        rows.append({"task": key[0], "student": key[1], "method": key[2], "folder": folders[key],
                     "dev (the card's)": ", ".join(f"{metric['name']}: {100 * metric['value']:.2f}"
                                                  for metric in metrics)})
    return pd.DataFrame(rows, columns=["task", "student", "method", "folder", "dev (the card's)"])


# Probing (thesis §6.1).


def probing_table(results: dict[str, list[dict]]) -> pd.DataFrame:
    """Tidy table of ``{model: [probe_encodings results]}``: one row per model, task and layer (``kind`` probe),
    plus one row per task and baseline (``kind`` and ``model`` = majority | morphology). Accuracies x100."""
    rows, baselines = [], {}
    for model, tasks in results.items():
        for result in tasks:
            for layer in result["layers"]:
                rows.append(dict(model=model, task=result["task"], layer=layer["layer"], kind="probe",
                                 test_accuracy=100 * layer["test_accuracy"], dev_accuracy=100 * layer["dev_accuracy"],
                                 hidden_size=layer["selected"]["hidden_size"], dropout=layer["selected"]["dropout"],
                                 l2=layer["selected"]["l2"]))
            for name, accuracy in result["baselines"].items():
                baselines[result["task"], name] = accuracy
    for (task, name), accuracy in baselines.items():
        rows.append(dict(model=name, task=task, layer=pd.NA, kind=name, test_accuracy=100 * accuracy,
                         dev_accuracy=float("nan"), hidden_size=pd.NA, dropout=float("nan"), l2=float("nan")))
    table = pd.DataFrame(rows)
    table["layer"] = table["layer"].astype("Int64")
    table["hidden_size"] = table["hidden_size"].astype("Int64")
    return table


def probing_document(table: pd.DataFrame) -> Document:
    """Per model and task, the test accuracy of the layer best on dev (layer in parentheses; choosing it on test
    would flatter the model), the baselines, then every layer's test accuracy per model."""
    probes = table[table.kind == "probe"]
    tasks = [task for task in PROBING_TASKS if task in set(table.task)]
    best = probes.loc[probes.groupby(["model", "task"], sort=False)["dev_accuracy"].idxmax()]
    summary = {model: {task: "—" for task in tasks} for model in dict.fromkeys(probes.model)}
    for row in best.itertuples():
        summary[row.model][row.task] = f"{row.test_accuracy:.1f} (L{row.layer})"
    for row in table[table.kind != "probe"].itertuples():
        summary.setdefault(f"baseline: {row.kind}", {task: "—" for task in tasks})[row.task] = f"{row.test_accuracy:.1f}"
    frame = pd.DataFrame([{"model": model, **cells} for model, cells in summary.items()])
    document = Document("Probing (SentEval; test accuracy, %)",
                        [Paragraph("Best layer chosen on dev accuracy."), Table(frame)])
    for model, rows in probes.groupby("model", sort=False):
        wide = rows.pivot_table(index="layer", columns="task", values="test_accuracy", sort=False)
        wide = wide[[task for task in tasks if task in wide.columns]]
        document.blocks += [Heading(f"{model}: test accuracy per layer (0 = embeddings)"), Table(wide.reset_index())]
    return document
