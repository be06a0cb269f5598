"""kdflow's students that have no ``transformers`` architecture (the Universal-KD BiLSTM and Gated CNN, the thesis's
LSTM_S) as a ``transformers`` model: a config class and a ``PreTrainedModel`` for sequence classification.

This file depends on torch and transformers only, never on kdflow: :mod:`kdflow.export.student_export` copies it
verbatim into every folder it exports for such a student, and the folder's ``config.json`` names its classes in
``auto_map``, so that ``AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)`` and
``pipeline("text-classification", model=folder, trust_remote_code=True)`` load the student without kdflow.

Why a custom class rather than a folder with a loader of its own: either way the architecture's code must travel
with the weights (transformers has no BiLSTM, Gated CNN or LSTM_S class), and as a ``PreTrainedModel`` that code
loads through the same ``from_pretrained`` and ``pipeline`` calls as every other Hugging Face model, batches and
pads through the saved tokenizer, and can be fine-tuned or pushed to the Hub like one.

The model computes kdflow's logits (kdflow.students.recurrent, kdflow.students.convolutional and
kdflow.students.embeddings), for inference:

- ``embeddings`` is one lookup table: kdflow's token embedding (one or two channels, concatenated, and a linear
  projection where the student has one) applied to every vocabulary id once, at export. The result of a lookup is
  the same vector kdflow computes for that token. What is lost is training-time only: which channel was frozen.
- ``bilstm`` and ``gated_cnn``: the sequence layers over the real tokens only (LSTMs run packed; convolutions see
  pads as zeros), attention-sum pooling of the top layer (a learned vector scores each real token, softmax), a
  linear classifier. kdflow pools every layer for its distillation losses; only the top layer's pool makes the
  logits, so only it is exported.
- ``bilstm_s`` (LSTM_S): a packed BiLSTM, the last layer's final forward and backward states concatenated, a ReLU
  layer, a linear classifier. Its sentences come without [CLS]/[SEP] markers (the exported tokenizer adds none).

A row with no token at all reads as one unknown token (``unk_token_id``), as kdflow's LSTM_S reads an empty
sentence: an LSTM cannot run over nothing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

ARCHITECTURES = ("bilstm", "gated_cnn", "bilstm_s")


class KdflowStudentConfig(PretrainedConfig):
    """``architecture``: one of :data:`ARCHITECTURES`. ``embedding_size``: the width of the (folded) token vectors;
    ``hidden_size``: a BiLSTM's width over both directions or the Gated CNN's width (bilstm, gated_cnn), or LSTM_S's
    units per direction (bilstm_s); ``num_layers``; ``kernel_width`` (gated_cnn); ``fc_size`` (bilstm_s);
    ``dropout``: applied in training as kdflow applies it."""

    model_type = "kdflow_student"

    def __init__(self, architecture: str = "bilstm", vocab_size: int = 2, embedding_size: int = 2,
                 hidden_size: int = 2, num_layers: int = 1, kernel_width: int = 3, fc_size: int = 2,
                 dropout: float = 0.1, unk_token_id: int = 0, pad_token_id: int = 0, **kwargs):
        if architecture not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {architecture!r}; expected one of {ARCHITECTURES}")
        self.architecture = architecture
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.kernel_width = kernel_width
        self.fc_size = fc_size
        self.dropout = dropout
        self.unk_token_id = unk_token_id
        super().__init__(pad_token_id=pad_token_id, **kwargs)


def packed(lstm: nn.LSTM, states: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch-first ``lstm`` over the real tokens only: outputs [B, T, H] (zero at pads), final states."""
    sequences = pack_padded_sequence(states, mask.sum(1).cpu(), batch_first=True, enforce_sorted=False)
    outputs, (final, _) = lstm(sequences)
    return pad_packed_sequence(outputs, batch_first=True, total_length=states.shape[1])[0], final


