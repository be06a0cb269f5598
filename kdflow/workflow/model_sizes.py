"""The models the cost plan (:mod:`kdflow.workflow.cost_plan`) prices, sized from their specs before anything runs:
a family (whose throughput applies), layers (the per-batch floor grows with them), width (what a probe reads) and
parameters without embeddings (what FLOPs count). Teachers and generators are transformers of a hub checkpoint
(:data:`HUB_ARCHITECTURES`, else its config.json: a local folder's or the Hugging Face cache's) or an
``architecture``; students are sized from the catalog's defaults over their teacher.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kdflow.core.errors import UserError
from kdflow.core.model_references import embeddings_source, reference_kind
from kdflow.workflow.job_settings import embedding_settings, grid_points, student_settings

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


def model(family: str, layers: int, width: int, parameters: float) -> dict:
    return {"family": family, "layers": layers, "width": width, "parameters": float(parameters)}


def transformer(layers: int, hidden: int, intermediate: int, inputs: int = 0) -> dict:
    """A BERT-style encoder (or GPT-2's blocks): attention (4 d^2) and feed-forward (2 d I) per layer, and a
    projection of ``inputs``-wide vectors to the hidden size where they differ."""
    projection = inputs * hidden if inputs and inputs != hidden else 0
    return model("transformer", layers, hidden, layers * (4 * hidden**2 + 2 * hidden * intermediate) + projection)


def checkpoint_config(name: str) -> dict | None:
    """The config.json of checkpoint ``name``: a local folder's, or the copy a download left in the Hugging Face
    cache (the plan downloads nothing); None where neither is there."""
    local = Path(name, "config.json")
    if local.is_file():
        return json.loads(local.read_text())
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(name, "config.json")
    except ValueError:  # not a hub id (a path that does not exist, say)
        return None
    return json.loads(Path(cached).read_text()) if isinstance(cached, str) else None


def architecture_model(spec: dict) -> dict:
    """The transformer a teacher, generator or ``hf`` student spec builds: a hub name (:data:`HUB_ARCHITECTURES`,
    else :func:`checkpoint_config`), a local checkpoint folder or an ``architecture``."""
    if spec.get("model"):
        name = str(spec["model"])
        if name in HUB_ARCHITECTURES:
            return transformer(*HUB_ARCHITECTURES[name])
        found = checkpoint_config(name)
        if found is None:
            raise UserError(f"the plan does not know the size of {name!r}: give a local checkpoint folder, download "
                            "it once (its config.json in the Hugging Face cache), or add it to HUB_ARCHITECTURES "
                            "(kdflow/workflow/model_sizes.py)")
        return architecture_model({"architecture": found})
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


def bert_k_size(options: dict, teacher: dict) -> dict:
    per_layer = teacher["parameters"] / teacher["layers"]
    return model("transformer", options["layers"], teacher["width"], per_layer * options["layers"])


def hf_size(options: dict, teacher: dict) -> dict:
    return architecture_model(options)


def bert_s_size(options: dict, teacher: dict) -> dict:
    inputs = embedding_width(options["embeddings"], teacher, bert_s_inputs(options))
    return transformer(options["num_hidden_layers"], options["hidden_size"], options["intermediate_size"], inputs)


def bert_s_inputs(options: dict) -> dict:
    return {"source": "teacher", "mode": "non_static", "dim": options["hidden_size"]}


def bilstm_size(options: dict, teacher: dict) -> dict:
    width = options["hidden_size"]
    inputs = embedding_width(options["embeddings"], teacher, bilstm_inputs(options))
    return model("lstm", options["layers"], width, lstm_parameters(inputs, width // 2, options["layers"]))


def bilstm_inputs(options: dict) -> dict:
    return {"source": "random", "dim": 512}


def bilstm_s_size(options: dict, teacher: dict) -> dict:
    size = options["lstm_size"]
    inputs = embedding_width(options["embeddings"], teacher, bilstm_s_inputs(options))
    return model("lstm", options["layers"], 2 * size,
                 lstm_parameters(inputs, size, options["layers"]) + 2 * size * options["fc_size"])


def bilstm_s_inputs(options: dict) -> dict:
    return {"source": "teacher", "mode": "multichannel"}


def gated_cnn_size(options: dict, teacher: dict) -> dict:
    width = options["hidden_size"]
    inputs = embedding_width(options["embeddings"], teacher, gated_cnn_inputs(options))
    projection = inputs * width if inputs != width else 0
    return model("cnn", options["layers"], width,
                 options["layers"] * options["kernel_width"] * width * 2 * width + projection)


def gated_cnn_inputs(options: dict) -> dict:
    return {"source": "random", "dim": 300}


@dataclass(frozen=True)
class StudentSize:
    """How the plan sizes a registered student type (:mod:`kdflow.students`), which it cannot build (planning
    imports no torch): its model over the teacher's, from its options (the registry's defaults under the spec's),
    and the default of its input vectors where it has its own (source, mode, dim; :func:`embedding_width`)."""

    model: Callable[[dict, dict], dict]
    inputs: Callable[[dict], dict] | None = None


# One entry per registered student type; tests/test_plan.py checks that every type has one.
STUDENT_SIZES = {
    "bert_k": StudentSize(bert_k_size),
    "hf": StudentSize(hf_size),
    "bert_s": StudentSize(bert_s_size, bert_s_inputs),
    "bilstm": StudentSize(bilstm_size, bilstm_inputs),
    "bilstm_s": StudentSize(bilstm_s_size, bilstm_s_inputs),
    "gated_cnn": StudentSize(gated_cnn_size, gated_cnn_inputs),
}


def student_size(kind: str) -> StudentSize:
    if kind not in STUDENT_SIZES:
        raise UserError(f"the plan does not know the size of student type {kind!r}: add it to STUDENT_SIZES "
                        "(kdflow/workflow/model_sizes.py)")
    return STUDENT_SIZES[kind]


def student_model(student: dict, teacher: dict, catalog: dict) -> dict:
    """The model a student spec (with the catalog's defaults) builds over ``teacher`` (its model)."""
    options = {**catalog["students"][student["type"]]["defaults"], **student}
    return student_size(student["type"]).model(options, teacher)


def teacher_model(config: dict, teacher: str) -> dict:
    return architecture_model(config["teachers"][teacher])


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
            inputs = student_size(student["type"]).inputs
            default = inputs(student) if inputs else {"source": "teacher"}
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
