"""Distillation in output space through pseudo classifiers: Universal-KD (Wu et al. 2021), its Table 6 variant,
MHKD and DIH as Universal-KD compares them.

Teacher pseudo classifiers ``f_i^t = σ(W_i^t h_i^t)`` (Eq. 3) are trained once per teacher by the
``train_pseudo_heads`` rule; their logits arrive cached as ``teacher.head_logits`` [B, N, C] for the teacher's
layers 1..N. Student pseudo classifiers are linear heads on the student's layer representations, owned by the
method and trained only through the distillation loss (no CE on them, §4.1), except for MHKD.

Pseudo classifiers are plain softmaxes ``σ(W h)`` (Eq. 3-6, 8) and their KL terms carry no temperature: T enters
only the KD term on the final logits (Eq. 1, weighted by beta in Eq. 10). DIH is the exception: it distils from
every head by Hinton KD, temperature included.

Regression (STS-B; the paper only writes the classification case, so this is kdflow's reading): a pseudo
classifier outputs a score, not a distribution. KL becomes the squared error. Eq. 4's score f_i^t · f_j^s, for two
distributions the probability that the classifiers agree, becomes the agreement of two scores, exp(-(s - t)²/2):
1 when they are equal, in (0, 1] as the dot product of two distributions is in [0, 1]. (It is the overlap of two
Gaussians around the scores, with the variance 1/2 under which their KL is the squared error.) The plain product
s · t ranks the teacher's heads by the size of their output instead: on STS-B it put half of the weight on
whichever head predicted the highest similarity (docs/evidence.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kdflow.distillation.methods.registry import Method, register, skip_mapping
from kdflow.training.losses import kd_loss, layer_attention, task_loss


class OutputSpaceMethod(Method):
    needs = frozenset({"logits", "head_logits"})
    provides = ("kd", "inter")
    # Universal-KD §4.2, stage 1: alpha = 0, beta in {0.2, 0.5, 0.7}, gamma = 1 - beta.
    defaults = {"alpha": 0.0, "beta": 0.5, "gamma": None, "temperature": 1.0}
    complement = {"gamma": "beta"}

    def distribution(self, logits: torch.Tensor) -> torch.Tensor:
        """A pseudo classifier's output σ(z) (Eq. 3, no temperature), or the raw output for regression."""
        return logits if self.shapes.regression else F.softmax(logits, -1)

    def divergence(self, target: torch.Tensor, student_logits: torch.Tensor) -> torch.Tensor:
        """KL(target || σ(z_s)) per example (and layer), without temperature (Eq. 3, 6): [..., C] -> [...];
        squared error for regression."""
        if self.shapes.regression:
            return (target - student_logits).pow(2).sum(-1)
        return (torch.xlogy(target, target) - target * F.log_softmax(student_logits, -1)).sum(-1)

    def attention(self, student_outputs: torch.Tensor, teacher_outputs: torch.Tensor) -> torch.Tensor:
        """Eq. 4's weights ``λ = softmax_i(f_i^t · f^s)`` of each student row [B, M, C] over the teacher's
        pseudo classifiers [B, N, C] -> [B, M, N]; for regression the agreement exp(-(s - t)²/2) in place of the
        dot product (module docstring)."""
        if not self.shapes.regression:
            return layer_attention(student_outputs, teacher_outputs)
        gap = (student_outputs[:, :, None] - teacher_outputs[:, None]).pow(2).sum(-1)
        return torch.exp(-gap / 2).softmax(-1)

    def kd(self, student, teacher) -> torch.Tensor:
        """Hinton KD on the final logits (Eq. 1), the one term with a temperature."""
        return kd_loss(student.logits, teacher.logits, self.options["temperature"], self.shapes.regression)

    def student_heads(self, layer_indices: list[int]) -> nn.ModuleList:
        """Linear pseudo classifiers on the given student layers (0-based)."""
        widths = self.shapes.student_widths
        return nn.ModuleList(nn.Linear(widths[j], self.shapes.num_labels) for j in layer_indices)


