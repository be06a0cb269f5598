"""The cost plan of a config, before anything runs (issue 16): every job of the DAG, the work it does, and the
seconds that work takes on a named GPU (or on the CPU), from a table of measured and scaled throughputs.

Jobs come from Snakemake's own DAG (:mod:`kdflow.workflow.dag_jobs`), with their wildcards, params and resources:
the plan lists no job itself. The work of a job is counted in what its model computes:

- ``train``: examples x epochs of training (forward and backward) in batches of the optimiser's batch size, one
  backward per micro-batch; each example is ``tokens`` token positions (the task's mean padded length,
  reference/task_sizes.csv, at most the job's ``max_seq_length``);
- ``infer``: examples through a forward pass: dev at every evaluation, the final predictions, teacher signals,
  probing encodings; in batches of ``eval_batch_size``;
- ``decode``: sampled tokens, one forward step per token for a whole batch of sequences (transfer-set shards);
- the SentEval probes (``probe``): examples x epochs of the probe grid, per layer of the model (its dev checks
  included in the measured rate).

Split sizes come from the raw files where the config points at local ones that exist (the demo's), else from
reference/task_sizes.csv (GLUE's sizes, and the Sara split; the full config downloads GLUE only when it runs).

Seconds (:func:`estimate`): a job's start-up (importing its script's modules and, for a job that runs a model,
loading one; measured per rule: reference/startup.csv) plus, per kind of work, its batches times a per-batch floor (the Python and dispatch work of
a step, which grows with the model's layers and is all a tiny model costs) and its FLOPs (6 x parameters x tokens
to train, 2 x to infer: Kaplan et al. 2020's estimate; attention's quadratic term left out) at the achieved FLOP/s
of its model family, added up. Both come from reference/throughput.csv (benchmarks/plan_throughput.py): measured on
a CPU, and scaled to GPUs, where the floor is an assumed host time per layer (eager PyTorch dispatches every kernel
from Python) and the FLOP/s an assumed fraction of the GPU's peak. On a GPU the host could run ahead of the device,
but kdflow's training loop reads the loss and the gradient norm at every step, which waits for the GPU: adding the
two is the cautious bound (at most twice the larger).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.core.errors import UserError
from kdflow.core.model_references import embeddings_source, reference_kind
from kdflow.core.tasks import TASKS
from kdflow.workflow.config import (
    TRANSFER_SOURCES,
    embedding_settings,
    generator_settings,
    grid_points,
    raw_task_files,
    student_settings,
    task_source_dir,
    teacher_jobs,
    teacher_settings,
    transfer_of,
    transfer_sets,
    unlabelled_files,
)
from kdflow.workflow.exploration import exploration_experiments
from kdflow.workflow.gpu_packs import PACKED_RULE, sharing

TASK_SIZES = "reference/task_sizes.csv"
THROUGHPUT = "reference/throughput.csv"
STARTUP = "reference/startup.csv"

# Hub checkpoints the configs name: (layers, hidden size, intermediate size) of their transformer blocks.
HUB_ARCHITECTURES = {
    "bert-base-uncased": (12, 768, 3072), "bert-base-cased": (12, 768, 3072),
    "bert-large-uncased": (24, 1024, 4096), "bert-large-cased": (24, 1024, 4096),
    "roberta-base": (12, 768, 3072), "roberta-large": (24, 1024, 4096), "distilroberta-base": (6, 768, 3072),
    "distilbert-base-uncased": (6, 768, 3072), "gpt2": (12, 768, 3072), "gpt2-medium": (24, 1024, 4096),
    "gpt2-large": (36, 1280, 5120),
}
GPT2_VOCABULARY = 50257
WORD2VEC_WIDTH = 300  # a word-vector file's width when it cannot be read before the run (GoogleNews: 300)
# The probe grid (kdflow.probing.probe.ProbeSettings' defaults; the config may override them) and its epochs: the
# batched grid trains until its last configuration stops, after at least 24 epochs (SentEval's early stopping:
# the 6th dev check every 4 epochs without a gain); on benchmarks/probing_throughput.py's synthetic task it stops
# after tens of epochs: 40 is assumed, or the cap.
PROBE_DEFAULTS = {"hidden_sizes": (50, 100, 200), "dropouts": (0.0, 0.1, 0.2), "l2_penalties": (1e-5, 1e-4, 1e-3, 1e-2),
                  "batch_size": 64, "epochs_per_check": 4, "max_epochs": 200,
                  "logistic_regression_tasks": ("WordContent",)}
PROBE_EPOCHS = 40
SENTEVAL_SENTENCES = {"train": 100_000, "dev": 10_000, "test": 10_000}  # every SentEval probing task (Conneau 2018)
# SentEval's probing sentences are short (a few to about 30 words): assumed 24 token positions per sentence padded to
# its batch's longest, with [CLS] and [SEP].
SENTEVAL_TOKENS = 24.0
PROBE_CLASSES = {"Length": 6, "WordContent": 1000, "Depth": 8, "TopConstituents": 20}  # the others: 2
# The sections of the plan that are not experiments, by rule.
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
    **dict.fromkeys(["measure_inference", "paper_table", "runtime_table", "attention_maps", "layer_outputs",
                     "claims_table", "ledger_table", "status_page"], "paper tables and figures"),
    **dict.fromkeys(["exploration_table", "figure_exploration_curves", "figure_gradient_explosion",
                     "figure_student_sizes"], "exploration figures"),
    **dict.fromkeys(["plan", "plan_measured", "plan_calibrated"], "plan"),
}
KINDS = ("train", "infer", "decode", "probe")
START_UP_ONLY = "start-up only"  # the source of a job that runs no model
GPU_START_SECONDS = 3.0  # assumed: creating a job's CUDA context and moving its model to the GPU
FLOPS_PER_PARAMETER = {"train": 6, "infer": 2, "decode": 2, "probe": 6}


def config_digest(config: dict) -> str:
    """A fingerprint of the whole config, whatever its key order: the plan rule's param, so that any edit of the
    config reruns the plan (and the dry run names the change without printing the config)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


