"""ONNX export (kdflow.export.onnx_export): every kind of exported student as model.onnx, whose logits under
onnxruntime match the PyTorch model's on batches of other sizes and lengths than the example the exporter traced."""

import numpy as np
import pandas as pd
import pytest
import torch
from test_export import EXTRA, STUDENTS

for package in ("onnx", "onnxruntime", "onnxscript"):
    pytest.importorskip(package, reason=f"ONNX export needs {package}: pip install -e '.[onnx]' (pyproject.toml)")

pytestmark = pytest.mark.slow  # eight exports through torch's dynamo exporter: about 35 s

from kdflow.core import run_files
from kdflow.export.conversion import TOLERANCE, accepted_inputs, exported_logits, exported_model, exported_tokenizer
from kdflow.export.onnx_export import (
    EXAMPLE_SHAPE,
    check_onnx,
    export_onnx,
    onnx_logits,
    onnx_session,
)
from kdflow.students.registry import StudentContext, build_student

MAX_LENGTH = 32
WORDS = ["good", "bad", "movie", "film", "plot", "actor", "story", "music", "scene", "ending", "the", "a", "and"]
TEXTS = ["good movie", "a bad plot and a sad ending of the film", "the actor", *EXTRA]
# (student, regression, sentence pairs): every route; LSTM_S and BERT_S (token types) on pairs with one output
CASES = [(name, False, False) for name in STUDENTS] + [("lstm_s", True, True), ("bert_s", True, True)]


@pytest.fixture(scope="module")
def teacher(untrained_teacher):
    """An untrained tiny BERT teacher's folder: what bert_k copies and every wordpiece student tokenises with."""
    directory, _, tokenizer = untrained_teacher
    return directory, tokenizer


def frame_of(texts, pairs: bool) -> pd.DataFrame:
    return pd.DataFrame({"idx": range(len(texts)), "text_a": texts,
                         "text_b": list(reversed(texts)) if pairs else [None] * len(texts)})


@pytest.mark.parametrize("name, regression, pairs", CASES,
                         ids=[f"{name}{'_pairs_regression' if pairs else ''}" for name, _, pairs in CASES])
def test_onnxruntime_computes_the_pytorch_models_logits(teacher, tmp_path, name, regression, pairs):
    directory, teacher_tokenizer = teacher
    torch.manual_seed(1)
    outputs = 1 if regression else 2
    student = build_student(STUDENTS[name], StudentContext(outputs, teacher_tokenizer, str(directory), words=WORDS))
    tokenizer = exported_tokenizer(student.eval(), directory / "model", MAX_LENGTH)
    model = exported_model(student, None if regression else ["negative", "positive"], regression, tokenizer)
    accepted_inputs(tokenizer, model)
    path = export_onnx(model, tokenizer, tmp_path)
    assert path == tmp_path / run_files.ONNX_MODEL
    session = onnx_session(path)
    takes = [given.name for given in session.get_inputs()]
    assert takes == [n for n in tokenizer.model_input_names if n != "token_type_ids" or name in ("bert_k", "bert_s")]
    assert [given.shape for given in session.get_inputs()] == [["batch", "sequence"]] * len(takes)
    assert [output.name for output in session.get_outputs()] == ["logits"]

    # batches of 1, 3 and 6 texts, padded to lengths other than the example's, and each text alone
    batches = [TEXTS[:1], TEXTS[:3], TEXTS] + [[text] for text in TEXTS]
    lengths = set()
    for texts in batches:
        frame = frame_of(texts, pairs)
        lengths.add(tokenizer(texts, list(frame["text_b"]) if pairs else None, truncation=True,
                              padding=True, return_tensors="np")["input_ids"].shape)
        onnx, torch_logits = onnx_logits(session, tokenizer, frame), exported_logits(model, tokenizer, frame)
        assert onnx.shape == (len(texts), outputs)
        np.testing.assert_allclose(onnx, torch_logits, rtol=0, atol=TOLERANCE)
    assert len({length for _, length in lengths}) >= 3 and EXAMPLE_SHAPE not in lengths
    result = check_onnx(path, model, tokenizer, frame_of(TEXTS, pairs), regression)
    assert result["prediction_disagreements"] == 0 and result["max_abs_logit_difference"] <= TOLERANCE
    print(f"{name}: max |onnxruntime - torch| = {result['max_abs_logit_difference']:.1e}")
