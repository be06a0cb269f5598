"""The thesis's probing scores beside kdflow's (Sučík 2020 §6.1, Figs. 6.1-6.3 and C.1).

``reference/thesis_probing_scores.csv`` holds the thesis's numbers: per thesis model (``BERT_T[CoLA]``,
``LSTM_S-scratch[Sara]``, ``embed.word[SST-2]``, ...), pooling (``avg``, ``max``, ``single``), SentEval task and
layer, the test accuracy of the dev-selected probe. The config's ``probing.thesis`` maps thesis models onto kdflow's
named models (``models``) and says why the others have no counterpart; :func:`thesis_comparison` lines every thesis
row up with kdflow's probe of the same model, task and layer (results/tables/probing.csv) and says, for each row
kdflow cannot fill, why.

Layers: the thesis's ``E`` is the embedding output, kdflow's layer 0; a number is the same encoder layer in both;
``embed.`` is an ``embeddings`` model's only layer, 0; ``last (BiLSTM)`` is LSTM_S's top BiLSTM layer, which kdflow
numbers second highest (:class:`kdflow.students.recurrent.ThesisBiLSTM` gives its BiLSTM layers, then its FC layer).
Pooling: the thesis's ``avg``, ``max`` and ``single`` ([CLS]) are kdflow's ``mean``, ``max`` and ``cls``; kdflow
probes with one pooling (``probing.pooling``), so the thesis's rows of another have no kdflow value.

``reference/thesis_probing_baselines.csv`` holds the reference lines the thesis draws in those figures
(:func:`read_reference_lines`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from kdflow.core.documents import Document, Heading, Paragraph, Table
from kdflow.core.errors import UserError
from kdflow.probing.senteval import PROBING_TASKS
from kdflow.reporting.paper_tables import deviation_blocks
from kdflow.workflow.results_paths import PROBING_TABLE_CSV

POOLINGS = {"avg": "mean", "max": "max", "single": "cls"}  # the thesis's pooling names -> kdflow's
EMBEDDINGS_LAYER, TOP_BILSTM, EMBEDDING_OUTPUT = "embed.", "last (BiLSTM)", "E"
UNPROBED_TASK = "kdflow does not probe {} (probing.tasks)"
MISSING_LAYER = "{} has no layer that is the thesis's {}"
COLUMNS = ("model", "family", "downstream_task", "variant", "pooling", "task", "task_type", "layer", "score",
           "devacc", "nhid", "dropout", "thesis_figures")


def read_thesis_scores(path) -> pd.DataFrame:
    """The thesis's probing scores; layers stay names (``E``, ``12``, ``last (BiLSTM)``, ``embed.``)."""
    scores = pd.read_csv(path, dtype={"layer": str}, keep_default_na=False)  # "" stays "" (variant, thesis_figures)
    missing = [column for column in COLUMNS if column not in scores.columns]
    if missing:
        raise UserError(f"{path}: missing columns {missing}")
    unknown = sorted(set(scores["pooling"]) - set(POOLINGS))
    if unknown:
        raise UserError(f"{path}: unknown pooling {unknown}; expected one of {sorted(POOLINGS)}")
    return scores


REFERENCE_LINES = ("majority", "human", "conneau_best", "morphology")
REFERENCE_COLUMNS = ("baseline", "task", "score", "thesis_figures", "paper", "table", "read_in")


def read_reference_lines(path) -> pd.DataFrame:
    """The reference lines of the thesis's probing figures, per ``baseline`` and SentEval task: the majority class and
    human performance "as reported by Conneau et al. (2018)" (Figs. 6.1-6.3, C.1), Conneau et al.'s best model per
    task (Fig. 6.1, "Conneau") and the thesis's morphology guess (Fig. 6.3, Tense, SubjNumber, ObjNumber);
    ``thesis_figures`` says where each is drawn, ``paper``/``table``/``read_in`` where its number comes from."""
    lines = pd.read_csv(path, keep_default_na=False)
    missing = [column for column in REFERENCE_COLUMNS if column not in lines.columns]
    if missing:
        raise UserError(f"{path}: missing columns {missing}")
    for column, known in (("baseline", REFERENCE_LINES), ("task", PROBING_TASKS)):
        unknown = sorted(set(lines[column]) - set(known))
        if unknown:
            raise UserError(f"{path}: unknown {column} {unknown}; expected one of {list(known)}")
    return lines.astype({"score": float})


