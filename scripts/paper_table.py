"""Rule paper_table: one paper table with kdflow's numbers beside the paper's."""

from kdflow.core.runtime import rule_job
from kdflow.reporting.paper_tables import deviations_of, load_inputs, paper_table, read_reference, write_paper_table

with rule_job(snakemake):
    spec, reference = snakemake.params.spec, read_reference(snakemake.input.reference)
    files = {key: list(snakemake.input.get(key, [])) for key in ("teacher_metrics", "experiment_tables", "inference")}
    table = paper_table(reference, spec, **load_inputs(spec, reference, files))
    deviations = deviations_of(snakemake.input.get("deviations"), snakemake.wildcards.paper_table)
    write_paper_table(table, snakemake.params.title, snakemake.output.csv, snakemake.output.markdown,
                      snakemake.output.latex, snakemake.output.html, deviations)
