"""What the jobs that load named models (config ``models``: probing, prediction analysis, sentence probes, inference,
the figures that recompute students' layers) read, and how they load each model: functions of the config, which the
rules call with their wildcards (rules/analysis.smk, probing.smk, reporting_figures.smk)."""

from __future__ import annotations

from kdflow.core import run_files
from kdflow.core.model_references import embeddings_source, reference_kind
from kdflow.workflow.job_inputs import student_run_file, transfer_set_file
from kdflow.workflow.job_settings import (
    canonical,
    embedding_settings,
    experiment_runs,
    model_reference,
    pretrained_settings,
)
from kdflow.workflow.results_paths import (
    DATA,
    PSEUDO_HEADS,
    SELECTION,
    STUDENT_METHOD_DIR,
    TEACHER_MODEL,
    TEACHER_PREDICTIONS,
)

THESIS_SENTENCES = "reference/thesis_table_c1_sentences.tsv"  # thesis Table C.1's sentences


def model_files(config: dict, name: str, file: str = run_files.STUDENT_WEIGHTS) -> dict:
    """The files a named model is loaded from: its task's data, the fine-tuned teacher and, for a student, the
    experiment's selection and ``file`` of every run it selects among."""
    reference = model_reference(config, name)
    kind = reference_kind(reference)
    if kind == "embeddings":
        return embedding_files(config, reference)
    if kind == "pretrained":
        return {}
    task = reference["task"]
    teacher = reference["teacher"] if kind == "teacher" else config["experiments"][reference["experiment"]]["teacher"]
    files = {"data": DATA.format(task=task), "teacher_model": TEACHER_MODEL.format(teacher=teacher, task=task)}
    if kind == "student":
        files["selection"] = SELECTION.format(experiment=reference["experiment"])
        files["runs"] = [student_run_file(file, experiment=reference["experiment"], **run)
                         for run in experiment_runs(config, reference["experiment"])
                         if all(run[key] == reference[key] for key in ("task", "student", "method"))]
    return files


def embedding_files(config: dict, reference: dict) -> dict:
    """The files an ``embeddings`` model is built from: nothing for a pre-trained teacher's; the task's data and
    the fine-tuned teacher for a teacher's; for an experiment's student also its word-vectors file, if any, and,
    for a word-level student, its transfer set (its vocabulary)."""
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
    return {"data": DATA.format(task=task), "teacher_model": TEACHER_MODEL.format(teacher=teacher, task=task),
            **transfer_set_file(transfer, task), **({"vectors": vectors} if vectors else {})}


def model_params(config: dict, name: str) -> dict:
    """How to load a named model: its reference, the run directory of a student, a pretrained spec and how an
    ``embeddings`` model builds a student's vectors."""
    reference = model_reference(config, name)
    kind = reference_kind(reference)
    params = {"reference": reference}
    if kind == "pretrained":
        params["pretrained"] = pretrained_settings(config, reference["pretrained"])
    if kind == "embeddings" and embeddings_source(reference) == "pretrained":
        params["pretrained"] = pretrained_settings(config, reference["embeddings"]["pretrained"])
    if kind == "embeddings" and embeddings_source(reference) == "student":
        params["embeddings"] = embedding_settings(config, reference)
    if kind == "student":  # the directory of its runs (student_run_file), above their grid points
        params["runs_dir"] = STUDENT_METHOD_DIR.format(**reference)
    return canonical(params)


def analysis_models(config: dict, task: str) -> list[str]:
    group = config["analysis"][task]
    return [group["teacher"], *group["students"]]


def analysis_inputs(config: dict, task: str) -> dict:
    """The dev data and, per model, what its predictions are read from (for a student: every run it is selected
    among, since the selection decides which one; for a teacher, evaluate_teacher's predictions beside its model)."""
    inputs = {"data": DATA.format(task=task)}
    for name in analysis_models(config, task):
        files = model_files(config, name, run_files.PREDICTIONS)
        inputs[f"{name}_teacher"] = files["teacher_model"]
        if "selection" in files:
            inputs[f"{name}_selection"] = files["selection"]
            inputs[f"{name}_runs"] = files["runs"]
        else:  # a teacher (config.check_references)
            teacher = model_reference(config, name)["teacher"]
            inputs[f"{name}_predictions"] = TEACHER_PREDICTIONS.format(teacher=teacher, task=task)
    return inputs


def sentence_probe_inputs(config: dict, task: str) -> dict:
    """The task's data (its label names), the sentence file, and the files each listed model is loaded from."""
    probe = config["sentence_probes"][task]
    inputs = {"data": DATA.format(task=task), "sentences": probe.get("sentences", THESIS_SENTENCES)}
    for name in probe["models"]:
        files = model_files(config, name)
        inputs[f"{name}_teacher"] = files["teacher_model"]
        if "selection" in files:
            inputs[f"{name}_selection"] = files["selection"]
            inputs[f"{name}_runs"] = files["runs"]
    return inputs


def recomputed_student_inputs(config: dict, task: str, names: list[str]) -> dict:
    """What a figure that recomputes students' layers on a task's examples reads (ALP-KD Figs. 3-4, Universal-KD
    Fig. 3): the students' shared teacher, its pseudo-heads, and each student's selection and candidate runs."""
    experiment = model_reference(config, names[0])["experiment"]
    teacher = config["experiments"][experiment]["teacher"]
    inputs = {"data": DATA.format(task=task), "teacher": TEACHER_MODEL.format(teacher=teacher, task=task),
              "heads": PSEUDO_HEADS.format(teacher=teacher, task=task)}
    for name in names:
        files = model_files(config, name)
        inputs[f"{name}_selection"] = files["selection"]
        inputs[f"{name}_runs"] = files["runs"]
    return inputs
