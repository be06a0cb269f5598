"""Every distillation loss against values computed by hand from the papers' equations, on small tensors."""

import math

import numpy as np
import pytest
import torch

from kdflow.core.errors import UserError
from kdflow.distillation.methods.registry import (
    Shapes,
    attentive_methods,
    available_methods,
    buckets,
    build_method,
    skip_mapping,
)
from kdflow.students.registry import StudentOutput
from kdflow.training.losses import kd_loss, layer_attention, soft_kl
from kdflow.transfer.signals import OWN_FIELDS, SIGNALS, TeacherSignals


def shapes(student_widths=(2, 2), teacher_layers=2, teacher_width=2, num_labels=2, regression=False):
    return Shapes(tuple(student_widths), teacher_layers, teacher_width, num_labels, regression)


def kl(p, q):
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)


def softmax(z):
    e = np.exp(np.asarray(z, dtype=float) - np.max(z))
    return e / e.sum()


def only(term, method):
    """Weights that isolate one term of the total."""
    method.set_weights(alpha=float(term == "ce"), beta=float(term == "kd"), gamma=float(term == "inter"))
    return method


# --- primitives ---------------------------------------------------------------------------------------------


def test_kd_loss_is_t_squared_kl_teacher_to_student_batch_mean():
    teacher, student = torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor([[0.0, 0.0], [2.0, 0.0]])
    expected = (kl(softmax([1, 0]), [0.5, 0.5]) + kl([0.5, 0.5], softmax([2, 0]))) / 2
    assert kd_loss(student, teacher, 1.0, regression=False).item() == pytest.approx(expected, rel=1e-6)
    at_t2 = 4 * (kl(softmax([0.5, 0]), [0.5, 0.5]) + kl([0.5, 0.5], softmax([1, 0]))) / 2
    assert kd_loss(student, teacher, 2.0, regression=False).item() == pytest.approx(at_t2, rel=1e-6)
    assert kd_loss(torch.tensor([[1.0]]), torch.tensor([[3.0]]), 1.0, regression=True).item() == 4.0


def test_soft_kl_handles_zeros_and_vanishes_on_equal_distributions():
    p = torch.tensor([[1.0, 0.0]])
    assert soft_kl(p, torch.log(torch.tensor([[0.5, 0.5]]))).item() == pytest.approx(math.log(2))
    q = torch.tensor([[0.3, 0.7]])
    assert soft_kl(q, q.log()).item() == pytest.approx(0.0, abs=1e-7)


def test_layer_attention_rows_sum_to_one_and_respect_buckets():
    query, keys = torch.randn(3, 2, 4), torch.randn(3, 5, 4)
    weights = layer_attention(query, keys)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2))
    allowed = torch.tensor([[True, True, False, False, False], [False, False, True, True, True]])
    masked = layer_attention(query, keys, allowed)
    assert (masked[:, ~allowed] == 0).all()
    torch.testing.assert_close(masked.sum(-1), torch.ones(3, 2))


def test_layer_mappings():
    assert skip_mapping(12, 4) == [3, 6, 9] and skip_mapping(12, 6) == [2, 4, 6, 8, 10] and skip_mapping(24, 6) == [4, 8, 12, 16, 20]
    assert buckets(12, 4, overlap=False) == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]  # ALP-KD's NO
    assert buckets(12, 4, overlap=True) == [[1, 2, 3, 4, 5], [5, 6, 7, 8, 9], [9, 10, 11, 12]]  # ALP-KD's PO
    assert buckets(12, 2, overlap=False) == [list(range(1, 13))]  # 2-layer students: one bucket of all layers
    assert [len(b) for b in buckets(12, 6, overlap=False)] == [3, 3, 2, 2, 2]


# --- logit methods ------------------------------------------------------------------------------------------


def out(logits, *layers):
    return StudentOutput(torch.tensor(logits), [torch.tensor(h) for h in layers])


