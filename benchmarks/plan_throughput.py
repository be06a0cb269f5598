"""The throughputs and start-up times the cost plan (kdflow.workflow.cost_plan) reads: reference/throughput.csv and
reference/startup.csv.

    python benchmarks/plan_throughput.py --threads 1 --write    # measure on this CPU, write both tables

Measured on the CPU it runs on, per model family (transformer, lstm, cnn, gpt2, probe) and kind of work (train:
forward, backward and an AdamW step; infer: a forward pass; decode: one sampling step of every slot, kdflow's
batched sampler; probe: the batched SentEval probe grid, kdflow.probing.probe): the seconds of a batch at two widths
of the same depth, the demo's tiny models (where Python and dispatch dominate) and wider ones (where arithmetic
does). A batch costs ``floor + FLOPs / rate``: the two sizes give the floor (per layer) and the rate (achieved
FLOP/s), FLOPs counted as the plan counts them (6 x non-embedding parameters x token positions to train, 2 x to
infer; kdflow.workflow.cost_plan). Each time is the fastest of ``--repeats`` runs (other processes only slow a run
down).
Sentences are the SST-2 excerpt the demo ships, tokenised with the demo vocabulary; models are randomly
initialised (speed does not depend on the weights).

Times are CPU seconds (user and system, of the process and its children): on an idle machine the wall time of these
one-thread runs, and what other processes on a busy machine do not inflate.

GPU rows are scaled, not measured (no GPU was available): the rate is an assumed fraction (MFU) of the GPU's dense
peak for the precision (bf16 on tensor cores; fp32 on the CUDA cores, since kdflow's fp32 turns TF32 off) and the
floor an assumed host time per layer and batch (eager PyTorch launches every kernel from Python; a GPU step cannot
be shorter than that, whatever the model's width), per family: see GPUS, MFU and GPU_FLOOR below. benchmarks/gpu_throughput.py
measures them on a GPU, with the measurement code here (Workload, measurements) and its own GPU_WORKLOAD.

Start-up: per rule, a fresh interpreter importing what its script imports (and Snakemake's script module, which
the script's preamble loads) and, for a rule that runs a model, loading the demo's teacher from disk; the fastest of
``--repeats`` runs. A rule that trains also builds its first optimizer (see TRAINING_RULES), and one that exports
to ONNX exports the demo teacher (ONNX_RULES).
"""

from __future__ import annotations

import argparse
import ast
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import GPT2Config, GPT2LMHeadModel

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kdflow.core.precision import FP32, Precision  # noqa: E402
from kdflow.probing.probe import ProbeSettings, probe  # noqa: E402
from kdflow.students.registry import StudentContext, build_student  # noqa: E402
from kdflow.teachers.finetune import build_teacher  # noqa: E402
from kdflow.training.batching import batches, to_device, tokenize  # noqa: E402
from kdflow.transfer.generation import SamplingSettings, sample  # noqa: E402
from kdflow.workflow.catalog_cache import load_catalog  # noqa: E402
from kdflow.workflow.cost_plan import FLOPS_PER_PARAMETER, PEAK_FLOPS  # noqa: E402
from kdflow.workflow.job_work import probe_parameters  # noqa: E402
from kdflow.workflow.model_sizes import language_model, student_model, transformer  # noqa: E402
from kdflow.workflow.provenance import rule_scripts  # noqa: E402

VOCAB = REPO / "demo" / "vocab.txt"
# The GPUs whose rows are scaled from their peak FLOP/s (kdflow.workflow.cost_plan.PEAK_FLOPS; the H200's are
# measured, benchmarks/gpu_check.py), and the fraction of it assumed achieved per family: transformer and GPT-2 blocks are large matmuls (BERT fine-tuning in
# mixed precision reaches about a third of peak at these batch sizes); the probe grid is one batched matmul; LSTMs
# are sequential over time steps and convolutions smaller: a tenth.
GPUS = {gpu: {precision: peak for (name, precision), peak in PEAK_FLOPS.items() if name == gpu}
        for gpu in ("H100", "A100")}
