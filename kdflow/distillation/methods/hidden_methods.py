"""Intermediate-layer distillation in hidden space: PKD, CKD and ALP-KD (Passban et al. 2021).

All three match the representations of the student's layers 1..M-1 (its top layer is distilled through the
logits) with the teacher's per-layer first-token vectors. When the student is narrower or wider than the
teacher, a trainable linear map takes each student layer into the teacher's space first (kdflow's choice for
PKD and ALP; the papers only use students as wide as their teacher). CKD's projection goes the other way, as
ALP-KD describes it: the concatenated teacher bucket is projected to the student's width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kdflow.distillation.methods.registry import Method, buckets, register, skip_mapping
from kdflow.training.losses import kd_loss, layer_attention, normalized_squared_distance


class HiddenSpaceMethod(Method):
    """Shared parts: the logit KD term and the student-to-teacher projections of layers 1..M-1."""

    needs = frozenset({"logits", "layers"})
    provides = ("kd", "inter")
    # ALP-KD Eq. 7 and its grid: η (beta) and γ in {0, 0.2, 0.5, 0.7}, the CE weight λ = 1 - η.
    defaults = {"alpha": None, "beta": 0.5, "gamma": 0.5, "temperature": 1.0}
    complement = {"alpha": "beta"}

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        if shapes.student_layers < 2:
            raise ValueError(f"{self.name} needs a student with at least 2 layers (its top layer is not matched)")
        self.to_teacher = nn.ModuleList(
            nn.Identity() if width == shapes.teacher_width else nn.Linear(width, shapes.teacher_width)
            for width in shapes.student_widths[:-1]
        )

    def student_layers(self, student) -> torch.Tensor:
        """Student layers 1..M-1 in the teacher's space: [B, M-1, H_t]."""
        return torch.stack([project(h) for project, h in zip(self.to_teacher, student.layers[:-1])], dim=1)

    def terms(self, student, teacher, labels):
        kd = kd_loss(student.logits, teacher.logits, self.options["temperature"], self.shapes.regression)
        return {"kd": kd, "inter": self.intermediate(student, teacher)}


@register("pkd")
class PKD(HiddenSpaceMethod):
    """Patient KD (Sun et al. 2019) in the form of ALP-KD Eq. 3: the sum over matched layers of
    ``||h_s/||h_s|| - h_t/||h_t|| ||²`` (a batch mean, summed over hidden units and layers, as the paper writes
    it; the PKD code's mean over units is 1/H of this, hence its β in the hundreds). ``mapping`` lists the
    teacher layer (1-based) for each of the student's layers 1..M-1; PKD-skip by default. ALP-KD's PKD runs
    use the first layer of each bucket, ``[1, 5, 9]`` for 12 -> 4."""

    defaults = {**HiddenSpaceMethod.defaults, "mapping": None}

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        mapping = self.options["mapping"] or skip_mapping(shapes.teacher_layers, shapes.student_layers)
        if len(mapping) != shapes.student_layers - 1 or not all(1 <= k <= shapes.teacher_layers for k in mapping):
            raise ValueError(f"pkd mapping {mapping} must give one teacher layer in 1..{shapes.teacher_layers} "
                             f"for each of the student's {shapes.student_layers - 1} intermediate layers")
        self.register_buffer("mapping", torch.tensor(mapping) - 1, persistent=False)

    def intermediate(self, student, teacher):
        targets = teacher.layers[:, self.mapping]
        return normalized_squared_distance(self.student_layers(student), targets).sum(1).mean()


class CKD(HiddenSpaceMethod):
    """CKD (Wu et al. 2020) as ALP-KD re-implemented it (§"Experimental Study"): the teacher layers of bucket j
    are concatenated and projected to the student's width, then matched to student layer j with the MSE
    (mean over hidden units, summed over layers, batch mean; ALP-KD Eq. 7's form)."""

    overlap = False

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        self.buckets = buckets(shapes.teacher_layers, shapes.student_layers, self.overlap)
        self.to_teacher = nn.ModuleList(nn.Identity() for _ in self.buckets)  # CKD projects the teacher side
        self.combine = nn.ModuleList(
            nn.Linear(len(bucket) * shapes.teacher_width, width)
            for bucket, width in zip(self.buckets, shapes.student_widths)
        )

    def intermediate(self, student, teacher):
        total = 0.0
        for j, (bucket, combine) in enumerate(zip(self.buckets, self.combine)):
            combined = combine(teacher.layers[:, [k - 1 for k in bucket]].flatten(1))
            total = total + F.mse_loss(student.layers[j], combined)
        return total


@register("ckd_no")
class CKDNoOverlap(CKD):
    __doc__ = CKD.__doc__ + "\n    Buckets share no layers (ALP-KD's NO): 12 -> 4 gives [1-4], [5-8], [9-12]."


@register("ckd_po")
class CKDPartialOverlap(CKD):
    __doc__ = CKD.__doc__ + "\n    Each bucket shares its first layer with the preceding one (ALP-KD's PO)."
    overlap = True


class ALP(HiddenSpaceMethod):
    """ALP-KD (Passban et al. 2021) Eq. 5-7: each student layer j attends over teacher layers with weights
    ``α_jk = softmax_k(h_s^j · h_t^k)`` (dot product, no scaling), ``C_j = Σ_k α_jk h_t^k``, and
    ``L_ALP = Σ_j MSE(h_s^j, C_j)`` (mean over hidden units, summed over layers, batch mean). The weights are
    functions of the student's representations, so gradients flow through them (the paper calls them
    learnable); ``detach_attention`` stops that. The total is Eq. 7 with kdflow's weight names."""

    defaults = {**HiddenSpaceMethod.defaults, "detach_attention": False}
    overlap: bool | None = None  # None: attention over all teacher layers (Eq. 6)

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        m, n = shapes.student_layers - 1, shapes.teacher_layers
        allowed = torch.ones(m, n, dtype=torch.bool)
        if self.overlap is not None:
            allowed = torch.zeros(m, n, dtype=torch.bool)
            for j, bucket in enumerate(buckets(n, shapes.student_layers, self.overlap)):
                allowed[j, [k - 1 for k in bucket]] = True
        self.register_buffer("allowed", allowed, persistent=False)

    def attention(self, student, teacher) -> torch.Tensor:
        """Attention weights [B, M-1, N] of student layers 1..M-1 over teacher layers 1..N."""
        query = self.student_layers(student)
        if self.options["detach_attention"]:
            query = query.detach()
        return layer_attention(query, teacher.layers, self.allowed)

    def layer_attention(self, student, teacher):
        return self.attention(student, teacher), list(range(1, self.shapes.student_layers))

    def intermediate(self, student, teacher):
        combined = torch.einsum("bmn,bnh->bmh", self.attention(student, teacher), teacher.layers)
        return (self.student_layers(student) - combined).pow(2).mean(-1).sum(1).mean()


@register("alp")
class ALPAllLayers(ALP):
    __doc__ = ALP.__doc__ + "\n    Attention spans all teacher layers (Eq. 6): no bucketing, no search."


@register("alp_no")
class ALPNoOverlap(ALP):
    __doc__ = ALP.__doc__ + "\n    Attention within non-overlapping buckets (Eq. 5, ALP-KD's NO)."
    overlap = False


@register("alp_po")
class ALPPartialOverlap(ALP):
    __doc__ = ALP.__doc__ + "\n    Attention within partially overlapping buckets (Eq. 5, ALP-KD's PO)."
    overlap = True