class BiLSTMLayer(nn.Module):
    def __init__(self, input_size: int, width: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, width // 2, batch_first=True, bidirectional=True)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return packed(self.lstm, states, mask)[0]


class GatedConvLayer(nn.Module):
    """``X + (X * W + b) ⊗ σ(X * V + c)``, a centred convolution over the sequence with pads zeroed."""

    def __init__(self, width: int, kernel_width: int):
        super().__init__()
        self.conv = nn.Conv1d(width, 2 * width, kernel_width, padding=kernel_width // 2)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        states = states.masked_fill(~mask.unsqueeze(-1), 0.0)
        return states + F.glu(self.conv(states.transpose(1, 2)), dim=1).transpose(1, 2)


class AttentionSum(nn.Module):
    """A learned vector scores every real token; the softmax-weighted sum of the states is the sequence's vector."""

    def __init__(self, width: int):
        super().__init__()
        self.score = nn.Linear(width, 1, bias=False)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = self.score(states).squeeze(-1).masked_fill(~mask, float("-inf"))
        return torch.einsum("bt,bth->bh", scores.softmax(dim=-1), states)


class KdflowStudentForSequenceClassification(PreTrainedModel):
    config_class = KdflowStudentConfig
    base_model_prefix = "kdflow_student"
    main_input_name = "input_ids"

    def __init__(self, config: KdflowStudentConfig):
        super().__init__(config)
        width, kind = config.hidden_size, config.architecture
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_size)
        self.dropout = nn.Dropout(config.dropout)
        if kind == "bilstm_s":
            self.lstm = nn.LSTM(config.embedding_size, width, config.num_layers, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(2 * width, config.fc_size)
            self.classifier = nn.Linear(config.fc_size, config.num_labels)
        else:
            if kind == "bilstm":
                sizes = [config.embedding_size] + [width] * (config.num_layers - 1)
                layers = [BiLSTMLayer(size, width) for size in sizes]
            else:  # the folded embeddings hold kdflow's projection to the layers' width
                if config.embedding_size != width:
                    raise ValueError(f"gated_cnn needs embedding_size == hidden_size, got {config.embedding_size} "
                                     f"and {width}")
                layers = [GatedConvLayer(width, config.kernel_width) for _ in range(config.num_layers)]
            self.layers = nn.ModuleList(layers)
            self.pool = AttentionSum(width)
            self.classifier = nn.Linear(width, config.num_labels)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Training from these classes starts from exported weights; PyTorch's own initialisation is kept."""

    def get_input_embeddings(self) -> nn.Module:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.embeddings = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                return_dict: bool | None = None, **kwargs) -> SequenceClassifierOutput | tuple:
        """``token_type_ids`` are accepted and unused: a sentence pair is one sequence."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        input_ids, mask = self._never_empty(input_ids, attention_mask.bool())
        states = self.embeddings(input_ids)
        if self.config.architecture == "bilstm_s":
            _, final = packed(self.lstm, states, mask)
            last = torch.cat([final[-2], final[-1]], dim=-1)  # the top layer's forward and backward final states
            logits = self.classifier(self.dropout(F.relu(self.fc(last))))
        else:
            for layer in self.layers:
                states = layer(self.dropout(states), mask)
            logits = self.classifier(self.dropout(self.pool(states, mask)))
        loss = None if labels is None else self._loss(logits, labels)
        if return_dict is False:
            return (logits,) if loss is None else (loss, logits)
        return SequenceClassifierOutput(loss=loss, logits=logits)

    def _never_empty(self, input_ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows without a real token get one unknown token in the first position."""
        if input_ids.shape[1] == 0:
            input_ids = input_ids.new_full((input_ids.shape[0], 1), self.config.pad_token_id)
            mask = mask.new_zeros((mask.shape[0], 1))
        empty = ~mask.any(dim=1)
        if empty.any():
            input_ids, mask = input_ids.clone(), mask.clone()
            input_ids[empty, 0] = self.config.unk_token_id
            mask[empty, 0] = True
        return input_ids, mask

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.config.problem_type == "regression" or self.config.num_labels == 1:
            return F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
        return F.cross_entropy(logits, labels.long())
