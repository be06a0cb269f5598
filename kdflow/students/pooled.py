"""The attention-pooled students (the Universal-KD BiLSTM and Gated CNN) as kdflow trains them:
:class:`kdflow.students.layers.AttentionPooled` reading kdflow's batches."""

from __future__ import annotations

import torch

from kdflow.students.layers import AttentionPooled
from kdflow.students.registry import StudentOutput
from kdflow.training.batching import host_lengths


class AttentionPooledStudent(AttentionPooled):
    """The logits and every layer's pooled vector of a batch, each row's lengths read on the host."""

    def forward(self, batch: dict[str, torch.Tensor]) -> StudentOutput:
        return StudentOutput(*self.encode(batch["input_ids"], batch["attention_mask"].bool(), host_lengths(batch)))
