"""Loss primitives with kdflow's one convention, shared by every distillation method.

* Every term is a **batch mean**: summed over what makes up one example (classes of a distribution, layers,
  hidden units where the paper writes a squared norm), averaged over the examples of the batch.
* KL terms are ``KL(teacher || student)`` (Universal-KD Eq. 1, 3, 6) with the **T² factor** of Hinton et al.,
  so that gradients keep their scale across temperatures. (PKD's and TAKD's code average the KL over classes
  too, which silently divides by C; kdflow follows the papers.)
* Weights are explicit in the total: ``alpha * CE(gold) + beta * KD(logits) + gamma * intermediate``
  (Universal-KD Eq. 10). ``alpha`` weights the **hard-label** loss, as in Universal-KD Eq. 1 and 10; note that
  the PKD/TAKD code bases use the letter for the KD weight instead.
* Regression (STS-B) has no class distribution: "KL" between outputs becomes the mean squared error.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def task_loss(logits: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
    """Cross-entropy on gold labels, or MSE for regression, averaged over the labelled examples of the batch.
    Examples of an augmented transfer set that the generator wrote have no gold label (class -1, or NaN for
    regression) and are left out; a batch without any labelled example contributes 0."""
    # A mask, not boolean indexing, whose shape would depend on the data (a host sync on a GPU): the unlabelled rows
    # get a stand-in label and weight 0, and the mean is over the labelled rows (at least 1, so an all-unlabelled
    # batch gives 0, still connected to the graph).
    labelled = ~torch.isnan(labels) if regression else labels >= 0
    if regression:
        per_row = F.mse_loss(logits.squeeze(-1), torch.where(labelled, labels, 0.0), reduction="none")
    else:
        per_row = F.cross_entropy(logits, labels.clamp(min=0), reduction="none")
    weight = labelled.to(per_row.dtype)
    return (per_row * weight).sum() / weight.sum().clamp(min=1.0)


def soft_kl(teacher_probs: torch.Tensor, student_log_probs: torch.Tensor) -> torch.Tensor:
    """KL(p || q) summed over the last dimension, averaged over every other one (examples, and layers if
    the caller has not summed them). ``0 * log 0 = 0``, so one-hot or sparse teacher distributions are fine."""
    kl = torch.xlogy(teacher_probs, teacher_probs) - teacher_probs * student_log_probs
    return kl.sum(-1).mean()


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float, regression: bool):
    """Hinton KD (Universal-KD Eq. 1): T² · KL(σ(z_t/T) || σ(z_s/T)); MSE between outputs for regression."""
    if regression:
        return F.mse_loss(student_logits, teacher_logits)
    t = temperature
    return t * t * soft_kl(F.softmax(teacher_logits / t, -1), F.log_softmax(student_logits / t, -1))


def normalized_squared_distance(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """PKD's ``||h_s/||h_s|| - h_t/||h_t|| ||²`` (Universal-KD Eq. 2, ALP-KD Eq. 3) per example: [..., H] -> [...]."""
    return (F.normalize(student, dim=-1) - F.normalize(teacher, dim=-1)).pow(2).sum(-1)


def layer_attention(query: torch.Tensor, keys: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """Dot-product attention of each query layer over key layers, softmax over the keys (ALP-KD Eq. 5-6,
    Universal-KD Eq. 4). query [B, M, D], keys [B, N, D], allowed [M, N] (bucket mask) -> weights [B, M, N].
    The papers use the plain dot product, without the 1/sqrt(D) of Transformer attention."""
    scores = torch.einsum("bmd,bnd->bmn", query, keys)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1)
