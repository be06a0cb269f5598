"""What rule export_student (rules/export.smk) reads and runs with: functions of the config and the rule's
wildcards (experiment, task, student, method). Torch-free, as the rest of kdflow.workflow: Snakemake calls them
while it plans."""

from __future__ import annotations

from kdflow.core import run_files
from kdflow.core.errors import UserError
from kdflow.workflow.cost_plan import paper_table_experiments
from kdflow.workflow.job_inputs import student_run_file
from kdflow.workflow.job_settings import canonical, experiment_runs, scale_note, teacher_settings
from kdflow.workflow.results_paths import DATA, EXPORT_CARD, SELECTION, STUDENT_METHOD_DIR, TEACHER_MODEL

RUN_FILES = {"metrics": run_files.METRICS, "model": run_files.STUDENT_WEIGHTS, "predictions": run_files.PREDICTIONS}


def exported_runs(config: dict, experiment: str, task: str, student: str, method: str) -> list[dict]:
    """Every run the selection chooses the exported one from (each grid point and seed); a clear error where the
    experiment trains no such student."""
    runs = [run for run in experiment_runs(config, experiment)
            if (run["task"], run["student"], run["method"]) == (task, student, method)]
    if not runs:
        spec = config["experiments"][experiment]
        raise UserError(f"experiment {experiment!r} trains no student {student!r} with method {method!r} on {task!r} "
                        f"(its tasks: {', '.join(spec['tasks'])}; students: {', '.join(spec['students'])}; methods: "
                        f"{', '.join(spec['methods'])})")
    return runs


def export_inputs(config: dict, experiment: str, task: str, student: str, method: str) -> dict:
    """The experiment's selection, the task's data, the fine-tuned teacher (the tokenizer), the files of every run
    the selection may choose, and the deviation ledger (the card lists its entries) where the config names one."""
    runs = exported_runs(config, experiment, task, student, method)
    teacher = config["experiments"][experiment]["teacher"]
    inputs = {"selection": SELECTION.format(experiment=experiment), "data": DATA.format(task=task),
              "teacher": TEACHER_MODEL.format(teacher=teacher, task=task)}
    for key, name in RUN_FILES.items():
        inputs[key] = [student_run_file(name, experiment=experiment, **run) for run in runs]
    ledger = config.get("paper_tables", {}).get("deviations")
    if ledger:
        inputs["deviations"] = ledger
    return inputs


def export_params(config: dict, experiment: str, task: str, student: str, method: str) -> dict:
    """The request, where its runs are, and what the model card states beyond the run: the teacher and its
    settings, the experiment's paper, and the paper tables made from the experiment (whose ledger entries apply)."""
    teacher = config["experiments"][experiment]["teacher"]
    request = {"experiment": experiment, "task": task, "student": student, "method": method}
    tables = sorted(name for name, experiments in paper_table_experiments(config).items() if experiment in experiments)
    return canonical({"request": request, "runs_dir": STUDENT_METHOD_DIR.format(**request),
                      **({"license": config["export"]["license"]} if config.get("export", {}).get("license") else {}),
                      "teacher": {"name": teacher, **teacher_settings(config, teacher, task)},
                      "paper": config["experiments"][experiment].get("paper"),
                      "scale_note": scale_note(config, [experiment]), "paper_tables": tables})


def exported_students(config: dict, experiment: str | None = None) -> list[dict]:
    """The selected students the config's ``export`` asks the default target for (of ``experiment`` only, if given):
    each (experiment, task, student, method) of each listed experiment, or of its listed tasks, students and methods;
    a clear error for a name the experiment does not have."""
    found = []
    for number, request in enumerate(config.get("export", {}).get("students", []), 1):
        name = request["experiment"]
        if name not in config.get("experiments", {}):
            raise UserError(f"export.students[{number}].experiment: unknown experiment {name!r}")
        spec = config["experiments"][name]
        chosen = {}
        options = (("tasks", spec["tasks"]), ("students", spec["students"]), ("methods", list(spec["methods"])))
        for key, known in options:
            unknown = sorted(set(request.get(key, known)) - set(known))
            if unknown:
                raise UserError(f"export.students[{number}].{key}: {unknown} not in experiment {name!r} "
                                f"(its {key}: {', '.join(known)})")
            chosen[key] = [item for item in known if item in request.get(key, known)]
        found += [{"experiment": name, "task": task, "student": student, "method": method}
                  for task in chosen["tasks"] for student in chosen["students"] for method in chosen["methods"]]
    return [exported for exported in found if experiment in (None, exported["experiment"])]


def exported_cards(config: dict, experiment: str) -> list[str]:
    """The model cards of the experiment's students the config exports, which its report page lists."""
    return [EXPORT_CARD.format(**exported) for exported in exported_students(config, experiment)]