def test_no_kd_kd_and_mse_logits():
    student = out([[0.0, 0.0]], [[1.0, 0.0]], [[0.0, 1.0]])
    teacher = TeacherSignals(torch.tensor([[1.0, 0.0]]))
    labels = torch.tensor([0])
    ce = math.log(2)
    assert build_method("no_kd", shapes())(student, teacher, labels)["loss"].item() == pytest.approx(ce)
    kd = build_method("kd", shapes(), {"beta": 0.7})(student, teacher, labels)  # alpha = 1 - beta
    assert kd["loss"].item() == pytest.approx(0.3 * ce + 0.7 * kl(softmax([1, 0]), [0.5, 0.5]), rel=1e-6)
    mse = build_method("mse_logits", shapes())(student, teacher, labels)
    assert mse["loss"].item() == pytest.approx(1.0)  # (0-1)^2 + 0^2, summed over classes (thesis Eq. 2.7)
    batch = out([[0.0, 0.0], [3.0, 1.0]], [[0.0, 0.0], [0.0, 0.0]])
    teachers = TeacherSignals(torch.tensor([[1.0, 0.0], [1.0, 2.0]]))
    mse = build_method("mse_logits", shapes())(batch, teachers, torch.tensor([0, 1]))
    assert mse["loss"].item() == pytest.approx((1 + (4 + 1)) / 2)  # summed over classes, mean over examples


def test_hard_logits_is_cross_entropy_against_the_teachers_argmax_class():
    batch = out([[0.0, 0.0], [2.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]])
    teachers = TeacherSignals(torch.tensor([[0.2, 0.1], [1.0, 3.0]]))  # argmax: class 0, class 1
    gold = torch.tensor([1, 0])  # ignored: no gold-label term
    loss = build_method("hard_logits", shapes())(batch, teachers, gold)["loss"].item()
    assert loss == pytest.approx((math.log(2) + math.log(1 + math.exp(2.0))) / 2)  # -log softmax of the argmax
    with pytest.raises(ValueError, match="hard_logits needs classes"):
        build_method("hard_logits", shapes(num_labels=1, regression=True))


def test_annealing_kd_scales_teacher_logits_in_steps():
    method = build_method("annealing_kd", shapes(), {"max_temperature": 4})
    factors = []
    for epoch in range(1, 9):
        method.start_epoch(epoch, 8)
        factors.append(method.factor)
    assert factors == [0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0]
    student, teacher = out([[0.0, 0.0]], [[1.0, 0.0]]), TeacherSignals(torch.tensor([[2.0, 0.0]]))
    method.start_epoch(1, 8)
    assert method(student, teacher, torch.tensor([0]))["loss"].item() == pytest.approx(0.5**2 / 2)


# --- hidden-space methods -----------------------------------------------------------------------------------


def test_pkd_by_hand():
    student = out([[0.0, 0.0]], [[2.0, 0.0]], [[5.0, 5.0]])  # layer 1 matched; the top layer is not
    teacher = TeacherSignals(torch.tensor([[0.0, 0.0]]), layers=torch.tensor([[[0.0, 3.0], [1.0, 1.0]]]))
    method = only("inter", build_method("pkd", shapes()))  # skip mapping 2 -> 2: student 1 <- teacher 1
    # ||[1, 0] - [0, 1]||^2 = 2
    assert method(student, teacher, torch.tensor([0]))["loss"].item() == pytest.approx(2.0)
    method = only("inter", build_method("pkd", shapes(), {"mapping": [2]}))
    assert method(student, teacher, torch.tensor([0]))["loss"].item() == pytest.approx((1 - 1 / math.sqrt(2)) ** 2 + 0.5)
    with pytest.raises(ValueError, match="one teacher layer in 1..2"):
        build_method("pkd", shapes(), {"mapping": [3]})


def test_alp_by_hand():
    student = out([[0.0, 0.0]], [[1.0, 0.0]], [[9.0, 9.0]])
    teacher = TeacherSignals(torch.tensor([[0.0, 0.0]]), layers=torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]))
    method = only("inter", build_method("alp", shapes()))
    a1, a2 = softmax([1.0, 0.0])  # scores h_s . h_t^k = 1, 0
    expected = ((1 - a1) ** 2 + (0 - a2) ** 2) / 2  # MSE(h_s, C) with C = a1 [1,0] + a2 [0,1]
    assert method(student, teacher, torch.tensor([0]))["loss"].item() == pytest.approx(expected, rel=1e-6)
    weights = method.attention(student, teacher)
    torch.testing.assert_close(weights[0, 0], torch.tensor([a1, a2], dtype=torch.float32))