# Models: a family (whose throughput applies), layers (the per-batch floor grows with them), width (what a probe
# reads) and parameters without embeddings (what FLOPs count).


def model(family: str, layers: int, width: int, parameters: float) -> dict:
    return {"family": family, "layers": layers, "width": width, "parameters": float(parameters)}


def transformer(layers: int, hidden: int, intermediate: int, inputs: int = 0) -> dict:
    """A BERT-style encoder (or GPT-2's blocks): attention (4 d^2) and feed-forward (2 d I) per layer, and a
    projection of ``inputs``-wide vectors to the hidden size where they differ."""
    projection = inputs * hidden if inputs and inputs != hidden else 0
    return model("transformer", layers, hidden, layers * (4 * hidden**2 + 2 * hidden * intermediate) + projection)


def architecture_model(spec: dict) -> dict:
    """The transformer a teacher, generator or ``hf`` student spec builds: a hub name or an ``architecture``."""
    if spec.get("model"):
        name = str(spec["model"])
        if name not in HUB_ARCHITECTURES:
            raise UserError(f"the plan does not know the size of {name!r}: add it to HUB_ARCHITECTURES "
                             "(kdflow/workflow/cost_plan.py)")
        return transformer(*HUB_ARCHITECTURES[name])
    arch = spec["architecture"]
    hidden = arch.get("hidden_size", arch.get("n_embd", 768))
    layers = arch.get("num_hidden_layers", arch.get("n_layer", 12))
    return transformer(layers, hidden, arch.get("intermediate_size", arch.get("n_inner") or 4 * hidden))


def language_model(spec: dict) -> dict:
    """A causal LM (the generator): its blocks and its output layer over the vocabulary, which every token
    computes (GPT-2's own tokenizer: 50,257 tokens; a tokenizer file's: its lines)."""
    blocks = architecture_model(spec)
    vocabulary = GPT2_VOCABULARY
    if spec.get("tokenizer") and Path(spec["tokenizer"]).is_file():
        vocabulary = sum(1 for _ in open(spec["tokenizer"], encoding="utf-8"))
    return model("gpt2", blocks["layers"], blocks["width"], blocks["parameters"] + vocabulary * blocks["width"])


def lstm_parameters(inputs: int, per_direction: int, layers: int) -> float:
    """A stack of bidirectional LSTM layers: 4 gates x (input + recurrent) weights, two directions."""
    widths = [inputs] + [2 * per_direction] * (layers - 1)
    return sum(2 * 4 * per_direction * (width + per_direction) for width in widths)


