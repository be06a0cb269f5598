"""The workflow's default target (rule ``all``): every table, figure, report page and final artifact the config
asks for, from the plan to the GLUE submissions (Snakemake builds whatever they need); and where the report files
the figures whose place depends on the config."""

from __future__ import annotations

from kdflow.core.tasks import GLUE_FILES
from kdflow.workflow.config import augmented_jobs, class_distribution_tasks, generator_tasks, teacher_jobs

GLUE_TASKS = {task for task, _ in GLUE_FILES}
THESIS_PROBING_FIGURES = [f"results/figures/probing_thesis_{name}.png" for name in ("6_1", "6_2", "6_3", "C_1")]
ANALYSIS_FIGURES = ("confidence_correlation", "mistake_overlap", "average_confidence")


def default_targets(config: dict, exploration_experiments: set[str]) -> list[str]:
    """``config`` as the workflow sees it, its exploration's experiments added (``exploration_experiments``:
    their names, whose runs feed the exploration's figures rather than tables of their own)."""
    experiments = config.get("experiments", {})
    exploration = config.get("exploration", {})
    paper_tables = config.get("paper_tables", {})
    analysis = list(config.get("analysis", {}))
    own_table = [name for name in experiments if name not in exploration_experiments]
    return [
        "results/plan.csv",
        *(["results/tables/claims.md"] if "evidence" in config else []),
        *(["results/tables/ledger.md"] if paper_tables.get("deviations") else []),
        "results/tables/teachers.csv",
        "results/tables/teachers.md",
        *[f"results/pseudo_heads/{teacher}/{task}/metrics.json" for teacher, task in teacher_jobs(config)],
        *[f"results/transfer/{task}/statistics/{teacher}.md" for teacher, task in augmented_jobs(config)],
        *[f"results/generators/{task}/metrics.json" for task in generator_tasks(config)],
        *[f"results/tables/experiments/{name}.md" for name in own_table],
        *[f"results/tables/experiments/{name}_grid.csv" for name in own_table],
        *[f"results/figures/experiments/{name}_curves.png" for name in own_table],
        *[f"results/figures/thesis_{figure}.png" for figure in exploration.get("figures", {})],
        *(["results/tables/thesis_table51.md"] if exploration.get("table") else []),
        *(["results/tables/probing.csv"] if "probing" in config else []),
        *[f"results/analysis/{task}.json" for task in analysis],
        *[f"results/sentence_probes/{task}.csv" for task in config.get("sentence_probes", {})],
        "results/figures/pseudo_heads.png",
        *(["results/figures/class_distribution.png"] if class_distribution_tasks(config) else []),
        *[f"results/figures/teacher_curves_{teacher}.png" for teacher in config["teachers"]],
        *(["results/tables/runtimes.md"] if config.get("runtime_table") else []),
        *(["results/figures/probing.png"] if "probing" in config else []),
        *(["results/tables/probing_thesis.csv", *THESIS_PROBING_FIGURES]
          if config.get("probing", {}).get("thesis") else []),
        *[f"results/figures/{figure}_{task}.png" for figure in ANALYSIS_FIGURES for task in analysis],
        *[f"results/figures/attention_{figure}.png" for figure in config.get("attention_maps", {})],
        *[f"results/figures/layer_outputs_{task}.png" for task in config.get("layer_outputs", {})],
        *[f"results/tables/papers/{name}.md" for name in paper_tables.get("tables", {})],
        *[f"results/glue_submission/{name}" for name in own_table
          if any(task in GLUE_TASKS for task in experiments[name]["tasks"])],
    ]


def with_run_summaries(targets: list[str]) -> list[str]:
    """The default targets and the pages that account for them, built last: the status page (rule status_page)
    and the plan against the hours the jobs took (rule plan_measured)."""
    return [*targets, "results/tables/status.md", "results/tables/plan_measured.md"]
