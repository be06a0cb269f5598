"""ONNX Runtime beside PyTorch in thesis Table 5.2's speed (issue 55): kdflow.export.onnx_inference.measure_onnxruntime
times the model exported to ONNX on the same batches and threads, checks its logits against PyTorch's, and records
None with a reason where it cannot; the paper table gains a row for it that has no paper value."""

import shutil
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from test_export import STUDENTS
from torch import nn

from kdflow.analysis.inference import measure
from kdflow.distillation.named_models import hf_model, student_model
from kdflow.export import onnx_inference
from kdflow.export.conversion import TOLERANCE
from kdflow.export.onnx_inference import ONNXRUNTIME_MS, measure_onnxruntime
from kdflow.reporting.paper_tables import NOT_IN_PAPER, paper_document, paper_table, read_reference
from kdflow.students.registry import StudentContext, build_student
from kdflow.workflow import results_paths as paths
from kdflow.training.batching import batches, tokenize

ONNX = all(__import__("importlib").util.find_spec(name) for name in ("onnx", "onnxruntime", "onnxscript"))
needs_onnx = pytest.mark.skipif(not ONNX, reason="needs onnx, onnxruntime and onnxscript: pip install -e '.[onnx]'")
WORDS = ["good", "bad", "movie", "film", "plot", "actor", "story", "music", "scene", "ending", "the", "a", "and"]
# an empty text (LSTM_S reads it as one unknown token) and rows of several lengths, in batches of 4, 4 and 2
TEXTS = ["good movie", "a bad plot and a sad ending of the film", "the actor", "", "GOOD Movie, café!",
         "music", "the story and the scene", "a film", "bad ending", "the the the actor and a plot"]
THREADS = 1


def loaded(name, teacher):
    """A tiny model as rule measure_inference loads it (kdflow.distillation.named_models), and its dev batches."""
    directory, teacher_model, tokenizer = teacher
    torch.manual_seed(1)
    if name == "teacher":
        model = hf_model(teacher_model, tokenizer)
    else:
        model = student_model(build_student(STUDENTS[name], StudentContext(2, tokenizer, str(directory), words=WORDS)),
                              tokenizer)
    frame = pd.DataFrame({"idx": range(len(TEXTS)), "text_a": TEXTS, "text_b": [None] * len(TEXTS)})
    return model, list(batches(tokenize(frame, model.tokenizer, 128, labelled=False), 4, False))


def measured(model, inputs) -> dict:
    """What the rule's script records: PyTorch's measurement, then ONNX Runtime's on the same batches and threads."""
    logits = []
    result = measure(model.module, model.logits, inputs, threads=THREADS, outputs=logits)
    return result | measure_onnxruntime(model.module, model.tokenizer, inputs, torch.cat(logits), result["threads"])


