# The helpers of the rule files, kept apart from the rules as Snakemake's linter asks. First those that several
# files share, then, under a `# rules/<file>.smk` line, those of one file (tests/test_layout.py).
import os
import re
from kdflow.workflow.config import (
    TRANSFER_SOURCES,
    assistant_run,
    canonical,
    class_distribution_tasks,
    embedding_settings,
    experiment_run_files,
    experiment_runs,
    generator_settings,
    grid_points,
    hygiene_settings,
    model_reference,
    pretrained_settings,
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
from kdflow.core.model_references import embeddings_source, reference_kind
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


def transfer_inputs(transfer, task):
    """The files a transfer set adds beyond the prepared task: the built set's merged examples."""
    if transfer != "train":
        return {"transfer": f"results/transfer/{task}/{transfer}.parquet"}
    return {}


def model_files(name, file="model.safetensors"):
    """The files a named model (config ``models``) is loaded from: its task's data, the fine-tuned teacher and,
    for a student, the experiment's selection and ``file`` of every run it selects among.
    """
    reference = model_reference(config, name)
    kind = reference_kind(reference)
    if kind == "embeddings":
        return embedding_files(reference)
    if kind == "pretrained":
        return {}
    task = reference["task"]
    teacher = (
        reference["teacher"]
        if kind == "teacher"
        else config["experiments"][reference["experiment"]]["teacher"]
    )
    files = {
        "data": f"results/data/{task}",
        "teacher_model": f"results/teachers/{teacher}/{task}/model",
    }
    if kind == "student":
        files["selection"] = f"results/selection/{reference['experiment']}.json"
        files["runs"] = [
            student_run_file(file, experiment=reference["experiment"], **run)
            for run in experiment_runs(config, reference["experiment"])
            if all(run[key] == reference[key] for key in ("task", "student", "method"))
        ]
    return files


def embedding_files(reference):
    """The files an ``embeddings`` model is built from: nothing for a pre-trained teacher's; the task's data and
    the fine-tuned teacher for a teacher's; for an experiment's student also its word-vectors file, if any, and,
    for a word-level student, its transfer set (its vocabulary).
    """
    source = embeddings_source(reference)
    if source == "pretrained":
        return {}
    task = reference["embeddings"]["task"]
    if source == "teacher":
        teacher, transfer, vectors = reference["embeddings"]["teacher"], None, None
    else:
        settings = embedding_settings(config, reference)
        teacher, transfer = settings["teacher"], settings["transfer"]
        vectors = (settings["student"].get("embeddings") or {}).get("path")
    return {
        "data": f"results/data/{task}",
        "teacher_model": f"results/teachers/{teacher}/{task}/model",
        **(transfer_inputs(transfer, task) if transfer else {}),
        **({"vectors": vectors} if vectors else {}),
    }


def model_params(name):
    """How to load a named model: its reference, the run directory of a student, a pretrained spec and how an
    ``embeddings`` model builds a student's vectors."""
    reference = model_reference(config, name)
    kind = reference_kind(reference)
    params = {"reference": reference}
    if kind == "pretrained":
        params["pretrained"] = pretrained_settings(config, reference["pretrained"])
    if kind == "embeddings" and embeddings_source(reference) == "pretrained":
        params["pretrained"] = pretrained_settings(
            config, reference["embeddings"]["pretrained"]
        )
    if kind == "embeddings" and embeddings_source(reference) == "student":
        params["embeddings"] = embedding_settings(config, reference)
    if (
        kind == "student"
    ):  # the directory of the runs student_run_file names, above their grid points
        params["runs_dir"] = (
            "results/students/{experiment}/{task}/{student}/{method}".format(
                **reference
            )
        )
    return canonical(params)


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
        **transfer_inputs(wildcards.transfer, wildcards.task),
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
        **transfer_inputs(transfer, wildcards.task),
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


# rules/analysis.smk
def analysis_models(task):
    group = config["analysis"][task]
    return [group["teacher"], *group["students"]]


def analysis_inputs(wildcards):
    """The dev data and, per model, what its predictions are read from (for a student: every run it is
    selected among, since the selection decides which one)."""
    inputs = {"data": f"results/data/{wildcards.task}"}
    for name in analysis_models(wildcards.task):
        files = model_files(name, "predictions.parquet")
        inputs[f"{name}_teacher"] = files["teacher_model"]
        if "selection" in files:
            inputs[f"{name}_selection"] = files["selection"]
            inputs[f"{name}_runs"] = files["runs"]
        else:  # a teacher: evaluate_teacher's predictions beside its model
            inputs[f"{name}_predictions"] = os.path.join(
                os.path.dirname(files["teacher_model"]), "predictions.parquet"
            )
    return inputs


THESIS_SENTENCES = "reference/thesis_table_c1_sentences.tsv"


def sentence_probe_inputs(wildcards):
    """The task's data (its label names), the sentence file, and the files each listed model is loaded from."""
    probe = config["sentence_probes"][wildcards.task]
    inputs = {
        "data": f"results/data/{wildcards.task}",
        "sentences": probe.get("sentences", THESIS_SENTENCES),
    }
    for name in probe["models"]:
        files = model_files(name)
        inputs[f"{name}_teacher"] = files["teacher_model"]
        if "selection" in files:
            inputs[f"{name}_selection"] = files["selection"]
            inputs[f"{name}_runs"] = files["runs"]
    return inputs


# rules/reporting.smk
def recomputed_student_inputs(task, names):
    """What a figure that recomputes students' layers on a task's examples reads: the students' shared teacher,
    its pseudo-heads, and each student's selection and candidate runs."""
    experiment = model_reference(config, names[0])["experiment"]
    teacher = config["experiments"][experiment]["teacher"]
    inputs = {
        "data": f"results/data/{task}",
        "teacher": f"results/teachers/{teacher}/{task}/model",
        "heads": f"results/pseudo_heads/{teacher}/{task}/heads.safetensors",
    }
    for name in names:
        files = model_files(name)
        inputs[f"{name}_selection"] = files["selection"]
        inputs[f"{name}_runs"] = files["runs"]
    return inputs


def attention_inputs(wildcards):
    spec = config["attention_maps"][wildcards.figure]
    return recomputed_student_inputs(spec["task"], spec["models"])


def layer_output_inputs(wildcards):
    return recomputed_student_inputs(
        wildcards.task, config["layer_outputs"][wildcards.task]["models"]
    )


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
