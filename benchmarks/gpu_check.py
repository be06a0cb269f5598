"""The GPU check (issue 50): one command that turns a lent GPU into measured figures and full-scale evidence, in
parts that each stop at a time cap and write what they have as soon as they end.

    python benchmarks/gpu_check.py --out DIR                      # on the GPU (docs/gpu-check.md: the runbook)
    python benchmarks/gpu_check.py --device cpu --tiny --out DIR  # the same code on CPU in a minute (a test)
    python benchmarks/gpu_check.py --adopt DIR                    # here: what DIR measured into the repository

It reads the carried folder (``--carry``, default .gpu-carry/) that benchmarks/gpu_carry.py prepares here: the
jobs of the workflow listed by Snakemake (kdflow.workflow.replay), which runs them where Snakemake is not, MiniLM-L6
in float16, the full SST-2, the wheels the machine lacks and the commit they come from. With ``--tiny`` it needs
none of it: the jobs are listed on the spot from the demo's config.

The parts, in order (``--parts``), and what each writes into ``--out``:
1. ``environment``: the GPU, torch, CUDA and transformers versions, bf16 support (summary.json).
2. ``correctness`` (correctness.csv): every model code path of the demo's rules for one step (a teacher, the
   pseudo-heads, each student family, each distillation method, GPT-2, a probe) on CPU in float32 and on the
   device in fp32 and bf16, compared within :data:`TOLERANCE`; then the demo's own jobs (teacher, pseudo-heads,
   signals, a student of every method family, GPT-2 fine-tuning and sampling, probing) replayed on the device in
   each precision, every score they write finite.
3. ``step`` (step.csv): one training step of each model family, eager and compiled as one CUDA graph, in each
   precision, against its arithmetic floor, with its host syncs and the GPU's busy fraction
   (benchmarks/gpu_step.py).
4. ``throughput`` (throughput_measured.csv): the throughput rows reference/throughput.csv only scales, measured
   (benchmarks/gpu_throughput.py).
5. ``sharing`` (sharing.csv): K = 1, 2, 4, 8 small students training at once on the GPU
   (benchmarks/gpu_sharing.py).
6. ``packs`` (packs.csv): K = 1 to 32 students of a family trained as one pack, one computation in one process
   (benchmarks/gpu_pack_curve.py), beside the sharing part's K processes.
7. ``evidence`` (evidence_runs.jsonl): the claims benchmark's cells (benchmarks/quality_claims.py) on the full SST-2
   train set with the MiniLM-L6 teacher, in the carried order, for the time that remains.
summary.md says what each part found, summary.json holds it, gpu_check.log is the console.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from transformers.utils import SAFE_WEIGHTS_NAME  # noqa: E402

from kdflow.core import run_files  # noqa: E402
from kdflow.core.precision import Precision, resolve_precision  # noqa: E402
from kdflow.training.batching import HOST_LENGTHS  # noqa: E402
from kdflow.reporting.claims import read_runs  # noqa: E402
from kdflow.workflow import replay  # noqa: E402
from kdflow.workflow import results_paths as paths  # noqa: E402
from kdflow.workflow.cost_plan import SHARING  # noqa: E402
from quality_claims import run_dir, teacher_digest  # noqa: E402

PARTS = ("environment", "correctness", "step", "throughput", "sharing", "packs", "evidence")
# Seconds each part may take on the GPU; the evidence takes what remains, at least EVIDENCE_SECONDS (the parts
# before it are cut short to leave it that).
CAPS = {"environment": 10, "correctness": 90, "step": 60, "throughput": 50, "sharing": 40, "packs": 60,
        "evidence": 170}
BUDGET = 480  # the 8 minutes, inside a 9-minute call that leaves a lease of 15 time for the start and a rerun
# The tiny profile's caps guard against a hang, not a slow machine: the test checks that every part ran.
TINY_CAPS = {"environment": 60, "correctness": 300, "step": 300, "throughput": 120, "sharing": 120, "packs": 180,
             "evidence": 300}
# One step of a code path on the device against the same step on CPU: fp32 (TF32 off) differs from CPU only by the
# order of float32 sums, so the loss agrees to 1e-5 and the gradients to 1e-4 of their norm; bf16 rounds every
# matmul input to 8 bits of mantissa (relative 4e-3), which a loss and its gradients carry to about 1e-2.
TOLERANCE = {"fp32": {"loss": 1e-5, "gradients": 1e-4}, "bf16": {"loss": 5e-2, "gradients": 1e-1}}
DEMO_VOCAB = REPO / "demo/vocab.txt"
TINY_BERT = {"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
             "intermediate_size": 128, "max_position_embeddings": 128}
# The demo's jobs the correctness part replays: a student of every method family (logit, hidden-space,
# output-space with pseudo-heads, cross-architecture, teacher assistant) and the thesis's student on a GPT-2
# augmented transfer set, and a probe of the teacher; Snakemake adds what they need (the teacher, its pseudo-heads
# and signals, the generator and its samples, the encodings).
DEMO_TARGETS = [paths.STUDENT_METRICS.format(**dict(zip(("experiment", "task", "student", "method", "point"),
                                                         run.split("/"))), seed=0) for run in (
    "universal_kd_table2/sst2/bert_3/kd/beta0.3", "alp_kd_table2/sst2/bert_3/alp/default",
    "alp_kd_table2/sst2/bert_3/pkd/default", "alp_kd_table3/sst2/bert_2/mhkd/default",
    "universal_kd_table2/sst2/bert_3/universal_kd_il/beta0.3", "universal_kd_table4/sst2/tiny_roberta/takd/default",
    "universal_kd_table4/sst2/tiny_roberta/dih/default", "universal_kd_table5/sst2/gated_cnn/universal_kd_ca/default",
    "thesis_table52/sst2/lstm_s/mse_logits/default")] + [paths.PROBING_SCORES.format(model="tiny_bert_sst2",
                                                                                     probing_task="Length")]
TINY_TARGETS = [paths.STUDENT_METRICS.format(experiment="universal_kd_table2", task="sst2", student="bert_3", method="kd",
                                             point="beta0.3", seed=0)]
# The tiny profile trains the demo's models one epoch each: its jobs check code paths, not scores.
TINY_CONFIG = {part: {"epochs": 1} for part in ("teacher_defaults", "pseudo_heads", "student_defaults")}
# The tiny profile's evidence: one more run of the same demo experiment, recorded as the GPU's runs are.
TINY_GROUPS = [{"experiment": "universal_kd_table2", "task": "sst2", "teacher": "tiny_bert", "student": "bert_3",
                "methods": ["no_kd"],
                "points": {"no_kd": ["default"]}, "seeds": [0]}]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- 1. environment -----------------------------------------------------------------------------------------------

def environment(context: dict, stop_at: float) -> dict:
    import transformers

    found = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
             "transformers": transformers.__version__, "cpus": os.cpu_count(), "device": context["device"],
             "provenance": context.get("provenance")}
    if context["device"] == "cuda":
        properties = torch.cuda.get_device_properties(0)
        found.update(gpu=properties.name, capability=f"{properties.major}.{properties.minor}",
                     gpu_memory_gib=round(properties.total_memory / 2**30, 1),
                     multiprocessors=properties.multi_processor_count,
                     bf16=torch.cuda.is_bf16_supported(including_emulation=False),
                     driver=subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True).stdout.strip() or None)
    for key, value in found.items():
        log(f"{key}: {value}")
    return found


# --- 2. correctness -----------------------------------------------------------------------------------------------

def code_paths(scratch: Path) -> dict:
    """name -> (model, loss(model, batch) -> scalar, batch): every kind of model and loss the demo's rules train,
    built on CPU from a fixed seed (the students that start from the teacher's embeddings read it from
    ``scratch``); dropout is off (eval mode), since CPU and CUDA draw different masks."""
    from kdflow.distillation.methods.registry import Shapes, available_methods, build_method
    from kdflow.students.registry import StudentContext, build_student
    from kdflow.teachers.finetune import build_teacher
    from kdflow.teachers.pseudo_heads import LayerHeads, heads_loss, teacher_outputs
    from kdflow.training.batching import batches, tokenize
    from kdflow.transfer.generation import lm_loss
    from kdflow.transfer.signals import TeacherSignals
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()  # each student that reads the teacher's embeddings says so at length
    transformers_logging.disable_progress_bar()
    torch.manual_seed(0)
    teacher, tokenizer = build_teacher({"architecture": TINY_BERT, "tokenizer": str(DEMO_VOCAB)}, num_labels=2)
    teacher.save_pretrained(scratch / "model")
    tokenizer.save_pretrained(scratch / "model")
    frame = pd.read_csv(REPO / "demo/data/glue/SST-2/train.tsv", sep="\t", quoting=3).head(16)
    frame = pd.DataFrame({"text_a": frame["sentence"], "text_b": None, "label": frame["label"]})
    batch = next(batches(tokenize(frame, tokenizer, 32, labelled=True), 16, regression=False))
    paths = {"teacher": (teacher, lambda model, b: torch.nn.functional.cross_entropy(
        model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits, b["labels"]), batch)}

    heads = LayerHeads(TINY_BERT["num_hidden_layers"], TINY_BERT["hidden_size"], 2)
    torch.nn.init.normal_(heads.weight, std=0.02)
    with_heads = torch.nn.ModuleDict({"teacher": copy.deepcopy(teacher), "heads": heads})
    paths["pseudo_heads"] = (with_heads, lambda model, b: heads_loss(
        model["heads"](teacher_outputs(model["teacher"], b, "cls")[1].detach()), b["labels"], False), batch)

    students = {"bert_s": {"type": "bert_s", "num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2,
                           "intermediate_size": 64},
                "bilstm": {"type": "bilstm", "layers": 2, "hidden_size": 32, "embeddings": {"dim": 16}},
                "gated_cnn": {"type": "gated_cnn", "layers": 2, "hidden_size": 32, "embeddings": {"dim": 16}},
                "bilstm_s": {"type": "bilstm_s", "embeddings": {"source": "random", "dim": 16, "mode": "multichannel"}}}
    signals = TeacherSignals(torch.randn(16, 2), head_logits=torch.randn(16, 2, 2), layers=torch.randn(16, 2, 64))

    def distilled(student_spec: dict, method_name: str):
        student = build_student(student_spec, StudentContext(2, tokenizer, str(scratch)))
        widths = tuple(layer.shape[-1] for layer in student(batch).layers)
        method = build_method(method_name, Shapes(widths, 2, 64, 2, False),
                              {"assistant": "ta"} if method_name == "takd" else {})
        method.set_weights(alpha=0.5, beta=0.5 * ("kd" in method.provides), gamma=0.5 * ("inter" in method.provides))
        model = torch.nn.ModuleDict({"student": student, "method": method})
        return model, lambda m, b: m["method"](m["student"](b), b["signals"], b["labels"])["loss"]

    with_signals = {**batch, "signals": signals}
    for name, spec in students.items():
        paths[f"student {name} (kd)"] = (*distilled(spec, "kd"), with_signals)
    for method_name in available_methods():
        paths[f"method {method_name} (bert_s)"] = (*distilled(students["bert_s"], method_name), with_signals)

    generator = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=64, n_layer=2, n_head=2, n_positions=64))
    paths["generator"] = (generator, lm_loss, batch)
    return paths


def moved(value, device):
    """``value`` on ``device``; a batch's tokens' counts stay on the host, as the jobs' batches have them."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {key: item if key == HOST_LENGTHS else moved(item, device) for key, item in value.items()}
    if hasattr(value, "__dataclass_fields__"):
        return type(value)(**{key: moved(getattr(value, key), device) for key in value.__dataclass_fields__})
    return value