def embedding_width(spec: dict | None, teacher: dict, default: dict) -> int:
    """The width of a student's input vectors: the teacher's, a word-vector file's, or random ``dim``-wide ones;
    twice that for ``multichannel``. ``default`` is the student type's (source, mode, dim)."""
    options = {**default, **(spec or {})}
    width = {"teacher": teacher["width"], "file": WORD2VEC_WIDTH}.get(options["source"]) or options.get("dim") or 0
    return width * (2 if options.get("mode") == "multichannel" else 1)


def student_model(student: dict, teacher: dict, catalog: dict) -> dict:
    """The model a student spec (with the catalog's defaults) builds over ``teacher`` (its model)."""
    options = {**catalog["students"][student["type"]]["defaults"], **student}
    kind = student["type"]
    if kind == "bert_k":
        per_layer = teacher["parameters"] / teacher["layers"]
        return model("transformer", options["layers"], teacher["width"], per_layer * options["layers"])
    if kind == "hf":
        return architecture_model(options)
    if kind == "bert_s":
        inputs = embedding_width(options["embeddings"], teacher, {"source": "teacher", "mode": "non_static",
                                                                  "dim": options["hidden_size"]})
        return transformer(options["num_hidden_layers"], options["hidden_size"], options["intermediate_size"], inputs)
    if kind == "bilstm":
        width = options["hidden_size"]
        inputs = embedding_width(options["embeddings"], teacher, {"source": "random", "dim": 512})
        return model("lstm", options["layers"], width, lstm_parameters(inputs, width // 2, options["layers"]))
    if kind == "bilstm_s":
        size = options["lstm_size"]
        inputs = embedding_width(options["embeddings"], teacher, {"source": "teacher", "mode": "multichannel"})
        return model("lstm", options["layers"], 2 * size,
                     lstm_parameters(inputs, size, options["layers"]) + 2 * size * options["fc_size"])
    if kind == "gated_cnn":
        width = options["hidden_size"]
        inputs = embedding_width(options["embeddings"], teacher, {"source": "random", "dim": 300})
        projection = inputs * width if inputs != width else 0
        return model("cnn", options["layers"], width,
                     options["layers"] * options["kernel_width"] * width * 2 * width + projection)
    raise UserError(f"the plan does not know the size of student type {kind!r}: add it to student_model "
                    "(kdflow/workflow/cost_plan.py)")


def teacher_model(config: dict, teacher: str) -> dict:
    return architecture_model(config["teachers"][teacher])


# Sizes: split sizes and tokens per example, per task.


def task_sizes(config: dict, table: pd.DataFrame) -> dict[str, dict]:
    """Per task: ``train``, ``dev``, ``other`` (the splits predicted once at the end), ``tokens`` per example and
    ``sizes`` (where the sizes come from): counted in the task's raw files where the config points at a local copy
    that exists, else reference/task_sizes.csv."""
    sizes = {}
    rows = table.set_index("task")
    for name, task in TASKS.items():
        row = rows.loc[name]
        entry = {"train": int(row.train), "dev": int(row.dev), "other": int(row.other),
                 "tokens": float(row.tokens_per_example), "sizes": TASK_SIZES}
        source = task_source_dir(config, name)
        directory = None if source is None else Path(source)
        if directory is not None and all((directory / layout.filename).is_file() for layout in task.tsv.values()):
            counts = count_rows(name, directory)
            entry.update(train=counts["train"], dev=counts["dev"],
                         other=sum(n for split, n in counts.items() if split not in ("train", "dev")),
                         sizes=f"counted in {directory}")
        sizes[name] = entry
    return sizes


def counted_files(config: dict, probing_files: list[str]) -> list[str]:
    """The local files whose rows the plan counts: the raw task files, the ``probing_files`` and the unlabelled
    text that exist (editing them changes the plan)."""
    tasks = dict.fromkeys(task for _, task in teacher_jobs(config))
    files = [path for task in tasks for path in raw_task_files(config, task)]
    files += [path for path in probing_files if os.path.isfile(path)]
    for transfer, task in transfer_sets(config):
        if "unlabelled" in TRANSFER_SOURCES[transfer]:
            files += unlabelled_files(config, task)
    return sorted(set(files))


def count_rows(task: str, directory: Path) -> dict[str, int]:
    """Examples per split of a task's raw files: their non-blank lines, less the header, read as ingestion reads
    them (tab-separated, quoting disabled; kdflow.core.data, which checks each row when the task is prepared)."""
    counts = {}
    for split, layout in TASKS[task].tsv.items():
        with open(directory / layout.filename, encoding="utf-8-sig", newline="") as lines:
            rows = [row for row in csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE) if row and row != [""]]
        counts[split] = len(rows) - layout.header
    return counts


def transfer_size(config: dict, sizes: dict, transfer: str, task: str) -> int:
    """Examples of a transfer set before its hygiene: train, the sampled sentences, the unlabelled lines."""
    examples = sizes[task]["train"]
    if "generated" in TRANSFER_SOURCES[transfer]:
        examples += config["generation"]["sampling"]["sentences"]
    if "unlabelled" in TRANSFER_SOURCES[transfer]:
        examples += sum(sum(1 for line in open(path, encoding="utf-8") if line.strip())
                        for path in unlabelled_files(config, task))
    return examples


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


def planned_jobs(dag: list[dict], config: dict, sizes: dict, catalog: dict, probing_files: dict[str, str]) -> list[dict]:
    """Every job of the DAG that runs code, with its work and its benchmark file. ``dag``: the jobs Snakemake lists
    (:func:`kdflow.workflow.dag_jobs.workflow_jobs`; the target rule ``all``, which runs nothing, has no benchmark
    and is left out); ``sizes``: :func:`task_sizes`; ``catalog``: the registered students
    (:func:`kdflow.workflow.catalog.load_catalog`); ``probing_files``: the SentEval file of each probing task (counted
    where it exists). A job's work is read from its params (settings, sampling, probe grid) where it has them, else
    from the config by its wildcards."""
    # The files behind split sizes are counted once, not per job: every probe and encoding job reads the probing
    # tasks', every student and teacher-signal job its transfer set's.
    transfers = {(transfer_of(spec), task) for spec in config.get("experiments", {}).values() for task in spec["tasks"]}
    context = {"config": config, "sizes": sizes, "catalog": catalog, "sharing": sharing(config),
               "teachers": {name: teacher_model(config, name) for name in config["teachers"]},
               "probing_splits": {task: probing_split_sizes(probing_files[task])
                                  for task in config.get("probing", {}).get("tasks", [])},
               "transfer_sizes": {pair: transfer_size(config, sizes, *pair) for pair in transfers}}
    return [{**planned_job(dag_job, context), "benchmark": dag_job["benchmark"]} for dag_job in dag
            if dag_job["benchmark"]]


def planned_job(dag_job: dict, context: dict) -> dict:
    rule, wildcards = dag_job["rule"], dag_job["wildcards"]
    section = wildcards.get("experiment") or SECTIONS.get(rule)
    if section is None:
        raise UserError(f"rule {rule} has no section in the cost plan: add it to SECTIONS in {__name__}")
    work = WORK.get(rule)
    if work is None:  # a table or a figure: its start-up alone
        return job(rule, section=section, task=wildcards.get("task", ""))
    shared = context["sharing"].get(wildcards["student"], 1) if rule == PACKED_RULE else 1
    return job(rule, section=section, accelerator=dag_job["resources"].get("gpu", 0) > 0, gpu_share=1 / shared,
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


# Probing, analysis, paper tables, figures, the exploration's figures.


def named_model(config: dict, name: str, catalog: dict, teachers: dict) -> tuple[dict, int]:
    """The model a named model (config ``models``) runs and the layers probing reads from it (embeddings included):
    an ``embeddings`` model computes only a mean of its input vectors, one layer."""
    reference = config["models"][name]
    kind = reference_kind(reference)
    if kind == "embeddings":
        source = reference["embeddings"]
        if embeddings_source(reference) == "student":
            settings = embedding_settings(config, reference)
            student = {**catalog["students"][settings["student"]["type"]]["defaults"], **settings["student"]}
            default = {"source": "teacher", "mode": "multichannel" if student["type"] == "bilstm_s" else "non_static",
                       "dim": student.get("hidden_size")}
            width = embedding_width(student.get("embeddings"), teachers[settings["teacher"]], default)
        else:
            width = teachers[source.get("pretrained") or source["teacher"]]["width"]
        return model("none", 0, width, 0), 1
    if kind in ("pretrained", "teacher"):
        found = teachers[reference.get("pretrained") or reference["teacher"]]
    else:
        experiment = config["experiments"][reference["experiment"]]
        settings = student_settings(config, reference["experiment"], reference["task"], reference["student"],
                                    reference["method"], next(iter(grid_points(experiment, reference["method"]))),
                                    experiment["seeds"][0])
        found = student_model(settings["student"], teachers[experiment["teacher"]], catalog)
    return found, found["layers"] + 1




def probing_split_sizes(path: str) -> dict[str, int]:
    """Sentences per split (``tr``, ``va``, ``te``) of a SentEval probing file: counted where the file exists,
    else SentEval's sizes."""
    if not Path(path).is_file():
        return dict(zip(("tr", "va", "te"), SENTEVAL_SENTENCES.values()))
    counts = dict.fromkeys(("tr", "va", "te"), 0)
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            split = line.split("\t", 1)[0]
            if split in counts:
                counts[split] += 1
    return counts


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
    """Timing a named model's inference over its task's dev split."""
    config, name = context["config"], wildcards["model"]
    task = config["models"][name]["task"]
    found, _ = named_model(config, name, context["catalog"], context["teachers"])
    return {"task": task, "model_": found, "tokens": min(context["sizes"][task]["tokens"], 128),
            **inference_work(context["sizes"][task]["dev"], params["batch_size"])}


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
    "compute_assistant_signals": partial(student_work, training=False),
    "encode_probing_tasks": encoding_work,
    "probe_model": probe_work,
    "measure_inference": inference_speed_work,
}


# Seconds, and the plan per section and rule.


def read_throughput(path=THROUGHPUT) -> pd.DataFrame:
    """reference/throughput.csv: per model family, kind of work, device and precision, the per-batch floor per
    layer (seconds) and the achieved FLOP/s, and where they come from (``source``: measured or scaled)."""
    return pd.read_csv(path).set_index(["family", "kind", "device", "precision"]).sort_index()


def read_startup(path=STARTUP) -> dict[str, float]:
    """reference/startup.csv: per rule, the seconds its script takes to start (interpreter, imports)."""
    table = pd.read_csv(path)
    return dict(zip(table.rule, table.seconds))


def accelerator_of(config: dict, gpu: str) -> tuple[str, str]:
    """(device, precision) of the jobs that ask for a GPU, as the config's ``device`` and ``precision`` resolve
    (kdflow.core.precision): on ``gpu`` unless the config runs on the CPU; ``auto`` is bf16 on a GPU (every GPU of
    reference/throughput.csv has it) and fp32 on a CPU; fp16 runs at bf16's rate; on a CPU only fp32 is measured."""
    if config["device"] == "cpu":
        return "cpu", "fp32"
    return gpu, "fp32" if config["precision"] == "fp32" else "bf16"


def cost_plan(dag: list[dict], config: dict, task_table: pd.DataFrame, throughput: pd.DataFrame,
              startup: dict[str, float], catalog: dict, probing_files: dict[str, str], gpu: str) -> pd.DataFrame:
    """Every job of the DAG with its work and estimated seconds (:func:`planned_jobs`, :func:`estimate`)."""
    jobs = pd.DataFrame(planned_jobs(dag, config, task_sizes(config, task_table), catalog, probing_files))
    return estimate(jobs, throughput, startup, accelerator_of(config, gpu))


def estimate(jobs: pd.DataFrame, throughput: pd.DataFrame, startup: dict[str, float],
             accelerator: tuple[str, str]) -> pd.DataFrame:
    """``jobs`` (:func:`planned_jobs`, as a frame) with the ``device``, ``precision``, ``seconds`` and ``source``
    of each: start-up, then per kind of work its batches' floor plus its FLOPs at the family's rate; the three
    parts are also given apart (``startup_seconds``, ``floor_seconds``, ``compute_seconds``: what
    :mod:`kdflow.workflow.calibration` refits from the jobs that ran), and ``charged_seconds``, the seconds of
    device time it is charged (:func:`charged_share`).
    ``accelerator``: (device, precision) of the jobs that ask for a GPU; the others run on the CPU in fp32. A GPU
    job also starts CUDA (:data:`GPU_START_SECONDS`)."""
    rows = []
    for job in jobs.itertuples(index=False):
        device, precision = accelerator if job.accelerator else ("cpu", "fp32")
        start = startup[job.rule] + (GPU_START_SECONDS if device != "cpu" else 0.0)
        floor = compute = 0.0
        sources = set()
        for kind in KINDS:
            examples, batches = getattr(job, f"{kind}_examples"), getattr(job, f"{kind}_batches")
            if not examples or job.family == "none":
                continue
            rate = throughput.loc[(job.family, kind, device, precision)]
            floor += batches * rate.floor_seconds_per_layer * max(job.layers, 1)
            compute += FLOPS_PER_PARAMETER[kind] * job.parameters * job.tokens * examples / rate.flops_per_second
            sources.add(rate.source)
        rows.append({"device": device, "precision": precision, "seconds": start + floor + compute,
                     "startup_seconds": start, "floor_seconds": floor, "compute_seconds": compute,
                     "source": "; ".join(sorted(sources)) or START_UP_ONLY})
    estimated = pd.concat([jobs.reset_index(drop=True), pd.DataFrame(rows)], axis=1)
    return estimated.assign(charged_seconds=estimated.seconds * charged_share(estimated))


def charged_share(jobs: pd.DataFrame) -> np.ndarray:
    """The share of its seconds each job of the plan is charged: its ``gpu_share`` on a GPU (1/K for a family of the
    config's ``gpu_sharing``: K small students at once on one GPU, assumed not to slow each other down), all of
    them on the CPU."""
    return np.where(jobs.device != "cpu", jobs.gpu_share, 1.0)


def plan_table(estimated: pd.DataFrame, section_order: list[str]) -> pd.DataFrame:
    """One row per section and rule: jobs, examples x epochs trained, examples inferred, tokens sampled, device,
    precision, hours (GPU-hours on a GPU, a shared GPU's by share) and the throughput sources; sections in
    ``section_order``."""
    table = estimated.groupby(["section", "rule", "device", "precision"], sort=False).agg(
        jobs=("rule", "size"), examples_x_epochs=("train_examples", "sum"), inferred=("infer_examples", "sum"),
        sampled_tokens=("decode_examples", "sum"), probe_examples_x_epochs=("probe_examples", "sum"),
        hours=("charged_seconds", lambda seconds: seconds.sum() / 3600),
        source=("source", lambda sources: "; ".join(sorted(set("; ".join(sources).split("; "))))),
    ).reset_index()
    order = {name: i for i, name in enumerate(section_order)}
    table = table.sort_values("section", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
    return table[["section", "rule", "jobs", "examples_x_epochs", "inferred", "sampled_tokens",
                  "probe_examples_x_epochs", "device", "precision", "hours", "source"]]


def section_order(config: dict) -> list[str]:
    stages = list(dict.fromkeys(SECTIONS.values()))
    before = stages[: stages.index("transfer sets") + 1]
    return [*before, *config.get("experiments", {}), *[s for s in stages if s not in before]]


def paper_table_experiments(config: dict) -> dict[str, list[str]]:
    """Each paper table (config ``paper_tables``) and the thesis's exploration: the experiments it is made of."""
    groups = {name: spec.get("experiments", []) for name, spec in config.get("paper_tables", {}).get("tables", {}).items()}
    exploration = list(exploration_experiments(config))
    if exploration:
        groups["thesis_exploration (Chapter 5, Appendix B)"] = exploration
    return groups


def paper_table_hours(table: pd.DataFrame, config: dict) -> pd.DataFrame:
    """Per paper table (config ``paper_tables``) and the exploration: the jobs of its experiments and their
    GPU-hours and CPU-hours (shared teachers, transfer sets and probing not included; two tables of the same
    experiments count them twice)."""
    rows = []
    for name, experiments in paper_table_experiments(config).items():
        rows_of = table[table.section.isin(experiments)]
        on_gpu = rows_of.device != "cpu"
        rows.append({"paper_table": name, "experiments": ", ".join(experiments), "jobs": int(rows_of.jobs.sum()),
                     "gpu_hours": float(rows_of.hours[on_gpu].sum()), "cpu_hours": float(rows_of.hours[~on_gpu].sum())})
    return pd.DataFrame(rows, columns=["paper_table", "experiments", "jobs", "gpu_hours", "cpu_hours"])


def sizes_note(config: dict, task_table: pd.DataFrame) -> str:
    """Where the plan's split sizes come from, for the tasks the config trains on."""
    sizes = task_sizes(config, task_table)
    tasks = list(dict.fromkeys(task for _, task in teacher_jobs(config)))
    counted = [task for task in tasks if sizes[task]["sizes"] != TASK_SIZES]
    listed = [task for task in tasks if sizes[task]["sizes"] == TASK_SIZES]
    return "; ".join(part for part in (
        counted and f"counted in the raw files the config points at ({', '.join(counted)})",
        listed and f"{TASK_SIZES} ({', '.join(listed)})") if part)
