"""Every bad input and fault gets one clear message, and a plain rerun recovers once its cause is fixed (issue 18).

One table of faults. Each case breaks something the way a user, a crash or a machine would and returns what to try,
what its message must name (the file and line, or the config key, and what to do) and how to remove the cause; the
test tries, checks the message, removes the cause and tries the same again. Most cases call kdflow's readers and
loaders directly, inside ``rule_job`` where a rule job runs them; the few that need Snakemake share one scratch copy
of the repository in which RTE's teacher and pseudo-heads are built once.
"""

import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml
from conftest import DEMO_VOCAB, REPO, copy_repo, demo_task_dir, planned_jobs, run_while_progressing, snakemake

from kdflow.core.data import TaskData, prepare_task
from kdflow.core.devices import select_device
from kdflow.core.errors import UserError
from kdflow.core.job_setup import rule_job
from kdflow.core.tasks import get_task
from kdflow.core.tensor_files import save_tensors
from kdflow.probing.senteval import read_probing_file
from kdflow.students.embeddings import read_word_vectors
from kdflow.training.checkpoint import Checkpoint, resumable_chunks
from kdflow.training.hf_models import build_tokenizer
from kdflow.transfer.signals import SignalCache
from kdflow.workflow import results_paths as paths
from kdflow.workflow.config_checks import check_references
from kdflow.workflow.config_files import (
    FastStrictLoader,
    StrictConstructor,
    StrictLoader,
    load_config_file,
    validate_config,
    workflow_config,
)

SCHEMA = REPO / "schemas" / "config.schema.yaml"


@dataclass
class Fault:
    attempt: Callable[[], str | None]  # the problem it reports, None once it succeeds
    expected: list[str]  # what the message names
    fix: Callable[[], None]  # removes the cause (a damaged file: what rerunning the job that writes it does)


def in_job(work: Callable[[], object], inputs=()) -> Callable[[], str | None]:
    """``work`` run as a rule script runs it (inside ``rule_job``, with the job's ``inputs``); what it logged as a
    warning or an error, None if nothing."""

    def attempt() -> str | None:
        log = Path("logs/job.log")
        job = SimpleNamespace(log=[str(log)], threads=1, input=[str(path) for path in inputs])
        try:
            with rule_job(job):
                work()
        except SystemExit:
            pass
        problems = [line for line in log.read_text().splitlines() if " ERROR " in line or " WARNING " in line]
        return "\n".join(problems) or None

    return attempt


def raised(work: Callable[[], object]) -> Callable[[], str | None]:
    def attempt() -> str | None:
        try:
            work()
        except UserError as error:
            return str(error)
        return None

    return attempt


def write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def flip_byte(path: Path, from_end: int) -> None:
    data = bytearray(path.read_bytes())
    data[-from_end] ^= 0xFF
    path.write_bytes(bytes(data))


# Faults of kdflow's own files: a crash, a copy cut short.


def checkpoint_truncated(tmp: Path) -> Fault:
    path = Path("checkpoints/train_pseudo_heads/tiny_bert/rte.ckpt")
    interrupted = Checkpoint(path, "job", every_minutes=None, every_steps=1)
    resumable_chunks(range(3), lambda index, chunk: chunk, interrupted)
    truncate(path)

    def job():  # a rule job: resume if possible, and remove the checkpoint once the outputs are written
        checkpoint = Checkpoint(path, "job", every_minutes=None, every_steps=1)
        assert resumable_chunks(range(3), lambda index, chunk: chunk * 10, checkpoint) == [0, 10, 20]  # afresh
        checkpoint.remove()

    expected = [f"checkpoint {path} cannot be read", f"set aside as {path}.damaged", "starting afresh"]
    return Fault(in_job(job), expected, lambda: None)  # the job recovers by itself; its rerun finds no checkpoint


SIGNALS = Path(paths.SIGNALS.format(teacher="tiny_bert", task="sst2", transfer="train"))


def write_signals() -> None:
    SIGNALS.parent.mkdir(parents=True, exist_ok=True)
    save_tensors({"logits": torch.randn(50, 2), "idx": torch.arange(50)}, SIGNALS, {"transfer": "train"})


