"""Mixed precision: resolving the config's ``precision``, autocast with float32 weights, fp16's gradient scaler in
the training loop (a step whose gradient overflows is skipped, the scale is checkpointed), bf16 signals and
encodings against float32 ones, bf16 and fp16 training end to end on CPU, and the fused attention of the models."""

import math
import re
import sys

import numpy as np
import pytest
import torch
from conftest import REPO, TEACHER_HP, TINY_BERT, finetuned, rule_blocks, rule_scripts, run_while_progressing
from safetensors import safe_open
from safetensors.torch import load_file
from torch import nn

from kdflow.core.errors import UserError
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.precision import Precision, resolve_precision
from kdflow.distillation.distill import distill
from kdflow.distillation.named_models import hf_model
from kdflow.probing.encodings import encode_sentences
from kdflow.probing.probe import ProbeSettings, probe
from kdflow.students.registry import StudentContext, build_student
from kdflow.teachers.finetune import build_teacher
from kdflow.teachers.pseudo_heads import train_pseudo_heads
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.hf_models import load_classifier
from kdflow.training.loop import train
from kdflow.transfer.frames import transfer_frame
from kdflow.transfer.generation import build_generator
from kdflow.transfer.labelling import compute_signals

CPU = torch.device("cpu")
BF16, FP16, FP32 = Precision("bf16"), Precision("fp16"), Precision("fp32")


def test_auto_is_float32_on_cpu_and_a_named_precision_is_kept():
    assert resolve_precision("auto", CPU) == FP32
    assert resolve_precision("bf16", CPU) == BF16 and resolve_precision("fp16", CPU) == FP16
    assert not resolve_precision("bf16", CPU).tf32  # TF32 is a CUDA matter


def test_an_unknown_precision_is_an_error_naming_the_setting():
    with pytest.raises(UserError, match=r"precision: 'bf32' is not one of auto, bf16, fp16, fp32"):
        resolve_precision("bf32", CPU)


@pytest.mark.parametrize("precision, dtype", [(BF16, torch.bfloat16), (FP16, torch.float16), (FP32, torch.float32)])
def test_forward_passes_compute_in_the_precision_and_the_weights_stay_float32(precision, dtype):
    linear = nn.Linear(4, 3)
    with precision.autocast():
        out = linear(torch.randn(2, 4))
    assert out.dtype == dtype and linear.weight.dtype == torch.float32


@pytest.fixture
def tf32_flags():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.mark.filterwarnings("ignore:CUDA is not available")  # no GPU here: autocast is disabled
def test_on_cuda_a_mixed_precision_runs_float32_matmuls_in_tf32_and_fp32_strictly(tf32_flags):
    """The flags stay set after the forward pass, for its backward; torch's own getter agrees (no mix of APIs)."""
    with Precision("bf16", "cuda", tf32=True).autocast():
        pass
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    assert torch.get_float32_matmul_precision() == "high"
    with Precision("fp32", "cuda").autocast():
        pass
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32  # cuDNN's default off
    assert torch.get_float32_matmul_precision() == "highest"


# The fp16 gradient scaler on a model whose gradient is known: loss = y = w.x + b on one example, so dloss/dy = 1,
# which backward carries in float16 after scaling. At torch's initial scale 2^16 that is 65536, beyond float16's
# largest value 65504: the first step's gradient overflows, the step is skipped and the scale halves; at 2^15 the
# second step's does not (the largest scaled gradient, db, is 32768). The true gradient: dw = x = (0.5, 1), db = 1,
# norm 1.5.
X = torch.tensor([[0.5, 1.0]])
ONE_STEP_PER_EPOCH = Hyperparameters(learning_rate=0.1, batch_size=1, epochs=3, warmup_ratio=0.0, lr_decay="none",
                                     weight_decay=0.0, max_grad_norm=None, keep="final", log_every=1000)


class Interrupted(Exception):
    pass


