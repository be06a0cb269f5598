"""BiLSTM students: Universal-KD's 3-layer attention-pooled BiLSTM (``bilstm``) and the thesis's LSTM_S
(``bilstm_s``). A sentence pair is one sequence, as the batch gives it (Universal-KD A.2: no siamese encoder).

Padding never reaches an LSTM: sequences are packed to their real lengths, so outputs at real tokens and the
final states (those at each sequence's last real token) are what the unpadded sequence would give. Under
``torch.compile``, which cannot trace packed sequences (nor, in torch 2.13, ``nn.LSTM`` at all), the same LSTM runs
step by step on the padded batch in plain tensor operations (:func:`unrolled_lstm`): the backward direction reads
each sequence reversed within its own length, so padding still never reaches a real token's state, and the
outputs equal the packed form's to float tolerance (tests/test_students.py). So does a pack's ``vmap``
(kdflow.training.packs), which has no batching rule for packed sequences.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

from kdflow.students.embeddings import AttentionPooledStudent, token_embedding
from kdflow.students.registry import StudentContext, StudentOutput, register
from kdflow.students.tokens import WholeSentences, input_tokenizer
from kdflow.training.batching import host_lengths


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


class BiLSTMLayer(nn.Module):
    """One bidirectional LSTM layer, ``width`` wide in total (``width / 2`` per direction)."""

    def __init__(self, input_size: int, width: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, width // 2, batch_first=True, bidirectional=True)

    def forward(self, states: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return packed_lstm(self.lstm, states, mask, lengths)[0]


@register("bilstm", {"layers": 3, "hidden_size": 768, "dropout": 0.1, "embeddings": None})
def bilstm(opts: dict, context: StudentContext) -> nn.Module:
    """Universal-KD §5.5: a 3-layer BiLSTM encoder "with a hidden size of 768" and "around 25M trainable
    parameters", attention-sum pooling, a linear classifier; dropout as in A.2 (Table 9 tunes it per task).

    Choices the paper leaves open: 768 is read as the layer's total width (384 units per direction, so every layer
    outputs 768), because 768 units per direction would give over 33M parameters whatever the embedding width; the
    paper gives no embedding width, so random 512-wide vectors are the default, which with BERT's 30,522 wordpieces
    makes 25,479,938 parameters for 2 classes. Each layer's pooled vector is a layer representation.
    Options: ``layers`` (3), ``hidden_size`` (768, both directions), ``dropout`` (0.1), ``embeddings``.
    """
    width = opts["hidden_size"]
    if width % 2:
        raise ValueError(f"bilstm hidden_size must be even (two directions), got {width}")
    embed = token_embedding(opts["embeddings"], context, dim=512)
    inputs = [embed.width] + [width] * (opts["layers"] - 1)
    layers = [BiLSTMLayer(size, width) for size in inputs]
    return AttentionPooledStudent(embed, layers, width, context.num_labels, opts["dropout"])


class ThesisBiLSTM(nn.Module):
    """Sučík (2020) §4.3.3 LSTM_S (from Tang et al. 2019): BiLSTM, the last forward and backward hidden states
    concatenated, a fully connected ReLU layer, dropout, a linear classifier.

    Layer representations: each BiLSTM layer's concatenated final states [B, 2 * hidden], then the FC layer's
    output [B, fc] (before dropout). With the default single BiLSTM layer, the FC layer is the only intermediate
    layer above it, so including it is what gives intermediate-layer distillation (Universal-KD Eq. 7, M - 1 layers)
    anything to work on."""

    def __init__(self, embed: nn.Module, hidden: int, layers: int, fc: int, num_labels: int, dropout: float):
        super().__init__()
        self.embed = embed
        # No dropout between stacked BiLSTM layers (Table B.2's deeper students): the original code has none.
        self.lstm = nn.LSTM(embed.width, hidden, layers, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, fc)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(fc, num_labels)

    def forward(self, batch: dict[str, torch.Tensor]) -> StudentOutput:
        _, final = packed_lstm(self.lstm, self.embed(batch["input_ids"]), batch["attention_mask"].bool(),
                               host_lengths(batch))
        layers, batch_size = self.lstm.num_layers, final.shape[1]
        # final is [layer0 forward, layer0 backward, layer1 forward, ...]: pair the two directions of each layer
        per_layer = final.view(layers, 2, batch_size, -1).transpose(1, 2).reshape(layers, batch_size, -1)
        hidden = F.relu(self.fc(per_layer[-1]))
        return StudentOutput(self.classifier(self.dropout(hidden)), [*per_layer, hidden])


LSTM_S = {"lstm_size": 300, "fc_size": 400, "layers": 1, "dropout": 0.1, "embeddings": None, "tokens": "wordpiece",
          "max_length": None}


@register("bilstm_s", LSTM_S)
def bilstm_s(opts: dict, context: StudentContext) -> nn.Module:
    """Thesis LSTM_S: 1 BiLSTM layer of 300 units per direction, FC 400, dropout 0.1 (§4.3.3, §4.3.5); Table B.2
    scales ``lstm_size`` (d_LSTM, per direction), ``fc_size`` (d_FC) and ``layers``.

    It reads sentences whole and without [CLS]/[SEP], as the thesis's LSTM_S (:class:`WholeSentences`);
    ``max_length`` caps them should memory need it. ``tokens``: ``wordpiece`` (the teacher's, the thesis's Sara
    LSTM_S) or ``words`` (its CoLA and SST-2 LSTM_S, with ``embeddings: {source: file, path: <word2vec>}``; see
    :mod:`kdflow.students.tokens`). Embeddings default to the teacher's wordpieces in multichannel mode (Table 5.2).
    With 300-wide multichannel vectors the model has 2,406,002 non-embedding parameters for 2 classes: Table 5.2's
    2.41M. With 1024-wide multichannel wordpieces and Sara's 57 intents it has 5.90M, as in Table 5.2, which is why
    recurrent students get no projection to a fixed width."""
    tokenizer = input_tokenizer(opts["tokens"], context, markers=False)
    embed = token_embedding(opts["embeddings"], replace(context, tokenizer=tokenizer), source="teacher",
                            mode="multichannel")
    student = ThesisBiLSTM(embed, opts["lstm_size"], opts["layers"], opts["fc_size"], context.num_labels,
                           opts["dropout"])
    student.tokenizer = WholeSentences(tokenizer, opts["max_length"])
    return student
