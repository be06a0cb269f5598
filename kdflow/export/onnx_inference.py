"""Thesis Table 5.2's speed in ONNX Runtime beside PyTorch's (issue 55, beyond the thesis; rule measure_inference).

:func:`measure_onnxruntime` exports the model :func:`kdflow.analysis.inference.measure` has just timed to a temporary
ONNX file (:func:`kdflow.export.onnx_export.export_onnx`: a teacher or a ``transformers`` student as it is, BERT_S with
its token embedding folded into one table, a BiLSTM, Gated CNN or LSTM_S through its unpacked twin), runs the same
batches (of 256, padded to their longest example) through an ``onnxruntime.InferenceSession`` on
``CPUExecutionProvider`` with as many intra-op threads as PyTorch had, timed as PyTorch was
(:func:`kdflow.analysis.inference.time_inference`: one untimed warm-up run of the first batch), and keeps its
milliseconds per example only if its logits lie within :data:`kdflow.export.conversion.TOLERANCE` (1e-4, the export's
own bound) of PyTorch's on every example, with the same predictions (:func:`kdflow.export.conversion.agreement`).
Without the optional packages (``pip install 'kdflow[onnx]'``), for a model with no ONNX route, or with logits that
disagree, the time is ``None`` with the reason beside it, never a number.

The session runs the graph as ONNX Runtime optimises it by default (``ORT_ENABLE_ALL``: constant folding, fused
attention and layer norms), which is what a user of the exported file gets.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import tempfile
from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel

from kdflow.analysis.inference import Batch, time_inference
from kdflow.core.errors import UserError
from kdflow.export.conversion import INPUT_NAMES, TOLERANCE, agreement, agrees, custom_model, exported_model
from kdflow.export.onnx_export import OUTPUT_NAME, export_onnx, require_onnx
from kdflow.students.layers import LSTMS, AttentionPooled
from kdflow.students.tokens import WholeSentences
from kdflow.students.transformer import HFStudent
from kdflow.training.hf_models import model_inputs

ONNXRUNTIME_MS = "ms_per_example_onnxruntime_cpu"  # beside measure's ms_per_example_cpu, on the same batches
ONNXRUNTIME_PROVIDER = "CPUExecutionProvider"


def installed_version(package: str) -> str | None:
    """``package``'s installed version, None if it cannot be imported."""
    if importlib.util.find_spec(package) is None:
        return None
    return importlib.metadata.version(package)


def unmeasured(version: str | None, reason: str, check: dict | None = None) -> dict:
    """:func:`measure_onnxruntime`'s record without a time: why, in ``onnxruntime_reason``."""
    return {ONNXRUNTIME_MS: None, "onnxruntime": version, "onnxruntime_provider": None, "onnxruntime_check": check,
            "onnxruntime_reason": reason}


def token_ids(tokenizer) -> SimpleNamespace:
    """The unknown and pad ids of the tokenizer a model's batches were made with (a word list, LSTM_S's
    :class:`~kdflow.students.tokens.WholeSentences`, or a ``transformers`` tokenizer): what the exported custom
    students read an empty row and a pad as."""
    inner = tokenizer.tokenizer if isinstance(tokenizer, WholeSentences) else tokenizer
    return SimpleNamespace(unk_token_id=inner.unk_token_id, pad_token_id=inner.pad_token_id)


