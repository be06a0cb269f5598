"""A training step compiled whole: every student family, with a method of each kind (logits, hidden states,
attention over layers, pseudo-classifiers), traces into one graph (``fullgraph=True``: no graph break) and
computes the eager step's loss and gradients. AOTAutograd's eager backend compiles here without a C++ toolchain,
which tests the tracing, the part that breaks; on a GPU the same graph goes to inductor and CUDA graphs."""

import copy

import pandas as pd
import pytest
import torch
from conftest import DEMO_VOCAB, TINY_BERT
from torch import nn
from transformers import BertTokenizer

from kdflow.distillation.methods.registry import Shapes, build_method
from kdflow.students.registry import StudentContext, build_student
from kdflow.students.tokens import student_tokenizer
from kdflow.teachers.finetune import build_teacher
from kdflow.training.batching import collate, tokenize
from kdflow.training.loop import StepCompiler
from kdflow.transfer.signals import TeacherSignals

pytestmark = pytest.mark.slow  # tracing an unrolled LSTM takes tens of seconds

SENTENCES = pd.DataFrame({"text_a": ["the movie was good", "a man is not a dog at all", "bad", "the cat was bad"],
                          "text_b": None, "label": [0, 1, 1, 0]})
RANDOM = {"source": "random", "dim": 8}
FAMILIES = {
    "bert_k": {"type": "bert_k", "layers": 2},
    "bert_s": {"type": "bert_s", "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 2,
               "intermediate_size": 24, "embeddings": {"source": "random"}},
    "bilstm": {"type": "bilstm", "layers": 2, "hidden_size": 8, "embeddings": RANDOM},
    "gated_cnn": {"type": "gated_cnn", "layers": 2, "hidden_size": 8, "embeddings": RANDOM},
    "bilstm_s": {"type": "bilstm_s", "layers": 2, "lstm_size": 4, "fc_size": 6, "embeddings": RANDOM},
}
METHODS = ["kd", "pkd", "alp", "universal_kd_ca"]  # logits, hidden states, attention over layers, pseudo-heads
TEACHER_LAYERS, TEACHER_WIDTH = 3, 32


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("teacher")
    model, tokenizer = build_teacher({**TINY_BERT, "architecture": {**TINY_BERT["architecture"],
                                                                    "num_hidden_layers": TEACHER_LAYERS}}, 2)
    model.save_pretrained(directory / "model")
    tokenizer.save_pretrained(directory / "model")
    return StudentContext(2, BertTokenizer(vocab=str(DEMO_VOCAB), do_lower_case=True), str(directory))


@pytest.mark.parametrize("method_name", METHODS)
@pytest.mark.parametrize("family", FAMILIES)
def test_a_students_step_compiles_as_one_graph_and_computes_the_eager_loss_and_gradients(family, method_name,
                                                                                         context):
    torch.manual_seed(0)
    student = build_student(FAMILIES[family], context)
    split = tokenize(SENTENCES, student_tokenizer(student, context.tokenizer), 16, labelled=True)
    batch = collate(split, torch.arange(len(SENTENCES)).numpy(), regression=False, length_buckets=2)
    with torch.no_grad():
        widths = tuple(layer.shape[-1] for layer in student.eval()(batch).layers)
    method = build_method(method_name, Shapes(widths, TEACHER_LAYERS, TEACHER_WIDTH, 2, False))
    generator = torch.Generator().manual_seed(1)
    signals = TeacherSignals(torch.randn(4, 2, generator=generator),
                             torch.randn(4, TEACHER_LAYERS, 2, generator=generator),
                             torch.randn(4, TEACHER_LAYERS, TEACHER_WIDTH, generator=generator))
    eager = nn.ModuleDict({"student": student, "method": method}).eval()  # no dropout: both draw alike
    graphed = copy.deepcopy(eager)

    def loss_fn(model, batch):
        return model["method"](model["student"](batch), signals, batch["labels"])["loss"]

    torch._dynamo.reset()
    losses = {}
    for name, model, step in (("eager", eager, loss_fn), ("compiled", graphed, StepCompiler(backend="aot_eager")(loss_fn))):
        loss = step(model, batch)
        loss.backward()
        losses[name] = loss.detach()
    torch.testing.assert_close(losses["compiled"], losses["eager"], rtol=1e-5, atol=1e-6)
    for (name, parameter), (_, twin) in zip(eager.named_parameters(), graphed.named_parameters(), strict=True):
        if parameter.grad is None:
            assert twin.grad is None, name
        else:
            torch.testing.assert_close(twin.grad, parameter.grad, rtol=1e-4, atol=1e-6, msg=name)