def signals_truncated(tmp: Path) -> Fault:
    write_signals()
    truncate(SIGNALS)
    expected = [f"{SIGNALS} is damaged or incomplete", "bytes where its header describes",
                f"set aside as {SIGNALS}.damaged", "run snakemake again to rebuild it"]
    return Fault(in_job(lambda: SignalCache(SIGNALS, "cpu", np.arange(50)), [SIGNALS]), expected, write_signals)


def signals_flipped_byte(tmp: Path) -> Fault:
    write_signals()
    flip_byte(SIGNALS, 300)  # inside the logits, the file's length intact: only the checksum can tell
    expected = [f"{SIGNALS} is damaged or incomplete", "does not match the checksum", f"{SIGNALS}.damaged"]
    return Fault(in_job(lambda: SignalCache(SIGNALS, "cpu", np.arange(50)), [SIGNALS]), expected, write_signals)


DATA = Path(paths.DATA.format(task="sst2"))


def prepare_sst2() -> None:
    prepare_task(get_task("sst2"), demo_task_dir("sst2"), DATA)


def data_file_damaged(name: str, damage: Callable[[Path], None], problem: str) -> Callable[[Path], Fault]:
    def case(tmp: Path) -> Fault:
        prepare_sst2()
        damage(DATA / name)
        expected = [f"{DATA / name} is damaged or incomplete", problem, f"set {DATA} aside as {DATA}.damaged",
                    "run snakemake again"]
        return Fault(in_job(lambda: TaskData.load(DATA).split("train"), [DATA]), expected, prepare_sst2)

    return case


def metrics_empty(tmp: Path) -> Fault:
    path = Path(paths.STUDENT_METRICS.format(experiment="e", task="sst2", student="bert_3", method="kd",
                                             point="default", seed=0))
    write(path, "")  # renamed into place before its data reached the disk
    expected = [f"{path} is damaged or incomplete (not valid JSON: Expecting value at line 1", f"{path}.damaged"]
    return Fault(in_job(lambda: None, [path]), expected, lambda: write(path, json.dumps({"scores": {}})))


# Raw data.


def glue_copy(task: str) -> Path:
    directory = Path("raw") / get_task(task).tsv_dir
    shutil.copytree(demo_task_dir(task), directory)
    return directory


def raw_line_changed(task: str, split: str, line: int, change: Callable[[str], str | bytes],
                     expected: Callable[[Path], list[str]]) -> Callable[[Path], Fault]:
    """A raw TSV whose ``line`` (1-based) is replaced by ``change(line)``."""

    def case(tmp: Path) -> Fault:
        directory = glue_copy(task)
        path = directory / f"{split}.tsv"
        original = path.read_bytes()
        lines = original.split(b"\n")
        changed = change(lines[line - 1].decode())
        lines[line - 1] = changed if isinstance(changed, bytes) else changed.encode()
        path.write_bytes(b"\n".join(lines))
        attempt = in_job(lambda: prepare_task(get_task(task), directory, Path(paths.DATA.format(task=task))))
        return Fault(attempt, expected(path), lambda: path.write_bytes(original))

    return case


def with_score(score: str) -> Callable[[str], str]:
    return lambda line: "\t".join([*line.split("\t")[:-1], score])


def probing_latin1(tmp: Path) -> Fault:
    path = Path("senteval/past_present.txt")
    rows = [f"{split}\t{label}\tthe cat {word} on the mat" for split in ("tr", "va", "te")
            for label, word in (("PAST", "sat"), ("PRES", "sits"))]
    write(path, "\n".join(rows[:3]).encode() + "\ntr\tPAST\tthe caf\xe9 closed\n".encode("latin-1"))
    expected = [f"{path}:4: byte 0xe9 at column 16 is not UTF-8", "save the file as UTF-8"]
    return Fault(raised(lambda: read_probing_file(path)), expected, lambda: write(path, "\n".join(rows)))


def vectors_not_numbers(tmp: Path) -> Fault:
    path = Path("vectors.txt")
    write(path, "2 3\ngood 0.1 0.2 0.3\nbad 0.1 O.2 0.3\n")  # a letter O for a zero
    tokenizer = build_tokenizer({"tokenizer": str(DEMO_VOCAB)})
    expected = [f"{path}:3: a vector value is not a number"]
    fix = lambda: write(path, "2 3\ngood 0.1 0.2 0.3\nbad 0.1 0.2 0.3\n")  # noqa: E731
    return Fault(in_job(lambda: read_word_vectors(path, tokenizer)), expected, fix)


