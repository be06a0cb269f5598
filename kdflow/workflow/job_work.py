"""The work of each job of the cost plan (:mod:`kdflow.workflow.cost_plan`), counted from the job's wildcards and
params in what its model computes (:mod:`kdflow.workflow.model_sizes`) over its splits
(:mod:`kdflow.workflow.split_sizes`):

- ``train``: examples x epochs of training (forward and backward) in batches of the optimiser's batch size, one
  backward per micro-batch; each example is ``tokens`` token positions (the task's mean padded length,
  reference/task_sizes.csv, at most the job's ``max_seq_length``);
- ``infer``: examples through a forward pass: dev at every evaluation, the final predictions, teacher signals,
  probing encodings; in batches of ``eval_batch_size``;
- ``decode``: sampled tokens, one forward step per token for a whole batch of sequences (transfer-set shards);
- the SentEval probes (``probe``): examples x epochs of the probe grid, per layer of the model (its dev checks
  included in the measured rate).

Every job of the DAG is priced (:func:`planned_jobs`); a rule of :data:`WORK` counts its work, every other rule's job
(a table, a figure) is its start-up alone. Each job belongs to a section of the plan: its experiment, or its stage
(:data:`SECTIONS`).
"""

from __future__ import annotations

import math
from functools import partial

from kdflow.core.errors import UserError
from kdflow.workflow.gpu_packs import PACKED_RULE, sharing
from kdflow.workflow.job_settings import generator_settings, teacher_settings, transfer_of
from kdflow.workflow.model_sizes import language_model, model, named_model, student_model, teacher_model
from kdflow.workflow.split_sizes import probing_split_sizes, transfer_size
from kdflow.workflow.student_packs import pack_of

# The probe grid (kdflow.probing.probe.ProbeSettings' defaults; the config may override them) and its epochs: the
# batched grid trains until its last configuration stops, after at least 24 epochs (SentEval's early stopping:
# the 6th dev check every 4 epochs without a gain); on benchmarks/probing_throughput.py's synthetic task it stops
# after tens of epochs: 40 is assumed, or the cap.
PROBE_DEFAULTS = {"hidden_sizes": (50, 100, 200), "dropouts": (0.0, 0.1, 0.2), "l2_penalties": (1e-5, 1e-4, 1e-3, 1e-2),
                  "batch_size": 64, "epochs_per_check": 4, "max_epochs": 200,
                  "logistic_regression_tasks": ("WordContent",)}
PROBE_EPOCHS = 40
# SentEval's probing sentences are short (a few to about 30 words): assumed 24 token positions per sentence padded to
# its batch's longest, with [CLS] and [SEP].
SENTEVAL_TOKENS = 24.0
PROBE_CLASSES = {"Length": 6, "WordContent": 1000, "Depth": 8, "TopConstituents": 20}  # the others: 2
TABLES_AND_FIGURES = "paper tables and figures"  # also the section of a table's or figure's rule SECTIONS leaves out
# The sections of the plan that are not experiments, by rule: every rule of WORK (rules whose jobs run a model)
# must have one.
SECTIONS = {
    **dict.fromkeys(["prepare_task", "figure_class_distribution"], "data"),
    **dict.fromkeys(["finetune_teacher", "evaluate_teacher", "train_pseudo_heads", "evaluate_pseudo_heads",
                     "compute_teacher_signals", "teacher_table", "figure_teacher_curves", "figure_pseudo_heads"],
                    "teachers"),
    **dict.fromkeys(["finetune_generator", "evaluate_generator", "sample_transfer_shard", "build_transfer_set", "transfer_statistics"],
                    "transfer sets"),
    **dict.fromkeys(["download_probing_task", "encode_probing_tasks", "probe_model", "probing_table", "figure_probing",
                     "probing_thesis_table", "figure_probing_thesis"], "probing"),
    **dict.fromkeys(["analyse_predictions", "figure_analysis", "classify_sentences"], "prediction analysis"),
    **dict.fromkeys(["measure_inference", "paper_table", "runtime_table", "compute_attention_maps",
                     "figure_attention_maps", "compute_layer_outputs", "figure_layer_outputs", "claims_table",
                     "ledger_table", "status_page"],
                    TABLES_AND_FIGURES),
    **dict.fromkeys(["exploration_table", "figure_exploration_curves", "figure_gradient_explosion",
                     "figure_student_sizes"], "exploration figures"),
    **dict.fromkeys(["plan", "plan_measured", "plan_calibrated"], "plan"),
}
KINDS = ("train", "infer", "decode", "probe")