def test_alp_buckets_restrict_attention():
    s = shapes(student_widths=(3, 3, 3), teacher_layers=4, teacher_width=3)
    student = StudentOutput(torch.zeros(2, 2), [torch.randn(2, 3) for _ in range(3)])
    teacher = TeacherSignals(torch.zeros(2, 2), layers=torch.randn(2, 4, 3))
    for name, allowed in (("alp_no", [[1, 1, 0, 0], [0, 0, 1, 1]]), ("alp_po", [[1, 1, 1, 0], [0, 0, 1, 1]]),
                          ("alp", [[1, 1, 1, 1], [1, 1, 1, 1]])):
        weights = build_method(name, s).attention(student, teacher)
        assert ((weights > 0).int() == torch.tensor(allowed)).all(), name


def test_ckd_concatenates_a_bucket_and_projects_it():
    s = shapes(student_widths=(2, 2), teacher_layers=2, teacher_width=1)  # one bucket of two 1-d layers
    method = only("inter", build_method("ckd_no", s))
    with torch.no_grad():
        method.combine[0].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
        method.combine[0].bias.zero_()
    student = out([[0.0, 0.0]], [[1.0, 1.0]], [[0.0, 0.0]])
    teacher = TeacherSignals(torch.tensor([[0.0, 0.0]]), layers=torch.tensor([[[3.0], [1.0]]]))
    # combined = [3, 2]; MSE([1, 1], [3, 2]) = (4 + 1) / 2
    assert method(student, teacher, torch.tensor([0]))["loss"].item() == pytest.approx(2.5)


# --- output-space methods -----------------------------------------------------------------------------------


def test_universal_kd_il_by_hand():
    method = only("inter", build_method("universal_kd_il", shapes(student_widths=(2, 2))))
    with torch.no_grad():  # the student's pseudo classifier on layer 1 is the identity
        method.heads[0].weight.copy_(torch.eye(2))
        method.heads[0].bias.zero_()
    student = out([[0.0, 0.0]], [[1.0, 0.0]], [[0.0, 0.0]])
    head_logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0]]])
    teacher = TeacherSignals(torch.tensor([[0.0, 0.0]]), head_logits=head_logits)
    fs = softmax([1, 0])  # f_1^s
    ft = [softmax([2, 0]), softmax([0, 1])]  # f_1^t, f_2^t
    lam = softmax([ft[0] @ fs, ft[1] @ fs])  # Eq. 4
    aggregate = lam[0] * ft[0] + lam[1] * ft[1]  # Eq. 5
    assert method(student, teacher, torch.tensor([0]))["loss"].item() == pytest.approx(kl(aggregate, fs), rel=1e-5)


def test_universal_kd_term_vanishes_when_student_matches_the_teachers_aggregate():
    method = only("inter", build_method("universal_kd_il", shapes(student_widths=(2, 2, 2), teacher_layers=3)))
    with torch.no_grad():
        for head in method.heads:
            head.weight.copy_(torch.eye(2))
            head.bias.zero_()
    p = torch.tensor([0.8, 0.2])
    # every teacher head predicts p, so F^t(j) = p whatever the attention; student heads output log p
    teacher = TeacherSignals(torch.zeros(1, 2), head_logits=p.log().expand(1, 3, 2))
    student = StudentOutput(torch.zeros(1, 2), [p.log()[None], p.log()[None], torch.zeros(1, 2)])
    assert method(student, teacher, torch.tensor([0]))["loss"].item() == pytest.approx(0.0, abs=1e-6)


def test_universal_kd_cg_and_att_on_losses_by_hand():
    student = out([[1.0, 0.0]], [[0.0, 0.0]], [[0.0, 0.0]])
    head_logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    teacher = TeacherSignals(torch.tensor([[0.0, 0.0]]), head_logits=head_logits)
    fs = softmax([1, 0])
    ft = [softmax([2, 0]), softmax([0, 1]), softmax([1, 1])]
    lam = softmax([f @ fs for f in ft])
    labels = torch.tensor([0])
    s = shapes(teacher_layers=3)
    cg = only("inter", build_method("universal_kd_cg", s))(student, teacher, labels)["loss"].item()
    assert cg == pytest.approx(kl(sum(l * f for l, f in zip(lam, ft)), fs), rel=1e-5)  # Eq. 8
    losses = only("inter", build_method("universal_kd_att_on_losses", s))(student, teacher, labels)["loss"].item()
    assert losses == pytest.approx(sum(l * kl(f, fs) for l, f in zip(lam, ft)), rel=1e-5)  # Table 6 variant


