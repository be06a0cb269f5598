# The helpers of the rule files, kept apart from the rules as Snakemake's linter asks. First those that several
# files share, then, under a `# rules/<file>.smk` line, those of one file (tests/test_layout.py).
import os
import re
from kdflow.workflow.config import (
    TRANSFER_SOURCES,
    assistant_run,
    canonical,
    class_distribution_tasks,
    experiment_run_files,
    generator_settings,
    grid_points,
    hygiene_settings,
    probing_settings,
    pseudo_head_settings,
    sampling_settings,
    selection_inputs,
    selection_params,
    signal_needs,
    student_run_file,
    student_settings,
    teacher_jobs,
    teacher_settings,
    transfer_of,
    transfer_sets,
    unlabelled_files,
)
from kdflow.workflow.exploration import (
    drawn_runs,
    figure_kind,
    figure_constraint,
    figure_labels,
    figure_sizes,
    figure_title,
    run_files,
    run_records,
    table_runs,
    table_studies,
)
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.reporting.paper_tables import (
    is_hyperparameter_table,
    read_reference,
    selected_values,
    table_inputs,
    title_of,
)
from kdflow.probing.senteval import PROBING_TASKS
from kdflow.workflow.cost_plan import config_digest
from kdflow.workflow.provenance import script_fingerprint
from kdflow.workflow.model_inputs import (
    analysis_inputs,
    analysis_models,
    model_files,
    model_params,
    recomputed_student_inputs,
    sentence_probe_inputs,
    transfer_set_file,
)
from kdflow.workflow.targets import default_targets
from kdflow.workflow.runtime_jobs import runtime_jobs
from kdflow.core.tasks import TASKS


def code_of(script):
    """The fingerprint of the code a rule's script runs (the script and its kdflow import closure), a param of
    every rule so that editing that code reruns exactly the rule's jobs (kdflow.workflow.provenance).
    """
    return script_fingerprint(os.path.join(workflow.basedir, "scripts", script))


wildcard_constraints:
    task="|".join(TASKS),
    teacher="|".join(config["teachers"]),
    experiment="|".join(config.get("experiments", {})) or "no-experiments",
    student="|".join(config.get("students", {})) or "no-students",
    method="[a-z0-9_]+",
    config="[^/]+",
    seed="[0-9]+",
    transfer="train|augmented|unlabelled|unlabelled_augmented",
    shard="[0-9]+",
    model="|".join(config.get("models", {})) or "no-models",
    probing_task="|".join(PROBING_TASKS),


def raw_files_of(task):
    directory = task_source_dir(task)
    if directory is None or not os.path.isdir(directory):
        return []
    return sorted(
        os.path.join(directory, name)
        for name in os.listdir(directory)
        if name.endswith(".tsv")
    )


def task_source_dir(task):
    """Where a task's raw files live, or None to download it from the Hugging Face hub."""
    if TASKS[task].source == "sara":
        return config["data"]["sara_dir"]
    root = config["data"].get("glue_dir")
    return None if root is None else os.path.join(root, TASKS[task].tsv_dir)


def teacher_params(wildcards):
    return teacher_settings(config, wildcards.teacher, wildcards.task)


def configured_resource(section, name):
    """A job resource: the ``resources`` of the job's config section (``section(wildcards)``) over the
    defaults; memory and time grow with each retry."""

    def resource(wildcards, attempt):
        value = section(wildcards).get("resources", {}).get(name)
        value = value if value is not None else config["resources"][name]
        return value * attempt if name in ("mem_mb", "runtime") else value

    return resource


def teacher_resource(name):
    return configured_resource(lambda w: config["teachers"][w.teacher], name)


def one_process_gpu(resource):
    """A ``gpu`` resource capped at one, for jobs that run in one process: of a teacher's jobs, only
    fine-tuning uses several GPUs (kdflow.training.parallel); the others would hold the rest idle.
    """

    def capped(wildcards, attempt):
        return min(1, resource(wildcards, attempt))

    return capped


PROBING_CONFIG = config.get("probing", {})


def probing_file(task):
    directory = PROBING_CONFIG["data_dir"] or "resources/senteval_probing"
    return os.path.join(directory, PROBING_TASKS[task])


# rules/data.smk
def raw_task_files(wildcards):
    """The raw files of a task that exist, so that editing them reruns ingestion. Missing files are
    reported by the ingestion script itself, with the path it looked for (dry runs stay possible).
    """
    return raw_files_of(wildcards.task)


def source_dir_param(wildcards):
    return task_source_dir(wildcards.task)