def test_without_onnxruntime_the_time_is_null_with_its_reason(untrained_teacher, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` fails, find_spec finds nothing
    model, inputs = loaded("lstm_s", untrained_teacher)
    result = measured(model, inputs)
    assert result["ms_per_example_cpu"] > 0 and result["examples"] == len(TEXTS)
    assert result[ONNXRUNTIME_MS] is None and result["onnxruntime"] is None
    assert result["onnxruntime_check"] is None and result["onnxruntime_provider"] is None
    assert "onnxruntime" in result["onnxruntime_reason"] and "pip install" in result["onnxruntime_reason"]


@needs_onnx
def test_a_model_without_an_onnx_route_is_said_to_be_one():
    module = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2)).eval()
    inputs = [{"input_ids": torch.ones(3, 5, dtype=torch.long), "attention_mask": torch.ones(3, 5, dtype=torch.long)}]
    result = measure_onnxruntime(module, None, inputs, torch.zeros(3, 2), THREADS)
    assert result[ONNXRUNTIME_MS] is None and result["onnxruntime"] == __import__("onnxruntime").__version__
    assert result["onnxruntime_reason"].startswith("the model cannot be exported to ONNX: no ONNX export for a model "
                                                   "of class Sequential")


@pytest.fixture(scope="module")
def gated_cnn(untrained_teacher, tmp_path_factory):
    """A Gated CNN measured both ways (the custom students' route; the quickest to export: about 3.5 s), and its
    ONNX file."""
    model, inputs = loaded("gated_cnn", untrained_teacher)
    kept = tmp_path_factory.mktemp("onnx") / "model.onnx"
    export = onnx_inference.export_onnx

    def export_and_keep(*args):
        path = export(*args)
        shutil.copy(path, kept)
        return path

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(onnx_inference, "export_onnx", export_and_keep)
        return model, inputs, measured(model, inputs), kept


@needs_onnx
def test_onnxruntime_times_the_same_batches_on_the_same_threads_and_computes_pytorchs_logits(gated_cnn, monkeypatch):
    model, inputs, result, kept = gated_cnn
    assert result["ms_per_example_cpu"] > 0 and result[ONNXRUNTIME_MS] > 0
    assert (result["threads"], result["examples"], result["batch_size"]) == (THREADS, len(TEXTS), 4)
    assert result["onnxruntime"] == __import__("onnxruntime").__version__
    assert result["onnxruntime_provider"] == "CPUExecutionProvider" and result["onnxruntime_reason"] is None
    check = result["onnxruntime_check"]
    assert check["examples"] == len(TEXTS) and check["tolerance"] == TOLERANCE == 1e-4
    assert check["max_abs_logit_difference"] <= TOLERANCE and check["prediction_disagreements"] == 0

    sessions = []
    cpu_session = onnx_inference.cpu_session
    monkeypatch.setattr(onnx_inference, "cpu_session", lambda path, threads: sessions.append(threads) or cpu_session(
        path, threads))
    monkeypatch.setattr(onnx_inference, "export_onnx", lambda model, names, folder: shutil.copy(kept, folder))
    with torch.no_grad():
        pytorch = torch.cat([model.logits(batch) for batch in inputs])
    wrong = measure_onnxruntime(model.module, model.tokenizer, inputs, pytorch + 10 * TOLERANCE, threads=2)
    assert sessions == [2]  # intra-op threads: the count PyTorch ran with
    assert wrong[ONNXRUNTIME_MS] is None and wrong["onnxruntime_check"]["max_abs_logit_difference"] > TOLERANCE
    assert wrong["onnxruntime_reason"].startswith("ONNX Runtime's logits are not PyTorch's within 0.0001")


@pytest.mark.slow  # an export through torch's dynamo exporter each, 2.5 to 6.5 s: about 25 s
@needs_onnx
@pytest.mark.parametrize("name", ["teacher", *(name for name in STUDENTS if name != "gated_cnn")])
def test_every_student_type_and_the_teacher_are_measured_in_onnxruntime(untrained_teacher, name):
    model, inputs = loaded(name, untrained_teacher)
    result = measured(model, inputs)
    assert result[ONNXRUNTIME_MS] > 0, result["onnxruntime_reason"]
    assert result["onnxruntime_check"]["max_abs_logit_difference"] <= TOLERANCE


THESIS = {"source": "thesis_sucik2020", "table": 5.2, "teacher": "bert_large", "experiments": ["thesis_table52_lstm_s"],
          "students": {"bilstm_s": "lstm_s"}, "student_methods": {"bilstm_s": {"kd": "mse_logits"}},
          "inference": {"bert-large (teacher)": {"sst2": "bert_large_sst2"},
                        "bilstm_s": {"sst2": "lstm_s_sst2", "cola": "lstm_s_cola"}}}
MEASURED = {
    "bert_large_sst2": {"params_millions_non_embedding": 303.36, "ms_per_example_cpu": 40.0,
                        ONNXRUNTIME_MS: 25.5, "onnxruntime": "1.32.0", "onnxruntime_reason": None},
    "lstm_s_sst2": {"params_millions_non_embedding": 2.41, "ms_per_example_cpu": 0.5, ONNXRUNTIME_MS: None,
                    "onnxruntime": None, "onnxruntime_reason": "ONNX export needs onnxruntime: pip install"},
    "lstm_s_cola": {"params_millions_non_embedding": 15.4, "ms_per_example_cpu": 2.0},  # measured before issue 55
}


def test_the_thesis_table_has_an_onnxruntime_row_after_each_cpu_speed_without_a_paper_value(tmp_path):
    reference = read_reference(__import__("conftest").REPO / "reference" / "paper_results.csv")
    teacher = {task: {"scores": {"dev": {}}} for task in ("cola", "sst2", "sara")}
    table = paper_table(reference, THESIS, teacher, {}, MEASURED)
    ours = table[table.metric == ONNXRUNTIME_MS]
    cpu = table[table.metric == "ms_per_example_cpu"]
    assert len(ours) == len(cpu) == 9 and (ours.index == cpu.index + 1).all()  # each right after the paper's row
    assert ours.paper.isna().all() and (ours.paper_note == NOT_IN_PAPER).all()
    assert ours.difference.isna().all() and ours.within_spread.isna().all()  # a speed, not a score

    def row(student, task):
        return ours[(ours.student == student) & (ours.task == task)].squeeze()

    assert (row("bert-large (teacher)", "sst2").kdflow, row("bert-large (teacher)", "sst2").kdflow_from) == (
        25.5, "bert_large_sst2")
    assert np.isnan(row("bilstm_s", "sst2").kdflow) and "needs onnxruntime" in row("bilstm_s", "sst2").kdflow_note
    inference = paths.INFERENCE.format(model="lstm_s_cola")
    assert row("bilstm_s", "cola").kdflow_note == f"{inference} has no {ONNXRUNTIME_MS}"
    assert "spec `inference`" in row("bert_s", "sst2").kdflow_note

    text = paper_document(table, "Table 5.2").markdown()
    assert ("| sst2 accuracy dev | sst2 accuracy test | sst2 params (M) | sst2 ms/example (CPU; lower is better) | "
            "sst2 ms/example (ONNX Runtime CPU; lower is better) |") in text
    assert "| 303.36 (340.00) | 40.00 (750.00) | 25.50 (—) |" in text  # the paper's CPU decimals; no paper value
    assert "| 2.41 (2.41) | 0.50 (1.00) | — (—) |" in text
    table.to_csv(tmp_path / "table.csv", index=False)
    written = pd.read_csv(tmp_path / "table.csv", keep_default_na=False)
    assert set(written[written.metric == ONNXRUNTIME_MS].paper) == {""}  # empty in the CSV, never 0
