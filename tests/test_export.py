"""Exported students (kdflow.export, rule export_student): tiny students of every kind of route, trained and
selected as the workflow does, exported, then loaded in a fresh process where kdflow cannot be imported, by
transformers alone (from_pretrained, AutoTokenizer, pipeline), must predict what kdflow's own student does."""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import REPO, TEACHER_HP, TINY_BERT, finetuned

from kdflow.core import run_files
from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.distillation.distill import distill
from kdflow.distillation.selection import best_seed, select_experiment
from kdflow.export.conversion import TOLERANCE, agreement, kdflow_logits, needs_remote_code
from kdflow.export.model_card import metadata
from kdflow.export.student_export import (
    applicable_deviations,
    export_student,
    rebuild_command,
)
from kdflow.reporting.tables import exports_table
from kdflow.students.loading import load_distilled
from kdflow.teachers.pseudo_heads import train_pseudo_heads
from kdflow.transfer.frames import transfer_frame
from kdflow.transfer.labelling import compute_signals
from kdflow.workflow import results_paths as paths
from kdflow.workflow.export_inputs import export_inputs, exported_cards, exported_students

CPU = torch.device("cpu")
HEADS = {"learning_rate": 1e-2, "batch_size": 32, "epochs": 1, "warmup_ratio": 0.0, "weight_decay": 0.0, "seed": 0,
         "max_seq_length": 32}
STUDENT_HP = {"learning_rate": 2e-3, "batch_size": 16, "epochs": 1, "max_seq_length": 32, "eval_batch_size": 64,
              "log_every": 50, "max_train_examples": 64}
RANDOM = {"source": "random", "dim": 8}
# One student per route: transformers' own class (bert_k; bert_s with its embedding folded, reading words with
# its markers; an hf DistilBERT, which takes no token types), and the class whose code travels in the folder
# (bilstm, gated_cnn; LSTM_S reading wordpieces without markers).
STUDENTS = {
    "bert_k": {"type": "bert_k", "layers": 1},
    "bert_s": {"type": "bert_s", "hidden_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2,
               "intermediate_size": 24, "tokens": "words", "embeddings": {**RANDOM, "mode": "multichannel"}},
    "bilstm": {"type": "bilstm", "layers": 2, "hidden_size": 16, "embeddings": RANDOM},
    "gated_cnn": {"type": "gated_cnn", "layers": 2, "hidden_size": 16, "embeddings": RANDOM},
    "lstm_s": {"type": "bilstm_s", "lstm_size": 10, "fc_size": 12, "embeddings": RANDOM},
    "distilbert": {"type": "hf", "architecture": {"model_type": "distilbert", "dim": 16, "n_layers": 1, "n_heads": 2,
                                                  "hidden_dim": 32, "max_position_embeddings": 64}},  # no token types
}
REGRESSION = ["bert_k", "lstm_s"]  # on STS-B: sentence pairs, one output
SEEDS = {"bert_k": [0, 1]}  # two seeds of one point: the export takes the better one on dev
EXPERIMENT, METHOD, POINT = "tiny", "kd", "default"
# Texts beyond a task's dev set: an empty sentence (LSTM_S reads it as one unknown token), case and accents, and
# one longer than max_seq_length (cut where kdflow cut it)
EXTRA = ["", "GOOD Movie, café!", " ".join(["good plot and a bad ending"] * 12)]
LOADER = """
import json, sys
sys.modules["kdflow"] = None  # a fresh process in which kdflow cannot be imported
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

jobs, results = json.load(open(sys.argv[1])), {}
for name, job in jobs.items():
    folder, trust, texts, pairs = job["folder"], job["trust"], job["texts"], job["pairs"]
    model = AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=trust).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust)
    with torch.no_grad():
        logits = [model(**tokenizer([text], [pair] if pairs else None, truncation=True, return_tensors="pt")).logits[0]
                  .tolist() for text, pair in zip(texts, pairs or texts)]
        batched = model(**tokenizer(texts, pairs, truncation=True, padding=True, return_tensors="pt")).logits.tolist()
    classify = pipeline("text-classification", model=folder, trust_remote_code=trust)
    inputs = [{"text": a, "text_pair": b} for a, b in zip(texts, pairs)] if pairs else texts
    results[name] = {"logits": logits, "batched": batched, "pipeline": classify(inputs, truncation=True),
                     "class": type(model).__name__}
results["kdflow_imported"] = any(m.startswith("kdflow.") for m in sys.modules)
json.dump(results, open(sys.argv[2], "w"))
"""