MFU = {"transformer": 0.3, "gpt2": 0.3, "probe": 0.3, "lstm": 0.1, "cnn": 0.1}
# Host seconds per layer and batch on a GPU: a transformer layer's eager training step (forward, backward, AdamW)
# launches about a hundred kernels at about 10 us each, inference a third of that, a sampling step a few tens; a
# cuDNN LSTM layer steps through the sequence's ~40 time steps one after another; a gated convolution is a few
# kernels; the probe grid is one batched linear model.
GPU_FLOOR = {("transformer", "train"): 1e-3, ("transformer", "infer"): 3e-4, ("gpt2", "train"): 1e-3,
             ("gpt2", "infer"): 3e-4, ("gpt2", "decode"): 3e-4, ("lstm", "train"): 2e-3, ("lstm", "infer"): 5e-4,
             ("cnn", "train"): 3e-4, ("cnn", "infer"): 1e-4, ("probe", "probe"): 3e-4}
# Rules whose job loads (or builds) a model before its work: the rules with a `device` param but probe_model, which
# reads stored encodings, and measure_inference.
MODEL_RULES = {"finetune_teacher", "evaluate_teacher", "train_pseudo_heads", "evaluate_pseudo_heads",
               "compute_teacher_signals", "finetune_generator", "evaluate_generator", "sample_transfer_shard", "distill_student",
               "compute_assistant_signals", "encode_probing_tasks", "measure_inference", "classify_sentences",
               "compute_attention_maps", "compute_layer_outputs", "export_student"}