def kdflow_layer(name: str, layers: list[int]) -> int | None:
    """kdflow's number of the thesis's layer ``name`` among the ``layers`` kdflow probed of a model (None: the
    model has no such layer): ``E`` and ``embed.`` are 0, a number is itself, ``last (BiLSTM)`` the second highest."""
    if name in (EMBEDDING_OUTPUT, EMBEDDINGS_LAYER):
        number = 0
    elif name == TOP_BILSTM:
        number = sorted(layers)[-2] if len(layers) >= 2 else None
    elif name.isdigit():
        number = int(name)
    else:
        raise UserError(f"unknown thesis layer {name!r}: expected E, embed., {TOP_BILSTM} or a number")
    return number if number in layers else None


def thesis_comparison(probing: pd.DataFrame, thesis: pd.DataFrame, models: Mapping[str, str],
                      missing: Mapping[str, str], pooling: str) -> pd.DataFrame:
    """Every row of the thesis's scores beside kdflow's: ``thesis``/``kdflow`` test accuracy (and ``*_dev``), their
    ``difference`` (kdflow − thesis), x100; ``model``/``layer``: kdflow's; ``note``: why a row has no kdflow value.
    ``probing``: results/tables/probing.csv; ``models``: thesis model -> kdflow model; ``missing``: thesis model ->
    why kdflow has no counterpart; ``pooling``: the pooling kdflow probes with."""
    unknown = sorted((set(models) | set(missing)) - set(thesis["model"]))
    if unknown:
        raise UserError(f"probing.thesis names models the thesis's scores do not have: {unknown}")
    probes = probing[probing["kind"] == "probe"]
    unprobed = sorted(set(models.values()) - set(probes["model"]))
    if unprobed:
        raise UserError(f"probing.thesis maps thesis models onto {unprobed}, which are not probed (probing.models)")
    layers = probes.groupby(["model", "task"])["layer"].apply(lambda values: sorted(map(int, values))).to_dict()
    results = probes.set_index(["model", "task", "layer"])[["test_accuracy", "dev_accuracy"]]
    rows = []
    for row in thesis.itertuples(index=False):
        model = models.get(row.model)
        found = dict(model=model, layer=None, kdflow=float("nan"), kdflow_dev=float("nan"), note="")
        if row.model in missing:
            found["note"] = f"no kdflow counterpart: {missing[row.model]}"
        elif model is None:
            found["note"] = "no kdflow counterpart (not mapped in probing.thesis)"
        elif POOLINGS[row.pooling] != pooling:
            found["note"] = f"pooled by {POOLINGS[row.pooling]} in the thesis; kdflow probes with {pooling} pooling"
        elif (model, row.task) not in layers:
            found["note"] = UNPROBED_TASK.format(row.task)
        else:
            found["layer"] = kdflow_layer(row.layer, layers[model, row.task])
            if found["layer"] is None:
                found["note"] = MISSING_LAYER.format(model, row.layer)
            else:
                test, dev = results.loc[(model, row.task, found["layer"])]
                found.update(kdflow=float(test), kdflow_dev=float(dev))
        rows.append(dict(thesis_model=row.model, family=row.family, downstream_task=row.downstream_task,
                         variant=row.variant, pooling=row.pooling, task=row.task, thesis_layer=row.layer,
                         model=found["model"], layer=found["layer"], thesis=float(row.score),
                         kdflow=found["kdflow"], difference=found["kdflow"] - float(row.score),
                         thesis_dev=float(row.devacc), kdflow_dev=found["kdflow_dev"], note=found["note"],
                         thesis_figures=row.thesis_figures))
    table = pd.DataFrame(rows)
    table["layer"] = table["layer"].astype("Int64")
    return table