def test_universal_kd_on_regression_weighs_teacher_heads_by_agreement_by_hand():
    # Eq. 4 for scores (kdflow's reading; output_methods' docstring): λ_i = softmax_i(exp(-(s - t_i)²/2))
    s = shapes(num_labels=1, regression=True, teacher_layers=3)
    student = out([[1.0]], [[0.0, 0.0]], [[0.0, 0.0]])  # the student's output 1.0
    t = [1.0, 4.0, 2.0]
    teacher = TeacherSignals(torch.tensor([[0.0]]), head_logits=torch.tensor([[[v] for v in t]]))
    lam = softmax([math.exp(-((1.0 - v) ** 2) / 2) for v in t])
    aggregate = sum(l * v for l, v in zip(lam, t))
    cg = only("inter", build_method("universal_kd_cg", s))(student, teacher, torch.tensor([1.0]))["loss"].item()
    assert cg == pytest.approx((aggregate - 1.0) ** 2, rel=1e-5)  # Eq. 8, KL as the squared error
    losses = only("inter", build_method("universal_kd_att_on_losses", s))(student, teacher, torch.tensor([1.0]))
    assert losses["loss"].item() == pytest.approx(sum(l * (v - 1.0) ** 2 for l, v in zip(lam, t)), rel=1e-5)
    il = build_method("universal_kd_il", shapes(student_widths=(1, 1), num_labels=1, regression=True, teacher_layers=3))
    weights = il.attention(torch.tensor([[[1.0]]]), teacher.head_logits)[0, 0]
    assert weights.tolist() == pytest.approx(lam.tolist(), rel=1e-5)


@pytest.mark.parametrize("student_score", [1.0, 3.0])
def test_universal_kd_on_regression_puts_most_weight_on_the_head_that_agrees_not_the_largest(student_score):
    # the plain product s · t would rank heads by their output: the head at 4.0 first, whatever the student says
    method = build_method("universal_kd_cg", shapes(num_labels=1, regression=True, teacher_layers=3))
    teacher = torch.tensor([[[student_score], [4.0], [-3.0]]])
    weights = method.attention(torch.tensor([[[student_score]]]), teacher)[0, 0]
    assert weights.argmax().item() == 0
    assert weights[2] < weights[1]  # the farther a head's score, the less its weight


def test_dih_distils_uniformly_from_the_selected_heads_and_the_final_classifier():
    student = out([[1.0, 0.0]], [[0.0, 0.0]], [[0.0, 0.0]])
    head_logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    teacher = TeacherSignals(torch.tensor([[0.0, 3.0]]), head_logits=head_logits)
    labels, s = torch.tensor([0]), shapes(teacher_layers=3)
    cohort = [[2, 0], [0, 1], [1, 1], [0, 3]]  # heads on teacher layers 1-3, then the final classifier
    method = build_method("dih", s, {"beta": 0.7})  # alpha = 1 - beta
    uniform = sum(kl(softmax(z), softmax([1, 0])) for z in cohort) / 4
    assert method(student, teacher, labels)["loss"].item() == pytest.approx(
        0.3 * -math.log(softmax([1, 0])[0]) + 0.7 * uniform, rel=1e-5)
    selected = build_method("dih", s, {"head_layers": [1, 3], "temperature": 2.0})  # T on every cohort member
    at_t2 = 4 * sum(kl(softmax(np.array(z) / 2), softmax([0.5, 0])) for z in (cohort[0], cohort[2], cohort[3])) / 3
    assert only("kd", selected)(student, teacher, labels)["loss"].item() == pytest.approx(at_t2, rel=1e-5)
    with pytest.raises(ValueError, match=r"head_layers \[4\] must list teacher layers in 1..3"):
        build_method("dih", s, {"head_layers": [4]})