class UniversalKD(OutputSpaceMethod):
    """Universal-KD for intermediate layers (Eq. 4-7): a pseudo classifier on each student layer j = 1..M-1;
    ``λ_ij = softmax_i(f_i^t · f_j^s)`` over the N teacher pseudo classifiers (Eq. 4), the aggregate
    ``F^t(j) = Σ_i λ_ij f_i^t`` (Eq. 5), ``l(j) = KL(F^t(j) || f_j^s)`` (Eq. 6) and ``L = Σ_j l(j)`` (Eq. 7),
    a batch mean. The total is Eq. 10; stage 1 of §4.2 is ``alpha = 0, beta ∈ {0.2, 0.5, 0.7},
    gamma = 1 - beta`` (the defaults here), stage 2 is cross-entropy only. Gradients flow through λ (it depends
    on the student, as in ALP-KD); ``detach_attention`` stops them."""

    defaults = {**OutputSpaceMethod.defaults, "detach_attention": False}

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        if shapes.student_layers < 2:
            raise ValueError(f"{self.name} needs a student with at least 2 layers (its top layer is not matched)")
        self.heads = self.student_heads(list(range(shapes.student_layers - 1)))

    def attention(self, student_probs: torch.Tensor, teacher_probs: torch.Tensor) -> torch.Tensor:
        query = student_probs.detach() if self.options["detach_attention"] else student_probs
        return super().attention(query, teacher_probs)

    def student_head_logits(self, student) -> torch.Tensor:
        """The logits f_j^s of the pseudo classifiers on the student's layers j = 1..M-1: [B, M-1, C]."""
        return torch.stack([head(h) for head, h in zip(self.heads, student.layers[:-1])], dim=1)

    def layer_attention(self, student, teacher):
        """Eq. 4's λ of the student's layers 1..M-1 over the teacher's pseudo classifiers."""
        weights = self.attention(self.distribution(self.student_head_logits(student)),
                                 self.distribution(teacher.head_logits))
        return weights, list(range(1, self.shapes.student_layers))

    def terms(self, student, teacher, labels):
        student_logits = self.student_head_logits(student)
        teacher_probs = self.distribution(teacher.head_logits)  # [B, N, C]
        weights = self.attention(self.distribution(student_logits), teacher_probs)  # [B, M-1, N]
        aggregate = torch.einsum("bmn,bnc->bmc", weights, teacher_probs)  # F^t(j)
        inter = self.divergence(aggregate, student_logits).sum(1).mean()
        return {"kd": self.kd(student, teacher), "inter": inter}


@register("universal_kd_il")
class UniversalKDIntermediate(UniversalKD):
    __doc__ = UniversalKD.__doc__


@register("universal_kd_ca")
class UniversalKDCrossArchitecture(UniversalKD):
    __doc__ = UniversalKD.__doc__ + """
    Cross-architecture (Eq. 9): the same loss, with the student's layers coming from a BiLSTM or gated CNN;
    output space makes layers of different architectures comparable."""


class OutputAttention(OutputSpaceMethod):
    """A Universal-KD method whose student *output* attends over the teacher's pseudo classifiers (Eq. 8): one row
    of attention, the student's top layer M's."""

    def output_attention(self, student, teacher_probs: torch.Tensor) -> torch.Tensor:
        """λ_iM of the student's output distribution over the teacher's [B, N, C] distributions: [B, 1, N]."""
        return self.attention(self.distribution(student.logits)[:, None], teacher_probs)

    def layer_attention(self, student, teacher):
        return self.output_attention(student, self.distribution(teacher.head_logits)), [self.shapes.student_layers]


@register("universal_kd_cg")
class UniversalKDCapacityGap(OutputAttention):
    """Universal-KD for the capacity gap (Eq. 8): the teacher's pseudo classifiers act as pseudo teacher
    assistants, aggregated by the attention of the student's *output* distribution over them,
    ``L = KL(F^t(M) || f_M^s)`` with ``F^t(M) = Σ_i λ_iM f_i^t``."""

    def terms(self, student, teacher, labels):
        teacher_probs = self.distribution(teacher.head_logits)
        weights = self.output_attention(student, teacher_probs)  # [B, 1, N]
        aggregate = torch.einsum("bmn,bnc->bmc", weights, teacher_probs)[:, 0]
        return {"kd": self.kd(student, teacher), "inter": self.divergence(aggregate, student.logits).mean()}


