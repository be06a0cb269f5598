"""Rule plan: the cost plan of the config before it runs (kdflow.workflow.cost_plan), as CSV, Markdown and HTML:
the jobs of the workflow's DAG under the same config, as Snakemake lists them (kdflow.workflow.dag_jobs); and the
pilot, the fewest of those jobs that calibrate the plan (kdflow.reporting.pilot)."""

import logging

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.pilot import pilot_jobs, pilot_summary
from kdflow.reporting.plan_pages import plan_jobs, write_plan
from kdflow.workflow.catalog_cache import load_catalog
from kdflow.workflow.cost_plan import (
    cost_plan,
    paper_table_hours,
    plan_table,
    read_sharing,
    read_startup,
    read_throughput,
    section_order,
    sizes_note,
)
from kdflow.workflow.dag_jobs import workflow_jobs

with rule_job(snakemake):
    config = snakemake.config  # as the workflow sees it: validated, the exploration's experiments added
    task_table = pd.read_csv(snakemake.input.sizes)
    dag = workflow_jobs(**snakemake.params.snakemake_config)
    jobs = cost_plan(dag, config, task_table, read_throughput(snakemake.input.throughput),
                     read_startup(snakemake.input.startup), load_catalog(), snakemake.params.probing_files,
                     snakemake.params.gpu, read_sharing(snakemake.input.sharing))
    plan_jobs(jobs).to_csv(snakemake.output.jobs, index=False, float_format="%.6g")
    pilot = pilot_jobs(jobs, dag)
    pilot.to_csv(snakemake.output.pilot, index=False, float_format="%.6g")
    table = plan_table(jobs, section_order(config))
    document = write_plan(table, paper_table_hours(table, config), sizes_note(config, task_table),
                          snakemake.output.csv, snakemake.output.markdown, snakemake.output.html,
                          pilot=pilot_summary(pilot, jobs), sharing=config.get("gpu_sharing"))
    logging.getLogger("kdflow").info("\n%s", document.markdown())