def onnx_exportable(module: nn.Module, tokenizer, num_labels: int) -> PreTrainedModel:
    """The ``transformers`` model that :func:`~kdflow.export.onnx_export.export_onnx` traces for a measured module:
    a teacher (or any ``transformers`` classifier) itself; a ``bert_k``/``hf``/``bert_s`` student the model it wraps
    (BERT_S's token embedding folded into one table); a BiLSTM, Gated CNN or LSTM_S its
    :class:`~kdflow.students.modeling_kdflow_student.KdflowStudentForSequenceClassification`. Anything else is a
    :class:`~kdflow.core.errors.UserError`. The labels are placeholders: only the logits are compared."""
    labels, regression = [str(label) for label in range(num_labels)], num_labels == 1
    if isinstance(module, PreTrainedModel):
        return module
    if isinstance(module, HFStudent):
        return exported_model(module, labels, regression, tokenizer)  # every transformers student: one route
    if isinstance(module, (LSTMS, AttentionPooled)):
        return custom_model(module, token_ids(tokenizer))  # a UserError for an attention-pooled student of other layers
    raise UserError(f"no ONNX export for a model of class {type(module).__name__}: kdflow.export knows transformers "
                    "classifiers and the BiLSTM, Gated CNN and LSTM_S students")


def graph_inputs(model: PreTrainedModel) -> SimpleNamespace:
    """What :func:`~kdflow.export.onnx_export.export_onnx` reads off a tokenizer: the inputs ``model.forward`` takes
    (:func:`kdflow.training.hf_models.model_inputs`), as kdflow's batches feed them."""
    taken = model_inputs(model, dict.fromkeys(INPUT_NAMES))
    return SimpleNamespace(model_input_names=[name for name in INPUT_NAMES if name in taken])


def cpu_session(path, threads: int):
    """An onnxruntime session on ``path``, on the CPU with ``threads`` intra-op threads, executing nodes one after
    another (as PyTorch's eager forward does)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    return onnxruntime.InferenceSession(str(path), options, providers=[ONNXRUNTIME_PROVIDER])


def measure_onnxruntime(module: nn.Module, tokenizer, batches: Sequence[Batch], reference: torch.Tensor,
                        threads: int, warmup: int = 1) -> dict:
    """ONNX Runtime's CPU milliseconds per example of ``module`` on the same ``batches`` as
    :func:`kdflow.analysis.inference.measure`, with ``threads`` intra-op threads (see the module docstring):
    ``ms_per_example_onnxruntime_cpu``, ``onnxruntime`` (its version), ``onnxruntime_provider``,
    ``onnxruntime_check`` (:func:`kdflow.export.conversion.agreement` of its logits with ``reference``, PyTorch's on
    the same batches) and ``onnxruntime_reason`` (None when measured). The time is None, with the reason, where
    onnxruntime (or the exporter's onnx and onnxscript) is not installed, where the model has no ONNX route, or where
    its logits are not PyTorch's."""
    version = installed_version("onnxruntime")
    try:
        require_onnx()
    except UserError as error:
        return unmeasured(version, str(error))
    num_labels = reference.shape[1]
    try:
        model = onnx_exportable(module, tokenizer, num_labels)
    except UserError as error:
        return unmeasured(version, f"the model cannot be exported to ONNX: {error}")
    with tempfile.TemporaryDirectory(prefix="kdflow-onnx-") as folder:
        try:
            path = export_onnx(model, graph_inputs(model), folder)
        except (UserError, torch.onnx.OnnxExporterError) as error:
            return unmeasured(version, f"the model cannot be exported to ONNX: {error}")
        session = cpu_session(path, threads)
        names = [given.name for given in session.get_inputs()]
        feeds = [{name: batch[name].numpy().astype(np.int64, copy=False) for name in names} for batch in batches]
        outputs = []
        ms = time_inference(lambda feed: session.run([OUTPUT_NAME], feed)[0], feeds, warmup=warmup,
                            outputs=outputs)
    check = agreement(reference.float().numpy(), np.concatenate(outputs), regression=num_labels == 1)
    if not agrees(check):
        return unmeasured(version, f"ONNX Runtime's logits are not PyTorch's within {TOLERANCE:g}: {check}", check)
    return {ONNXRUNTIME_MS: ms, "onnxruntime": version, "onnxruntime_provider": ONNXRUNTIME_PROVIDER,
            "onnxruntime_check": check, "onnxruntime_reason": None}
