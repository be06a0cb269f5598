"""The models of kdflow's students that ``transformers`` has no class for, in torch alone: the Universal-KD BiLSTM and
Gated CNN (:class:`AttentionPooled` over registered sequence layers) and the thesis's LSTM_S (:class:`LSTMS`).

kdflow trains these classes (kdflow.students.pooled and kdflow.students.recurrent give them kdflow's batches), and
the export copies this file, beside ``modeling_kdflow_student.py``, into the folder of every such student, whose
``transformers`` model is built of the same classes: the exported model computes with the code that trained it.
So this file imports nothing but torch.

A sequence layer maps ``(states [B, T, H_in], mask [B, T], lengths [B] on the host)`` to ``[B, T, H]``, and padding
must not change a real token's output. It is registered in :data:`SEQUENCE_LAYERS` by name (:func:`sequence_layer`)
and keeps its constructor's arguments in ``options``, from which the exported model builds it again.

Padding never reaches an LSTM: sequences are packed to their real lengths, so outputs at real tokens and the final
states (those at each sequence's last real token) are what the unpadded sequence would give. Under
``torch.compile``, which cannot trace packed sequences (nor, in torch 2.13, ``nn.LSTM`` at all), the same LSTM runs
step by step on the padded batch in plain tensor operations (:func:`unrolled_lstm`): the backward direction reads
each sequence reversed within its own length, so padding still never reaches a real token's state, and the
outputs equal the packed form's to float tolerance (tests/test_students.py). So does a pack's ``vmap``
(kdflow.training.packs), which has no batching rule for packed sequences.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

SEQUENCE_LAYERS: dict[str, type[nn.Module]] = {}


def sequence_layer(name: str):
    """Register a sequence layer class under ``name`` (its ``kind``)."""

    def register(cls: type[nn.Module]) -> type[nn.Module]:
        if name in SEQUENCE_LAYERS:
            raise ValueError(f"a sequence layer {name!r} is already registered")
        cls.kind = name
        SEQUENCE_LAYERS[name] = cls
        return cls

    return register


def packed_lstm(lstm: nn.LSTM, states: torch.Tensor, mask: torch.Tensor,
                lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a batch-first ``lstm`` over the real tokens only (``lengths`` of them per row, on the host; ``mask``
    the same on the device): outputs [B, T, H] (zero at pads) and the final hidden states [layers * directions,
    B, H_dir]; under ``torch.compile`` or in a pack's ``vmap`` by :func:`unrolled_lstm`. On CPU under a mixed
    precision the LSTM computes in float32: oneDNN's bfloat16 LSTM (torch 2.13) has no kernel for some batches,
    equal lengths among them, and fails on them."""
    if torch.compiler.is_compiling() or torch._C._functorch.is_batchedtensor(states):  # compiled, or in a pack
        return unrolled_lstm(lstm, states, mask)
    cpu_mixed = states.device.type == "cpu" and torch.is_autocast_enabled("cpu")
    with torch.autocast("cpu", enabled=False) if cpu_mixed else contextlib.nullcontext():
        packed = pack_padded_sequence(states.float() if cpu_mixed else states, lengths, batch_first=True,
                                      enforce_sorted=False)
        outputs, (final, _) = lstm(packed)
    return padded(outputs, states.shape[1]), final