def fit_sum(precision, checkpoint=None, interrupt_at=None):
    """Train y = w.x + b on loss y, one step per epoch; returns the weights at each evaluation and the run."""
    net, calls, seen = nn.Linear(2, 1), [0], []
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[0.5, -0.25]]))
        net.bias.fill_(0.125)

    def loss_fn(net, batch):
        calls[0] += 1
        if calls[0] == interrupt_at:
            raise Interrupted
        return net(batch["x"]).sum()

    def evaluate(net):
        seen.append(torch.cat([net.weight.detach().flatten(), net.bias.detach()]).clone())
        return {"score": 0.0}

    result = train(net, loss_fn, lambda rng: iter([{"x": X}]), 1, evaluate, "score", ONE_STEP_PER_EPOCH, CPU,
                   checkpoint=checkpoint, precision=precision)
    return seen, result


def test_an_fp16_step_whose_gradient_overflows_is_skipped_and_the_next_one_at_half_the_scale_is_taken():
    weights, result = fit_sum(FP16)
    start = torch.tensor([0.5, -0.25, 0.125])
    assert torch.equal(weights[0], start)  # step 1 skipped: weights (and AdamW's moments) untouched
    # step 2 is AdamW's first step: each weight moves by lr x sign of its gradient (all positive), eps aside
    torch.testing.assert_close(weights[1], start - 0.1, atol=1e-6, rtol=0)
    assert [record["skipped_steps"] for record in result.history] == [1, 0, 0]
    assert math.isnan(result.history[0]["grad_norm_max"])  # no step taken since the last evaluation
    assert result.history[1]["grad_norm_mean"] == pytest.approx(1.5)  # the true (unscaled) gradient's norm
    assert result.diverged is None


def test_bf16_and_fp32_need_no_scaler_and_skip_nothing():
    for precision in (BF16, FP32):
        weights, result = fit_sum(precision)
        torch.testing.assert_close(weights[0], torch.tensor([0.4, -0.35, 0.025]), atol=1e-6, rtol=0)
        assert [record["skipped_steps"] for record in result.history] == [0, 0, 0]


def test_an_fp16_run_resumes_with_its_gradient_scale(tmp_path):
    """Interrupted after the skipped step, the run must go on at scale 2^15: at a fresh 2^16 it would skip again."""
    _, whole = fit_sum(FP16)
    path = tmp_path / "job.ckpt"
    with pytest.raises(Interrupted):
        fit_sum(FP16, Checkpoint(path, "job", every_minutes=None, every_steps=1), interrupt_at=2)
    assert torch.load(path, weights_only=True)["runs"]["train"]["scaler"]["scale"] == 2.0**15
    _, resumed = fit_sum(FP16, Checkpoint(path, "job", every_minutes=None, every_steps=1))
    assert [r["skipped_steps"] for r in resumed.history] == [r["skipped_steps"] for r in whole.history]
    for name, value in whole.best_state.items():  # the final weights (keep: final): two steps taken, not one
        assert torch.equal(resumed.best_state[name], value), name


def test_a_run_resumed_in_another_precision_goes_on_from_its_float32_weights(tmp_path):
    """`auto` can resolve differently on the machine a requeued job lands on: the checkpoint's weights, optimiser
    and position carry over; only the fp16 scale does not."""
    path = tmp_path / "job.ckpt"
    with pytest.raises(Interrupted):
        fit_sum(FP16, Checkpoint(path, "job", every_minutes=None, every_steps=1), interrupt_at=2)
    weights, resumed = fit_sum(BF16, Checkpoint(path, "job", every_minutes=None, every_steps=1))
    assert [r["skipped_steps"] for r in resumed.history] == [1, 0, 0]  # epoch 1's record is the fp16 run's
    torch.testing.assert_close(weights[0], torch.tensor([0.4, -0.35, 0.025]), atol=1e-6, rtol=0)  # AdamW's 1st step


# A trained teacher's signals in bf16 against float32. bf16 keeps 8 significant bits (relative rounding 2^-9); over
# the tiny teacher's two layers the logits differ from float32's by under 2% of their range (measured: ~0.5%), and
# the stored float16 layers by under 2% of theirs. Predictions near the decision boundary may flip: 97% must agree.
def relative_error(reference: torch.Tensor, other: torch.Tensor) -> float:
    return float((reference - other).abs().max() / reference.abs().max())


@pytest.fixture(scope="module")
def heads(trained_teacher, separable, tmp_path_factory):
    out = tmp_path_factory.mktemp("heads")
    train_pseudo_heads(separable, trained_teacher[0], dict(learning_rate=1e-2, batch_size=32, epochs=1, seed=0,
                                                           max_seq_length=32), out, CPU)
    return out / "heads.safetensors"