# rules/teachers.smk
def heads_params(wildcards):
    return {
        **pseudo_head_settings(config, wildcards.teacher),
        "max_seq_length": teacher_params(wildcards)["hyperparameters"].get(
            "max_seq_length", Hyperparameters.max_seq_length
        ),
    }


# rules/transfer.smk
def generation_resource(name):
    """Generator fine-tuning and sampling shards."""
    return configured_resource(lambda w: config["generation"], name)


def transfer_set_inputs(wildcards):
    """The prepared task and the sources of its transfer set (kdflow.workflow.config.TRANSFER_SOURCES)."""
    sources = TRANSFER_SOURCES[wildcards.transfer]
    inputs = {"data": f"results/data/{wildcards.task}"}
    if "generated" in sources:
        inputs["shards"] = expand(
            "results/transfer/{task}/shards/{shard}.parquet",
            task=wildcards.task,
            shard=range(config["generation"]["sampling"]["shards"]),
        )
    if "unlabelled" in sources:
        inputs["unlabelled"] = unlabelled_files(config, wildcards.task)
    return inputs


def teacher_signal_inputs(wildcards):
    return {
        "data": f"results/data/{wildcards.task}",
        "model": f"results/teachers/{wildcards.teacher}/{wildcards.task}/model",
        "heads": f"results/pseudo_heads/{wildcards.teacher}/{wildcards.task}/heads.safetensors",
        **transfer_set_file(wildcards.transfer, wildcards.task),
    }


def signal_layers_param(wildcards):
    return signal_needs(config, wildcards.teacher, wildcards.task)


# rules/distillation.smk
def experiment_of(wildcards):
    return config["experiments"][wildcards.experiment]


def experiment_transfer(wildcards):
    return transfer_of(experiment_of(wildcards))


def student_inputs(wildcards):
    """Data, teacher, the signals the student learns from (the teacher's, or TAKD's assistant's) and the
    word-vectors file it reads, if any: a missing file stops the plan, not a job."""
    teacher = experiment_of(wildcards)["teacher"]
    assistant = assistant_run(
        config,
        wildcards.experiment,
        wildcards.task,
        wildcards.method,
        wildcards.config,
        wildcards.seed,
    )
    transfer = experiment_transfer(wildcards)
    vectors = (student_params(wildcards)["student"].get("embeddings") or {}).get("path")
    if assistant is None:
        signals = f"results/signals/{teacher}/{wildcards.task}/{transfer}.safetensors"
    else:
        signals = student_run_file(
            "signals.safetensors",
            experiment=wildcards.experiment,
            task=wildcards.task,
            **assistant,
        )
    return {
        "data": f"results/data/{wildcards.task}",
        "teacher": f"results/teachers/{teacher}/{wildcards.task}/model",
        "signals": signals,
        **transfer_set_file(transfer, wildcards.task),
        **({"vectors": vectors} if vectors else {}),
    }


def student_params(wildcards):
    return student_settings(
        config,
        wildcards.experiment,
        wildcards.task,
        wildcards.student,
        wildcards.method,
        wildcards.config,
        wildcards.seed,
    )


def student_resource(name):
    return configured_resource(experiment_of, name)


# rules/probing.smk
def probing_resource(name):
    """Encoding and probing jobs."""
    return configured_resource(lambda w: config["probing"], name)


# rules/reporting.smk
def attention_figure_meta(key):
    """The report entry's ``key`` (category, subcategory or labels) of an attention figure: its paper and figure."""

    def of(wildcards):
        spec = config["attention_maps"][wildcards.figure]
        layer = spec["student_layer"] or "top attending"
        return {
            "category": PAPER_CATEGORIES[spec["paper"]],
            "subcategory": f"Figure {spec['figure']}",
            "labels": {
                "figure": "attention over teacher layers",
                "task": spec["task"],
                "student layer": str(layer),
            },
        }[key]

    return of


def plan_counted_files():
    """The local files whose rows the plan counts: the raw task files, the probing files and the unlabelled text
    that exist (editing them changes the plan)."""
    tasks = dict.fromkeys(task for _, task in teacher_jobs(config))
    files = [path for task in tasks for path in raw_files_of(task)]
    files += [
        path
        for path in map(probing_file, PROBING_CONFIG.get("tasks", []))
        if os.path.isfile(path)
    ]
    for transfer, task in transfer_sets(config):
        if "unlabelled" in TRANSFER_SOURCES[transfer]:
            files += unlabelled_files(config, task)
    return sorted(set(files))
