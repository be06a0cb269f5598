"""An exported student as ``model.onnx``, for ONNX Runtime (docs/export.md, issue 55).

:func:`export_onnx` writes the model of an exported folder (the ``transformers`` model
:func:`kdflow.export.conversion.exported_model` builds, or the folder's model loaded back) as one ONNX file: inputs
named as the folder's tokenizer returns them (``input_ids``, ``attention_mask``, and ``token_type_ids`` where the
model reads them), int64, with a dynamic batch axis and a dynamic sequence axis; one output, ``logits`` (float32,
``[batch, labels]``). :func:`onnx_logits` runs it with onnxruntime as a user would, and the export compares the two
on every dev example (:func:`kdflow.export.conversion.agreement`, the same 1e-4 bound).

The exporter is ``torch.onnx.export(..., dynamo=True)``, torch's default since 2.9 (it needs ``onnxscript``); the
TorchScript exporter still ships in torch 2.13 but warns that it is deprecated, and it cannot follow the packed
sequences or the data-dependent branch of the custom students' code. The dynamo exporter traces with
``torch.export``, which needs a forward pass without data-dependent Python control flow, so:

- a ``transformers`` class (BERT-k, BERT_S, an ``hf`` encoder) is exported as it is, through a wrapper that returns
  its ``logits``;
- a :class:`~kdflow.students.modeling_kdflow_student.KdflowStudentForSequenceClassification` (BiLSTM, Gated CNN,
  LSTM_S) is exported through :class:`TraceableStudent`, the same computation with the same weights written
  without packing: each bidirectional LSTM becomes two one-directional LSTMs, the backward one run over each
  row's real tokens reversed in place (a gather), which is what ``pack_padded_sequence`` computes; a row without a
  real token reads one unknown token through ``torch.where``, not an ``if``. Attention masks are taken to be
  right-padded, as the folder's tokenizer pads and as the PyTorch class assumes (it packs by ``mask.sum(1)``).

onnx, onnxruntime and onnxscript are optional (``pip install kdflow[onnx]``): :func:`onnx_available` says whether
they are installed, and the export writes no ``model.onnx`` without them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn
from transformers import PreTrainedModel

from kdflow.core import run_files
from kdflow.core.errors import UserError
from kdflow.export.conversion import agreement, agrees, exported_logits
from kdflow.students.layers import BiLSTMLayer
from kdflow.students.modeling_kdflow_student import KdflowStudentForSequenceClassification

ONNX_PACKAGES = ("onnx", "onnxruntime", "onnxscript")  # the `onnx` extra of pyproject.toml
OUTPUT_NAME = "logits"
# The example the exporter traces with: two rows of eight tokens. Sizes 0 and 1 would be specialised (fixed in
# the graph), so neither axis of the example is either; the graph takes any batch and any length.
EXAMPLE_SHAPE = (2, 8)
TWO_GIB = 2**31  # an ONNX protobuf's size limit: larger weights go to model.onnx.data


def onnx_available() -> bool:
    """Whether the packages :func:`export_onnx` and :func:`onnx_logits` need are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ONNX_PACKAGES)


def require_onnx() -> None:
    missing = [name for name in ONNX_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"ONNX export needs {', '.join(missing)}: pip install 'kdflow[onnx]' (pyproject.toml)")