@pytest.fixture(scope="module")
def signals(trained_teacher, separable, heads, tmp_path_factory):
    out = tmp_path_factory.mktemp("signals")
    for precision in (FP32, BF16):
        compute_signals(transfer_frame(separable), "train", trained_teacher[0], heads, ["layers"], 32, 64, CPU,
                        out / f"{precision.name}.safetensors", precision=precision)
    return {name: out / f"{name}.safetensors" for name in ("fp32", "bf16")}


def test_bf16_signals_keep_the_files_dtypes_and_record_their_precision(signals):
    reference, mixed = load_file(signals["fp32"]), load_file(signals["bf16"])
    assert {k: (v.dtype, v.shape) for k, v in mixed.items()} == {k: (v.dtype, v.shape) for k, v in reference.items()}
    assert reference["logits"].dtype == reference["head_logits"].dtype == torch.float32
    assert reference["layers"].dtype == torch.float16
    with safe_open(str(signals["bf16"]), framework="pt") as f:
        assert f.metadata()["precision"] == "bf16"


def test_bf16_signals_agree_with_float32_within_bf16_rounding(signals):
    reference, mixed = load_file(signals["fp32"]), load_file(signals["bf16"])
    for name in ("logits", "head_logits", "layers"):
        assert relative_error(reference[name].float(), mixed[name].float()) < 0.02, name
    assert (reference["logits"].argmax(1) == mixed["logits"].argmax(1)).float().mean() >= 0.97


def test_bf16_probing_encodings_agree_with_float32(trained_teacher, separable):
    model = hf_model(load_classifier(trained_teacher[0] / "model"), build_teacher(TINY_BERT, 2)[1])
    sentences = list(separable.split("dev")["text_a"])
    reference, mixed = (encode_sentences(model, sentences, "mean", 16, 32, CPU, p) for p in (FP32, BF16))
    assert [layer.dtype for layer in mixed] == [torch.float16] * 3  # embeddings and 2 layers, stored in float16
    for layer, (a, b) in enumerate(zip(reference, mixed)):
        assert relative_error(a.float(), b.float()) < 0.02, layer


@pytest.mark.parametrize("precision", [BF16, FP16], ids=["bf16", "fp16"])
def test_a_teacher_and_its_student_train_in_mixed_precision_on_cpu(precision, separable, trained_teacher, signals,
                                                                  tmp_path):
    """CPU autocast has both half types: a teacher fine-tunes and a student distils (from bf16 signals) to the
    separable task's near-perfect dev accuracy, as in float32; the outputs record the precision."""
    teacher = finetuned(separable, TINY_BERT, Hyperparameters(**TEACHER_HP), tmp_path / "teacher",
                       CPU, precision=precision)
    assert teacher["precision"] == precision.name and teacher["scores"]["dev"]["accuracy"] >= 0.9
    assert all(math.isfinite(record["train_loss"]) for record in teacher["history"])
    student = distill(separable, None, trained_teacher[0], signals["bf16"], {"type": "bert_k", "layers": 2}, "kd",
                      {}, [{"epochs": 1}], Hyperparameters(learning_rate=2e-3, batch_size=16, epochs=1,
                                                           max_seq_length=32, log_every=50),
                      tmp_path / "student", CPU, precision=precision)
    assert student["precision"] == precision.name and student["scores"]["dev"]["accuracy"] >= 0.9
    saved = load_file(tmp_path / "student" / "model.safetensors")
    assert {tensor.dtype for tensor in saved.values()} == {torch.float32}  # master weights: float32


@pytest.mark.parametrize("spec", [{"type": "bilstm", "layers": 2, "hidden_size": 16, "embeddings": {"dim": 8}},
                                  {"type": "bilstm_s", "embeddings": {"source": "random", "dim": 8}}],
                         ids=["bilstm", "bilstm_s"])