def test_pseudo_classifier_terms_take_no_temperature_only_the_final_kd_term_does():
    student = out([[1.0, 0.0]], [[0.0, 1.0]], [[0.0, 0.0]])
    head_logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    teacher = TeacherSignals(torch.tensor([[0.0, 3.0]]), head_logits=head_logits)
    ft = [softmax([2, 0]), softmax([0, 1]), softmax([1, 1])]  # f_i^t = σ(W_i^t h_i^t), Eq. 3: no T
    labels, s, t = torch.tensor([0]), shapes(teacher_layers=3), 2.0
    final_kd = t * t * kl(softmax([0, 1.5]), softmax([0.5, 0]))  # Eq. 1 at T = 2
    fs = softmax([1, 0])  # the student's output σ(z_s), Eq. 8
    lam = softmax([f @ fs for f in ft])
    expected = {"universal_kd_cg": kl(sum(l * f for l, f in zip(lam, ft)), fs),
                "universal_kd_att_on_losses": sum(l * kl(f, fs) for l, f in zip(lam, ft))}
    fj = softmax([0, 1])  # the student's pseudo classifier on layer 1 (identity head), Eq. 4-6
    lam = softmax([f @ fj for f in ft])
    expected["universal_kd_il"] = kl(sum(l * f for l, f in zip(lam, ft)), fj)
    for name, inter in expected.items():
        method = build_method(name, s, {"temperature": t})
        if name == "universal_kd_il":
            with torch.no_grad():
                method.heads[0].weight.copy_(torch.eye(2))
                method.heads[0].bias.zero_()
        terms = method(student, teacher, labels)
        assert terms["inter"].item() == pytest.approx(inter, rel=1e-5), name
        assert terms["kd"].item() == pytest.approx(final_kd, rel=1e-5), name


def test_mhkd_adds_cross_entropy_on_student_heads():
    method = only("inter", build_method("mhkd", shapes(teacher_layers=2)))  # student 1 <- teacher head 1
    with torch.no_grad():
        method.heads[0].weight.copy_(torch.eye(2))
        method.heads[0].bias.zero_()
    student = out([[0.0, 0.0]], [[1.0, 0.0]], [[0.0, 0.0]])
    teacher = TeacherSignals(torch.zeros(1, 2), head_logits=torch.tensor([[[0.0, 2.0], [5.0, 5.0]]]))
    fs = softmax([1, 0])
    expected = kl(softmax([0, 2]), fs) - math.log(fs[1])  # KL to teacher head 1 + CE with gold label 1
    assert method(student, teacher, torch.tensor([1]))["loss"].item() == pytest.approx(expected, rel=1e-5)


def test_regression_output_space_uses_squared_error():
    method = only("kd", build_method("dih", shapes(num_labels=1, regression=True)))
    student = out([[1.0]], [[0.0, 0.0]], [[0.0, 0.0]])
    teacher = TeacherSignals(torch.tensor([[0.0]]), head_logits=torch.tensor([[[3.0], [2.0]]]))
    assert method(student, teacher, torch.tensor([1.0]))["loss"].item() == pytest.approx((4 + 1 + 1) / 3)


# --- every method: gradients, options ---------------------------------------------------------------------


class TinyStudent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1, self.layer2, self.classifier = torch.nn.Linear(4, 3), torch.nn.Linear(3, 3), torch.nn.Linear(3, 2)

    def forward(self, x):
        h1 = torch.tanh(self.layer1(x))
        h2 = torch.tanh(self.layer2(h1))
        return StudentOutput(self.classifier(h2), [h1, h2])


@pytest.mark.parametrize("name", available_methods())
def test_gradients_reach_the_student_and_its_heads_never_the_teacher(name):
    torch.manual_seed(0)
    student = TinyStudent()
    teacher_net = torch.nn.Linear(4, 5 * 2)  # stands in for the frozen teacher whose outputs are cached
    x = torch.randn(6, 4)
    with torch.no_grad():  # teacher signals are computed once, without gradients
        signals = random_teacher(6, 4, 5, 2)
        signals.head_logits = teacher_net(x).view(6, 5, 2)
    method = build_method(name, Shapes((3, 3), 5, 4, 2, False), {"assistant": "ta"} if name == "takd" else {})
    method.set_weights(alpha=0.2, beta=0.3 * ("kd" in method.provides), gamma=0.5 * ("inter" in method.provides))
    terms = method(student(x), signals, torch.randint(0, 2, (6,)))
    terms["loss"].backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in student.parameters()), name
    assert all(p.grad is not None for p in method.parameters()), f"{name}: a method part gets no gradient"
    assert all(p.grad is None for p in teacher_net.parameters())
    assert torch.isfinite(terms["loss"])


