"""Rule paper_table: one paper table with kdflow's numbers beside the paper's."""

import json
from pathlib import Path

from kdflow.core.job_setup import rule_job
from kdflow.reporting.paper_tables import (
    hyperparameter_table,
    is_hyperparameter_table,
    load_inputs,
    paper_caption,
    paper_table,
    read_deviations,
    read_reference,
    write_hyperparameter_table,
    write_paper_table,
)

with rule_job(snakemake):
    spec, reference = snakemake.params.spec, read_reference(snakemake.input.reference)
    outputs = (snakemake.params.title, snakemake.output.csv, snakemake.output.markdown, snakemake.output.latex,
               snakemake.output.html)
    deviations = read_deviations(snakemake.input.get("deviations"))
    caption = paper_caption(snakemake.input.artifacts, spec)
    if is_hyperparameter_table(spec):
        selections = {experiment: json.loads(Path(path).read_text())
                      for experiment, path in zip(spec["experiments"], snakemake.input.selections, strict=True)}
        table = hyperparameter_table(reference, spec, selections, snakemake.params.values)
        write_hyperparameter_table(table, *outputs, deviations=deviations, caption=caption,
                                   scale_note=snakemake.params.scale_note, experiments=spec["experiments"])
    else:
        files = {key: list(snakemake.input.get(key, [])) for key in ("teacher_metrics", "experiment_tables", "inference")}
        write_paper_table(paper_table(reference, spec, **load_inputs(spec, reference, files)), *outputs, deviations,
                          caption, snakemake.params.scale_note, experiments=spec.get("experiments", []))