def unrolled_lstm(lstm: nn.LSTM, states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`packed_lstm`'s outputs and final states from a batch-first ``lstm``'s weights, computed one time step
    at a time on the padded batch (``mask``: its real tokens), in operations ``torch.compile`` traces whole: the
    input projection of every step is one matmul, each step then one matmul and its gates' elementwise work."""
    lengths = mask.sum(1)
    positions = torch.arange(states.shape[1], device=states.device)
    # position t of a row read backwards within its length (pads stay where they are): its own inverse
    reverse = torch.where(positions < lengths[:, None], lengths[:, None] - 1 - positions, positions)
    last = (lengths - 1).clamp(min=0)[:, None, None]
    directions = ["", "_reverse"] if lstm.bidirectional else [""]
    finals, inputs = [], states
    for layer in range(lstm.num_layers):
        outputs = []
        for suffix in directions:
            weights = [getattr(lstm, f"{kind}_l{layer}{suffix}") for kind in ("weight_ih", "weight_hh")]
            biases = [getattr(lstm, f"{kind}_l{layer}{suffix}") for kind in ("bias_ih", "bias_hh")] if lstm.bias \
                else [None, None]
            steps = inputs if not suffix else inputs.gather(1, reverse[..., None].expand_as(inputs))
            out = _lstm_steps(steps, *weights, *biases)
            finals.append(out.gather(1, last.expand(-1, 1, out.shape[-1]))[:, 0])
            outputs.append(out if not suffix else out.gather(1, reverse[..., None].expand_as(out)))
        inputs = torch.cat(outputs, dim=-1) * mask[..., None]
        if layer < lstm.num_layers - 1 and lstm.dropout:
            inputs = F.dropout(inputs, lstm.dropout, lstm.training)
    return inputs, torch.stack(finals)


def _lstm_steps(inputs, weight_ih, weight_hh, bias_ih, bias_hh) -> torch.Tensor:
    """One direction of one LSTM layer over [B, T, D] (torch's gate order: input, forget, cell, output)."""
    projected = F.linear(inputs, weight_ih, bias_ih)
    hidden = inputs.new_zeros(inputs.shape[0], weight_hh.shape[1])
    cell = hidden
    outputs = []
    for t in range(inputs.shape[1]):
        gates = projected[:, t] + F.linear(hidden, weight_hh, bias_hh)
        i, f, g, o = gates.chunk(4, dim=-1)
        cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
        hidden = torch.sigmoid(o) * torch.tanh(cell)
        outputs.append(hidden)
    return torch.stack(outputs, dim=1)


def padded(sequence: PackedSequence, length: int) -> torch.Tensor:
    """A batch-first packed sequence as [B, ``length``, H], zero at pads, in the batch's order: torch's
    ``pad_packed_sequence`` without the lengths it also returns, which it indexes on the host
    (``unsorted_indices.cpu()``, a wait for the device in every step on a GPU)."""
    states, _ = torch.ops.aten._pad_packed_sequence(sequence.data, sequence.batch_sizes, True, 0.0, length)
    return states.index_select(0, sequence.unsorted_indices)


@sequence_layer("bilstm")
class BiLSTMLayer(nn.Module):
    """One bidirectional LSTM layer, ``width`` wide in total (``width / 2`` per direction)."""

    def __init__(self, input_size: int, width: int):
        super().__init__()
        self.options = {"input_size": input_size, "width": width}
        self.lstm = nn.LSTM(input_size, width // 2, batch_first=True, bidirectional=True)

    def forward(self, states: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return packed_lstm(self.lstm, states, mask, lengths)[0]


@sequence_layer("gated_conv")
class GatedConvLayer(nn.Module):
    """A residual gated convolution: ``X + (X * W + b) ⊗ σ(X * V + c)`` (Dauphin et al. 2017 Eq. 1, wrapped in a
    residual block as in their §3). Convolutions are centred ("same" padding), not causal as in Dauphin's language
    model: a classifier sees the whole sentence. Pads are zeroed before the convolution, so a real token's window
    sees exactly the zeros that pad an unpadded sequence's ends and padding cannot change any real token's output."""

    def __init__(self, width: int, kernel_width: int):
        super().__init__()
        self.options = {"width": width, "kernel_width": kernel_width}
        self.conv = nn.Conv1d(width, 2 * width, kernel_width, padding=kernel_width // 2)  # W and V as one conv

    def forward(self, states: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        states = states.masked_fill(~mask.unsqueeze(-1), 0.0)  # (``lengths``: only recurrent layers pack by them)
        gated = F.glu(self.conv(states.transpose(1, 2)), dim=1)  # first half ⊗ sigmoid(second half)
        return states + gated.transpose(1, 2)


class AttentionSum(nn.Module):
    """Universal-KD §5.5's "attention sum" (Bahdanau et al. 2015): a learned vector scores every position, a
    softmax over the real (non-pad) tokens turns the scores into weights, and the weighted sum of the states is the
    sequence's vector. [B, T, H], mask [B, T] -> [B, H]. The paper gives no scoring function; a single vector
    (rather than Bahdanau's one-hidden-layer MLP) is the simplest one and adds only H parameters per layer."""

    def __init__(self, width: int):
        super().__init__()
        self.score = nn.Linear(width, 1, bias=False)  # a bias would cancel in the softmax

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = self.score(states).squeeze(-1).masked_fill(~mask, float("-inf"))
        return torch.einsum("bt,bth->bh", scores.softmax(dim=-1), states)


class AttentionPooled(nn.Module):
    """Universal-KD §5.5: embeddings, a stack of sequence layers, every layer's output reduced by its own attention
    sum (the per-layer vectors the pseudo classifiers of Eq. 3 need), and a linear classifier on the top layer's
    vector. Dropout (A.2 tunes it in [0.1, 0.8]) is applied to every layer's input and to the classifier's input."""

    def __init__(self, embed: nn.Module, layers: list[nn.Module], width: int, num_labels: int, dropout: float):
        super().__init__()
        self.embed = embed
        self.layers = nn.ModuleList(layers)
        self.pools = nn.ModuleList(AttentionSum(width) for _ in layers)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(width, num_labels)

    def encode(self, input_ids: torch.Tensor, mask: torch.Tensor,
               lengths: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """-> the logits [B, C] and every layer's pooled vector [B, H], bottom to top."""
        states = self.embed(input_ids)
        pooled = []
        for layer, pool in zip(self.layers, self.pools):
            states = layer(self.dropout(states), mask, lengths)
            pooled.append(pool(states, mask))
        return self.classifier(self.dropout(pooled[-1])), pooled


class LSTMS(nn.Module):
    """Sučík (2020) §4.3.3 LSTM_S (from Tang et al. 2019): BiLSTM, the last forward and backward hidden states
    concatenated, a fully connected ReLU layer, dropout, a linear classifier.

    Layer representations: each BiLSTM layer's concatenated final states [B, 2 * hidden], then the FC layer's
    output [B, fc] (before dropout). With the default single BiLSTM layer, the FC layer is the only intermediate
    layer above it, so including it is what gives intermediate-layer distillation (Universal-KD Eq. 7, M - 1 layers)
    anything to work on."""

    def __init__(self, embed: nn.Module, input_size: int, hidden: int, layers: int, fc: int, num_labels: int,
                 dropout: float):
        super().__init__()
        self.embed = embed
        # No dropout between stacked BiLSTM layers (Table B.2's deeper students): the original code has none.
        self.lstm = nn.LSTM(input_size, hidden, layers, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, fc)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(fc, num_labels)

    def encode(self, input_ids: torch.Tensor, mask: torch.Tensor,
               lengths: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """-> the logits [B, C] and the layer representations, bottom to top."""
        _, final = packed_lstm(self.lstm, self.embed(input_ids), mask, lengths)
        layers, batch_size = self.lstm.num_layers, final.shape[1]
        # final is [layer0 forward, layer0 backward, layer1 forward, ...]: pair the two directions of each layer
        per_layer = final.view(layers, 2, batch_size, -1).transpose(1, 2).reshape(layers, batch_size, -1)
        hidden = F.relu(self.fc(per_layer[-1]))
        return self.classifier(self.dropout(hidden)), [*per_layer, hidden]