def test_complementary_weights_follow_the_papers():
    assert build_method("universal_kd_il", shapes(), {"beta": 0.2}).weights == {"alpha": 0.0, "beta": 0.2, "gamma": 0.8}
    assert build_method("alp", shapes(), {"beta": 0.7, "gamma": 0.2}).weights == pytest.approx(
        {"alpha": 0.3, "beta": 0.7, "gamma": 0.2})
    assert build_method("kd", shapes(), {"beta": 0.2, "alpha": 1.0}).weights == {"alpha": 1.0, "beta": 0.2, "gamma": 0.0}


def test_method_registry_and_errors():
    expected = {"no_kd", "kd", "mse_logits", "pkd", "ckd_no", "ckd_po", "alp_no", "alp_po", "alp", "mhkd",
                "universal_kd_il", "universal_kd_cg", "universal_kd_ca", "universal_kd_att_on_losses", "dih",
                "annealing_kd", "takd", "hard_logits"}
    assert expected <= set(available_methods())
    with pytest.raises(KeyError, match="unknown method 'fitnet'"):
        build_method("fitnet", shapes())
    with pytest.raises(ValueError, match=r"unknown options \['temprature'\]"):
        build_method("kd", shapes(), {"temprature": 2})
    method = build_method("kd", shapes())
    with pytest.raises(ValueError, match="every loss weight is zero"):
        method.set_weights(alpha=0, beta=0)
    with pytest.raises(ValueError, match="kd has no 'inter' term: gamma must be 0"):
        method.set_weights(gamma=0.5)
    with pytest.raises(ValueError, match="takd needs an 'assistant'"):
        build_method("takd", shapes())
    with pytest.raises(ValueError, match="at least 2 layers"):
        build_method("universal_kd_il", shapes(student_widths=(2,)))


# --- what the hand-computed cases above left open (each a surviving mutant, benchmarks/mutation_score.py) ------


def random_signals(batch=1, student_layers=3, width=4, teacher_layers=5, classes=2, seed=0):
    generator = torch.Generator().manual_seed(seed)
    student = StudentOutput(torch.randn(batch, classes, generator=generator),
                            [torch.randn(batch, width, generator=generator) for _ in range(student_layers)])
    return student, random_teacher(batch, width, teacher_layers, classes, generator)


def random_teacher(batch, width, teacher_layers, classes, generator=None):
    """Every registered teacher signal, random, in its shape (kdflow.transfer.signals.SIGNALS)."""
    drawn = {name: torch.randn(batch, *signal.example_shape(teacher_layers, width, classes), generator=generator)
             for name, signal in SIGNALS.items()}
    return TeacherSignals(*(drawn.pop(name) for name in OWN_FIELDS), others=drawn)


def built(name, student_layers=3, width=4, teacher_layers=5, classes=2, regression=False, **options):
    options = {"assistant": "ta", **options} if name == "takd" else options
    return build_method(name, Shapes((width,) * student_layers, teacher_layers, width, classes, regression), options)


@pytest.mark.parametrize("name", available_methods())
def test_every_term_is_a_batch_mean(name):
    """The same example twice gives each term its value on the example once: terms are means over the batch, not
    sums (a sum would scale the loss, and so the learning rate, with the batch size)."""
    torch.manual_seed(0)
    method = built(name)
    student, teacher = random_signals()
    twice = StudentOutput(student.logits.repeat(2, 1), [h.repeat(2, 1) for h in student.layers])
    teacher_twice = TeacherSignals(*(torch.cat([teacher[name]] * 2) for name in OWN_FIELDS),
                                   others={name: torch.cat([value] * 2) for name, value in teacher.others.items()})
    once, doubled = method(student, teacher, torch.tensor([1])), method(twice, teacher_twice, torch.tensor([1, 1]))
    for term in once:
        torch.testing.assert_close(doubled[term], once[term], msg=f"{name}: {term}")


@pytest.mark.parametrize("name", ["pkd", "ckd_no", "alp", "universal_kd_il", "mhkd"])
def test_every_intermediate_student_layer_takes_part(name):
    """With three student layers, layers 1 and 2 are matched (the top one is not): changing layer 2 changes the
    intermediate term, changing layer 3 does not."""
    method = only("inter", built(name))
    student, teacher = random_signals()
    base = method(student, teacher, torch.tensor([1]))["loss"]
    for index, matched in ((1, True), (2, False)):  # layer 2, layer 3 (the top)
        moved = StudentOutput(student.logits, [h + 1.0 if j == index else h for j, h in enumerate(student.layers)])
        changed = not torch.isclose(method(moved, teacher, torch.tensor([1]))["loss"], base)
        assert changed == matched, (name, index + 1)


