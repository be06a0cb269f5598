# Shared by the rule files. The package's functions they call (each job's settings and inputs, from the config and
# its wildcards), the paths of every output (`paths`: kdflow.workflow.results_paths), each rule's code fingerprint,
# the wildcard constraints and the job resources. What one rule file needs is a function of the package called from
# its rules, since Snakemake's linter wants no function definitions beside rules (tests/test_layout.py).
import os

import kdflow.core.run_files as run_file_names
import kdflow.workflow.results_paths as paths
import kdflow.workflow.student_packs as packs
from kdflow.core.tasks import TASKS
from kdflow.probing.senteval import PROBING_TASKS
from kdflow.reporting.calibration import benchmarks_state
from kdflow.reporting.paper_tables import (
    is_hyperparameter_table,
    read_reference,
    selected_values,
    table_inputs,
    title_of,
)
from kdflow.reporting.report_menu import (
    attention_report_entry,
    category,
    paper_place,
    paper_table_place,
)
from kdflow.reporting.status import status_inputs
from kdflow.reporting.works import paper_files
from kdflow.workflow.job_inputs import (
    experiment_run_files,
    raw_task_files,
    selection_inputs,
    student_inputs,
    student_run_file,
    task_source_dir,
    teacher_signal_inputs,
    transfer_set_file,
    transfer_set_inputs,
)
from kdflow.workflow.job_settings import (
    canonical,
    class_distribution_tasks,
    generator_settings,
    hygiene_settings,
    needed_signals,
    paper_table_models,
    probing_settings,
    pseudo_head_job_settings,
    sampling_settings,
    scale_note,
    selection_params,
    student_code_members,
    student_settings,
    teacher_jobs,
    teacher_settings,
    transfer_of,
)
from kdflow.workflow.job_resources import configured_resource, configured_resources
from kdflow.workflow.cost_plan import config_digest, paper_table_experiments
from kdflow.workflow.export_inputs import (
    export_inputs,
    export_params,
    exported_cards,
    exported_students,
)
from kdflow.workflow.exploration import (
    drawn_runs,
    figure_constraint,
    figure_kind,
    figure_labels,
    figure_sizes,
    figure_title,
    result_config,
    run_files,
    run_records,
    table_runs,
    table_studies,
)
from kdflow.workflow.model_inputs import (
    analysis_inputs,
    analysis_models,
    model_files,
    model_params,
    recomputed_student_inputs,
    sentence_probe_inputs,
)
from kdflow.workflow.provenance import (
    job_fingerprint,
    script_fingerprint,
    workflow_fingerprint,
)
from kdflow.workflow.runtime_jobs import runtime_jobs
from kdflow.workflow.scheduler_timers import correct_scheduler_timers
from kdflow.workflow.slurm_status import correct_slurm_plugin
from kdflow.workflow.split_sizes import counted_files
from kdflow.workflow.targets import default_targets, with_run_summaries

# Under --profile slurm, a job cancelled with scancel fails (and is retried) instead of hanging the run, and a
# restarted run follows the jobs a lost snakemake process left running instead of submitting them again.
correct_slurm_plugin()
# The scheduler keeps one pending re-evaluation timer, not one more per job that finished (scheduler_timers.py).
correct_scheduler_timers()


def runs(script, members_of=None):
    """A rule's script (scripts/<script>) and the fingerprint of the code it runs (its ``code`` param: the script and
    its kdflow import closure), as two of its params, so that editing that code reruns exactly the rule's jobs
    (kdflow.workflow.provenance). With ``members_of`` (wildcards -> the (registry, name) pairs a job runs), the
    fingerprint is a function of the wildcards that counts, of the registries, only the job's own members' modules.
    """
    path = os.path.join(workflow.basedir, "scripts", script)
    if members_of is None:
        return {"script": script, "code": script_fingerprint(path)}
    return {"script": script, "code": lambda wildcards: job_fingerprint(path, members_of(wildcards))}


wildcard_constraints:
    task="|".join(TASKS),
    teacher="|".join(config["teachers"]),
    experiment="|".join(config.get("experiments", {})) or "no-experiments",
    student="|".join(config.get("students", {})) or "no-students",
    method="[a-z0-9_]+",
    point="[^/]+",
    seed="[0-9]+",
    transfer="train|augmented|unlabelled|unlabelled_augmented",
    shard="[0-9]+",
    pack="[0-9]+",
    model="|".join(config.get("models", {})) or "no-models",
    probing_task="|".join(PROBING_TASKS),


def teacher_params(wildcards):
    return teacher_settings(config, wildcards.teacher, wildcards.task)


PROBING_CONFIG = config.get("probing", {})


def probing_file(task):
    """A SentEval probing task's file (``probing.data_dir``, or where the workflow downloads it)."""
    directory = PROBING_CONFIG["data_dir"] or "resources/senteval_probing"
    return os.path.join(directory, PROBING_TASKS[task])


# The papers' tables (reference/paper_results.csv), whose reference and deviation ledger several reporting rules read.
PAPER_TABLES = config.get("paper_tables", {})


def deviations_file(result):
    """The ledger's entries of a paper result (a paper table, the thesis's probing or hyperparameter_exploration) as
    they hold for this run (rule run_deviations), where the config names a ledger."""
    return paths.RUN_DEVIATIONS.format(result=result) if PAPER_TABLES.get("deviations") else []


# What every figure caption opens with: a run of randomly initialised teachers (the demo) says it is not a result.
RUN_SCALE_NOTE = scale_note(config, list(config.get("experiments", {})))


# The default target: what `snakemake` with no target asks for, and what the status page accounts for.
DEFAULT_TARGETS = default_targets(config, EXPLORATION_EXPERIMENTS)


def page_and_csv(caption, labels, category=None, subcategory=None, **outputs):
    """A reporting rule's named outputs, in their order, when the report shows its table twice in one place with
    one caption and the same labels but for "format": as a page (the output ``html``) and as raw CSV (the first
    output); those between (Markdown, LaTeX) are not in the report. ``labels``, like the place, may be a function
    of the wildcards.
    """
    formats = {next(iter(outputs)): "raw CSV", "html": "page"}

    def entry(path, format):
        if callable(labels):
            with_format = lambda wildcards: {**labels(wildcards), "format": format}
        else:
            with_format = {**labels, "format": format}
        return report(
            path,
            caption=caption,
            category=category,
            subcategory=subcategory,
            labels=with_format,
        )

    return {name: entry(path, formats[name]) if name in formats else path for name, path in outputs.items()}
