"""The model card of an exported student: a ``README.md`` whose YAML front matter is the Hugging Face Hub's metadata
(``model-index`` with the task, the dataset, the metrics and the exported run's dev scores) and whose text states
the teacher, the method and its weights, the transfer set, the seeds and their spread, the agreement with kdflow,
the deviations from the paper, the kdflow commit, the config and the command that rebuilds it. Everything comes
from the export record (:mod:`kdflow.export.student_export`)."""

from __future__ import annotations

import json
import math

import yaml

from kdflow.core.deviation_entries import statement
from kdflow.core.tasks import get_task
from kdflow.export.conversion import REGRESSION_LABEL

# kdflow's metric names (kdflow.core.metrics) as the Hub's metric ids
HUB_METRICS = {"accuracy": "accuracy", "f1": "f1", "f1_micro": "f1", "mcc": "matthews_correlation",
               "pearson": "pearsonr", "spearman": "spearmanr"}
HYPERPARAMETERS = ("learning_rate", "batch_size", "epochs", "max_seq_length", "warmup_ratio", "weight_decay",
                   "optimizer", "lr_decay", "max_grad_norm", "seed")


def dataset(task_name: str) -> dict:
    """The model-index ``dataset`` of a task's dev split: GLUE's hub copy for a GLUE task."""
    task = get_task(task_name)
    if task.source == "glue":
        return {"name": f"GLUE {task.tsv_dir}", "type": "nyu-mll/glue", "config": task.hub_config,
                "split": task.hub.get("dev", "validation")}
    return {"name": task_name.capitalize(), "type": task_name, "split": "dev"}


def model_name(record: dict) -> str:
    return "-".join(record[key] for key in ("experiment", "task", "student", "method"))


def metadata(record: dict) -> dict:
    """The card's YAML front matter."""
    run = record["run"]
    dev = run["scores"].get("dev", {})
    metrics = [{"type": HUB_METRICS.get(name, name), "value": _number(value),
                "name": f"dev {name} (seed {run['seed']})"} for name, value in dev.items()]
    student_type = record["student_spec"]["type"]
    return {
        **({"license": record["license"]} if record.get("license") else {}),
        "library_name": "transformers",
        "pipeline_tag": "text-classification",
        "tags": ["knowledge-distillation", "kdflow", student_type, record["method"]],
        "metrics": sorted({metric["type"] for metric in metrics}),
        **({"datasets": ["nyu-mll/glue"]} if get_task(record["task"]).source == "glue" else {}),
        "model-index": [{"name": model_name(record), "results": [{
            "task": {"type": "text-classification", "name": "Text Classification"},
            "dataset": dataset(record["task"]),
            "metrics": metrics,
        }]}],
    }


def _number(value) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def _score(value) -> str:
    return "NaN (diverged)" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _json(value) -> str:
    return json.dumps(value, sort_keys=True)


def usage(record: dict) -> str:
    """How to load the folder: the pipeline, with a pair or a sentence of the task's kind."""
    trust = ", trust_remote_code=True" if record["trust_remote_code"] else ""
    example = ('{"text": "A first sentence.", "text_pair": "A second one."}' if get_task(record["task"]).is_pair
               else '"A sentence to classify."')
    lines = ["```python", "from transformers import pipeline", "",
             f'classify = pipeline("text-classification", model="path/to/this/folder"{trust})',
             f"classify({example}, truncation=True)", "```", ""]
    if record["tokenizer_max_length"] is None:
        lines.append("kdflow read every sentence whole (LSTM_S has no maximum length), as this tokenizer does.")
    else:
        lines.append(f"kdflow cut inputs at {record['tokenizer_max_length']} tokens: `truncation=True` cuts where "
                     "kdflow did.")
    if record.get("tokenizer", "").startswith("a word list"):
        lines[-1] += (" The student reads words: `<unk>`, `<pad>`, `<cls>` and `<sep>` written in a text read as "
                      "those tokens here, where kdflow read their letters and brackets as words.")
        if record["tokenizer_max_length"] is not None and get_task(record["task"]).is_pair:
            lines[-1] += (" A sentence pair longer than the limit may be cut one word differently (the `tokenizers` "
                          "library's longest-first truncation breaks ties on the other sentence).")
    if record["trust_remote_code"]:
        lines[-1] += (" `transformers` has no class for this architecture: the folder holds its code, "
                      "`modeling_kdflow_student.py` and the `layers.py` it builds the model of (torch and transformers "
                      "only), which `trust_remote_code=True` runs; read them first.")
    if record["regression"]:
        lines.append("")
        lines.append(f"The task is a regression: the pipeline returns the output itself as the score of the label "
                     f"`{REGRESSION_LABEL}`, on the task's scale.")
    return "\n".join(lines)