# Rules that train: their first optimizer imports torch._dynamo (torch wraps Optimizer.add_param_group in
# torch._disable_dynamo), about 1.7 CPU s here that a rule whose imports do not already pull it pays before its
# first batch.
TRAINING_RULES = {"finetune_teacher", "train_pseudo_heads", "finetune_generator", "distill_student", "probe_model"}
FIRST_OPTIMIZER = "import torch\ntorch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])"
# Rules that export a model to ONNX (torch's dynamo exporter traces it: seconds, whatever the model's size here), once a
# job: measure_inference times ONNX Runtime beside PyTorch, export_student writes model.onnx.
ONNX_RULES = {"measure_inference", "export_student"}
TINY_BERT = {"num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128}
WIDE_BERT = {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024}
# The times a run of a workload takes: the fastest of its repeats (a callable, e.g. fastest with its repeats bound).
Timer = Callable[[Callable[[], object]], float]


@dataclass(frozen=True)
class Workload:
    """What one run measures: per family the narrow model (the demo's) and the wide one, of the same depth (the
    floor is per layer), and the batches. CPU_WORKLOAD is this benchmark's; benchmarks/gpu_throughput.py has a
    GPU's, wider and longer for arithmetic to show past the GPU's launch floor."""

    encoders: dict[str, tuple[tuple[str, dict], ...]]  # family: (label, spec) narrow then wide
    generators: tuple[tuple[str, int, int], ...]  # GPT-2 of 2 layers: (label, width, heads) narrow then wide
    probe_widths: tuple[tuple[str, int], ...]  # (label, width of the encodings) narrow then wide
    train: tuple[int, int] = (16, 8)  # examples per batch, batches
    infer: tuple[int, int] = (64, 3)
    max_length: int = 64
    sentences_per_example: int = 1  # demo SST-2 sentences joined into one example: longer inputs
    decode: tuple[int, int] = (32, 24)  # slots, new tokens per sequence
    probe_examples: int = 2048


DEMO_ENCODERS = {
    "transformer": ("demo teacher 4x64",
                    {"architecture": {"model_type": "bert", **TINY_BERT, "max_position_embeddings": 128}}),
    "lstm": ("demo bilstm 3x64", {"type": "bilstm", "layers": 3, "hidden_size": 64, "embeddings": {"dim": 32}}),
    "cnn": ("demo gated_cnn 4x64", {"type": "gated_cnn", "layers": 4, "hidden_size": 64, "embeddings": {"dim": 32}}),
}
CPU_WORKLOAD = Workload(
    encoders={
        "transformer": (DEMO_ENCODERS["transformer"],
                        ("4x256", {"architecture": {"model_type": "bert", **WIDE_BERT,
                                                    "max_position_embeddings": 128}})),
        "lstm": (DEMO_ENCODERS["lstm"],
                 ("bilstm 3x256", {"type": "bilstm", "layers": 3, "hidden_size": 256, "embeddings": {"dim": 128}})),
        "cnn": (DEMO_ENCODERS["cnn"],
                ("gated_cnn 4x256", {"type": "gated_cnn", "layers": 4, "hidden_size": 256,
                                     "embeddings": {"dim": 128}})),
    },
    generators=(("demo generator 2x64", 64, 2), ("2x256", 256, 2)),
    probe_widths=(("64-wide encodings", 64), ("768-wide encodings", 768)),
)


def fastest(run, repeats: int) -> float:
    """The least CPU time (this process's and its children's, user and system) of ``repeats`` runs: the wall time of a
    one-thread run on an idle machine, which other processes on a busy one do not inflate."""
    times = []
    for _ in range(repeats):
        started = cpu_seconds()
        run()
        times.append(cpu_seconds() - started)
    return min(times)


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def demo_tokenizer():
    _, tokenizer = build_teacher({"architecture": {"model_type": "bert", **TINY_BERT}, "tokenizer": str(VOCAB)}, 2)
    return tokenizer


def demo_batches(tokenizer, batch_size: int, count: int, max_length: int = 64, sentences_per_example: int = 1,
                 device: torch.device | str = "cpu") -> list[dict]:
    """``count`` batches of the demo's SST-2 sentences (``sentences_per_example`` joined into each example, cut at
    ``max_length`` tokens) on ``device``."""
    sentences = pd.read_csv(REPO / "demo/data/glue/SST-2/train.tsv", sep="\t", quoting=3)
    picked = sentences.sample(batch_size * count * sentences_per_example, replace=True, random_state=0)
    example = np.arange(len(picked)) // sentences_per_example
    frame = pd.DataFrame({"text_a": picked["sentence"].groupby(example).agg(" ".join), "text_b": None,
                          "label": picked["label"].groupby(example).first()})
    split = tokenize(frame, tokenizer, max_length, labelled=True)
    return [to_device(batch, device) for batch in batches(split, batch_size, regression=False)]


def training_step(forward, parameters, precision: Precision = FP32):
    """One batch of training as kdflow's loop runs it: the forward pass and loss in ``precision``, backward outside
    it, an AdamW step."""
    optimizer = torch.optim.AdamW(parameters, lr=1e-4)

    def step(batch):
        with precision.autocast():
            loss = forward(batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def batch_seconds(step, data: list[dict], timer: Timer) -> tuple[float, float]:
    """Seconds per batch (``timer``'s time of a pass over ``data``, after one warm-up batch) and the mean token
    positions per example."""
    step(data[0])
    seconds = timer(lambda: [step(batch) for batch in data]) / len(data)
    tokens = np.mean([batch["input_ids"].shape[1] for batch in data])
    return seconds, float(tokens)


def measurements(tokenizer, workload: Workload, device: torch.device, precision: Precision,
                 timer: Timer) -> dict[str, Iterator[dict]]:
    """Per family, the measurements of ``workload`` on ``device`` in ``precision``, each kind narrow then wide.
    Each is taken when iterated to: a caller can stop between two, or go on to the next family when one fails."""
    data = workload_batches(tokenizer, workload, device)
    families = {family: encoder_measurements(family, sizes, tokenizer, data, workload, device, precision, timer)
                for family, sizes in workload.encoders.items()}
    return {**families, "gpt2": generator_measurements(tokenizer, data, workload, device, precision, timer),
            "probe": probe_measurements(workload, device, precision, timer)}


def encoder_measurements(family: str, sizes: tuple[tuple[str, dict], ...], tokenizer, data: tuple[list, list],
                         workload: Workload, device: torch.device, precision: Precision,
                         timer: Timer) -> Iterator[dict]:
    """A transformer (BERT), LSTM or CNN student at the demo's width and a wider one, training and inference."""
    catalog = load_catalog()
    teacher = transformer(4, 64, 128)
    train, infer = data
    for label, spec in sizes:
        if family == "transformer":
            module, _ = build_teacher({**spec, "tokenizer": str(VOCAB)}, num_labels=2)
            arch = spec["architecture"]
            planned = transformer(arch["num_hidden_layers"], arch["hidden_size"], arch["intermediate_size"])
            logits = lambda batch, m=module: m(input_ids=batch["input_ids"],  # noqa: E731
                                               attention_mask=batch["attention_mask"]).logits
        else:
            module = build_student(spec, StudentContext(2, tokenizer))
            planned = student_model(spec, teacher, catalog)
            logits = lambda batch, m=module: m(batch).logits  # noqa: E731
        module.to(device)
        loss = lambda batch, f=logits: torch.nn.functional.cross_entropy(f(batch), batch["labels"])  # noqa: E731
        module.train()
        seconds, tokens = batch_seconds(training_step(loss, module.parameters(), precision), train, timer)
        yield measurement(family, "train", label, planned, seconds, workload.train[0] * tokens)
        module.eval()
        with torch.no_grad(), precision.autocast():
            seconds, tokens = batch_seconds(logits, infer, timer)
        yield measurement(family, "infer", label, planned, seconds, workload.infer[0] * tokens)


def workload_batches(tokenizer, workload: Workload, device: torch.device) -> tuple[list[dict], list[dict]]:
    """The training and the inference batches of ``workload``."""
    return tuple(demo_batches(tokenizer, size, count, workload.max_length, workload.sentences_per_example, device)
                 for size, count in (workload.train, workload.infer))


def generator_measurements(tokenizer, data: tuple[list, list], workload: Workload, device: torch.device,
                           precision: Precision, timer: Timer) -> Iterator[dict]:
    """GPT-2 blocks at the demo's width and a wider one: training, inference and batched sampling."""
    train, infer = data
    for label, width, heads in workload.generators:
        spec = {"architecture": {"model_type": "gpt2", "n_embd": width, "n_layer": 2, "n_head": heads},
                "tokenizer": str(VOCAB)}
        planned = language_model(spec)
        module = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=width, n_layer=2, n_head=heads,
                                            n_positions=128)).to(device)
        loss = lambda batch, m=module: m(input_ids=batch["input_ids"], labels=batch["input_ids"]).loss  # noqa: E731
        module.train()
        seconds, tokens = batch_seconds(training_step(loss, module.parameters(), precision), train, timer)
        yield measurement("gpt2", "train", label, planned, seconds, workload.train[0] * tokens)
        module.eval()
        with torch.no_grad(), precision.autocast():
            seconds, tokens = batch_seconds(lambda batch, m=module: m(input_ids=batch["input_ids"]).logits, infer,
                                            timer)
        yield measurement("gpt2", "infer", label, planned, seconds, workload.infer[0] * tokens)
        slots, length = workload.decode  # every sequence runs to max_length: steps = sequences / slots x new tokens
        prefixes = [[i % 100 + 5] for i in range(2 * slots)]
        settings = SamplingSettings(max_length=length, batch_size=slots)
        eos = len(tokenizer) + 1  # never sampled
        run = lambda: sample(module, prefixes, eos, settings,  # noqa: E731
                             torch.Generator(device=device).manual_seed(0), device, precision)
        run()
        steps = len(prefixes) // slots * length
        yield measurement("gpt2", "decode", label, planned, timer(run) / steps, slots)