def test_projections_and_pseudo_classifiers_cover_layers_one_to_m_minus_one():
    student, _ = random_signals(batch=2)
    pkd = built("pkd")
    torch.testing.assert_close(pkd.student_layers(student), torch.stack(student.layers[:2], dim=1))
    assert len(pkd.to_teacher) == 2 and len(built("pkd", width=4).to_teacher) == 2
    assert built("universal_kd_il").student_head_logits(student).shape == (2, 2, 2)


@pytest.mark.parametrize("name", ["kd", "takd", "pkd", "ckd_no", "alp", "universal_kd_il", "universal_kd_cg",
                                  "universal_kd_ca", "universal_kd_att_on_losses", "mhkd"])
def test_on_regression_the_kd_term_is_the_squared_error_between_outputs(name):
    method = built(name, classes=1, regression=True)
    student, teacher = random_signals(batch=3, classes=1)
    terms = method(student, teacher, torch.tensor([0.5, 1.0, 2.0]))
    torch.testing.assert_close(terms["kd"], torch.nn.functional.mse_loss(student.logits, teacher.logits))
    assert torch.isfinite(terms["loss"])


@pytest.mark.parametrize("name", ["alp", "universal_kd_il"])
def test_detached_attention_weighs_the_same_but_passes_no_gradient(name):
    student, teacher = random_signals(batch=2)
    student.layers[0].requires_grad_(True)
    weights = {}
    for detach in (False, True):
        torch.manual_seed(0)  # the same pseudo classifiers
        method = built(name, detach_attention=detach)
        if name == "alp":
            weights[detach] = method.attention(student, teacher)
        else:
            probs = method.distribution(method.student_head_logits(student))
            weights[detach] = method.attention(probs, method.distribution(teacher.head_logits))
    torch.testing.assert_close(weights[True], weights[False])
    assert weights[False].requires_grad and not weights[True].requires_grad


@pytest.mark.parametrize("name", available_methods())
def test_every_option_reaches_the_method_and_only_trained_parts_are_saved(name):
    """A method keeps the options it is built with; its state (saved with the student) holds its trained parameters
    only: fixed buffers (layer mappings, bucket masks) are rebuilt from the options."""
    defaults = built(name).options
    changed = {key: value + 0.25 for key, value in defaults.items()
               if isinstance(value, float) and key not in ("alpha", "beta", "gamma")}
    method = built(name, **changed)
    assert {key: method.options[key] for key in changed} == changed
    assert set(method.state_dict()) == {key for key, _ in method.named_parameters()}, name


def test_annealing_kd_steps_in_whole_blocks_and_by_every_epoch_when_there_are_fewer_than_steps():
    method = build_method("annealing_kd", shapes(), {"max_temperature": 4})
    for epochs, expected in ((10, [0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 1.0, 1.0, 1.0, 1.0]), (3, [0.25, 0.5, 0.75])):
        factors = []
        for epoch in range(1, epochs + 1):
            method.start_epoch(epoch, epochs)
            factors.append(method.factor)
        assert factors == expected, epochs


@pytest.mark.parametrize("name, options, message", [
    ("pkd", {"mapping": [1]}, ("pkd mapping [1] must give one teacher layer in 1..5 for each of the student's 2 "
                              "intermediate layers")),
    ("mhkd", {"mapping": [1, 6]}, ("mhkd mapping [1, 6] must give one teacher layer in 1..5 for each of the "
                                  "student's 2 intermediate layers")),
    ("mhkd", {"mapping": [1]}, "mhkd mapping [1] must give"),
    ("hard_logits", {}, "hard_logits needs classes: a regression teacher's output has no argmax class"),
])
def test_a_method_that_cannot_be_built_says_why(name, options, message):
    with pytest.raises(ValueError) as error:
        built(name, regression=name == "hard_logits", classes=1 if name == "hard_logits" else 2, **options)
    assert str(error.value).startswith(message)


def test_a_mapping_may_name_the_top_teacher_layer_and_a_one_layer_student_is_refused_by_name():
    assert built("mhkd", mapping=[5, 5]).mapping == [4, 4] and built("pkd", mapping=[5, 5]).mapping.tolist() == [4, 4]
    with pytest.raises(ValueError, match=r"^pkd needs a student with at least 2 layers \(its top layer is not"):
        built("pkd", student_layers=1)
    with pytest.raises(ValueError, match=r"^takd needs an 'assistant': the name of the student that sits between"):
        build_method("takd", shapes())