def training(record: dict) -> str:
    teacher = record.get("teacher") or {}
    spec = teacher.get("spec", {})
    base = spec.get("model") or (f"a random-init {spec['architecture'].get('model_type', '')} "
                                 f"({_json(spec['architecture'])})" if spec.get("architecture") else "unknown")
    transfer = record["transfer"]
    stages = "; ".join(f"{stage.get('epochs')} epochs" + (f", weights {_json(stage['weights'])}"
                                                          if stage.get("weights") else "")
                       for stage in record["stages"])
    hp = record["hyperparameters"]
    rows = [
        ("teacher", f"`{teacher.get('name', 'unknown')}`: {base}, fine-tuned on {record['task']}"),
        ("student", f"`{record['student']}`: {_json(record['student_spec'])}, exported as `{record['model_class']}`"),
        ("tokenizer", record.get("tokenizer", "the teacher's")),
        ("method", f"`{record['method']}`, options {_json(record['method_options'])}"),
        ("schedule", stages + f" (the best dev state kept: stage {record['run']['best']['stage']}, epoch "
                              f"{record['run']['best']['epoch']})"),
        ("transfer set", (f"`{transfer['set']}`: {transfer['examples']} examples ({transfer.get('generated', 0)} "
                          f"generated, {transfer.get('unlabelled', 0)} unlabelled), labelled by the teacher")),
        ("hyperparameters", ", ".join(f"{key} {hp[key]}" for key in HYPERPARAMETERS if key in hp)),
        ("precision", record["run"]["precision"]),
    ]
    return _table(("", ""), rows)


def selection(record: dict) -> str:
    chosen = record["selection"]
    metric = chosen["main_metric"]
    seed = record["run"]["seed"]
    if chosen["selection_seeds"]:
        lines = [(f"kdflow chose the grid point `{chosen['selected']}` among {len(chosen['points'])} "
                  f"({', '.join(f'`{p}`' for p in chosen['points'])}) on the mean dev {metric} of the selection "
                  f"seeds {chosen['selection_seeds']}; the other seeds of that point are held out, never counted in "
                  "the choice they would flatter.")]
    else:
        lines = [f"One grid point, `{chosen['selected']}`: nothing was chosen, and every seed is held out."]
    lines += [(f"This folder is the point's seed with the best dev score, seed {seed}, as kdflow's GLUE "
               "submissions take it."), ""]
    lines.append(_table(("seed", f"dev {metric}", "role"), [
        (seed, _score(score), "chose the point" if int(seed) in chosen["selection_seeds"] else "held out")
        for seed, score in chosen["dev_by_seed"].items()]))
    held = chosen["held_out"].get("dev", {}).get(metric)
    headline = chosen["headline"].get("dev", {}).get(metric)
    lines.append("")
    if held and held["n"] > 1:
        lines.append(f"Held-out seeds {chosen['held_out_seeds']}: dev {metric} {_score(held['mean'])} ± "
                     f"{_score(held['std'])} (mean ± sample std, n = {held['n']}).")
    elif held:
        lines.append(f"One held-out seed, {chosen['held_out_seeds'][0]}: dev {metric} {_score(held['mean'])}; one "
                     "seed has no spread to state.")
    else:
        lines.append("No held-out seed: the spread over seeds is not measured.")
    if chosen["selection_seeds"] and headline:
        lines[-1] += (f" The selection seeds' mean at the chosen point (the headline, comparable with a paper's best "
                      f"dev score): {_score(headline['mean'])}.")
    if chosen["diverged_seeds"]:
        lines.append(f"Seeds that diverged at this point: {chosen['diverged_seeds']}.")
    return "\n".join(lines)