def pipeline_run(task, teacher_dir, root, student: str, spec: dict, seeds: list[int]) -> list[dict]:
    """Train ``student`` for each seed with kd from the teacher's signals, into the workflow's run layout."""
    runs = []
    for seed in seeds:
        out = root / "students" / EXPERIMENT / task.meta["task"] / student / METHOD / POINT / f"seed{seed}"
        hp = Hyperparameters(**{**STUDENT_HP, "seed": seed})
        distill(task, None, teacher_dir, root / f"signals_{task.meta['task']}.safetensors", spec, METHOD, {},
                [{"epochs": 1}], hp, out, CPU)
        runs.append({"task": task.meta["task"], "student": student, "method": METHOD, "point": POINT,
                     "seed": str(seed), "metrics": out / "metrics.json"})
    return runs


def teacher_signals(task, teacher_dir, root) -> None:
    heads_dir = root / f"heads_{task.meta['task']}"
    train_pseudo_heads(task, teacher_dir, HEADS, heads_dir, CPU)
    compute_signals(transfer_frame(task), "train", teacher_dir, heads_dir / "heads.safetensors", [], 32, 64, CPU,
                    root / f"signals_{task.meta['task']}.safetensors")


@pytest.fixture(scope="module")
def exported(trained_teacher, separable, prepared, tmp_path_factory):
    """Every student of STUDENTS on the separable SST-2 task and a bert_k on STS-B (regression, sentence pairs),
    selected and exported; then loaded in one fresh process. -> {name: (task, teacher dir, folder, record,
    what the fresh process computed)}"""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("export")
    sst2_teacher, _ = trained_teacher
    stsb = prepared("stsb")
    stsb_teacher = root / "teacher_stsb"
    finetuned(stsb, TINY_BERT, Hyperparameters(**{**TEACHER_HP, "epochs": 1}), stsb_teacher, CPU)
    jobs = {f"sst2_{name}": (separable, sst2_teacher, name, spec) for name, spec in STUDENTS.items()}
    jobs |= {f"stsb_{name}": (stsb, stsb_teacher, name, STUDENTS[name]) for name in REGRESSION}
    for task, teacher_dir in [(separable, sst2_teacher), (stsb, stsb_teacher)]:
        teacher_signals(task, teacher_dir, root)
    runs = []
    for task, teacher_dir, student, spec in jobs.values():
        runs += pipeline_run(task, teacher_dir, root, student, spec, SEEDS.get(student, [0]))
    main = {"sst2": "accuracy", "stsb": "pearson"}
    selection = select_experiment([{k: v for k, v in run.items() if k != "metrics"} for run in runs],
                                  [run["metrics"] for run in runs], main, selection_seeds=[0])
    (root / "selection.json").write_text(json.dumps(selection))

    done, loads = {}, {}
    for name, (task, teacher_dir, student, _) in jobs.items():
        request = {"experiment": EXPERIMENT, "task": task.meta["task"], "student": student, "method": METHOD}
        folder = root / "export" / name
        context = {"teacher": {"name": "tiny_bert", "spec": TINY_BERT}, "paper": "a test of the export",
                   "config_files": ["demo/config.yaml"], "rebuild": rebuild_command(str(folder), [], False, {})}
        record = export_student(request, root / "selection.json",
                                root / "students" / EXPERIMENT / task.meta["task"] / student / METHOD,
                                task.directory, teacher_dir / "model", folder, context)
        frame = pd.concat([task.split("dev").head(24), extra_frame(task)], ignore_index=True)
        done[name] = (task, teacher_dir, folder, record, frame)
        loads[name] = {"folder": str(folder), "trust": record["trust_remote_code"], "texts": list(frame["text_a"]),
                       "pairs": list(frame["text_b"]) if task.meta["pair"] else None}
    (root / "jobs.json").write_text(json.dumps(loads))
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    environment |= {"HF_MODULES_CACHE": str(root / "modules"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    (root / "load.py").write_text(LOADER)
    subprocess.run([sys.executable, str(root / "load.py"), str(root / "jobs.json"), str(root / "loaded.json")],
                   cwd=root, env=environment, check=True, capture_output=True, timeout=300)
    loaded = json.loads((root / "loaded.json").read_text())
    assert loaded.pop("kdflow_imported") is False
    return {name: (*done[name], loaded[name]) for name in done}


def extra_frame(task) -> pd.DataFrame:
    pairs = task.meta["pair"]
    return pd.DataFrame({"idx": range(len(EXTRA)), "text_a": EXTRA,
                         "text_b": list(reversed(EXTRA)) if pairs else [None] * len(EXTRA)})


@pytest.mark.parametrize("name", [f"sst2_{name}" for name in STUDENTS] + [f"stsb_{name}" for name in REGRESSION])
def test_the_exported_folder_predicts_what_kdflow_does_without_kdflow(exported, name):
    """transformers alone, in a fresh process: logits within the tolerance of kdflow's student reloaded from its run
    (one text at a time and padded in a batch), the same predictions, and the pipeline's labels and scores."""
    task, teacher_dir, _, record, frame, loaded = exported[name]
    run_dir = record["run"]["directory"]
    student = load_distilled(run_dir, teacher_dir, task.num_labels)
    reference = kdflow_logits(student, teacher_dir / "model", frame, STUDENT_HP["max_seq_length"])
    regression = task.meta["regression"]
    for logits in (loaded["logits"], loaded["batched"]):
        result = agreement(reference, np.array(logits), regression)
        assert result["max_abs_logit_difference"] <= TOLERANCE and result["prediction_disagreements"] == 0, result
    assert loaded["class"] == record["model_class"] == {"distilbert": "DistilBertForSequenceClassification"}.get(
        record["student"], "KdflowStudentForSequenceClassification" if record["trust_remote_code"]
        else "BertForSequenceClassification")
    scores = np.array([output["score"] for output in loaded["pipeline"]])
    if regression:  # the output itself, under the regression label
        assert {output["label"] for output in loaded["pipeline"]} == {"score"}
        np.testing.assert_allclose(scores, reference[:, 0], atol=TOLERANCE)
    else:  # the task's label names, and the softmax of kdflow's logits
        assert [output["label"] for output in loaded["pipeline"]] == [task.meta["labels"][i]
                                                                     for i in reference.argmax(1)]
        np.testing.assert_allclose(scores, torch.softmax(torch.tensor(reference), -1).max(-1).values, atol=TOLERANCE)


def test_the_export_takes_the_selected_points_best_dev_seed_and_checks_every_dev_example(exported):
    task, _, folder, record, *_ = exported["sst2_bert_k"]
    assert record["run"]["seed"] == int(best_seed(record["selection"]["dev_by_seed"]))
    assert json.loads((folder / run_files.EXPORT_RECORD).read_text()) == json.loads(json.dumps(record))
    for check in ("kdflow_student", "recorded_predictions"):
        assert record["agreement"][check]["examples"] == len(task.split("dev"))
        assert record["agreement"][check]["prediction_disagreements"] == 0
    assert record["agreement"]["recorded_predictions"]["required"]  # trained in float32


def test_the_folder_holds_code_only_for_students_transformers_has_no_class_for(exported):
    for name, (_, _, folder, record, *_) in exported.items():
        config = json.loads((folder / "config.json").read_text())
        has_code = (folder / "modeling_kdflow_student.py").exists()
        assert has_code == (folder / "layers.py").exists() == record["trust_remote_code"] == ("auto_map" in config)
        assert record["trust_remote_code"] == (STUDENTS[record["student"]]["type"] in ("bilstm", "gated_cnn",
                                                                                     "bilstm_s")), name
        if has_code:  # the class's code imports nothing of kdflow's, and the layers are those kdflow trained with
            code = (folder / "modeling_kdflow_student.py").read_text()
            assert "import kdflow" not in code and "from kdflow" not in code
            assert (folder / "layers.py").read_bytes() == (REPO / "kdflow/students/layers.py").read_bytes()


def test_the_tokenizer_returns_only_what_the_model_takes(exported):
    for name in ("sst2_distilbert", "sst2_bert_k"):
        saved = json.loads((exported[name][2] / "tokenizer_config.json").read_text())
        assert ("token_type_ids" in saved["model_input_names"]) == (name == "sst2_bert_k"), name


def test_the_labels_come_from_the_task(exported):
    sst2 = json.loads((exported["sst2_gated_cnn"][2] / "config.json").read_text())
    assert sst2["id2label"] == {"0": "negative", "1": "positive"} and sst2["label2id"] == {"negative": 0, "positive": 1}
    assert sst2["problem_type"] == "single_label_classification"
    stsb = json.loads((exported["stsb_bert_k"][2] / "config.json").read_text())
    assert stsb["id2label"] == {"0": "score"} and stsb["problem_type"] == "regression"


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


@pytest.mark.parametrize("name, metrics", [("sst2_bert_k", {"accuracy"}), ("stsb_bert_k", {"pearsonr", "spearmanr"})])
def test_the_model_card_holds_the_hubs_metadata_and_the_runs_facts(exported, name, metrics):
    task, _, folder, record, *_ = exported[name]
    card = (folder / "README.md").read_text()
    meta = front_matter(card)
    assert meta["pipeline_tag"] == "text-classification" and meta["library_name"] == "transformers"
    result = meta["model-index"][0]["results"][0]
    assert result["dataset"] == {"name": f"GLUE {'SST-2' if task.meta['task'] == 'sst2' else 'STS-B'}",
                                 "type": "nyu-mll/glue", "config": task.meta["task"], "split": "validation"}
    assert {metric["type"] for metric in result["metrics"]} == metrics
    dev = record["run"]["scores"]["dev"]
    assert sorted(metric["value"] for metric in result["metrics"]) == pytest.approx(sorted(dev.values()))
    for fact in ("`tiny_bert`", f"`{METHOD}`", "## Selection and seeds", "held out", "## Agreement with kdflow",
                 "## Provenance", "kdflow commit at export", "```bash\nsnakemake --cores 1 "):
        assert fact in card, fact
    assert ("trust_remote_code=True" in card) == record["trust_remote_code"]


def test_a_student_the_selection_does_not_have_is_a_clear_error(exported, tmp_path):
    task, teacher_dir, folder, *_ = exported["sst2_bert_k"]
    request = {"experiment": EXPERIMENT, "task": "sst2", "student": "bert_9", "method": METHOD}
    selection = folder.parents[1] / "selection.json"
    with pytest.raises(UserError, match="the selection has no run of student 'bert_9' with method 'kd' on 'sst2'; "
                                        "it has sst2/bert_k/kd"):
        export_student(request, selection, tmp_path, task.directory, teacher_dir / "model", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError, match="cannot export a student of class Linear"):
        needs_remote_code(torch.nn.Linear(2, 2))


def test_the_rule_asks_only_for_students_the_experiment_trains():
    config = {"experiments": {"e": {"teacher": "t", "tasks": ["sst2"], "students": ["a"], "methods": {"kd": None},
                                    "seeds": [0]}},
              "students": {"a": {"type": "bilstm"}}, "teachers": {"t": {"tasks": ["sst2"]}}}
    with pytest.raises(UserError, match="experiment 'e' trains no student 'b' with method 'kd' on 'sst2'"):
        export_inputs(config, "e", "sst2", "b", "kd")


def test_the_config_exports_an_experiments_students_or_those_it_lists_and_names_a_wrong_one():
    config = {"experiments": {"e": {"teacher": "t", "tasks": ["sst2", "cola"], "students": ["a", "b"],
                                    "methods": {"kd": None, "pkd_6": {"method": "pkd"}}, "seeds": [0]}}}
    config["export"] = {"students": [{"experiment": "e", "tasks": ["cola"], "methods": ["pkd_6"]}]}
    assert exported_students(config) == [{"experiment": "e", "task": "cola", "student": student, "method": "pkd_6"}
                                         for student in ("a", "b")]
    assert exported_cards(config, "e") == [paths.EXPORT_CARD.format(experiment="e", task="cola", student=student,
                                                                    method="pkd_6") for student in ("a", "b")]
    assert exported_cards(config, "other") == []
    config["export"] = {"students": [{"experiment": "e"}]}
    assert len(exported_students(config)) == 2 * 2 * 2
    config["export"] = {"students": [{"experiment": "e", "methods": ["pkd"]}]}
    with pytest.raises(UserError, match=r"export.students\[1\].methods: \['pkd'\] not in experiment 'e' \(its "
                                        r"methods: kd, pkd_6\)"):
        exported_students(config)
    config["export"] = {"students": [{"experiment": "f"}]}
    with pytest.raises(UserError, match=r"export.students\[1\].experiment: unknown experiment 'f'"):
        exported_students(config)


def test_the_card_names_the_licence_the_config_gives_and_none_otherwise(exported):
    record = exported["sst2_bert_k"][3]
    assert "license" not in metadata(record)
    assert metadata({**record, "license": "apache-2.0"})["license"] == "apache-2.0"


def test_the_experiment_page_lists_its_exported_students_with_the_cards_scores(exported, tmp_path):
    _, _, folder, record, *_ = exported["sst2_bert_k"]
    key = ("sst2", "bert_k", METHOD)
    exported_to = paths.EXPORT.format(experiment="e", task="sst2", student="bert_k", method="kd")
    exports = exports_table({key: folder / "README.md"}, {key: exported_to})
    dev = record["run"]["scores"]["dev"]
    assert exports.to_dict("records") == [{
        "task": "sst2", "student": "bert_k", "method": METHOD, "folder": exported_to,
        "dev (the card's)": ", ".join(f"dev {name} (seed {record['run']['seed']}): {100 * value:.2f}"
                                      for name, value in dev.items())}]


def test_the_card_lists_the_ledger_entries_of_its_experiments_tables(tmp_path):
    ledger = [
        {"tables": ["t1"], "kind": "cost", "kdflow": "everywhere"},
        {"tables": ["t2"], "kind": "cost", "kdflow": "another table"},
        {"tables": ["t1"], "setting": "experiments.other.*.hyperparameters.*", "kind": "choice", "kdflow": "other"},
        {"tables": ["t1"], "setting": "experiments.e.*.method_options.pkd.*", "kind": "choice", "kdflow": "pkd"},
        {"tables": ["t1"], "setting": "experiments.e.*.method_options.kd.*", "kind": "choice", "kdflow": "kd"},
        {"tables": ["t1"], "setting": ["experiments.e.cola.student.*", "precision"], "kind": "choice",
         "kdflow": "precision"},
        {"tables": ["t1"], "setting": "teachers.big.*.hyperparameters.*", "kind": "choice", "kdflow": "big"},
    ]
    path = tmp_path / "deviations.yaml"
    path.write_text(yaml.safe_dump(ledger))
    kept = applicable_deviations(path, ["t1"], "e", "sst2", "s", "kd", "small")
    assert [entry["kdflow"] for entry in kept] == ["everywhere", "kd", "precision"]
    assert applicable_deviations(None, ["t1"], "e", "sst2", "s", "kd", "small") == []
