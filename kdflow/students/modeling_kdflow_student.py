"""kdflow's students that have no ``transformers`` architecture (the Universal-KD BiLSTM and Gated CNN, the thesis's
LSTM_S) as a ``transformers`` model: a config class and a ``PreTrainedModel`` for sequence classification.

This file and ``layers.py`` beside it depend on torch and transformers only, never on kdflow: the export
(:mod:`kdflow.export.student_export`) writes both into every folder it exports for such a student (``save_pretrained``
copies a custom class's module with its relative imports), and the folder's ``config.json`` names the classes in
``auto_map``, so that ``AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)`` and
``pipeline("text-classification", model=folder, trust_remote_code=True)`` load the student without kdflow.

Why a custom class rather than a folder with a loader of its own: either way the architecture's code must travel
with the weights (transformers has no BiLSTM, Gated CNN or LSTM_S class), and as a ``PreTrainedModel`` that code
loads through the same ``from_pretrained`` and ``pipeline`` calls as every other Hugging Face model, batches and
pads through the saved tokenizer, and can be fine-tuned or pushed to the Hub like one.

The model is the student itself: the classes of ``layers.py`` that kdflow trained (:class:`AttentionPooled` over the
registered sequence layers each ``layers`` entry of the config names with its options, or :class:`LSTMS`), with one
difference, its token embedding. ``embed`` is one lookup table: kdflow's token embedding (one or two channels,
concatenated, and a linear projection where the student has one) applied to every vocabulary id once, at export.
The result of a lookup is the same vector kdflow computes for that token. What is lost is training-time only: which
channel was frozen. LSTM_S's sentences come without [CLS]/[SEP] markers (the exported tokenizer adds none).

A row with no token at all reads as one unknown token (``unk_token_id``), as kdflow's LSTM_S reads an empty
sentence: an LSTM cannot run over nothing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

from .layers import LSTMS, SEQUENCE_LAYERS, AttentionPooled

ARCHITECTURES = ("attention_pooled", "lstm_s")


class KdflowStudentConfig(PretrainedConfig):
    """``architecture``: one of :data:`ARCHITECTURES`. ``embedding_size``: the width of the (folded) token vectors.
    ``attention_pooled``: ``layers``, one ``{"kind": <a name of SEQUENCE_LAYERS>, **its options}`` per layer, bottom
    to top, and ``hidden_size``, the top layer's width. ``lstm_s``: ``hidden_size`` (units per direction),
    ``num_layers`` and ``fc_size``. ``dropout``: applied in training as kdflow applies it."""

    model_type = "kdflow_student"

    def __init__(self, architecture: str = "attention_pooled", vocab_size: int = 2, embedding_size: int = 2,
                 hidden_size: int = 2, layers: list[dict] | None = None, num_layers: int = 1, fc_size: int = 2,
                 dropout: float = 0.1, unk_token_id: int = 0, pad_token_id: int = 0, **kwargs):
        if architecture not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {architecture!r}; expected one of {ARCHITECTURES}")
        unknown = [layer.get("kind") for layer in layers or [] if layer.get("kind") not in SEQUENCE_LAYERS]
        if unknown:
            raise ValueError(f"unknown sequence layers {unknown}; layers.py has {sorted(SEQUENCE_LAYERS)}")
        self.architecture = architecture
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.layers = [dict(layer) for layer in layers or []]
        self.num_layers = num_layers
        self.fc_size = fc_size
        self.dropout = dropout
        self.unk_token_id = unk_token_id
        super().__init__(pad_token_id=pad_token_id, **kwargs)


def sequence_layers(config: KdflowStudentConfig) -> list[nn.Module]:
    """The layers ``config.layers`` names, built from their options."""
    return [SEQUENCE_LAYERS[layer["kind"]](**{k: v for k, v in layer.items() if k != "kind"})
            for layer in config.layers]


class KdflowStudentForSequenceClassification(PreTrainedModel):
    config_class = KdflowStudentConfig
    base_model_prefix = "kdflow_student"
    main_input_name = "input_ids"

    def __init__(self, config: KdflowStudentConfig):
        super().__init__(config)
        embed = nn.Embedding(config.vocab_size, config.embedding_size)
        if config.architecture == "lstm_s":
            self.student = LSTMS(embed, config.embedding_size, config.hidden_size, config.num_layers,
                                 config.fc_size, config.num_labels, config.dropout)
        else:
            self.student = AttentionPooled(embed, sequence_layers(config), config.hidden_size, config.num_labels,
                                           config.dropout)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        """Training from these classes starts from exported weights; PyTorch's own initialisation is kept."""

    def get_input_embeddings(self) -> nn.Module:
        return self.student.embed

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.student.embed = value

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                return_dict: bool | None = None, **kwargs) -> SequenceClassifierOutput | tuple:
        """``token_type_ids`` are accepted and unused: a sentence pair is one sequence."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        input_ids, mask = self._never_empty(input_ids, attention_mask.bool())
        logits, _ = self.student.encode(input_ids, mask, mask.sum(1).cpu())  # packing takes lengths on the host
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