def without_dropout(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` in training mode with every dropout at 0, so that two devices' steps are comparable: eval mode
    would do, but cuDNN's LSTM refuses a backward pass outside training mode."""
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
        elif isinstance(module, torch.nn.RNNBase):
            module.dropout = 0.0
    return model.train()


def one_step(model, loss_fn, batch, device: str, precision: Precision) -> tuple[float, torch.Tensor]:
    """The loss and the flattened gradients of one step of a copy of ``model`` on ``device``."""
    model = without_dropout(copy.deepcopy(model).to(device))
    with precision.autocast():
        loss = loss_fn(model, moved(batch, device))
    loss.backward()
    gradients = [p.grad.float().flatten().cpu() for p in model.parameters() if p.grad is not None]
    return float(loss.detach()), torch.cat(gradients)


def step_checks(paths: dict, device: str, precisions: list[str], stop_at: float) -> list[dict]:
    """Each code path's step (:func:`code_paths`) on ``device`` in each precision against the CPU's in fp32 (see
    TOLERANCE)."""
    rows = []
    resolved = {precision: resolve_precision(precision, torch.device(device)) for precision in precisions}  # as jobs do
    for name, (model, loss_fn, batch) in paths.items():
        if time.monotonic() > stop_at:
            break
        reference_loss, reference = one_step(model, loss_fn, batch, "cpu", Precision("fp32", "cpu"))
        for precision in precisions:
            loss, gradients = one_step(model, loss_fn, batch, device, resolved[precision])
            loss_error = abs(loss - reference_loss) / max(abs(reference_loss), 1e-6)
            gradient_error = float((gradients - reference).norm() / reference.norm().clamp_min(1e-12))
            finite = math.isfinite(loss) and bool(torch.isfinite(gradients).all())
            passed = finite and loss_error <= TOLERANCE[precision]["loss"] and \
                gradient_error <= TOLERANCE[precision]["gradients"]
            rows.append({"check": "one step against CPU fp32", "what": name, "precision": precision,
                         "loss": loss, "loss_error": loss_error, "gradient_error": gradient_error,
                         "finite": finite, "passed": passed})
            log(f"step {name:<40}{precision:<6}loss {loss:.6f} (rel. error {loss_error:.1e}), gradients "
                f"{gradient_error:.1e}: {'ok' if passed else 'FAILED'}")
    return rows


def probe_checks(device: str, stop_at: float) -> list[dict]:
    """The probe grid (kdflow.probing.probe) on CPU and on the device: the same selected configuration and
    accuracies (its initialisation and dropout draw from seeds, not from the device's generator)."""
    from kdflow.probing.probe import ProbeSettings, probe

    if time.monotonic() > stop_at:
        return []
    rng = np.random.default_rng(0)
    splits = {name: (rng.standard_normal((n, 32), dtype=np.float32), rng.integers(0, 3, n))
              for name, n in (("train", 256), ("dev", 128), ("test", 128))}
    for X, y in splits.values():
        X[:, 0] += y  # something to learn
    results = {}
    for where in dict.fromkeys(["cpu", device]):
        settings = ProbeSettings(max_epochs=4, hidden_sizes=(0, 16), dropouts=(0.0, 0.1), l2_penalties=(1e-4,),
                                 device=where)
        results[where] = probe(*splits["train"], *splits["dev"], *splits["test"], settings)
    same = all(results[device][key] == results["cpu"][key] for key in ("dev_accuracy", "test_accuracy"))
    log(f"probe on {device}: dev {results[device]['dev_accuracy']:.4f}, test {results[device]['test_accuracy']:.4f} "
        f"(CPU {results['cpu']['dev_accuracy']:.4f}, {results['cpu']['test_accuracy']:.4f}): "
        f"{'ok' if same else 'FAILED'}")
    return [{"check": "probe grid against CPU", "what": "probe", "precision": "fp32",
             "loss": results[device]["test_accuracy"], "finite": True, "passed": same}]


def finite_scores(path: Path) -> bool:
    """Whether every number in a job's JSON output is finite (json writes NaN and Infinity as such)."""
    def numbers(value):
        if isinstance(value, dict):
            for item in value.values():
                yield from numbers(item)
        elif isinstance(value, list):
            for item in value:
                yield from numbers(item)
        elif isinstance(value, float):
            yield value
    return all(math.isfinite(number) for number in numbers(json.loads(path.read_text())))


def demo_listings(context: dict) -> dict[str, Path]:
    """Per precision of the device, the listing of the demo's jobs the correctness part replays."""
    tiny = TINY_CONFIG if context["tiny"] else {}
    return {precision: jobs_listing(context, f"demo_jobs_{precision}.json", ["demo/config.yaml"],
                                    {**tiny, "precision": precision, "device": context["device"]},
                                    TINY_TARGETS if context["tiny"] else DEMO_TARGETS)
            for precision in context["precisions"]}


def replay_checks(context: dict, listings: dict[str, Path], stop_at: float) -> list[dict]:
    """The demo's jobs replayed in each precision; a job passes if it exits 0 and its JSON outputs are finite."""
    precisions = list(listings)

    def replayed(precision: str) -> list[dict]:
        listing, directory, rows = listings[precision], demo_directory(context, precision), []
        for record in replay.run(listing, directory, context["jobs"], stop_at, log=log):
            outputs = [directory / path for path in record["output"] if path.endswith(".json")]
            finite = record["returncode"] == 0 and all(finite_scores(path) for path in outputs if path.is_file())
            rows.append({"check": "demo job replayed", "what": f"{record['rule']} {record['output'][0]}",
                         "precision": precision, "seconds": record["seconds"], "returncode": record["returncode"],
                         "finite": finite, "passed": finite})
        return rows

    # the precisions side by side: their jobs are start-up-bound processes, and the GPU holds both
    with ThreadPoolExecutor(len(precisions)) as pool:
        return [row for rows in pool.map(replayed, precisions) for row in rows]


def demo_directory(context: dict, precision: str) -> Path:
    """Where the demo's jobs run in ``precision``: its config's paths (demo/...) lead to the repository's."""
    directory = context["work"] / f"demo_{precision}"
    directory.mkdir(parents=True, exist_ok=True)
    if not (directory / "demo").exists():
        (directory / "demo").symlink_to(REPO / "demo", target_is_directory=True)
    return directory


def correctness(context: dict, stop_at: float) -> dict:
    device = context["device"]
    listings = demo_listings(context)
    # the job server imports torch and kdflow while the steps run
    replay.start_server(json.loads(next(iter(listings.values())).read_text())["jobs"])
    # Every precision steps on any device (CPU autocast computes in bf16 too); the jobs replay in the device's.
    rows = step_checks(code_paths(context["work"]), device, ["fp32", "bf16"], stop_at) + probe_checks(device, stop_at)
    pd.DataFrame(rows).to_csv(context["out"] / "correctness.csv", index=False)
    rows += replay_checks(context, listings, stop_at)
    if not rows:
        return {"checks": 0, "failed": ["no check finished before the part's cap"]}
    frame = pd.DataFrame(rows)
    frame.to_csv(context["out"] / "correctness.csv", index=False)
    return {"checks": len(frame), "failed": frame.loc[~frame.passed, ["what", "precision"]].values.tolist()}


def jobs_listing(context: dict, name: str, configfiles: list[str], config: dict, targets: list[str]) -> Path:
    """The carried listing ``name``; in the tiny profile (or where Snakemake is and none was carried), listed on
    the spot, into the work folder: a carry prepared for the GPU lists other jobs."""
    path = (context["work"] if context["tiny"] else context["carry"]) / name
    if context["tiny"] or not path.exists():
        log(f"listing the jobs of {name} with Snakemake")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(replay.export([REPO / file for file in configfiles], config, targets)))
    return path


# --- 3. step, 4. throughput, 5. sharing --------------------------------------------------------------------------

def step(context: dict, stop_at: float) -> dict:
    import gpu_step

    data = None
    if not context["tiny"]:  # the full SST-2's dev sentences, from the carried data
        data = context["work"] / "step-data"
        data.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-xJf", str(context["carry"] / "data.tar.xz"), "-C", str(data),
                        "data/glue/SST-2/dev.tsv"], check=True)
        data = data / "data/glue"
    # the tiny profile checks the code path in the first precision alone
    precisions = context["precisions"][:1] if context["tiny"] else context["precisions"]
    rows = gpu_step.measure(context["device"], precisions, context["tiny"], stop_at, data, log=log,
                            on_row=lambda rows: gpu_step.write_rows(rows, context["out"] / "step.csv"))
    gpu_step.write_rows(rows, context["out"] / "step.csv")
    failed = [f"{row['family']} {row['precision']} {row['form']}" for row in rows if row.get("error")]
    return {"rows": len(rows), **({"failed": failed} if failed else {})}


def throughput(context: dict, stop_at: float) -> dict:
    import gpu_throughput

    rows = gpu_throughput.measure(context["device"], context["precisions"], context["tiny"], stop_at, log=log)
    pd.DataFrame(rows).to_csv(context["out"] / "throughput_measured.csv", index=False, float_format="%.6g")
    return {"rows": len(rows)}


def sharing(context: dict, stop_at: float) -> dict:
    import gpu_sharing

    minilm = context["carry"] / "minilm"
    # the tiny profile checks the code path: two families (a recurrent and a transformer student) at K = 1 and 2
    families = ("bilstm", "bert_k2") if context["tiny"] else ("bilstm", "gated_cnn", "bilstm_s", "bert_k2")
    frame = gpu_sharing.measure(context["device"], ks=(1, 2) if context["tiny"] else (1, 2, 4, 8), families=families,
                                precision=context["precisions"][-1], tiny=context["tiny"], deadline=stop_at,
                                tokenizer_dir=minilm if minilm.exists() else None, log=log)
    frame.to_csv(context["out"] / "sharing.csv", index=False, float_format="%.6g")
    return {"rows": len(frame), "recommended": gpu_sharing.recommend(frame) if len(frame) else {}}


def packs(context: dict, stop_at: float) -> dict:
    import gpu_pack_curve

    # the tiny profile checks the code path: a recurrent and a convolutional family at K = 1 and 2
    families = ("bilstm", "gated_cnn") if context["tiny"] else None
    rows = gpu_pack_curve.measure(context["device"], context["precisions"][-1], context["tiny"], stop_at,
                                  families=families, ks=(1, 2) if context["tiny"] else None, log=log)
    frame = pd.DataFrame(rows)
    frame.to_csv(context["out"] / "packs.csv", index=False, float_format="%.6g")
    failed = [f"{row['family']} K={row['k']}" for row in rows if row.get("error")]
    return {"rows": len(rows), "recommended": gpu_pack_curve.recommend(frame),
            **({"failed": failed} if failed else {})}


# --- 7. evidence --------------------------------------------------------------------------------------------------

def unpack_minilm(carry: Path, directory: Path) -> None:
    """MiniLM-L6 as it was before it travelled: float32 safetensors from the carried float16 (zlib-compressed)."""
    from safetensors.torch import load, save_file

    directory.mkdir(parents=True, exist_ok=True)
    weights = load(zlib.decompress((carry / "minilm" / "model.fp16.safetensors.z").read_bytes()))
    save_file({name: tensor.float() if tensor.is_floating_point() else tensor for name, tensor in weights.items()},
              directory / SAFE_WEIGHTS_NAME, metadata={"format": "pt"})
    for file in (carry / "minilm").iterdir():
        if not file.name.startswith("model."):
            (directory / file.name).write_bytes(file.read_bytes())


def evidence_waves(groups: list[dict], kept: Callable[[dict], dict[str, str]]):
    """The evidence's runs in waves, each (group, run) of a wave trained together before the next wave is asked
    for: a group's search on its first seed, then the points it keeps (``kept(group)``, asked once its search
    has run) on its other seeds, seed by seed so that a cut leaves pairs, together with the next group's search.
    A group's search (3 or 4 runs) alone would leave most of the GPU's 8 job slots idle."""
    previous = None
    for group in [*groups, None]:
        wave = []
        if previous is not None:
            points = kept(previous)
            wave += [(previous, run) for seed in previous["seeds"][1:] for method, point in points.items()
                     for run in group_runs(previous) if (run["method"], run["point"], run["seed"]) == (method, point, seed)]
        if group is not None:
            wave += [(group, run) for run in group_runs(group) if run["seed"] == group["seeds"][0]]
        if wave:
            yield wave
        previous = group


def evidence(context: dict, stop_at: float) -> dict:
    """The carried groups of methods (benchmarks/gpu_carry.py: evidence_groups) in :func:`evidence_waves` until
    ``stop_at``: each method's search on the first seed, its point kept as kdflow selects
    (kdflow.distillation.selection.select on that seed), then the kept points' other seeds; each finished run
    recorded as benchmarks/quality_claims.py records its own."""
    from quality_claims import record_key, run_record

    from kdflow.core.tasks import TASKS
    from kdflow.distillation.selection import select

    if context["tiny"]:
        directory, groups, recorded = demo_directory(context, context["precisions"][0]), TINY_GROUPS, []
        listing = jobs_listing(context, "evidence_jobs.json", ["demo/config.yaml"],
                               {**TINY_CONFIG, "device": context["device"]},
                               [teacher_metrics(group) for group in groups]
                               + [target(run) for group in groups for run in group_runs(group)])
    else:
        carried = json.loads((context["carry"] / "evidence.json").read_text())
        directory, groups, recorded = context["work"] / "evidence", carried["groups"], carried["recorded"]
        listing = context["carry"] / "evidence_jobs.json"
        if not (directory / "minilm" / SAFE_WEIGHTS_NAME).exists():
            unpack_minilm(context["carry"], directory / "minilm")
            subprocess.run(["tar", "-xJf", str(context["carry"] / "data.tar.xz"), "-C", str(directory)], check=True)
    how = {"device": context["environment"].get("gpu", "cpu"), "precision": context["precisions"][-1],
           "profile": "tiny" if context["tiny"] else "full", "invocation": " ".join(sys.argv)}
    commit = (context.get("provenance") or {}).get("commit", "unknown")
    found, jobs = [], []

    digests: dict[str, str | None] = {}  # this check's teachers, by their metrics file, once trained

    def own_teachers_runs() -> list[dict]:
        """The recorded runs that learnt from this check's teachers: only those pair with its own."""
        return same_teacher(recorded, {(group["experiment"], group["task"]): digests.get(teacher_metrics(group))
                                       for group in groups})

    def train(wave: list[tuple[dict, dict]]) -> None:
        teachers = {teacher_metrics(group): group for group, _ in wave}
        if any(teacher not in digests for teacher in teachers):  # train them first: what pairs depends on them
            jobs.extend(replay.run(listing, directory, context["evidence_jobs"], stop_at, log=log,
                                   targets=list(teachers)))
            digests.update({teacher: teacher_digest(directory, group["teacher"], group["task"])
                            for teacher, group in teachers.items() if (directory / teacher).exists()})
        done = {record_key(r) for r in own_teachers_runs() + found}
        todo = [(group, run) for group, run in wave if record_key(run) not in done]
        jobs.extend(replay.run(listing, directory, context["evidence_jobs"], stop_at, log=log,
                               targets=list(teachers) + [target(run) for _, run in todo]))
        seconds = finished_seconds(directory)
        teacher_devs = {teacher: json.loads((directory / teacher).read_text())["scores"]["dev"]
                        for teacher in teachers if (directory / teacher).exists()}
        with open(context["out"] / "evidence_runs.jsonl", "a") as out:
            for group, run in todo:
                wall, teacher_dev = seconds.get(Path(target(run)).parent), teacher_devs.get(teacher_metrics(group))
                teacher = {"teacher_dev": teacher_dev, "teacher_digest": digests.get(teacher_metrics(group))}
                record = run_record(directory, run, commit, {**how, "wall_seconds": wall, **teacher}) \
                    if wall is not None else None
                if record is not None:
                    out.write(json.dumps(record, separators=(",", ":")) + "\n")
                    found.append(record)
                    log(f"evidence {run['experiment']} {run['method']} {run['point']} seed {run['seed']}: "
                        f"dev {record['metric']} {record['dev']:.2f} in {wall:.0f} s")

    def kept(group: dict) -> dict[str, str]:
        """The point each method of ``group`` keeps on its first seed, for those whose search is complete."""
        first, points = group["seeds"][0], {}
        for method in group["methods"]:
            searched = [{"point": r["point"], "seed": r["seed"], "scores": {"dev": r["scores"]}}
                        for r in own_teachers_runs() + found if (r["experiment"], r["method"], r["seed"]) ==
                        (group["experiment"], method, first)]
            if {r["point"] for r in searched} == set(group["points"][method]):
                points[method] = select(searched, TASKS[group["task"]].main_metric, [first])["selected"]
        return points

    for wave in evidence_waves(groups, kept):
        train(wave)
        if time.monotonic() > stop_at:
            break
    return {"runs": len(found), "jobs": len(jobs), "failed_jobs": sum(job["returncode"] != 0 for job in jobs)}


def same_teacher(recorded: list[dict], digests: dict[tuple[str, str], str | None]) -> list[dict]:
    """The ``recorded`` runs whose teacher has the digest of this check's teacher for their (experiment, task):
    each check fine-tunes its teacher again, not bit for bit alike on a GPU, and a verdict pairs two runs only if
    they learnt from the same teacher (kdflow.reporting.claims). A run of another teacher is trained again, on
    both sides of its links, so that the check's runs pair among themselves; a teacher not trained yet (None)
    pairs with nothing."""
    return [run for run in recorded if run.get("teacher_digest") is not None
            and run["teacher_digest"] == digests.get((run["experiment"], run["task"]))]


def group_runs(group: dict) -> list[dict]:
    return [dict(experiment=group["experiment"], task=group["task"], student=group["student"], method=method,
                 point=point, seed=seed)
            for method in group["methods"] for point in group["points"][method] for seed in group["seeds"]]


def target(run: dict) -> str:
    return str(run_dir(Path(), run) / run_files.METRICS)


def teacher_metrics(group: dict) -> str:
    """The group's teacher's dev and test scores (rule evaluate_teacher), which every record of it keeps."""
    return paths.TEACHER_METRICS.format(teacher=group["teacher"], task=group["task"])


def finished_seconds(directory: Path) -> dict[Path, float]:
    """The wall seconds of every job that finished in ``directory``, by its first output's folder, from every
    replay there (replay.jsonl): a later call on the same work directory reads back what earlier calls trained."""
    log_file = directory / "replay.jsonl"
    records = [json.loads(line) for line in log_file.read_text().splitlines()] if log_file.exists() else []
    return {Path(record["output"][0]).parent: record["seconds"] for record in records if record["returncode"] == 0}


# --- the run ------------------------------------------------------------------------------------------------------

def summary_markdown(summary: dict) -> str:
    runs = ", ".join(summary.get("runs", [summary["started"]]))
    lines = [f"# GPU check on {summary['environment'].get('gpu', summary['environment'].get('device'))}", "",
             f"{runs}, profile {summary['profile']}, {summary['seconds']:.0f} s in all.", "",
             "| part | seconds | result |", "| --- | --- | --- |"]
    for part, result in summary["parts"].items():
        shown = {key: value for key, value in result.items() if key not in ("seconds", "traceback")}
        lines.append(f"| {part} | {result['seconds']:.0f} | {json.dumps(shown, default=str)[:300]} |")
    return "\n".join(lines) + "\n"


def check(args) -> dict:
    started = time.monotonic()
    out, carry = Path(args.out), Path(args.carry)
    out.mkdir(parents=True, exist_ok=True)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    provenance = json.loads((carry / "provenance.json").read_text()) if (carry / "provenance.json").exists() else None
    context = {"device": device, "tiny": args.tiny, "out": out, "carry": carry, "provenance": provenance,
               "work": Path(args.work or tempfile.mkdtemp(prefix="gpu-check-")), "jobs": args.jobs,
               "evidence_jobs": args.evidence_jobs,
               "precisions": ["fp32", "bf16"] if device == "cuda" else ["fp32"], "environment": {}}
    caps = TINY_CAPS if args.tiny else CAPS
    stop_all = started + (args.budget or (sum(caps[part] for part in args.parts) if args.tiny else BUDGET))
    summary = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "profile": "tiny" if args.tiny else "full",
               "environment": {}, "parts": {}, "seconds": 0.0}
    for part in args.parts:
        reserve = sum(caps[later] for later in args.parts[args.parts.index(part) + 1:])
        # each part until its cap, but leaving the later parts theirs; the evidence takes whatever remains
        stop_at = stop_all if part == "evidence" else min(time.monotonic() + caps[part], stop_all - reserve)
        log(f"--- {part}: until {max(stop_at - time.monotonic(), 0):.0f} s from now")
        part_started = time.monotonic()
        try:
            result = globals()[part](context, stop_at)
        except Exception as error:  # a part that breaks must not cost the others their minutes
            result = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
            log(result["traceback"])
        if part == "environment":
            context["environment"] = summary["environment"] = result
        summary["parts"][part] = {**result, "seconds": round(time.monotonic() - part_started, 1)}
        summary["seconds"] = time.monotonic() - started
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
        (out / "summary.md").write_text(summary_markdown(summary))
    log(f"done in {time.monotonic() - started:.0f} s: {out}")
    return summary


def merged_summary(summaries: list[dict]) -> dict:
    """One summary of a check and its reruns of single parts (the runbook's ``--parts``): a later run's part
    replaces an earlier run's, and says which run it came from, except the evidence, whose later calls go on where
    the earlier stopped: their counts add up."""
    merged = {**summaries[0], "parts": {}, "runs": [summary["started"] for summary in summaries]}
    for summary in summaries:
        for part, result in summary["parts"].items():
            earlier = merged["parts"].get(part)
            if part == "evidence" and earlier and "error" not in earlier and "error" not in result:
                merged["parts"][part] = {**{key: earlier[key] + result[key] for key in result},
                                         "run": f"{earlier['run']}, {summary['started']}"}
            else:
                merged["parts"][part] = {**result, "run": summary["started"]}
    merged["seconds"] = sum(summary["seconds"] for summary in summaries)
    return merged


def kept_folder(summary: dict, root: Path = REPO / "benchmarks/gpu") -> Path:
    """benchmarks/gpu/<date>-<GPU>/, or with the start's time where that folder holds another check of that day."""
    day, clock = summary["started"][:10], summary["started"][11:16].replace(":", "")
    gpu = summary["environment"]["gpu"].replace(" ", "_")
    folder = root / f"{day}-{gpu}"
    if (folder / "summary.json").exists() and \
            json.loads((folder / "summary.json").read_text())["started"] != summary["started"]:
        folder = folder.with_name(f"{day}-{clock}-{gpu}")
    return folder


def unrecorded(runs: list[dict], recorded: list[dict]) -> list[dict]:
    """``runs`` that are not in ``recorded``, each once: a later evidence call on the same work directory records
    its earlier calls' runs again."""
    from quality_claims import record_key

    known, new = {(*record_key(run), run["device"]) for run in recorded}, []
    for run in runs:
        if (*record_key(run), run["device"]) not in known:
            known.add((*record_key(run), run["device"]))
            new.append(run)
    return new


def adopt(folders: list[Path]) -> None:
    """What a GPU check measured, into the repository (run here, then commit): its files under
    benchmarks/gpu/<date>-<GPU>/, the measured throughput rows into reference/throughput.csv with the plan before
    and after them, the measured K into config.yaml's gpu_sharing, and the evidence runs into the claims record
    (with their ``device``) and its GPU verdicts. ``folders`` are a check and its reruns of single parts, in the
    order they ran: a part's files come from the last run that has them. Refuses a tiny or CPU run, and records
    evidence only from a carry prepared on a clean commit of main."""
    import shutil

    import gpu_sharing
    import gpu_throughput
    from quality_claims import RECORD, read_record

    summaries = [json.loads((folder / "summary.json").read_text()) for folder in folders]
    for folder, summary in zip(folders, summaries):
        if summary["profile"] != "full" or not summary["environment"].get("gpu"):
            raise SystemExit(f"{folder} is a {summary['profile']} run on {summary['environment'].get('device')}: "
                             "only a full run on a GPU is adopted")
    summary = merged_summary(summaries)
    gpu = summary["environment"]["gpu"]
    kept = kept_folder(summary)
    kept.mkdir(parents=True, exist_ok=True)
    for name in ("correctness.csv", "step.csv", "throughput_measured.csv", "sharing.csv", "packs.csv"):
        for folder in folders:
            if (folder / name).exists():
                shutil.copy(folder / name, kept / name)
    for number, folder in enumerate(folders, 1):
        if (folder / "gpu_check.log").exists():
            shutil.copy(folder / "gpu_check.log", kept / f"gpu_check.{number}.log")
    (kept / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    (kept / "summary.md").write_text(summary_markdown(summary))
    if (kept / "throughput_measured.csv").exists():
        old = pd.read_csv(REPO / "reference/throughput.csv")
        new = gpu_throughput.adopt(pd.read_csv(kept / "throughput_measured.csv"), old)
        comparison = gpu_throughput.plan_before_after(old, new)
        comparison.to_csv(kept / "plan_before_after.csv", index=False, float_format="%.4g")
        new.to_csv(REPO / "reference/throughput.csv", index=False, float_format="%.6g")
        print(comparison.to_string(index=False))
    if (kept / "sharing.csv").exists():
        measured = pd.read_csv(kept / "sharing.csv")
        recommended = gpu_sharing.adopted(measured)
        note = f"on one {gpu}, {summary['started'][:10]} ({kept.relative_to(REPO)}/sharing.csv; gpu_check.py)"
        print("gpu_sharing:", gpu_sharing.adopt(recommended, REPO / "config.yaml", note))
        gpu_sharing.adopt_speedups(measured, list(recommended), REPO / SHARING)
    runs = [run for folder in folders for run in read_runs(folder / "evidence_runs.jsonl", on_gpu=True)]
    provenance = summary["environment"].get("provenance") or {}
    if runs and not provenance.get("clean_on_main"):
        print(f"{len(runs)} evidence runs not recorded: the carry was not prepared on a clean commit of main")
    elif runs:
        new_runs = unrecorded(runs, read_record(on_gpu=True))
        with RECORD.open("a") as out:
            for run in new_runs:
                out.write(json.dumps(run, separators=(",", ":")) + "\n")
        print(f"{len(new_runs)} evidence runs recorded in {RECORD.relative_to(REPO)}; next: "
              "python benchmarks/quality_claims.py --report-only")
    print(f"kept: {kept.relative_to(REPO)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu-check"))
    parser.add_argument("--carry", default=str(REPO / ".gpu-carry"))
    parser.add_argument("--work", help="scratch folder for the jobs' outputs (default: a new temporary one)")
    parser.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda where there is one")
    parser.add_argument("--tiny", action="store_true", help="the demo's sizes and short caps: the CPU test")
    parser.add_argument("--budget", type=float, help=f"seconds for all parts together (default {BUDGET}; tiny: "
                                                         "the sum of its caps)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--jobs", type=int, default=8, help="demo jobs replayed at once")
    # 8: a kept point's four further seeds of KD and no KD train at once; eight BERT-2 students shared an H200 at
    # 0.96 of four's examples/s each (benchmarks/gpu/2026-11-28-NVIDIA_H200/sharing.csv)
    parser.add_argument("--evidence-jobs", type=int, default=8, help="evidence runs at once on the GPU")
    parser.add_argument("--adopt", nargs="+", help="folders a GPU check and its reruns of parts wrote, in the order "
                                                   "they ran: their measurements into the repository")
    args = parser.parse_args()
    if args.adopt:
        adopt([Path(folder) for folder in args.adopt])
        return
    summary = check(args)
    failed = [part for part, result in summary["parts"].items() if "error" in result or result.get("failed")]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
