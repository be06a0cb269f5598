# kdflow: raw GLUE and Sara data -> fine-tuned teachers -> per-layer pseudo-heads -> (augmented) transfer
# sets labelled by the teachers -> distilled students -> result tables, probing, prediction analysis, figures
# and the report (`snakemake --report report.html`, then `python -m kdflow.reporting.report_search report.html`).
# Full reproduction: `snakemake --profile slurm`. Offline demo: see README.md.

from snakemake.utils import min_version

min_version("9.19")


include: "rules/config.smk"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/templates.smk"
include: "rules/data.smk"
include: "rules/teachers.smk"
include: "rules/transfer.smk"
include: "rules/distillation.smk"
include: "rules/probing.smk"
include: "rules/analysis.smk"
include: "rules/export.smk"
include: "rules/reporting_experiments.smk"
include: "rules/reporting_paper_tables.smk"
include: "rules/reporting_probing.smk"
include: "rules/reporting_figures.smk"
include: "rules/reporting_exploration.smk"
include: "rules/reporting_plan.smk"


rule all:
    default_target: True
    input:
        with_run_summaries(DEFAULT_TARGETS),
