"""BiLSTM students: Universal-KD's 3-layer attention-pooled BiLSTM (``bilstm``) and the thesis's LSTM_S
(``bilstm_s``). A sentence pair is one sequence, as the batch gives it (Universal-KD A.2: no siamese encoder).

The LSTMs run packed over the real tokens only (:func:`kdflow.students.layers.packed_lstm` says how, and how under
``torch.compile`` and in a pack).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from kdflow.students.embeddings import token_embedding
from kdflow.students.layers import LSTMS, BiLSTMLayer
from kdflow.students.pooled import AttentionPooledStudent
from kdflow.students.registry import StudentContext, StudentOutput, register
from kdflow.students.tokens import WholeSentences, input_tokenizer
from kdflow.training.batching import host_lengths


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


class ThesisBiLSTM(LSTMS):
    """LSTM_S (:class:`kdflow.students.layers.LSTMS`) reading kdflow's batches, each row's lengths read on the
    host."""

    def __init__(self, embed: nn.Module, hidden: int, layers: int, fc: int, num_labels: int, dropout: float):
        super().__init__(embed, embed.width, hidden, layers, fc, num_labels, dropout)

    def forward(self, batch: dict[str, torch.Tensor]) -> StudentOutput:
        return StudentOutput(*self.encode(batch["input_ids"], batch["attention_mask"].bool(), host_lengths(batch)))


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