class TransformersLogits(nn.Module):
    """A ``transformers`` sequence classifier's ``logits`` from its inputs as named arguments."""

    def __init__(self, model: PreTrainedModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            inputs["token_type_ids"] = token_type_ids
        return self.model(**inputs).logits


def one_direction(lstm: nn.LSTM, layer: int, suffix: str) -> nn.LSTM:
    """Layer ``layer`` of ``lstm`` in one direction (``suffix``: "" forward, "_reverse" backward) as an LSTM of its
    own, sharing the weights."""
    single = nn.LSTM(lstm.input_size if layer == 0 else 2 * lstm.hidden_size, lstm.hidden_size, batch_first=True,
                     bias=lstm.bias)
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh") if lstm.bias else ("weight_ih", "weight_hh")
    for name in names:
        setattr(single, f"{name}_l0", getattr(lstm, f"{name}_l{layer}{suffix}"))
    return single


class SplitBiLSTM(nn.Module):
    """A batch-first bidirectional ``nn.LSTM`` over right-padded rows, computed as ``pack_padded_sequence`` does
    (each direction sees a row's real tokens only) from one-directional LSTMs and gathers, which trace."""

    def __init__(self, lstm: nn.LSTM):
        super().__init__()
        if not (lstm.bidirectional and lstm.batch_first) or lstm.proj_size:
            raise UserError("only batch-first bidirectional LSTMs without projections are exported to ONNX")
        self.layers = nn.ModuleList(nn.ModuleList([one_direction(lstm, layer, ""), one_direction(lstm, layer,
                                                                                                   "_reverse")])
                                    for layer in range(lstm.num_layers))

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> outputs [B, T, 2H] (zero at pads) and the top layer's final states [B, 2H] (forward, backward)."""
        lengths = mask.sum(dim=1, keepdim=True)  # [B, 1]
        steps = torch.arange(states.shape[1], device=states.device).unsqueeze(0)  # [1, T]
        real = steps < lengths
        reversed_order = torch.where(real, lengths - 1 - steps, steps)  # each row's real tokens back to front
        last = (lengths - 1).clamp(min=0)
        for forward_lstm, backward_lstm in self.layers:
            ahead = forward_lstm(states)[0]  # right padding: the real positions see no pad
            back = backward_lstm(gathered(states, reversed_order))[0]
            back = gathered(back, reversed_order)  # the reversal is its own inverse
            states = torch.cat([ahead, back], dim=-1).masked_fill(~real.unsqueeze(-1), 0.0)
        final = torch.cat([gathered(ahead, last).squeeze(1), back[:, 0]], dim=-1)
        return states, final


def gathered(states: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``states[b, order[b, t]]`` for every row b and position t."""
    return states.gather(1, order.unsqueeze(-1).expand(-1, -1, states.shape[-1]))


class TraceableStudent(nn.Module):
    """:class:`KdflowStudentForSequenceClassification`'s logits (in eval mode) as a forward pass ``torch.export``
    traces: the same modules and weights, its LSTMs through :class:`SplitBiLSTM` and every other sequence layer as it
    is (a layer that ``torch.export`` cannot trace needs its traceable form here, as the BiLSTM layer has). One pad
    column is appended to every input, so that an input of length 0 has a position for its unknown token; pads change
    no logit (the LSTMs never see them, the convolutions see pads as zeros, the pooling gives them no weight)."""

    def __init__(self, model: KdflowStudentForSequenceClassification):
        super().__init__()
        self.model = model
        self.student = model.student
        # by name, not class: a model loaded from a folder has the folder's copy of kdflow.students.layers
        self.lstm_s = model.config.architecture == "lstm_s"
        if self.lstm_s:
            self.lstm = SplitBiLSTM(self.student.lstm)
        else:
            self.layers = nn.ModuleList(SplitBiLSTMLayer(layer) if layer.kind == BiLSTMLayer.kind else layer
                                        for layer in self.student.layers)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        config, student = self.model.config, self.student
        column = torch.zeros_like(input_ids[:, :1])
        input_ids = torch.cat([input_ids, column + config.pad_token_id], dim=1)
        mask = torch.cat([attention_mask, column], dim=1).bool()
        empty = ~mask.any(dim=1, keepdim=True)  # such a row reads one unknown token
        input_ids = torch.cat([torch.where(empty, config.unk_token_id, input_ids[:, :1]), input_ids[:, 1:]], dim=1)
        mask = torch.cat([mask[:, :1] | empty, mask[:, 1:]], dim=1)
        states = student.embed(input_ids)
        if self.lstm_s:
            final = self.lstm(states, mask)[1]
            return student.classifier(torch.relu(student.fc(final)))
        for layer in self.layers:
            states = layer(states, mask, None)
        return student.classifier(student.pools[-1](states, mask))


class SplitBiLSTMLayer(nn.Module):
    """A :class:`~kdflow.students.layers.BiLSTMLayer` as a sequence layer through :class:`SplitBiLSTM`."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.lstm = SplitBiLSTM(layer.lstm)

    def forward(self, states: torch.Tensor, mask: torch.Tensor, lengths: None) -> torch.Tensor:
        return self.lstm(states, mask)[0]


def traceable(model: PreTrainedModel) -> nn.Module:
    """The module :func:`export_onnx` traces: ``model``'s logits from its named inputs."""
    if isinstance(model, KdflowStudentForSequenceClassification):
        return TraceableStudent(model)
    if type(model).__name__ == "KdflowStudentForSequenceClassification":  # loaded from a folder's own copy
        return TraceableStudent(model)
    return TransformersLogits(model)


def input_names(tokenizer, model: PreTrainedModel) -> list[str]:
    """What the ONNX graph takes: what the tokenizer returns, less token types where ``model`` ignores them (the
    custom students read a pair as one sequence): the exporter drops an unused input."""
    names = [name for name in tokenizer.model_input_names if name in ("input_ids", "attention_mask",
                                                                        "token_type_ids")]
    if type(model).__name__ == "KdflowStudentForSequenceClassification" and "token_type_ids" in names:
        names.remove("token_type_ids")
    for needed in ("input_ids", "attention_mask"):
        if needed not in names:
            raise UserError(f"the tokenizer returns {tokenizer.model_input_names}; ONNX export needs {needed}")
    return names


def example_inputs(model: PreTrainedModel, names: list[str]) -> dict[str, torch.Tensor]:
    batch, length = EXAMPLE_SHAPE
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (batch, length), generator=generator)
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[1, length // 2:] = 0  # one padded row
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    return {name: inputs[name] for name in names}


def export_onnx(model: PreTrainedModel, tokenizer, folder) -> Path:
    """Write ``model`` (an exported student, in float32) as ``folder/model.onnx``; returns its path. The graph's
    inputs are :func:`input_names`, int64 ``[batch, sequence]``, both axes dynamic; its output ``logits``."""
    require_onnx()
    path = Path(folder) / run_files.ONNX_MODEL
    path.parent.mkdir(parents=True, exist_ok=True)
    model = model.float().eval()
    names = input_names(tokenizer, model)
    inputs = example_inputs(model, names)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    shapes = {name: {0: batch, 1: sequence} for name in names}
    large = sum(p.numel() * p.element_size() for p in model.parameters()) > TWO_GIB // 2
    forget_rnn_kernels()
    with torch.no_grad():
        program = torch.onnx.export(traceable(model).eval(), (), kwargs=inputs, input_names=names,
                                    output_names=[OUTPUT_NAME], dynamic_shapes=shapes, dynamo=True,
                                    external_data=large, verbose=False)
    forget_rnn_kernels()
    fixed = {value.name: [dim for dim in value.shape[:2] if isinstance(dim, int)]
             for value in program.model.graph.inputs}
    if any(fixed.values()):
        raise UserError(f"the ONNX exporter fixed an axis it was asked to keep dynamic: {fixed}")
    program.save(str(path), external_data=large)
    return path


def forget_rnn_kernels() -> None:
    """Clear the kernels torch cached for ``aten.lstm``/``aten.gru``. For a dynamic sequence axis, torch.onnx
    (2.13) swaps in a ``while_loop`` decomposition of these ops for the duration of one export, but not the
    kernel the op cached on an earlier call: the next export of an LSTM could unroll it at the example's length,
    which fixes the sequence axis (observed on the third LSTM exported in one process)."""
    for op in (torch.ops.aten.lstm.input, torch.ops.aten.gru.input):
        op._dispatch_cache.clear()


def onnx_session(path):
    """An onnxruntime CPU session on ``path``."""
    require_onnx()
    import onnxruntime

    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def onnx_logits(session, tokenizer, frame: pd.DataFrame, batch_size: int = 64) -> np.ndarray:
    """The ONNX model's logits on ``frame``'s texts, tokenised as a user of the folder would (``truncation=True``,
    padded per batch), each input the graph takes fed from the tokenizer's output."""
    names = [given.name for given in session.get_inputs()]
    texts = list(frame["text_a"])
    pairs = list(frame["text_b"]) if frame["text_b"].notna().any() else None
    outputs = []
    for start in range(0, len(texts), batch_size):
        end = start + batch_size
        encoded = tokenizer(texts[start:end], pairs[start:end] if pairs else None, truncation=True, padding=True,
                            return_tensors="np")
        outputs.append(session.run([OUTPUT_NAME], at_least_one_position(encoded, names, tokenizer))[0])
    return np.concatenate(outputs).astype(np.float32) if outputs else np.zeros((0, 0), dtype=np.float32)


def at_least_one_position(encoded, names: list[str], tokenizer) -> dict[str, np.ndarray]:
    """The graph's inputs from a tokenizer's ``return_tensors="np"`` output, int64. A batch of empty texts without
    markers (LSTM_S) has length 0, which onnxruntime 1.32 rejects in this graph (a buffer it reuses has the
    length + 1 of the pad column): such a batch gets one pad position, which changes no logit."""
    feed = {name: np.asarray(encoded[name], dtype=np.int64) for name in names}
    if feed["input_ids"].shape[1] == 0:
        pads = {"input_ids": tokenizer.pad_token_id or 0}
        feed = {name: np.full((len(value), 1), pads.get(name, 0), dtype=np.int64) for name, value in feed.items()}
    return feed


def check_onnx(path, model: PreTrainedModel, tokenizer, frame: pd.DataFrame, regression: bool) -> dict:
    """The ONNX file's logits under onnxruntime against ``model``'s in PyTorch on ``frame``'s texts, both tokenised
    as a user would: :func:`kdflow.export.conversion.agreement`; a disagreement is a
    :class:`~kdflow.core.errors.UserError`."""
    result = agreement(exported_logits(model, tokenizer, frame), onnx_logits(onnx_session(path), tokenizer, frame),
                       regression)
    if not agrees(result):
        raise UserError(f"{path} does not compute what the exported PyTorch model does under onnxruntime: {result}")
    return result
