"""Methods that distil through the logits only."""

from __future__ import annotations

import torch.nn.functional as F

from kdflow.distillation.methods.registry import Method, register
from kdflow.training.losses import kd_loss


@register("no_kd")
class NoKD(Method):
    """The student alone on gold labels: cross-entropy (MSE for STS-B)."""

    needs = frozenset()
    provides = ()
    defaults = {"alpha": 1.0}


@register("kd")
class KD(Method):
    """Hinton et al. (2015) as written in Universal-KD Eq. 1: ``alpha * CE + beta * T² KL`` with
    ``alpha = 1 - beta`` unless given; Universal-KD sets T = 1 (Appendix A.1)."""

    defaults = {"alpha": None, "beta": 0.5, "temperature": 1.0}
    complement = {"alpha": "beta"}

    def terms(self, student, teacher, labels):
        return {"kd": kd_loss(student.logits, teacher.logits, self.options["temperature"], self.shapes.regression)}


@register("takd")
class TAKD(KD):
    """TAKD (Mirzadeh et al. 2020): the student learns by KD (the loss above) from a teacher assistant, itself a
    student of the same experiment distilled from the teacher with ``assistant_method`` (KD in the paper). The
    workflow chains the jobs: teacher -> assistant run -> the assistant's logits cached as signals -> this
    student (see ``kdflow.workflow.job_settings.assistant_run``). ``assistant`` names a student of the config."""

    defaults = {**KD.defaults, "assistant": None, "assistant_method": "kd"}
    learns_from_assistant = True

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        if not self.options["assistant"]:
            raise ValueError("takd needs an 'assistant': the name of the student that sits between teacher and student")


@register("mse_logits")
class MSELogits(Method):
    """Tang et al. (2019) and the thesis's LSTM_S (§4.3.3): the squared distance between student and teacher
    logits, summed over classes (thesis Eq. 2.7, ``Σ_c (z_t^(c) - z_s^(c))²``, as the thesis's code computes it)
    and averaged over examples like every kdflow term; it suits transfer sets without gold labels (alpha = 0)."""

    defaults = {"alpha": 0.0, "beta": 1.0}

    def terms(self, student, teacher, labels):
        return {"kd": (student.logits - teacher.logits).pow(2).sum(-1).mean()}


@register("hard_logits")
class HardLogits(Method):
    """The thesis author's students distilled from the teacher's hard logits (``use_hard_logits`` in their code,
    probed as BERT_S-hard-logits and LSTM_S-hard-logits in reference/thesis_probing_scores.csv): cross-entropy
    against the teacher's argmax class, the teacher's one-hot decision in place of its logits, no gold-label term.
    Classification only: a regression teacher has no class to take."""

    defaults = {"alpha": 0.0, "beta": 1.0}

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        if shapes.regression:
            raise ValueError("hard_logits needs classes: a regression teacher's output has no argmax class")

    def terms(self, student, teacher, labels):
        return {"kd": F.cross_entropy(student.logits, teacher.logits.argmax(-1))}


@register("annealing_kd")
class AnnealingKD(Method):
    """Annealing KD (Jafari et al. 2021). Phase 1 (the first stage of the schedule, ``beta = 1``): MSE between
    the student's logits and the teacher's logits scaled by ``Φ = T/τ_max``, with T stepping 1, 2, ..., τ_max
    in equal blocks of epochs (the authors' GLUE code; equivalent to the paper's Φ(T) = 1 - (T-1)/τ_max with
    T going from τ_max down to 1). Phase 2 (second stage, ``alpha = 1, beta = 0``): cross-entropy on labels."""

    defaults = {"alpha": 0.0, "beta": 1.0, "max_temperature": 7}

    def __init__(self, shapes, **options):
        super().__init__(shapes, **options)
        self.factor = 1.0 / self.options["max_temperature"]

    def start_epoch(self, epoch, epochs):
        tau = self.options["max_temperature"]
        block = max(1, epochs // tau)  # epochs per temperature step
        self.factor = min(tau, 1 + (epoch - 1) // block) / tau

    def terms(self, student, teacher, labels):
        return {"kd": F.mse_loss(student.logits, teacher.logits * self.factor)}