def test_lstm_students_train_in_bf16_on_cpu_whatever_their_sequences_lengths(spec):
    """oneDNN's bfloat16 LSTM fails on a batch of equal lengths (torch 2.13, found by benchmarks/gpu_throughput.py):
    the LSTM of a student computes in float32 on CPU, and its gradients reach the embeddings."""
    _, tokenizer = build_teacher({**TINY_BERT, "tokenizer": str(REPO / "demo/vocab.txt")}, 2)
    student = build_student(spec, StudentContext(2, tokenizer))
    batch = {"input_ids": torch.randint(5, 100, (4, 10)), "attention_mask": torch.ones(4, 10, dtype=torch.long)}
    with BF16.autocast():
        logits = student(batch).logits
    logits.float().sum().backward()
    assert torch.isfinite(logits).all() and any(p.grad is not None and p.grad.abs().sum() > 0
                                                for p in student.parameters() if p.dim() == 2 and p.shape[0] > 90)


@pytest.mark.parametrize("precision", [BF16, FP16], ids=["bf16", "fp16"])
def test_probes_in_mixed_precision_score_as_in_float32(precision):
    """A probe's inputs are float16 encodings: its own rounding moves accuracies by under 2 points (2 of the 100
    test sentences) on every configuration, logistic regression and MLP."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 8)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    results = {}
    for name in ("fp32", precision.name):
        settings = ProbeSettings(hidden_sizes=(0, 50), dropouts=(0.0,), l2_penalties=(1e-5,), max_epochs=8,
                                 precision=name)
        results[name] = probe(X[:400], y[:400], X[400:500], y[400:500], X[500:], y[500:], settings)
    assert results[precision.name]["settings"]["precision"] == precision.name
    for reference, mixed in zip(results["fp32"]["configs"], results[precision.name]["configs"]):
        assert abs(reference["test_accuracy"] - mixed["test_accuracy"]) <= 0.02
        assert abs(reference["dev_accuracy"] - mixed["dev_accuracy"]) <= 0.02
    assert results["fp32"]["test_accuracy"] > 0.75  # the probes learn something to compare


def test_the_models_kdflow_builds_attend_through_fused_scaled_dot_product_attention(tmp_path, trained_teacher):
    """transformers' default for models that support it: torch's scaled_dot_product_attention (flash or
    memory-efficient kernels on a GPU, in bf16/fp16 under autocast). kdflow's own students compute no token
    attention (their attention sums and the methods' layer attentions are softmaxes over a few vectors)."""
    teacher, tokenizer = build_teacher(TINY_BERT, 2)
    context = StudentContext(2, tokenizer, str(trained_teacher[0]))
    students = [build_student(spec, context).model for spec in (
        {"type": "bert_k", "layers": 1},
        {"type": "bert_s", "hidden_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2,
         "intermediate_size": 24},
        {"type": "hf", "architecture": {"model_type": "roberta", "hidden_size": 16, "num_hidden_layers": 1,
                                        "num_attention_heads": 2, "intermediate_size": 32}})]
    generator, _ = build_generator({"architecture": {"model_type": "gpt2", "n_embd": 16, "n_layer": 1, "n_head": 2},
                                    "tokenizer": TINY_BERT["tokenizer"]})
    loaded = load_classifier(trained_teacher[0] / "model")
    for model in (teacher, loaded, generator, *students):
        assert model.config._attn_implementation == "sdpa", type(model).__name__


def test_every_job_on_a_device_runs_in_the_configs_precision_which_is_a_param_of_it():
    """A job that picks a device resolves the precision, and has it as a param: changing it reruns the job (and,
    through its outputs, what depends on it), and a checkpoint of another precision is not resumed."""
    on_device = {rule for rule, script in rule_scripts().items()
                 if "select_device(" in (REPO / "scripts" / script).read_text()}
    assert len(on_device) == 16
    assert 'precision=config["precision"]' in rule_blocks()["kdflow_device_job"]
    for rule in on_device:
        assert "resolve_precision(" in (REPO / "scripts" / rule_scripts()[rule]).read_text(), rule
        assert rule_blocks()[rule].startswith(f"use rule kdflow_device_job as {rule} with:"), rule


@pytest.mark.parametrize("benchmark", ["distill_throughput.py", "generation_throughput.py"])
def test_the_throughput_benchmarks_load_and_measure_precisions_side_by_side(benchmark):
    """They run for minutes (and measure on a GPU): here only their imports and arguments."""
    result = run_while_progressing([sys.executable, str(REPO / "benchmarks" / benchmark), "--help"], merged=False)
    assert result.returncode == 0, result.stderr
    assert re.search(r"--precision \{auto,bf16,fp16,fp32\} \[\{auto,bf16,fp16,fp32\} \.\.\.\]", result.stdout)
