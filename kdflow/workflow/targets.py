"""The workflow's default target (rule ``all``): every table, figure, report page and final artifact the config
asks for, from the plan to the GLUE submissions (Snakemake builds whatever they need); and where the report files
the figures whose place depends on the config."""

from __future__ import annotations

from kdflow.core.tasks import GLUE_FILES
from kdflow.workflow import results_paths as paths
from kdflow.workflow.export_inputs import exported_students
from kdflow.workflow.job_settings import augmented_jobs, class_distribution_tasks, generator_tasks, teacher_jobs

GLUE_TASKS = {task for task, _ in GLUE_FILES}
THESIS_PROBING_FIGURES = [paths.PROBING_THESIS_PNG.format(figure=name) for name in ("6_1", "6_2", "6_3", "C_1")]
# A config section whose every entry asks for files of its own: section -> (the templates, the wildcard the entry's
# name fills). A new figure of that kind is a line here (docs/development.md, "A figure").
PER_ENTRY = {
    "analysis": ((paths.ANALYSIS_JSON, paths.CONFIDENCE_CORRELATION_PNG, paths.MISTAKE_OVERLAP_PNG,
                  paths.AVERAGE_CONFIDENCE_PNG), "task"),
    "sentence_probes": ((paths.SENTENCE_PROBES_CSV,), "task"),
    "attention_maps": ((paths.ATTENTION_PNG,), "figure"),
    "layer_outputs": ((paths.LAYER_OUTPUTS_PNG,), "task"),
}


def default_targets(config: dict, exploration_experiments: set[str]) -> list[str]:
    """``config`` as the workflow sees it, its exploration's experiments added (``exploration_experiments``:
    their names, whose runs feed the exploration's figures rather than tables of their own)."""
    experiments = config.get("experiments", {})
    exploration = config.get("exploration", {})
    paper_tables = config.get("paper_tables", {})
    own_table = [name for name in experiments if name not in exploration_experiments]
    return [
        paths.PLAN_CSV,
        *([paths.CLAIMS_TABLE_MD] if "evidence" in config else []),
        *([paths.LEDGER_MD] if paper_tables.get("deviations") else []),
        paths.TEACHER_TABLE_CSV,
        paths.TEACHER_TABLE_MD,
        *[paths.PSEUDO_HEADS_METRICS.format(teacher=teacher, task=task) for teacher, task in teacher_jobs(config)],
        *[paths.TRANSFER_STATISTICS_MD.format(task=task, teacher=teacher) for teacher, task in augmented_jobs(config)],
        *[paths.GENERATOR_METRICS.format(task=task) for task in generator_tasks(config)],
        *[paths.EXPERIMENT_TABLE_MD.format(experiment=name) for name in own_table],
        *[paths.EXPERIMENT_GRID_CSV.format(experiment=name) for name in own_table],
        *[paths.EXPERIMENT_CURVES_PNG.format(experiment=name) for name in own_table],
        *[paths.THESIS_FIGURE_PNG.format(figure=figure) for figure in exploration.get("figures", {})],
        *([paths.THESIS_TABLE51_MD] if exploration.get("table") else []),
        *([paths.PROBING_TABLE_CSV] if "probing" in config else []),
        paths.PSEUDO_HEADS_PNG,
        *([paths.CLASS_DISTRIBUTION_PNG] if class_distribution_tasks(config) else []),
        *[paths.TEACHER_CURVES_PNG.format(teacher=teacher) for teacher in config["teachers"]],
        *([paths.RUNTIME_TABLE_MD] if config.get("runtime_table") else []),
        *([paths.PROBING_PNG] if "probing" in config else []),
        *([paths.PROBING_THESIS_CSV, *THESIS_PROBING_FIGURES]
          if config.get("probing", {}).get("thesis") else []),
        *[template.format(**{wildcard: entry}) for section, (templates, wildcard) in PER_ENTRY.items()
          for entry in config.get(section, {}) for template in templates],
        *[paths.PAPER_TABLE_MD.format(paper_table=name) for name in paper_tables.get("tables", {})],
        *[paths.GLUE_SUBMISSION.format(experiment=name) for name in own_table
          if any(task in GLUE_TASKS for task in experiments[name]["tasks"])],
        *[paths.EXPORT.format(**exported) for exported in exported_students(config)],
    ]


def with_run_summaries(targets: list[str]) -> list[str]:
    """The default targets and the pages that account for them, built last: the status page (rule status_page)
    and the plan against the hours the jobs took (rule plan_measured)."""
    return [*targets, paths.STATUS_MD, paths.PLAN_MEASURED_MD]