def test_ckd_buckets_follow_its_variant_and_loss_weights_their_options():
    s = Shapes((4, 4, 4), 5, 4, 2, False)
    assert [list(map(int, b)) for b in build_method("ckd_po", s).buckets] == [[1, 2, 3, 4], [4, 5]]  # PO shares 4
    assert [list(map(int, b)) for b in build_method("ckd_no", s).buckets] == [[1, 2, 3], [4, 5]]
    for name in available_methods():
        if "beta" in built(name).options and name not in ("annealing_kd", "no_kd"):
            assert built(name, beta=0.3).weights["beta"] == pytest.approx(0.3), name


# --- a method answers for its own attention (what the attention figures draw) ----------------------------------

ATTENTIVE = {"universal_kd_il", "universal_kd_ca", "universal_kd_cg", "universal_kd_att_on_losses", "alp", "alp_no",
             "alp_po"}


def test_the_methods_that_weigh_teacher_layers_answer_for_their_attention_and_the_others_refuse():
    assert set(attentive_methods()) == ATTENTIVE
    student, teacher = random_signals(batch=2)
    for name in available_methods():
        method = built(name)
        if name in ATTENTIVE:
            weights, rows = method.layer_attention(student, teacher)
            assert weights.shape == (2, len(rows), 5) and torch.allclose(weights.sum(-1), torch.ones(2, len(rows)))
            assert rows == ([3] if name in ("universal_kd_cg", "universal_kd_att_on_losses") else [1, 2]), name
        else:
            with pytest.raises(UserError, match=f"{name} has no attention over teacher layers; methods that do: "):
                method.layer_attention(student, teacher)


def test_each_methods_attention_is_its_equations_by_hand():
    """Universal-KD Eq. 4 on the student's pseudo classifiers (layer 1 of 2), ALP-KD Eq. 5-6 on its hidden
    states, Eq. 8 on its output distribution: the weights the figures draw are the papers' λ and α."""
    s = shapes(teacher_layers=3)
    student = out([[1.0, 0.0]], [[1.0, 0.0]], [[0.0, 2.0]])
    head_logits = torch.tensor([[[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    teacher = TeacherSignals(torch.tensor([[0.0, 0.0]]), head_logits=head_logits,
                             layers=torch.tensor([[[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]]))
    ft = [softmax([2, 0]), softmax([0, 1]), softmax([1, 1])]
    il = build_method("universal_kd_il", s)
    with torch.no_grad():  # the pseudo classifier on student layer 1 is the identity
        il.heads[0].weight.copy_(torch.eye(2))
        il.heads[0].bias.zero_()
    fs = softmax([1, 0])  # f_1^s, and the output's σ(z) as well
    expected = {"universal_kd_il": softmax([f @ fs for f in ft]),  # Eq. 4
                "alp": softmax([1.0, 0.0, 2.0]),  # α_1k = softmax_k(h_s^1 · h_t^k), Eq. 5-6
                "universal_kd_cg": softmax([f @ fs for f in ft])}  # Eq. 8: the output f_M^s attends
    for name, method in {"universal_kd_il": il, "alp": build_method("alp", s),
                         "universal_kd_cg": build_method("universal_kd_cg", s)}.items():
        weights, rows = method.layer_attention(student, teacher)
        np.testing.assert_allclose(weights[0, 0].detach().numpy(), expected[name], rtol=1e-5, err_msg=name)
        assert rows == ([2] if name == "universal_kd_cg" else [1])


def test_the_output_methods_loss_weighs_the_teachers_heads_by_the_attention_they_answer_with():
    student, teacher = random_signals(batch=3)
    method = only("inter", built("universal_kd_cg"))
    weights, _ = method.layer_attention(student, teacher)
    teacher_probs = torch.softmax(teacher.head_logits, -1)
    aggregate = (weights[:, 0, :, None] * teacher_probs).sum(1)
    expected = soft_kl(aggregate, torch.log_softmax(student.logits, -1))
    torch.testing.assert_close(method(student, teacher, torch.zeros(3, dtype=torch.long))["loss"], expected)