# The machine.


def cuda_without_cuda(tmp: Path) -> Fault:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    device = {"name": "cuda"}
    expected = ["the config says `device: cuda` but torch sees no CUDA device", "set `device: auto`"]
    return Fault(in_job(lambda: select_device(device["name"])), expected, lambda: device.update(name="auto"))


def disk_full(tmp: Path) -> Fault:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full to stand for a full disk")
    target = {"path": "/dev/full"}

    def job():
        with open(target["path"], "wb") as f:
            f.write(b"\0" * 1_000_000)

    expected = ["No space left on device (a full disk or a quota)", "free space, then run snakemake again"]
    return Fault(in_job(job), expected, lambda: target.update(path="output.bin"))


def offline(code: str, fixed: str, expected: list[str]) -> Callable[[Path], Fault]:
    """``code`` in a Python process with no hub (offline, with an empty cache): the hub is unreachable here
    anyway, and offline mode makes it fail at once. ``fixed`` replaces ``code`` once the cause is removed."""

    def case(tmp: Path) -> Fault:
        env = {**os.environ, "HF_HOME": str(tmp / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "PYTHONPATH": str(REPO)}
        script = {"code": code}

        def attempt() -> str | None:
            run = run_while_progressing([sys.executable, "-c", script["code"]], merged=False, env=env)
            return run.stderr.strip() or None

        return Fault(attempt, expected, lambda: script.update(code=fixed))

    return case


QUIETLY = "import logging, sys; logging.disable(logging.WARNING)\n"
IN_JOB = QUIETLY + "from kdflow.core.errors import UserError\ntry:\n    {work}\nexcept UserError as error:\n    sys.exit(str(error))"
GLUE_FROM_HUB = IN_JOB.format(work="from kdflow.core.data import prepare_task; from kdflow.core.tasks import get_task; "
                                   f"prepare_task(get_task('rte'), {{glue_dir}}, {paths.DATA.format(task='rte')!r})")
TOKENIZER_FROM_HUB = IN_JOB.format(work="from kdflow.training.hf_models import build_tokenizer; build_tokenizer({spec})")


# Config files and the config.


def config_file(text: str, expected: list[str], fixed: str, read=load_config_file) -> Callable[[Path], Fault]:
    def case(tmp: Path) -> Fault:
        path = Path("config.yaml")
        write(path, text)
        return Fault(raised(lambda: read(path)), [part.replace("{path}", str(path)) for part in expected],
                     lambda: write(path, fixed))

    return case


def demo_config() -> dict:
    return load_config_file(REPO / "demo" / "config.yaml")


def config_checked(path: Path) -> None:
    """As the workflow checks a config given with --configfile and --replace-workflow-config."""
    settings = SimpleNamespace(configfiles=[path], config={}, replace_workflow_config=True)
    config, sources = workflow_config([], settings)
    validate_config(config, SCHEMA, sources)
    check_references(config)


def config_edit(edit: Callable[[dict], None], expected: list[str]) -> Callable[[Path], Fault]:
    """The demo's config with ``edit`` applied, validated and cross-checked as the workflow does."""

    def case(tmp: Path) -> Fault:
        shutil.copytree(REPO / "reference", "reference")  # the papers' numbers, which the demo's config names
        shutil.copytree(REPO / "demo/data/unlabelled", "demo/data/unlabelled")  # checked to exist, like them
        path = Path("config.yaml")
        broken = demo_config()
        edit(broken)
        write(path, json.dumps(broken, indent=1))  # JSON is YAML, and keeps a quoted number a string
        return Fault(raised(lambda: config_checked(path)), expected,
                     lambda: write(path, (REPO / "demo" / "config.yaml").read_text()))

    return case


def unknown_top_level_key(config: dict) -> None:
    config["devices"] = "cpu"


def nested_typo(config: dict) -> None:
    config["teacher_defaults"]["epoch"] = 3


def string_for_integer(config: dict) -> None:
    config["teacher_defaults"]["epochs"] = "3"


def missing_reference_file(config: dict) -> None:
    config["paper_tables"]["reference"] = "reference/paper_result.csv"


def quoted_number_in_a_grid(config: dict) -> None:
    config["experiments"]["universal_kd_table2"]["grid"]["learning_rate"] = ["1e-4"]


DIRECT = {
    # kdflow's own files
    "truncated checkpoint": checkpoint_truncated,
    "truncated signals": signals_truncated,
    "signals with a flipped byte": signals_flipped_byte,
    "truncated train.parquet": data_file_damaged("train.parquet", truncate, "not a complete Parquet file"),
    "train.parquet with a flipped byte": data_file_damaged(
        "train.parquet", lambda path: flip_byte(path, len(path.read_bytes()) // 3), "CRC checksum verification failed"),
    "truncated meta.json": data_file_damaged("meta.json", truncate, "not valid JSON"),
    "empty metrics.json": metrics_empty,
    # raw data
    "a Latin-1 byte in a TSV": raw_line_changed(
        "sst2", "train", 7, lambda line: line.encode().replace(b" ", b" caf\xe9 ", 1),
        lambda path: [f"{path}:7: byte 0xe9 at column", "is not UTF-8", "save the file as UTF-8"]),
    "an STS-B score of 75": raw_line_changed(
        "stsb", "dev", 3, with_score("75"), lambda path: [f"{path}:3: score 75 is outside the task's scale 0-5"]),
    "an STS-B score of nan": raw_line_changed(
        "stsb", "train", 2, with_score("nan"), lambda path: [f"{path}:2: score nan is not a finite number"]),
    "a label outside the task's set": raw_line_changed(
        "sst2", "dev", 4, with_score("2"), lambda path: [f"{path}:4: unknown label '2'; expected one of ['0', '1']"]),
    "a Latin-1 byte in a SentEval file": probing_latin1,
    "a word vector that is not numbers": vectors_not_numbers,
    # the machine
    "device: cuda without CUDA": cuda_without_cuda,
    "a full disk": disk_full,
    "no data.glue_dir and no hub": offline(
        GLUE_FROM_HUB.format(glue_dir=None), GLUE_FROM_HUB.format(glue_dir=repr(str(demo_task_dir("rte")))),
        ["task 'rte': `data.glue_dir` is not set", "nyu-mll/glue", "set `data.glue_dir` to a copy of GLUE"]),
    "a hub checkpoint and no hub": offline(
        TOKENIZER_FROM_HUB.format(spec={"model": "bert-base-uncased"}),
        TOKENIZER_FROM_HUB.format(spec={"tokenizer": str(DEMO_VOCAB)}),
        ["'bert-base-uncased' is not a local directory and could not be had from the Hugging Face hub",
         "HF_HUB_OFFLINE=1"]),
    # config files
    "invalid YAML": config_file("device: cpu\nresources: {threads: 1,\n  gpu: 0\nteachers: {}\n",
                                ["{path}:4:", "expected ',' or '}'"], "device: cpu\n"),
    "a key written twice": config_file("device: cpu\nresources: {threads: 1}\ndevice: cuda\n",
                                       ["{path}:3: key 'device' appears twice in one mapping (first at line 1)"],
                                       "device: cuda\nresources: {threads: 1}\n"),
    "a config file that is not UTF-8": config_file(b"device: cpu # caf\xe9\n",
                                                   ["{path}:1: byte 0xe9 at column 18 is not UTF-8"], "device: cpu\n"),
    "a config file that is a list": config_file("- device: cpu\n", ["{path}: a config file is a mapping"],
                                                "device: cpu\n"),
    # the config
    "an unknown top-level key": config_edit(
        unknown_top_level_key,
        ["the top level: unknown key(s) 'devices' (given in config.yaml); allowed: analysis, attention_maps,"]),
    "an unknown nested key": config_edit(
        nested_typo, ["teacher_defaults: unknown key(s) 'epoch'; allowed:", "epochs"]),
    "a string for an integer": config_edit(string_for_integer, ["teacher_defaults.epochs: '3' is not of type 'integer'"]),
    "a quoted number in a grid": config_edit(
        quoted_number_in_a_grid, ["experiments.universal_kd_table2.grid.learning_rate: '1e-4' is not of type float"]),
    "a missing reference file": config_edit(
        missing_reference_file, ["paper_tables.reference: file reference/paper_result.csv not found"]),
}


@pytest.mark.parametrize("case", DIRECT.values(), ids=DIRECT.keys())
def test_a_fault_gets_one_clear_message_and_a_rerun_recovers(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fault = case(tmp_path)
    message = fault.attempt()
    assert message is not None and all(part in message for part in fault.expected), message
    assert "Traceback" not in message and len(message) < 600, message  # one message, not a schema or a stack
    fault.fix()
    assert fault.attempt() is None


def test_numbers_written_like_1e4_are_numbers(tmp_path):
    """PyYAML reads `1.0e4` and `1e-4` as strings (YAML 1.1); the config reads them as YAML 1.2 does."""
    path = tmp_path / "grid.yaml"
    path.write_text("grid: {learning_rate: [1e-4, 1.0e4, 2.5E-5, 1.0e+4], batch_size: [16], name: [1e4x]}\n")
    assert yaml.safe_load(path.read_text())["grid"]["learning_rate"][:2] == ["1e-4", "1.0e4"]
    grid = load_config_file(path)["grid"]
    assert grid == {"learning_rate": [1e-4, 1e4, 2.5e-5, 1e4], "batch_size": [16], "name": ["1e4x"]}


def test_libyamls_parser_reads_every_shipped_yaml_file_as_the_pure_python_one_does():
    """Config files are parsed by libyaml for speed and by pure Python only for an error's message: the two must
    agree on the configs, the schema and the reference files."""
    files = [path for folder in ("", "demo", "schemas", "reference", "slurm", "workstation", "envs")
             for path in sorted((REPO / folder).glob("*.yaml"))]
    assert len(files) == 9 and FastStrictLoader.__mro__[1] is StrictConstructor
    for path in files:
        assert yaml.load(path.read_text(), Loader=FastStrictLoader) == yaml.load(path.read_text(), Loader=StrictLoader)
    if yaml.__with_libyaml__:
        assert issubclass(FastStrictLoader, yaml.CSafeLoader)
    twice = r"key 'a' appears twice in one mapping \(first at line 1\)"
    with pytest.raises(yaml.constructor.ConstructorError, match=twice):
        yaml.load("a: 1\nb: 2\na: 3\n", Loader=FastStrictLoader)


def test_the_config_is_snakemakes_read_strictly(tmp_path):
    """The workflow's file, then --configfile files, then --config values; the workflow's file is left out under
    --replace-workflow-config."""
    (tmp_path / "config.yaml").write_text("device: cpu\nresources: {threads: 1, gpu: 0}\n")
    (tmp_path / "mine.yaml").write_text("resources: {gpu: 1, runtime: 1e3}\n")
    settings = SimpleNamespace(configfiles=[tmp_path / "mine.yaml"], config={"device": "auto"},
                               replace_workflow_config=False)
    config, sources = workflow_config([tmp_path / "config.yaml"], settings)
    assert config == {"device": "auto", "resources": {"threads": 1, "gpu": 1, "runtime": 1000.0}}
    assert sources == {"device": "--config", "resources": str(tmp_path / "mine.yaml")}
    settings.replace_workflow_config = True
    config, _ = workflow_config([tmp_path / "config.yaml"], settings)
    assert config == {"device": "auto", "resources": {"gpu": 1, "runtime": 1000.0}}


# Through Snakemake: one scratch copy of the repository, the demo's config as its config.yaml, and in it, built
# once, RTE's teacher, its evaluation and its pseudo-heads, and SST-2's generator and its evaluation.

HEADS = paths.PSEUDO_HEADS_DIR.format(teacher="tiny_bert", task="rte")
TEACHER = paths.TEACHER_DIR.format(teacher="tiny_bert", task="rte")
GENERATOR = paths.GENERATOR_DIR.format(task="sst2")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    workdir = copy_repo(tmp_path_factory.mktemp("faults") / "kdflow")
    shutil.copy(workdir / "demo/config.yaml", workdir / "config.yaml")
    snakemake("--cores", "2", *(f"{built}/metrics.json" for built in (HEADS, TEACHER, GENERATOR)), cwd=workdir)
    return workdir


@pytest.mark.slow
def test_invalid_yaml_in_the_workflows_config_is_located_before_snakemake_reads_it(workdir):
    path = workdir / "config.yaml"
    original = path.read_text()
    lines = original.splitlines()
    line = lines.index("device: cpu") + 1  # the bracket opens here; the next key shows it unclosed
    next_key = next(i for i, text in enumerate(lines[line:], line + 1) if text.strip() and text[0] != "#")
    path.write_text(original.replace("device: cpu", "device: [cpu"))
    try:
        result = snakemake("-n", f"{HEADS}/metrics.json", cwd=workdir, check=False)
    finally:
        path.write_text(original)
    assert result.returncode != 0, result.stdout
    assert f"config.yaml:{next_key}: expected ',' or ']'" in result.stdout and f"at line {line})" in result.stdout
    assert "Traceback" not in result.stdout and "not valid JSON or YAML" not in result.stdout
    assert planned_jobs(f"{HEADS}/metrics.json", cwd=workdir) == {}


@pytest.mark.slow
def test_a_key_written_twice_in_a_configfile_is_named_with_its_line(workdir):
    extra = workdir / "extra.yaml"
    extra.write_text("device: cpu\nresources: {threads: 1}\ndevice: auto\n")
    # the target first: --configfile takes every name that follows it
    result = snakemake("-n", f"{HEADS}/metrics.json", "--configfile", str(extra), cwd=workdir, check=False)
    assert result.returncode != 0, result.stdout
    assert result.stdout.strip().endswith(f"{extra}:3: key 'device' appears twice in one mapping (first at line 1)")
    extra.write_text("device: cpu\nresources: {threads: 1}\n")
    assert planned_jobs(f"{HEADS}/metrics.json", "--configfile", str(extra), cwd=workdir) == {}


@pytest.mark.slow
def test_losing_an_evaluation_reruns_only_the_evaluation(workdir):
    """The metrics of the pseudo-heads, a teacher and a generator lost: each is evaluated again, and the heads,
    the teacher's weights and the generator's (and so the signals, samples and students that read them) stay
    up to date."""
    trained = {HEADS: workdir / HEADS / "heads.safetensors", TEACHER: workdir / TEACHER / "model/model.safetensors",
               GENERATOR: workdir / GENERATOR / "model/model.safetensors"}
    written = {built: path.stat().st_mtime_ns for built, path in trained.items()}
    for built in trained:
        (workdir / built / "metrics.json").unlink()
    targets = [f"{built}/metrics.json" for built in trained]
    assert planned_jobs(*targets, cwd=workdir) == {"evaluate_pseudo_heads": 1, "evaluate_teacher": 1,
                                                   "evaluate_generator": 1}
    snakemake("--cores", "2", *targets, cwd=workdir)
    assert {built: path.stat().st_mtime_ns for built, path in trained.items()} == written
    assert planned_jobs(*targets, cwd=workdir) == {}
    assert len(json.loads((workdir / HEADS / "metrics.json").read_text())["layers"]) == 4
    assert set(json.loads((workdir / TEACHER / "metrics.json").read_text())["scores"]) == {"dev"}
    assert json.loads((workdir / GENERATOR / "metrics.json").read_text())["dev_perplexity"] > 1


@pytest.mark.slow
def test_a_damaged_input_is_named_set_aside_and_rebuilt_by_the_next_run(workdir):
    heads = workdir / HEADS / "heads.safetensors"
    truncate(heads)  # newer than what reads it: the evaluation reruns, and finds it damaged
    result = snakemake("--cores", "1", f"{HEADS}/metrics.json", cwd=workdir, check=False)
    assert result.returncode != 0
    log = (workdir / "logs/evaluate_pseudo_heads/tiny_bert/rte.log").read_text()
    assert f"{HEADS}/heads.safetensors is damaged or incomplete" in log and "Traceback" not in log
    assert f"set aside as {HEADS}/heads.safetensors.damaged; run snakemake again to rebuild it" in log
    assert not heads.exists() and heads.with_name("heads.safetensors.damaged").exists()
    snakemake("--cores", "1", f"{HEADS}/metrics.json", cwd=workdir)  # plain: trains the heads, evaluates them
    assert heads.exists() and planned_jobs(f"{HEADS}/metrics.json", cwd=workdir) == {}