@register("universal_kd_att_on_losses")
class UniversalKDAttentionOnLosses(OutputAttention):
    """Universal-KD's Table 6 variant (§5.6, "Universal-KD▲"): the attention weights weigh the losses instead
    of the distributions, ``L = Σ_i λ_iM KL(f_i^t || f_M^s)``."""

    def terms(self, student, teacher, labels):
        teacher_probs = self.distribution(teacher.head_logits)
        weights = self.output_attention(student, teacher_probs)[:, 0]  # [B, N]
        per_head = self.divergence(teacher_probs, student.logits[:, None])  # [B, N]
        return {"kd": self.kd(student, teacher), "inter": (weights * per_head).sum(1).mean()}


@register("dih")
class DIH(Method):
    """DIH (Asadian and Salehi-Abari 2021), Universal-KD's capacity-gap baseline (Tables 4 and 6): the teacher's
    intermediate classifier heads and its final classifier are a cohort of k + 1 teachers that distil into the
    student's output uniformly ("each classifier contributes equally", Universal-KD §3.2; "a uniform distillation
    from the pseudo TAs", §4.1 after Eq. 8), each by Hinton KD at temperature T (Eq. 1), as the DIH code (``train_dih.py``) does::

        L = alpha * CE + beta * 1/(k+1) Σ_{i ∈ heads ∪ final} T² KL(σ(z_i/T) || σ(z_s/T)),   alpha = 1 - beta

    The DIH code adds one ``(1 - α) CE + α T² KL_i`` per cohort member, k + 1 times this loss. DIH mounts a head
    after each residual stage of a CNN; for transformers the papers leave the layers open: ``head_layers`` lists
    them (teacher layers, 1-based), by default all N, as Universal-KD puts pseudo classifiers on every layer."""

    needs = frozenset({"logits", "head_logits"})
    defaults = {"alpha": None, "beta": 0.5, "temperature": 1.0, "head_layers": None}
    complement = {"alpha": "beta"}

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        layers = self.options["head_layers"]
        if layers is None:
            layers = list(range(1, shapes.teacher_layers + 1))
        if not layers or not all(1 <= k <= shapes.teacher_layers for k in layers):
            raise ValueError(f"dih head_layers {layers} must list teacher layers in 1..{shapes.teacher_layers}")
        self.register_buffer("head_layers", torch.tensor(layers) - 1, persistent=False)

    def terms(self, student, teacher, labels):
        cohort = torch.cat([teacher.head_logits[:, self.head_layers], teacher.logits[:, None]], dim=1)  # [B, k+1, C]
        student_logits = student.logits[:, None].expand_as(cohort)
        # kd_loss averages over every axis but the classes: the batch mean of the uniform mean over the cohort
        return {"kd": kd_loss(student_logits, cohort, self.options["temperature"], self.shapes.regression)}


@register("mhkd")
class MHKD(OutputSpaceMethod):
    """MHKD (Wang et al. 2020) as Universal-KD re-implemented it: pseudo classifiers on selected student layers,
    each distilled from one teacher pseudo classifier (PKD-skip mapping by default, ``mapping`` to override)
    and, unlike Universal-KD, also trained with cross-entropy on the gold labels:
    ``L = Σ_j [KL(f_A(j)^t || f_j^s) + CE(f_j^s, y)]``."""

    defaults = {**OutputSpaceMethod.defaults, "mapping": None}

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        mapping = self.options["mapping"] or skip_mapping(shapes.teacher_layers, shapes.student_layers)
        if len(mapping) != shapes.student_layers - 1 or not all(1 <= k <= shapes.teacher_layers for k in mapping):
            raise ValueError(f"mhkd mapping {mapping} must give one teacher layer in 1..{shapes.teacher_layers} "
                             f"for each of the student's {shapes.student_layers - 1} intermediate layers")
        self.mapping = [k - 1 for k in mapping]
        self.heads = self.student_heads(list(range(shapes.student_layers - 1)))

    def terms(self, student, teacher, labels):
        inter = 0.0
        for j, (head, k) in enumerate(zip(self.heads, self.mapping)):
            logits = head(student.layers[j])
            target = self.distribution(teacher.head_logits[:, k])
            inter = inter + self.divergence(target, logits).mean() + task_loss(logits, labels, self.shapes.regression)
        return {"kd": self.kd(student, teacher), "inter": inter}