# Work of one training run: examples x epochs, batches, and the dev evaluations and final predictions it infers.


def training_work(hp: dict, stages: list[dict], examples: int, dev: int, once: int) -> dict:
    """``hp``: the run's hyperparameters; ``stages``: its ``[{epochs}]``; ``examples``: its training set; ``dev``:
    the examples of an evaluation; ``once``: the examples predicted once (the final predictions of every split)."""
    examples = min(examples, hp.get("max_train_examples") or examples)
    steps_per_epoch = math.ceil(examples / hp["batch_size"])
    micro_batches = steps_per_epoch * max(1, hp.get("gradient_accumulation_steps") or 1)
    epochs = sum(stage["epochs"] for stage in stages)
    evaluations = epochs
    if hp.get("evaluate_every_steps"):
        evaluations += sum(stage["epochs"] * steps_per_epoch // hp["evaluate_every_steps"] for stage in stages)
    infer = evaluations * dev + once
    eval_batches = evaluations * math.ceil(dev / hp["eval_batch_size"]) + math.ceil(once / hp["eval_batch_size"])
    return {"train_examples": examples * epochs, "train_batches": micro_batches * epochs,
            "infer_examples": infer, "infer_batches": eval_batches}


def inference_work(examples: int, batch_size: int) -> dict:
    return {"infer_examples": examples, "infer_batches": math.ceil(examples / batch_size)}


def job(rule: str, section: str | None = None, task: str = "", model_: dict | None = None, tokens: float = 0.0,
        accelerator: bool = False, gpu_share: float = 1.0, **work) -> dict:
    """One job of the plan: its rule, section (an experiment, or the stage of :data:`SECTIONS`), task, model,
    tokens per example, whether it asks for a GPU (``accelerator``), the share of the GPU it takes there (1/K for
    a family of the config's ``gpu_sharing``) and its work per kind."""
    work = {f"{kind}_{unit}": work.get(f"{kind}_{unit}", 0) for kind in KINDS for unit in ("examples", "batches")}
    return {"rule": rule, "section": section or SECTIONS[rule], "task": task, **(model_ or model("none", 0, 0, 0)),
            "tokens": tokens, "accelerator": accelerator, "gpu_share": gpu_share, **work}


def tokens_of(size: dict, hp: dict) -> float:
    return min(size["tokens"], hp.get("max_seq_length") or size["tokens"])


def planned_jobs(dag: list[dict], config: dict, sizes: dict, catalog: dict, probing_files: dict[str, str],
                 sharing_speedups: dict[tuple[str, int], float] | None = None) -> list[dict]:
    """Every job of the DAG that runs code, with its work and its benchmark file. ``dag``: the jobs Snakemake lists
    (:func:`kdflow.workflow.dag_jobs.workflow_jobs`; the target rule ``all``, which runs nothing, has no benchmark and
    is left out); ``sizes``: :func:`kdflow.workflow.split_sizes.task_sizes`; ``catalog``: the registered students
    (:func:`kdflow.workflow.catalog_cache.load_catalog`); ``probing_files``: the SentEval file of each probing task (counted
    where it exists); ``sharing_speedups``: per (student type, K), the measured speedup of K jobs sharing a GPU over
    one alone (:func:`kdflow.workflow.cost_plan.read_sharing`; a shared job is charged one over it, else 1/K). A
    job's work is read from its params (settings, sampling, probe grid) where it has them, else from
    the config by its wildcards."""
    # The files behind split sizes are counted once, not per job: every probe and encoding job reads the probing
    # tasks', every student and teacher-signal job its transfer set's.
    transfers = {(transfer_of(spec), task) for spec in config.get("experiments", {}).values() for task in spec["tasks"]}
    context = {"config": config, "sizes": sizes, "catalog": catalog,
               "gpu_share": {name: 1 / (sharing_speedups or {}).get((config["students"][name]["type"], k), k)
                             for name, k in sharing(config).items()},
               "teachers": {name: teacher_model(config, name) for name in config["teachers"]},
               "probing_splits": {task: probing_split_sizes(probing_files[task])
                                  for task in config.get("probing", {}).get("tasks", [])},
               "transfer_sizes": {pair: transfer_size(config, sizes, *pair) for pair in transfers}}
    return [{**planned_job(dag_job, context), "benchmark": dag_job["benchmark"]} for dag_job in dag
            if dag_job["benchmark"]]


def planned_job(dag_job: dict, context: dict) -> dict:
    rule, wildcards = dag_job["rule"], dag_job["wildcards"]
    section = wildcards.get("experiment") or SECTIONS.get(rule)
    work = WORK.get(rule)
    if rule == "distill_student" and pack_of(context["config"], **{k: wildcards[k] for k in STUDENT_WILDCARDS}):
        return job(rule, section=section, task=wildcards["task"])  # it links its files from its pack's: start-up
    if work is None:  # a table or a figure: its start-up alone, in the papers' section unless SECTIONS says
        return job(rule, section=section or TABLES_AND_FIGURES, task=wildcards.get("task", ""))
    if section is None:
        raise UserError(f"rule {rule} has no section in the cost plan: add it to SECTIONS in {__name__}")
    share = context["gpu_share"].get(wildcards["student"], 1.0) if rule == PACKED_RULE else 1.0
    return job(rule, section=section, accelerator=dag_job["resources"].get("gpu", 0) > 0, gpu_share=share,
               **work(wildcards, dag_job["params"], context))


def teacher_work(wildcards: dict, context: dict) -> tuple[dict, dict, dict]:
    """The teacher's hyperparameters on the job's task, the task's sizes and the teacher's model."""
    teacher, task = wildcards["teacher"], wildcards["task"]
    hp = teacher_settings(context["config"], teacher, task)["hyperparameters"]
    return hp, context["sizes"][task], context["teachers"][teacher]


def finetune_teacher_work(wildcards: dict, params: dict, context: dict) -> dict:
    hp, size, model_ = teacher_work(wildcards, context)
    return {"task": wildcards["task"], "model_": model_, "tokens": tokens_of(size, hp),
            **training_work(hp, [{"epochs": hp["epochs"]}], size["train"], size["dev"], 0)}


def evaluate_teacher_work(wildcards: dict, params: dict, context: dict) -> dict:
    hp, size, model_ = teacher_work(wildcards, context)
    return {"task": wildcards["task"], "model_": model_, "tokens": tokens_of(size, hp),
            **inference_work(size["dev"] + size["other"], hp["eval_batch_size"])}


def pseudo_heads_work(wildcards: dict, params: dict, context: dict, training: bool) -> dict:
    """Frozen features of train and dev (training the heads) or of dev (evaluating them)."""
    hp, size, model_ = teacher_work(wildcards, context)
    config = context["config"]
    heads = config["pseudo_heads"] | config["teachers"][wildcards["teacher"]].get("pseudo_heads", {})
    examples = size["dev"] + (size["train"] if training else 0)
    return {"task": wildcards["task"], "model_": model_, "tokens": tokens_of(size, hp),
            **inference_work(examples, heads["eval_batch_size"])}


def teacher_signals_work(wildcards: dict, params: dict, context: dict) -> dict:
    hp, size, model_ = teacher_work(wildcards, context)
    examples = context["transfer_sizes"][wildcards["transfer"], wildcards["task"]]
    return {"task": wildcards["task"], "model_": model_, "tokens": tokens_of(size, hp),
            **inference_work(examples, hp["eval_batch_size"])}


def generator_work(wildcards: dict, params: dict, context: dict, training: bool) -> dict:
    """Fine-tuning (dev perplexity at each evaluation, and once before) or evaluating the task's generator."""
    settings = generator_settings(context["config"])
    hp, size = settings["hyperparameters"], context["sizes"][wildcards["task"]]
    work = (training_work(hp, [{"epochs": hp["epochs"]}], size["train"], size["dev"], size["dev"])
            if training else inference_work(size["dev"], hp["eval_batch_size"]))
    return {"task": wildcards["task"], "model_": language_model(settings["spec"]), "tokens": tokens_of(size, hp),
            **work}


def sampling_work(wildcards: dict, params: dict, context: dict) -> dict:
    """One shard's sampled tokens, one forward step per token for a batch of sequences."""
    sampling, size = params["sampling"], context["sizes"][wildcards["task"]]
    sentences = len(range(int(wildcards["shard"]), sampling["sentences"], sampling["shards"]))
    tokens = round(sentences * min(size["tokens"], sampling["max_length"]))
    return {"task": wildcards["task"], "model_": language_model(generator_settings(context["config"])["spec"]),
            "tokens": 1.0, "decode_examples": tokens, "decode_batches": math.ceil(tokens / sampling["batch_size"])}


def student_work(wildcards: dict, params: dict, context: dict, training: bool) -> dict:
    """A student's training run, or the teacher-assistant signals it computes for a TAKD student (inference over
    its transfer set)."""
    settings, task = params["settings"], wildcards["task"]
    hp, size = settings["hyperparameters"], context["sizes"][task]
    student = student_model(settings["student"], context["teachers"][settings["teacher"]], context["catalog"])
    examples = context["transfer_sizes"][settings["transfer"], task]
    return {"task": task, "model_": student, "tokens": tokens_of(size, hp),
            **(training_work(hp, settings["stages"], examples, size["dev"], size["dev"] + size["other"]) if training
               else inference_work(examples, hp["eval_batch_size"]))}


STUDENT_WILDCARDS = ("experiment", "task", "student", "method", "point", "seed")


def pack_work(wildcards: dict, params: dict, context: dict) -> dict:
    """A pack of students (kdflow.workflow.student_packs): its members' examples added up (the arithmetic of K
    students), its batches one member's (a step of the pack launches one member's operators for all K: the host
    floor the plan charges per batch is paid once, benchmarks/pack_ops.py)."""
    members = [student_work(wildcards, {"settings": member["settings"]}, context, training=True)
               for member in params["members"]]
    added = {name: sum(member[name] for member in members) for name in members[0] if name.endswith("_examples")}
    return {**members[0], **added}


# Probing, analysis, paper tables, figures, the exploration's figures.


def probe_parameters(width: int, classes: int, probe: dict, logistic: bool) -> float:
    """Weights of the whole probe grid on ``width``-wide encodings (trained as one batched model)."""
    if logistic:
        return len(probe["l2_penalties"]) * width * classes
    configs = len(probe["dropouts"]) * len(probe["l2_penalties"])
    return configs * sum(hidden * (width + classes) for hidden in probe["hidden_sizes"])


def encoding_work(wildcards: dict, params: dict, context: dict) -> dict:
    """One model's encodings of every probing task's sentences."""
    found, _ = named_model(context["config"], wildcards["model"], context["catalog"], context["teachers"])
    settings = params["settings"]
    sentences = sum(sum(counts.values()) for counts in context["probing_splits"].values())
    return {"model_": found, "tokens": min(SENTEVAL_TOKENS, settings["max_seq_length"]),
            **inference_work(sentences, settings["encode_batch_size"])}


def probe_work(wildcards: dict, params: dict, context: dict) -> dict:
    """The probe grid, trained as one batched model on each layer's encodings of one probing task."""
    task, probe = wildcards["probing_task"], {**PROBE_DEFAULTS, **params["probe"]}
    found, layers = named_model(context["config"], wildcards["model"], context["catalog"], context["teachers"])
    epochs = min(probe["max_epochs"] + probe["epochs_per_check"], PROBE_EPOCHS)
    train = context["probing_splits"][task]["tr"]
    logistic = task in probe["logistic_regression_tasks"]
    grid = model("probe", 1, found["width"], probe_parameters(found["width"], PROBE_CLASSES.get(task, 2), probe, logistic))
    return {"model_": grid, "tokens": 1.0, "probe_examples": layers * train * epochs,
            "probe_batches": layers * math.ceil(train / probe["batch_size"]) * epochs}


def inference_speed_work(wildcards: dict, params: dict, context: dict) -> dict:
    """Timing a named model's inference over its task's dev split twice: in PyTorch and, exported, in ONNX Runtime
    (priced as a second PyTorch pass; the export itself is not priced)."""
    config, name = context["config"], wildcards["model"]
    task = config["models"][name]["task"]
    found, _ = named_model(config, name, context["catalog"], context["teachers"])
    return {"task": task, "model_": found, "tokens": min(context["sizes"][task]["tokens"], 128),
            **inference_work(2 * context["sizes"][task]["dev"], params["batch_size"])}


# The rules whose jobs run a model, and how to count their work; every other rule's job is its start-up alone.
WORK = {
    "finetune_teacher": finetune_teacher_work,
    "evaluate_teacher": evaluate_teacher_work,
    "train_pseudo_heads": partial(pseudo_heads_work, training=True),
    "evaluate_pseudo_heads": partial(pseudo_heads_work, training=False),
    "compute_teacher_signals": teacher_signals_work,
    "finetune_generator": partial(generator_work, training=True),
    "evaluate_generator": partial(generator_work, training=False),
    "sample_transfer_shard": sampling_work,
    "distill_student": partial(student_work, training=True),
    "distill_pack": pack_work,
    "compute_assistant_signals": partial(student_work, training=False),
    "encode_probing_tasks": encoding_work,
    "probe_model": probe_work,
    "measure_inference": inference_speed_work,
}