def _cell(row) -> str:
    kdflow = "—" if pd.isna(row.kdflow) else f"{row.kdflow:.1f}"
    return f"{kdflow} ({row.thesis:.1f})"


def _summary(model: str, pooling: str, rows: pd.DataFrame) -> dict:
    kdflow = rows["model"].dropna()
    return {"thesis model": model, "pooling": pooling, "kdflow model": kdflow.iloc[0] if len(kdflow) else "—",
            "thesis scores": len(rows), "compared": int(rows["kdflow"].notna().sum()),
            "mean kdflow − thesis": rows["difference"].mean(),
            "mean |kdflow − thesis|": rows["difference"].abs().mean(),
            "figures": " ".join(dict.fromkeys(" ".join(rows["thesis_figures"]).split())) or "—",
            "notes": "; ".join(_merged_notes(rows))}


def _merged_notes(rows: pd.DataFrame) -> list[str]:
    """A model's notes, each once; the layers its kdflow model lacks, and the tasks kdflow does not probe, in one note
    each."""
    notes, layers, tasks = [], [], []
    for row in rows.itertuples():
        if row.note == MISSING_LAYER.format(row.model, row.thesis_layer):
            layers.append(row.thesis_layer)
        elif row.note == UNPROBED_TASK.format(row.task):
            tasks.append(row.task)
        elif row.note:
            notes.append(row.note)
    if layers:
        notes.append(MISSING_LAYER.format(rows["model"].dropna().iloc[0], ", ".join(dict.fromkeys(layers))))
    if tasks:
        notes.append(UNPROBED_TASK.format(", ".join(dict.fromkeys(tasks))))
    return list(dict.fromkeys(notes))


def comparison_document(table: pd.DataFrame, deviations: list[dict] = ()) -> Document:
    """The comparison as people read it: per thesis model (and pooling) its kdflow counterpart, how many of its
    scores kdflow has and their mean difference, or why it has none; then per compared model "kdflow (thesis)" per
    layer and task; then the ledger's entries about probing."""
    groups = table.groupby(["thesis_model", "pooling"], sort=False)
    summary = pd.DataFrame([_summary(model, pooling, rows) for (model, pooling), rows in groups])
    document = Document("Probing: kdflow beside the thesis (Sučík 2020, Figs. 6.1-6.3, C.1)", [
        Paragraph("SentEval test accuracy (%) of the probe selected on dev, per model, task and layer: kdflow's "
                  f"({PROBING_TABLE_CSV}) beside the thesis's (reference/thesis_probing_scores.csv, from the "
                  "thesis author's result files). Layers: E = embedding output (kdflow's 0), n = encoder layer n, "
                  "last (BiLSTM) = LSTM_S's top BiLSTM layer, embed. = the input vectors alone. Every thesis score is "
                  "listed; where kdflow has none, the notes say why."),
        Table(summary, digits=2),
    ])
    for (model, pooling), rows in groups:
        if rows["kdflow"].notna().any():
            tasks = [task for task in PROBING_TASKS if task in set(rows["task"])]
            order = list(dict.fromkeys(rows["thesis_layer"]))
            cells = rows.assign(cell=[_cell(row) for row in rows.itertuples()]).pivot_table(
                index="thesis_layer", columns="task", values="cell", aggfunc="first").reindex(order)[tasks]
            kdflow_layers = rows.drop_duplicates("thesis_layer").set_index("thesis_layer")["layer"].reindex(order)
            cells.insert(0, "kdflow layer", ["—" if pd.isna(layer) else str(layer) for layer in kdflow_layers])
            document.blocks += [Heading(f"{model} ({pooling}) and kdflow's {rows['model'].iloc[0]}: kdflow (thesis)"),
                                Table(cells.rename_axis("thesis layer").reset_index())]
    document.blocks += deviation_blocks(deviations)
    return document
