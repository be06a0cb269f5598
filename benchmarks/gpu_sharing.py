"""Small students sharing one GPU: how many jobs of a family (config.yaml's ``gpu_sharing``) should run at once.

    python benchmarks/gpu_sharing.py --device cuda --out DIR         # K = 1, 2, 4, 8 of each family: DIR/sharing.csv
    python benchmarks/gpu_sharing.py --adopt DIR/sharing.csv         # config.yaml's gpu_sharing from that measurement
    python benchmarks/gpu_sharing.py --device cpu --tiny --out DIR   # the demo's sizes on CPU: the code path, no figure

kdflow.workflow.gpu_packs runs K ``distill_student`` jobs as K processes on one GPU and the cost plan charges each
a K-th of its GPU time. Here K processes (as a pack's jobs: each its own interpreter and CUDA context) build a
student of the family, wait until all K are ready, then train side by side for the same time window; each counts
the examples it trained on. A step is the training loop's (kdflow.training.loop): the forward pass and the
method's loss against teacher logits (cached signals: random here, as speed does not depend on them) under the
precision's autocast, backward, the gradient norm and clipping, the optimiser step, and the loss read back.
Students are the config's, built by the student registry with random weights: bilstm and gated_cnn (Universal-KD
Table 5: KD, Adam), lstm_s (the thesis's LSTM_S over BERT-large's 1024-wide wordpieces: MSE on logits, AdamW) and
bert_2 (ALP-KD Table 3: BERT-base's first two layers, KD). Batches are 32 examples (ALP-KD's and the thesis's
batch; Universal-KD Table 5's grid spans 8 to 64, and smaller batches leave more of the GPU idle, so a K measured
at 32 is the cautious one) of real sentences, padded per batch as kdflow pads them: the demo's SST-2 and MRPC
excerpts (a single-sentence and a sentence-pair task; GLUE's time goes to pairs, MNLI and QQP) or, for LSTM_S, its
tasks' CoLA and SST-2.

Workers are forked from a server that imports torch and kdflow once for all of them (seconds of CPU each would
pay), kept across measurements, and release their model and cached GPU memory between measurements. Peak memory
is torch's per process (its CUDA context, about half a GB more per process, is left to the 80% margin of
:func:`recommend`); on CPU it is the worker process's peak resident memory so far.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import resource
import sys
import textwrap
import time
import traceback
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kdflow.core.data import read_local  # noqa: E402
from kdflow.core.hyperparameters import Hyperparameters  # noqa: E402
from kdflow.core.precision import PRECISIONS, resolve_precision  # noqa: E402
from kdflow.core.tasks import get_task  # noqa: E402
from kdflow.distillation.methods.registry import Shapes, build_method  # noqa: E402
from kdflow.students.registry import StudentContext, build_student  # noqa: E402
from kdflow.students.tokens import student_tokenizer  # noqa: E402
from kdflow.training.batching import EncodedSplit, batches, to_device, tokenize  # noqa: E402
from kdflow.training.hf_models import build_tokenizer  # noqa: E402
from kdflow.training.loop import build_optimizer  # noqa: E402
from kdflow.transfer.signals import TeacherSignals  # noqa: E402
from kdflow.workflow.cost_plan import SHARING  # noqa: E402

DEMO_GLUE = REPO / "demo" / "data" / "glue"
DEMO_VOCAB = REPO / "demo" / "vocab.txt"
BATCH_SIZE, MAX_SEQ_LENGTH = 32, 128  # config.yaml's max_seq_length
TINY_BATCH_SIZE, TINY_MAX_SEQ_LENGTH = 16, 32  # the demo's students' batch; shorter sentences, for a quick CPU test
# Each worker trains this long before the window too: on an H200 (2026-11-28) three warm-up steps left BERT-2's
# first window at K = 1 with 11 examples/s against 797 per process at K = 4, some one-time cost in the window.
WARMUP_SECONDS = 2.0
JOB_THREADS = 4  # config.yaml's resources.threads: a pack asks for K times a job's threads
GB = 2**30
# config.yaml's bert_k students start from bert-base-uncased: its shape, whatever model the tokenizer folder holds
# (the kit passes MiniLM-L6's for its vocabulary, BERT's 30,522 wordpieces).
BERT_BASE = {"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072}
DEMO_BERT = {"model_type": "bert", "hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128,
             "max_position_embeddings": 128}  # the demo's teacher
UNIVERSAL_KD_TABLE5 = {"learning_rate": 5e-5, "optimizer": "adam", "weight_decay": 0.0}
THESIS_LSTM_S = {"learning_rate": 5e-4, "optimizer": "adamw", "betas": [0.9, 0.98], "eps": 1e-6, "weight_decay": 0.01,
                 "weight_decay_all": True, "max_grad_norm": None}
ALP_KD = {"learning_rate": 5e-5}
# recommend(): a larger K must add this much aggregate throughput over the next smaller one, and K processes'
# summed peak memory fit in this share of the device's
MIN_GAIN = 0.10
MEMORY_SHARE = 0.8
COLUMNS = ["family", "config_key", "k", "examples_per_second", "per_process_examples_per_second", "speedup",
           "peak_allocated_gb", "peak_reserved_gb", "sum_peak_reserved_gb", "device_memory_gb", "batch_size",
           "seconds", "threads", "precision", "device", "date", "error"]


@dataclass(frozen=True)
class Family:
    """A student family as config.yaml trains it: its catalog spec, the demo's tiny spec, the method and optimiser
    settings of its experiment, and the tasks whose sentences it reads."""

    config_key: str  # the student type: config.yaml's gpu_sharing key
    spec: dict
    tiny_spec: dict
    method: str
    hyperparameters: dict
    tasks: tuple[str, ...] = ("sst2", "mrpc")


FAMILIES = {
    "bilstm": Family("bilstm", {"type": "bilstm"},
                     {"type": "bilstm", "layers": 3, "hidden_size": 64, "embeddings": {"dim": 32}},
                     "kd", UNIVERSAL_KD_TABLE5),
    "gated_cnn": Family("gated_cnn", {"type": "gated_cnn"},
                        {"type": "gated_cnn", "layers": 4, "hidden_size": 64, "embeddings": {"dim": 32}},
                        "kd", UNIVERSAL_KD_TABLE5),
    # lstm_s copies BERT-large's wordpiece vectors from the teacher: random ones of that width have its shapes
    "bilstm_s": Family("bilstm_s", {"type": "bilstm_s", "embeddings": {"source": "random", "dim": 1024,
                                                                       "mode": "multichannel"}},
                       {"type": "bilstm_s", "lstm_size": 32, "fc_size": 40,
                        "embeddings": {"source": "random", "dim": 50, "mode": "multichannel"}},
                       "mse_logits", THESIS_LSTM_S, ("cola", "sst2")),
    # bert_2's shape with random weights: the hf student is what bert_k builds, less the copying of weights
    "bert_k2": Family("bert_k", {"type": "hf", "architecture": {**BERT_BASE, "num_hidden_layers": 2}},
                      {"type": "hf", "architecture": {**DEMO_BERT, "num_hidden_layers": 2}}, "kd", ALP_KD),
}


def measure(device: str, ks=(1, 2, 4, 8), families=("bilstm", "gated_cnn", "bilstm_s", "bert_k2"), precision="bf16",
            tiny=False, deadline=None, tokenizer_dir=None, log=print, seconds=None) -> pd.DataFrame:
    """One row per family and K (columns COLUMNS): K processes training side by side on ``device`` for ``seconds``
    (default 4, or with a ``deadline`` 40% of each measurement's share of the time left, the rest for building and
    warming up, but at least 1; 0.3 with ``tiny``, the demo's sizes). Families are measured in turn, each K in
    increasing order; a K whose processes fail (out of memory) ends its family with an error row. ``deadline`` (a
    time.monotonic() value): no measurement starts that would end after it, and one whose processes are not ready
    by then is stopped (an error row). ``tokenizer_dir``: a Hugging Face tokenizer folder (BERT's vocabulary, the
    size the real students' embeddings have), else the demo's small vocabulary."""
    if seconds is None:
        seconds = 0.3 if tiny else 4.0
        if deadline is not None and not tiny:
            seconds = max(1.0, min(seconds, 0.4 * (deadline - time.monotonic()) / (len(families) * len(ks))))
    today = date.today().isoformat()
    rows = []
    workers = Workers(tokenizer_dir)
    try:
        for name in families:
            family, alone = FAMILIES[name], None
            for k in sorted(ks):
                if deadline is not None and time.monotonic() + seconds > deadline:
                    log(f"gpu sharing: deadline reached, {len(rows)} measurements done")
                    return pd.DataFrame(rows, columns=COLUMNS)
                # tiny models gain nothing from a second thread, and on a busy CPU lose much waiting for it
                threads = 1 if tiny else max(1, min(JOB_THREADS, len(os.sched_getaffinity(0)) // k))
                job = {"family": name, "spec": family.tiny_spec if tiny else family.spec, "method": family.method,
                       "hyperparameters": family.hyperparameters, "tasks": family.tasks, "device": device,
                       "precision": precision, "threads": threads, "warmup": 1 if tiny else 3,
                       "warmup_seconds": 0.0 if tiny else WARMUP_SECONDS,
                       "batch_size": TINY_BATCH_SIZE if tiny else BATCH_SIZE,
                       "max_length": TINY_MAX_SEQ_LENGTH if tiny else MAX_SEQ_LENGTH}
                row = {"family": name, "config_key": family.config_key, "k": k, "batch_size": job["batch_size"],
                       "seconds": seconds, "threads": threads, "precision": precision, "date": today, "error": ""}
                patience = Workers.READY_SECONDS if deadline is None else deadline - time.monotonic() - seconds
                try:
                    results = workers.run(job, k, seconds, min(Workers.READY_SECONDS, max(patience, 1.0)))
                except WorkerError as error:
                    rows.append(row | {"error": str(error).strip().splitlines()[-1]})
                    log(f"{name:<10} K={k} failed, larger K not tried:\n{error}")
                    break
                rates = [result["examples"] / result["seconds"] for result in results]
                alone = sum(rates) if k == 1 else alone
                row |= {"examples_per_second": sum(rates), "per_process_examples_per_second": sum(rates) / k,
                        "speedup": sum(rates) / alone if alone else float("nan"),
                        "peak_allocated_gb": max(result["allocated"] for result in results) / GB,
                        "peak_reserved_gb": max(result["reserved"] for result in results) / GB,
                        "sum_peak_reserved_gb": sum(result["reserved"] for result in results) / GB,
                        "device_memory_gb": results[0]["device_memory"] / GB, "device": results[0]["device"],
                        "precision": results[0]["precision"]}
                rows.append(row)
                log(f"{name:<10} K={k}: {row['examples_per_second']:9.0f} examples/s in all, "
                    f"{row['per_process_examples_per_second']:8.0f} per process, x{row['speedup']:.2f} over K=1, "
                    f"peak {row['peak_reserved_gb']:.2f} GB per process ({row['sum_peak_reserved_gb']:.2f} GB in all)")
    finally:
        workers.close()
    return pd.DataFrame(rows, columns=COLUMNS)


class WorkerError(RuntimeError):
    """A measurement whose processes failed or did not answer in time."""


class Workers:
    """Worker processes kept across measurements, as many as the largest K so far. Forked from a fork server, not
    from this process, which may hold a CUDA context a forked child cannot use. The server imports, once for all
    of them, this module, what a first optimiser imports (torch._dynamo) and BERT's modelling code: seconds of CPU
    that spawned workers would each pay."""

    READY_SECONDS = 180  # at most, to build a student and warm up, the first time also to start and import

    def __init__(self, tokenizer_dir):
        self.tokenizer_dir = None if tokenizer_dir is None else str(tokenizer_dir)
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload([__name__, "torch._dynamo", "transformers.models.bert.modeling_bert"])
        self.processes, self.connections = [], []

    def run(self, job: dict, k: int, seconds: float, patience: float) -> list[dict]:
        """Each of ``k`` workers' counts for ``job``: all build and warm up (within ``patience`` seconds), then all
        train for ``seconds`` until the same moment."""
        while len(self.processes) < k:
            parent, child = self.context.Pipe()
            process = self.context.Process(target=serve, args=(child, self.tokenizer_dir, len(self.processes)),
                                           daemon=True)
            process.start()
            self.processes.append(process)
            self.connections.append(parent)
        connections = self.connections[:k]
        try:
            for connection in connections:
                connection.send(job)
            for connection in connections:
                self.receive(connection, "ready", patience)
            end = time.monotonic() + seconds  # one clock for every process of the machine
            for connection in connections:
                connection.send(end)
            return [self.receive(connection, "done", seconds + 60) for connection in connections]
        except (WorkerError, OSError) as error:  # OSError: a pipe to a worker that died
            self.kill()  # a worker may be stuck or its GPU state broken: the next measurement starts fresh ones
            raise WorkerError(str(error)) from None

    @staticmethod
    def receive(connection, expected: str, timeout: float):
        if not connection.poll(timeout):
            raise WorkerError(f"no answer in {timeout:.0f} s")
        try:
            kind, value = connection.recv()
        except EOFError:
            raise WorkerError("a worker process died") from None
        if kind != expected:
            raise WorkerError(value)
        return value

    def kill(self) -> None:
        for process in self.processes:
            process.kill()
            process.join()
        self.processes, self.connections = [], []

    def close(self) -> None:
        for connection in self.connections:
            try:
                connection.send(None)
            except OSError:  # it died: kill() reaps it
                pass
        for process in self.processes:
            process.join(timeout=10)
        self.kill()


def serve(connection, tokenizer_dir: str | None, rank: int) -> None:
    """A worker: one measurement per job received (None ends it); an exception is sent back, not raised."""
    tokenizer = build_tokenizer({"model": tokenizer_dir} if tokenizer_dir else {"tokenizer": str(DEMO_VOCAB)})
    while (job := connection.recv()) is not None:
        try:
            connection.send(("done", train_side_by_side(job, tokenizer, connection, rank)))
        except Exception:  # noqa: BLE001 (out of memory, any failure: the parent records it)
            connection.send(("error", traceback.format_exc()))
        gc.collect()
        torch.cuda.empty_cache()  # what this family cached is not the next one's


def train_side_by_side(job: dict, tokenizer, connection, rank: int) -> dict:
    """Build the job's student, warm up, say ready, train until the end time the parent sends back; the examples
    trained on, the seconds, peak memory and the device."""
    device = torch.device(job["device"])
    cuda = device.type == "cuda"
    torch.set_num_threads(job["threads"])
    torch.manual_seed(rank)
    if cuda:
        torch.cuda.init()  # the allocator's statistics exist once CUDA is initialised
        torch.cuda.reset_peak_memory_stats(device)
    precision = resolve_precision(job["precision"], device)
    student = build_student(job["spec"], StudentContext(2, tokenizer))
    split = sentences(job["tasks"], student_tokenizer(student, tokenizer), job["max_length"])
    stream = endless(split, job["batch_size"], np.random.default_rng(rank))
    with torch.no_grad():
        widths = tuple(h.shape[-1] for h in student.eval()(next(stream)).layers)
    # the methods measured read the teacher's logits alone: its layers' shape (BERT-base's here) is not used
    method = build_method(job["method"], Shapes(widths, 12, 768, 2, False))
    model = torch.nn.ModuleDict({"student": student, "method": method}).to(device).train()
    hp = Hyperparameters(**job["hyperparameters"], batch_size=job["batch_size"], epochs=1)
    optimizer = build_optimizer(model.named_parameters(), hp)
    parameters = [p for p in model.parameters() if p.requires_grad]
    scaler = precision.grad_scaler()
    teacher_logits = torch.randn(len(split), 2, device=device)  # the cached signals, on the device as SignalCache

    def step() -> int:
        batch = to_device(next(stream), device)
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast():
            output = model["student"](batch)
            loss = model["method"](output, TeacherSignals(teacher_logits[batch["index"]]), batch["labels"])["loss"]
        scaler.scale(loss.float()).backward()
        scaler.unscale_(optimizer)
        norm = torch.nn.utils.get_total_norm([p.grad for p in parameters if p.grad is not None])
        if hp.max_grad_norm:
            torch.nn.utils.clip_grads_with_norm_(parameters, hp.max_grad_norm, norm)
        scaler.step(optimizer)
        scaler.update()
        loss.item()  # the loop reads both back every step: a synchronisation, as in a real job
        norm.item()
        return len(batch["labels"])

    warming = time.monotonic()
    for _ in range(job["warmup"]):
        step()
    while time.monotonic() - warming < job["warmup_seconds"]:
        step()
    connection.send(("ready", None))
    end = connection.recv()
    started = time.monotonic()
    examples = step()  # one step at least, should the end time have passed already
    while time.monotonic() < end:
        examples += step()
    if cuda:
        torch.cuda.synchronize(device)
    elapsed = time.monotonic() - started
    if cuda:
        memory = {"allocated": torch.cuda.max_memory_allocated(device),
                  "reserved": torch.cuda.max_memory_reserved(device),
                  "device_memory": torch.cuda.get_device_properties(device).total_memory,
                  "device": torch.cuda.get_device_name(device)}
    else:
        resident = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        memory = {"allocated": resident, "reserved": resident,
                  "device_memory": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "device": "cpu"}
    return {"examples": examples, "seconds": elapsed, "precision": precision.name, **memory}


def sentences(tasks: tuple[str, ...], reader, max_length: int) -> EncodedSplit:
    """The demo's training sentences of ``tasks``, each task tokenised as kdflow tokenises it, in one split."""
    parts = []
    for name in tasks:
        task = get_task(name)
        train = read_local(task, DEMO_GLUE / task.tsv_dir)[0]["train"]
        frame = pd.DataFrame({"text_a": train.text_a, "text_b": train.text_b, "label": train.label})
        parts.append(tokenize(frame, reader, max_length, labelled=True))
    return EncodedSplit([ids for part in parts for ids in part.input_ids],
                        [types for part in parts for types in part.token_type_ids],
                        np.concatenate([part.labels for part in parts]), parts[0].pad_id)


def endless(split: EncodedSplit, batch_size: int, rng: np.random.Generator):
    """Shuffled epochs of batches, one after another."""
    while True:
        yield from batches(split, batch_size, regression=False, shuffle=True, generator=rng)


def recommend(frame: pd.DataFrame) -> dict[str, int]:
    """Per measured family, by its config.yaml gpu_sharing key (the student type), the K to share a GPU.

    The measured Ks are walked up from the smallest: a K is taken over the one below it when its K processes'
    summed peak memory fits in MEMORY_SHARE (80%) of the device's (the rest for CUDA contexts, a process's own
    memory beyond torch's allocator and longer batches than the measured ones) and it adds at least MIN_GAIN (10%)
    aggregate examples/s over the one below; the walk stops at the first K that does not. More processes sharing a
    GPU risk contention and memory for a small or noisy gain, so a gain must be clear to be taken. A K that failed
    ends the walk like one that does not fit; a family none of whose Ks fits gets 1."""
    chosen = {}
    for key, rows in frame.groupby("config_key", sort=False):
        rows = rows.sort_values("k")
        fits = ((rows["error"].isna() | (rows["error"] == "")) & np.isfinite(rows["examples_per_second"])
                & (rows["sum_peak_reserved_gb"] <= MEMORY_SHARE * rows["device_memory_gb"]))
        k, best = 1, None
        for row, fit in zip(rows.itertuples(), fits):
            if not fit or (best is not None and row.examples_per_second < (1 + MIN_GAIN) * best):
                break
            k, best = int(row.k), row.examples_per_second
        chosen[key] = k
    return chosen


# Measured but not packed: gpu_sharing is per student type, and bert_k's BERT-2 also stands for BERT-4 and BERT-6,
# two to three times heavier a step.
NOT_PACKED = {"bert_k"}


def adopted(frame: pd.DataFrame) -> dict[str, int]:
    """The Ks that config.yaml's gpu_sharing takes from a measurement: :func:`recommend`'s, less :data:`NOT_PACKED`
    and less a family whose sweep stopped before the largest K measured (at the part's deadline: the GPU check of
    2026-12-04 reached K = 2 of bilstm_s), whose next K might have paid: it keeps the K it has."""
    largest = frame["k"].max()
    complete = {key for key, rows in frame.groupby("config_key") if rows["k"].max() == largest}
    return {key: k for key, k in recommend(frame).items() if key not in NOT_PACKED and key in complete}


def adopt_speedups(frame: pd.DataFrame, student_types, path) -> pd.DataFrame:
    """Write the measured speedups of ``student_types`` (their rows of ``frame``, a sharing.csv) into ``path``
    (reference/gpu_sharing.csv, which the cost plan charges a shared job by), in place of those types' rows there;
    a failed K is left out. Returns the new table."""
    path = Path(path)
    measured = frame[frame.config_key.isin(student_types) & (frame.error.isna() | (frame.error == ""))]
    new = pd.DataFrame({"student_type": measured.config_key, "k": measured.k.astype(int),
                        "speedup": measured.speedup, "device": measured.device,
                        "source": [f"benchmarks/gpu_sharing.py, {row.family} at batch {row.batch_size}, "
                                   f"{row.precision}, {row.date}" for row in measured.itertuples()]})
    old = pd.read_csv(path) if path.exists() else new.iloc[:0]
    table = pd.concat([old[~old.student_type.isin(student_types)], new], ignore_index=True)
    table.to_csv(path, index=False, float_format="%.4g")
    return table


def adopt(recommendation: dict, config_path, note: str) -> dict[str, int]:
    """Rewrite ``config_path``'s ``gpu_sharing:`` line with the recommended Ks of the families its students use,
    and the comment block right above it to say they were measured (``note``: on what and when); every other byte
    of the file stays. Families the measurement lacks keep their K and are named as not measured. Returns the new
    gpu_sharing."""
    path = Path(config_path)
    with path.open(newline="") as stream:  # line endings as they are
        lines = stream.read().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.startswith("gpu_sharing:")]
    if len(at) != 1:
        raise ValueError(f"{path}: expected one top-level `gpu_sharing:` line, found {len(at)}")
    line = at[0]
    comment = line
    while comment > 0 and lines[comment - 1].startswith("#"):
        comment -= 1
    used = {spec["type"] for spec in yaml.safe_load("".join(lines)).get("students", {}).values()}
    measured = {key: int(k) for key, k in recommendation.items() if key in used}
    sharing = {**(yaml.safe_load(lines[line])["gpu_sharing"] or {}), **measured}
    kept = [key for key in sharing if key not in measured]
    ending = lines[line][len(lines[line].rstrip("\r\n")):] or "\n"
    text = ("Small students share a GPU on a cluster, K jobs at once (python -m kdflow.workflow.gpu_packs; "
            "docs/clusters.md), and the plan charges each of their jobs its GPU-hours over the measured speedup "
            "(reference/gpu_sharing.csv). K measured by "
            f"benchmarks/gpu_sharing.py for {', '.join(measured)} {note}"
            + (f"; {', '.join(kept)} not measured." if kept else "."))
    header = [f"# {part}{ending}" for part in textwrap.wrap(text, 118, break_on_hyphens=False)]
    entries = ", ".join(f"{key}: {k}" for key, k in sharing.items())
    lines[comment:line + 1] = [*header, f"gpu_sharing: {{{entries}}}{ending}"]
    with path.open("w", newline="") as stream:
        stream.write("".join(lines))
    return sharing


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--precision", default="bf16", choices=PRECISIONS)
    parser.add_argument("--seconds", type=float, help="training window of each measurement (default 4; tiny 0.3)")
    parser.add_argument("--tokenizer-dir", help="a Hugging Face tokenizer folder (default: the demo's vocabulary)")
    parser.add_argument("--tiny", action="store_true", help="the demo's model sizes")
    parser.add_argument("--out", type=Path, help="write OUT/sharing.csv")
    parser.add_argument("--adopt", type=Path, metavar="CSV", help="set config.yaml's gpu_sharing from a sharing.csv")
    parser.add_argument("--config", type=Path, default=REPO / "config.yaml")
    parser.add_argument("--speedups", type=Path, default=REPO / SHARING,
                        help="the measured speedups the cost plan charges shared jobs by (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.adopt:
        frame = pd.read_csv(args.adopt)
        measured = frame[frame["device"].notna()]
        if measured.empty or (measured["device"] == "cpu").any():
            sys.exit(f"{args.adopt}: not a GPU measurement; a CPU run says nothing about sharing a GPU")
        first = measured.iloc[0]
        note = f"on one {first.device} in {first.precision}, {first.date}"
        recommendation = adopted(frame)
        print(f"gpu_sharing: {adopt(recommendation, args.config, note)} ({args.config})")
        adopt_speedups(frame, list(recommendation), args.speedups)
        return
    frame = measure(args.device, tuple(args.ks), tuple(args.families), args.precision, args.tiny,
                    tokenizer_dir=args.tokenizer_dir, seconds=args.seconds)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.out / "sharing.csv", index=False, float_format="%.6g")
    print(f"recommended gpu_sharing: {recommend(frame)}")


if __name__ == "__main__":
    main()