def agreement(record: dict) -> str:
    checks = record["agreement"]
    mine, recorded = checks["kdflow_student"], checks["recorded_predictions"]
    required = "required to agree" if recorded["required"] else "stated, not required: its logits are lower-precision"
    return (f"Checked when exported, on all {mine['examples']} {checks['split']} examples, tokenised by this folder's "
            f"tokenizer with `truncation=True`:\n\n"
            f"- against kdflow's student reloaded from its run (float32, CPU): largest logit difference "
            f"{mine['max_abs_logit_difference']:.2e} (tolerance {mine['tolerance']:.0e}), "
            f"{mine['prediction_disagreements']} predictions differ;\n"
            f"- against the predictions the run recorded ({recorded['precision']}, {required}): largest logit "
            f"difference {recorded['max_abs_logit_difference']:.2e}, {recorded['prediction_disagreements']} "
            f"predictions differ.")


def deviations(record: dict) -> str:
    entries = record.get("deviations") or []
    if not entries:
        return ("None listed: the paper tables made from this experiment have no entry in the deviation ledger, "
                "or the config names no ledger.")
    return "\n".join([
        "The ledger's entries for this experiment's paper tables, in its words for config.yaml's full reproduction; "
        "the settings this run used are under Training, and each paper table's page checks the entries against "
        "them.", ""] + [f"- **{entry['kind']}** ({', '.join(entry['tables'])}): "
                        f"{statement(entry, label=lambda name: f'*{name}*', code=lambda name: f'`{name}`')}"
                        for entry in entries])


def provenance(record: dict) -> str:
    source = record["provenance"]
    commit = source.get("commit") or "unknown (not exported from a git checkout)"
    changes = {True: ", with uncommitted changes to tracked files", False: "", None: ""}[
        source.get("uncommitted_changes")]
    files = ", ".join(f"`{path}`" for path in source.get("config_files") or []) or "`config.yaml`"
    lines = [(f"- kdflow commit at export: `{commit}`{changes}. The workflow reruns a student whose code, "
              "settings or inputs changed (each job's params hold a fingerprint of the code it runs), so an export "
              "the workflow made is of a run current with the code it was exported with."),
             f"- config: {files}" + (f", with `--config` {_json(source['config_overrides'])}"
                                     if source.get("config_overrides") else ""),
             f"- run: `{record['run']['directory']}`"]
    if source.get("rebuild"):
        lines += ["", ("Rebuild it (the teacher, the transfer set, every run the selection compares, the selection, "
                       "then this folder):"), "", "```bash", source["rebuild"], "```"]
    return "\n".join(lines)


def _table(header: tuple, rows: list[tuple]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def model_card(record: dict) -> str:
    """The whole card."""
    front = yaml.safe_dump(metadata(record), sort_keys=False, allow_unicode=True)
    dev = record["run"]["scores"].get("dev", {})
    scores = ", ".join(f"{name} {_score(value)}" for name, value in dev.items())
    paper = (f" It was trained for {record['paper']}" + (
        f" at a demonstration's scale, and reproduces nothing of it. {record['scale_note']}"
        if record.get("scale_note") else "; its differences from the paper's protocol are listed below.")
             if record.get("paper") else "")
    kind = record["student_spec"]["type"]
    student = record["student"] if record["student"] == kind else f"{record['student']} ({kind})"
    title = f"{student} distilled with {record['method']} on {record['task']}"
    return "\n".join([
        "---", front.rstrip(), "---", "",
        f"# {title}", "",
        (f"A student of kdflow's experiment `{record['experiment']}`, distilled from the teacher "
         f"`{(record.get('teacher') or {}).get('name', 'unknown')}` on {record['task']} with the method "
         f"`{record['method']}`. Dev {scores}.{paper}"), "",
        "## Use", "", usage(record), "",
        "## Training", "", training(record), "",
        "## Selection and seeds", "", selection(record), "",
        "## Agreement with kdflow", "", agreement(record), "",
        "## Deviations from the paper", "", deviations(record), "",
        "## Provenance", "", provenance(record), "",
    ])