def probe_measurements(workload: Workload, device: torch.device, precision: Precision, timer: Timer) -> Iterator[dict]:
    """The batched probe grid (36 configurations) on the demo teacher's (64-wide) encodings and wider ones."""
    rng = np.random.default_rng(0)
    # One chunk of epochs_per_check (4) epochs.
    settings = ProbeSettings(max_epochs=0, device=str(device), precision=precision.name)
    n, classes = workload.probe_examples, 2
    for label, width in workload.probe_widths:
        data = {split: (rng.standard_normal((count, width), dtype=np.float32), rng.integers(0, classes, count))
                for split, count in (("train", n), ("dev", 256), ("test", 256))}
        seconds = timer(lambda: probe(*data["train"], *data["dev"], *data["test"], settings))
        batches_run = settings.epochs_per_check * -(-n // settings.batch_size)
        parameters = probe_parameters(width, classes, {"hidden_sizes": settings.hidden_sizes,
                                                       "dropouts": settings.dropouts,
                                                       "l2_penalties": settings.l2_penalties}, logistic=False)
        planned = {"family": "probe", "layers": 1, "width": width, "parameters": parameters}
        yield measurement("probe", "probe", label, planned, seconds / batches_run, settings.batch_size)


def measurement(family, kind, label, planned, seconds, tokens_per_batch) -> dict:
    flops = FLOPS_PER_PARAMETER[kind] * planned["parameters"] * tokens_per_batch
    return {"family": family, "kind": kind, "label": label, "layers": planned["layers"], "seconds": seconds,
            "flops": flops}


def described(row: dict) -> str:
    """One measurement as a line of progress."""
    return (f"{row['family']:<12}{row['kind']:<7}{row['label']:<22}{row['seconds'] * 1e3:>9.2f} ms/batch  "
            f"{row['flops'] / 1e9:>8.3f} GFLOP/batch  {row['layers']} layers")


def width_pairs(measured: list[dict]) -> list[tuple[dict, dict]]:
    """The narrow (first) and wide (second) measurement of each family and kind measured at both widths."""
    by_work = {}
    for row in measured:
        by_work.setdefault((row["family"], row["kind"]), []).append(row)
    return [(rows[0], rows[1]) for rows in by_work.values() if len(rows) == 2]


def floor_and_rate(narrow: dict, wide: dict) -> tuple[float, float]:
    """The floor per layer (seconds) and the rate (FLOP/s) that make a batch cost ``floor x layers + FLOPs / rate``
    at both widths."""
    rate = (wide["flops"] - narrow["flops"]) / max(wide["seconds"] - narrow["seconds"], 1e-9)
    floor = max(narrow["seconds"] - narrow["flops"] / rate, 0.0) / narrow["layers"]
    return floor, rate


def throughput_rows(measured: list[dict], command: str) -> list[dict]:
    """Per family and kind, floor and rate from the narrow (first) and wide (second) measurement; then the GPU
    rows scaled from them."""
    rows = []
    for narrow, wide in width_pairs(measured):
        family, kind = narrow["family"], narrow["kind"]
        floor, rate = floor_and_rate(narrow, wide)
        rows.append({"family": family, "kind": kind, "device": "cpu", "precision": "fp32",
                     "floor_seconds_per_layer": floor, "flops_per_second": rate,
                     "source": f"measured-cpu: {command} ({narrow['label']}, {wide['label']})"})
        for gpu, peaks in GPUS.items():
            for precision, peak in peaks.items():
                rows.append({"family": family, "kind": kind, "device": gpu, "precision": precision,
                             "floor_seconds_per_layer": GPU_FLOOR[family, kind],
                             "flops_per_second": MFU[family] * peak,
                             "source": f"scaled: {MFU[family]:.0%} of {gpu} {precision} peak "
                                       f"{peak / 1e12:.0f} TFLOP/s, assumed host floor"})
    return rows


def startup_rows(repeats: int, command: str, only: set[str] | None = None) -> list[dict]:
    """Per rule (of ``only``, if given), its start-up: see the module's docstring."""
    rows = []
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory() as directory:
        teacher, tokenizer = build_teacher({"architecture": {"model_type": "bert", **TINY_BERT}, "tokenizer": str(VOCAB)},
                                           num_labels=2)
        teacher.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        load = ("from transformers import AutoModelForSequenceClassification, AutoTokenizer\n"
                f"AutoTokenizer.from_pretrained({directory!r})\n"
                f"AutoModelForSequenceClassification.from_pretrained({directory!r})")
        onnx_export = ("import tempfile\nfrom transformers import AutoModelForSequenceClassification, AutoTokenizer\n"
                       "from kdflow.export.onnx_export import export_onnx\n"
                       f"export_onnx(AutoModelForSequenceClassification.from_pretrained({directory!r}), "
                       f"AutoTokenizer.from_pretrained({directory!r}), tempfile.mkdtemp())")
        for rule, script in rule_scripts(REPO / "rules").items():
            if only is not None and rule not in only:
                continue
            tree = ast.parse((REPO / "scripts" / script).read_text())
            imports = [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
            steps = [("loading the demo teacher", load)] if rule in MODEL_RULES else []
            steps += [("the first optimizer", FIRST_OPTIMIZER)] if rule in TRAINING_RULES else []
            steps += [("exporting the demo teacher to ONNX", onnx_export)] if rule in ONNX_RULES else []
            code = "\n".join(["import snakemake.script", *imports, *(step for _, step in steps)])
            seconds = fastest(lambda: subprocess.run([sys.executable, "-c", code], check=True, cwd=directory,
                                                     env=environment), repeats)
            print(f"start-up {rule:<28}{seconds:6.2f} s")
            what = ", ".join(["imports", *(label for label, _ in steps)])
            rows.append({"rule": rule, "seconds": round(seconds, 3), "source": f"measured-cpu ({what}): {command}"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the demo's jobs use 1)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write reference/throughput.csv and startup.csv")
    parser.add_argument("--startup", nargs="+", metavar="RULE",
                        help="measure only these rules' start-up and, with --write, replace their rows of startup.csv "
                             "(a new rule: the plan prices every rule's start-up)")
    args = parser.parse_args()
    if args.startup:
        command = f"benchmarks/plan_throughput.py --startup {' '.join(args.startup)} --repeats {args.repeats}"
        measured = pd.DataFrame(startup_rows(args.repeats, command, set(args.startup)))
        if set(measured.rule) != set(args.startup):
            raise SystemExit(f"no rule script for {sorted(set(args.startup) - set(measured.rule))}")
        if args.write:
            table = pd.read_csv(REPO / "reference/startup.csv")
            table = pd.concat([table[~table.rule.isin(measured.rule)], measured], ignore_index=True)
            table.to_csv(REPO / "reference/startup.csv", index=False)
        return
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    command = f"benchmarks/plan_throughput.py --threads {args.threads} --repeats {args.repeats}"
    print(f"{torch.get_num_threads()} threads, {os.cpu_count()} CPUs")
    measured = []
    for family in measurements(demo_tokenizer(), CPU_WORKLOAD, torch.device("cpu"), FP32,
                               partial(fastest, repeats=args.repeats)).values():
        for row in family:
            print(described(row))
            measured.append(row)
    throughput = pd.DataFrame(throughput_rows(measured, command))
    print(throughput[throughput.device == "cpu"].drop(columns="source").to_string(index=False))
    startup = pd.DataFrame(startup_rows(args.repeats, command))
    if args.write:
        throughput.to_csv(REPO / "reference/throughput.csv", index=False, float_format="%.6g")
        startup.to_csv(REPO / "reference/startup.csv", index=False)


if __name__ == "__main__":
    main()
