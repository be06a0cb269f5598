"""Packs (issue 66, its first step): K models of one architecture trained as one stacked computation in one
process, so that a small student's step costs the GPU one launch stream for all K instead of K.

The mechanism is ``torch.func``'s: the members' parameters are stacked into one tensor per parameter
(``stack_module_state``, a leading dimension of K) and one member's forward pass and loss, called functionally on
its own slice (``functional_call``), is mapped over the K slices and the K members' batches by ``vmap``. Each
operator then runs once for all members, batched, and the op count of a step does not grow with K (the ops
benchmark, benchmarks/pack_ops.py). Grouped kernels or K CUDA streams were the alternatives: the first needs a kernel
per layer type, the second keeps K launches per op.

A member keeps what makes it itself: its own initial weights (its seed's), its own batches, and per-member
tensors for the hyperparameters that a grid varies within a pack, its learning rate and weight decay; its
gradient's norm is measured and clipped per member, and :class:`PackAdamW` updates each member as torch's AdamW
updates a model alone. Dropout draws other masks per member (``randomness="different"``), so a member equals its
training alone to float tolerance only without dropout (tests/test_packs.py checks that; with dropout it is a
rerun with another dropout seed). Recurrent students run their unrolled LSTM under ``vmap``, which has no
batching rule for packed sequences.

The one training loop (:func:`kdflow.training.loop.train`) trains a pack as it trains a model: each member with its
own shuffler, schedule, evaluations, kept best state and divergence. A weight that no member's loss reaches
(:meth:`Pack.reached_by`) is left alone by :class:`PackAdamW`, as torch's AdamW leaves a parameter without a
gradient; :func:`kdflow.distillation.distill.distill_pack` distils a pack of students, the job of rule
distill_pack (config ``student_packs``).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

Batch = dict[str, torch.Tensor]



def attention_for_vmap(device: torch.device):
    """Attention computed by its plain operators (SDPA's math backend) on a GPU: a BERT pack's step failed on an H200
    (2026-12-04, the GPU check's packs part) in the memory-efficient kernel that vmap batched ("LSE is not correctly
    aligned (strideH)"). A CPU keeps its kernels, which vmap batches correctly (tests/test_packs.py)."""
    return sdpa_kernel(SDPBackend.MATH) if device.type == "cuda" else contextlib.nullcontext()


def stacked_batches(member_batches: Sequence[Batch]) -> Batch:
    """The members' batches of one step as one batch with a leading dimension of K: token batches (with
    ``input_ids``) each padded to the longest of them (with 0, past each row's attention mask, so that no output
    changes), then stacked in the members' order."""
    if "input_ids" in member_batches[0]:
        width = max(batch["input_ids"].shape[1] for batch in member_batches)
        member_batches = [{key: nn.functional.pad(value, (0, width - value.shape[1])) if value.ndim == 2 else value
                           for key, value in batch.items()} for batch in member_batches]
    return {key: torch.stack([batch[key] for batch in member_batches]) for key in member_batches[0]}


class Pack(nn.Module):
    """K ``members`` (modules of one architecture, each with its own weights) as one module. Their trainable
    weights live in one flat parameter [K, P] (``flat``: member k's row holds its P trainable numbers, parameter
    after parameter), so that the optimiser and the per-member gradient norms are a few operators whatever the
    members' number of parameter tensors; their frozen weights and buffers are stacked [K, ...]. :meth:`map` runs
    a function of one member and its inputs over all members at once."""

    def __init__(self, members: Sequence[nn.Module]):
        super().__init__()
        if len({tuple((name, p.shape) for name, p in member.named_parameters()) for member in members}) != 1:
            raise ValueError("a pack's members must share one architecture: the same parameters of the same shapes")
        params, buffers = stack_module_state(list(members))
        first = dict(members[0].named_parameters())
        self.trainable = [name for name in params if first[name].requires_grad]
        self.shapes = {name: first[name].shape for name in self.trainable}
        self.flat = nn.Parameter(torch.cat([params[name].flatten(1) for name in self.trainable], dim=1))
        self.frozen = {name: params[name].detach() for name in params if name not in self.shapes}
        self.buffer_names = list(buffers)
        for number, name in enumerate(self.buffer_names):
            self.register_buffer(f"buffer{number}", buffers[name])
        for number, name in enumerate(self.frozen):
            self.register_buffer(f"frozen{number}", self.frozen[name])
        self.size = len(members)
        self.state_names = list(members[0].state_dict())  # a member's state: its non-persistent buffers left out
        self._views = None  # the trainable views map() uses while reached_by() traces them
        # the members' module, without weights of its own: functional_call gives it each member's
        self._template = [copy.deepcopy(members[0]).to("meta")]

    @property
    def template(self) -> nn.Module:
        """The members' module that :meth:`map` calls with each member's weights: a method's loss weights and
        epoch-dependent state (set_weights, start_epoch) are set on it, for every member at once."""
        return self._template[0]

    def member_parameters(self) -> dict[str, torch.Tensor]:
        """Every parameter of the members, stacked [K, ...]: the trainable ones views into :attr:`flat`."""
        if self._views is not None:
            return self._views
        views, offset = {}, 0
        for name in self.trainable:
            size = self.shapes[name].numel()
            views[name] = self.flat[:, offset:offset + size].view(self.size, *self.shapes[name])
            offset += size
        return {**views, **{name: getattr(self, f"frozen{number}") for number, name in enumerate(self.frozen)}}

    def member_buffers(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, f"buffer{number}") for number, name in enumerate(self.buffer_names)}

    def decayed(self, decay_all: bool = False) -> torch.Tensor:
        """[P]: 1 where a member's weight decays, 0 where it does not: as kdflow's optimiser
        (kdflow.training.loop.build_optimizer), biases and LayerNorm weights (one dimension) are spared unless
        ``decay_all``."""
        return torch.cat([torch.full((shape.numel(),), float(decay_all or len(shape) >= 2), device=self.flat.device)
                          for shape in self.shapes.values()])

    def map(self, fn: Callable, *per_member, shared=()):
        """``fn(module, *member_inputs, *shared)`` for every member at once, its module holding that member's
        weights: ``per_member`` inputs have a leading dimension of K (pytrees of tensors), ``shared`` ones are every
        member's. Returns ``fn``'s outputs stacked over the members (a pytree of tensors: no dataclasses)."""
        template = self.template
        template.train(self.training)

        def one(params, buffers, *inputs):
            member_inputs, shared_inputs = inputs[:len(per_member)], inputs[len(per_member):]
            return fn(_Bound(template, params, buffers), *member_inputs, *shared_inputs)

        dims = (0, 0) + (0,) * len(per_member) + (None,) * len(shared)
        with attention_for_vmap(self.flat.device):
            return vmap(one, in_dims=dims, randomness="different")(self.member_parameters(), self.member_buffers(),
                                                                  *per_member, *shared)

    def restack_buffers(self, members: Sequence[nn.Module]) -> None:
        """Take the ``members``' buffers again, e.g. their methods' loss weights after a stage of a schedule set
        them (the members whose weights this pack was made of, in its order)."""
        for number, name in enumerate(self.buffer_names):
            getattr(self, f"buffer{number}").copy_(torch.stack([member.get_buffer(name) for member in members]))

    def reached_by(self, loss_fn: Callable, batch: Batch) -> torch.Tensor:
        """[P]: 1 where the members' loss ``loss_fn(pack, batch)`` ([K]) depends on a trainable weight, 0 where no
        path leads to it (a method's projection its loss leaves out, a pooler the student does not call): the
        weights torch's optimiser would find no gradient for. Traced once in eval mode (no dropout drawn, no
        training-time bookkeeping of the loss), one forward and backward pass."""
        views = self.member_parameters()
        training = self.training
        self._views = views
        self.eval()
        try:
            loss = loss_fn(self, batch)
        finally:
            self._views = None
            self.train(training)
        grads = torch.autograd.grad(loss.sum(), [views[name] for name in self.trainable], allow_unused=True)
        return torch.cat([torch.full((self.shapes[name].numel(),), float(grad is not None), device=self.flat.device)
                          for name, grad in zip(self.trainable, grads)])

    def member_state(self, k: int) -> dict[str, torch.Tensor]:
        """Member ``k``'s state dict, as the module trained alone would have it."""
        stacked = {**self.member_parameters(), **self.member_buffers()}
        return {name: stacked[name][k].detach().clone() for name in self.state_names}


class _Bound:
    """A member's module called with that member's weights (``functional_call``); attribute access reaches the
    module's submodules, so that a loss written for one model (``model["student"](batch)``) runs unchanged."""

    def __init__(self, module: nn.Module, params: dict, buffers: dict, prefix: str = ""):
        self._module, self._params, self._buffers, self._prefix = module, params, buffers, prefix

    def __call__(self, *args, **kwargs):
        prefix = self._prefix
        params = {name[len(prefix):]: p for name, p in self._params.items() if name.startswith(prefix)}
        buffers = {name[len(prefix):]: b for name, b in self._buffers.items() if name.startswith(prefix)}
        return functional_call(self._module, (params, buffers), args, kwargs, strict=True)

    def __getitem__(self, key: str) -> _Bound:
        return _Bound(self._module[key], self._params, self._buffers, f"{self._prefix}{key}.")

    @property
    def training(self) -> bool:
        return self._module.training


def member_gradient_norms(pack: Pack, max_norm: float | None) -> torch.Tensor:
    """Each member's gradient 2-norm [K] before clipping, clipping each member's to ``max_norm`` if set, as
    ``torch.nn.utils.clip_grad_norm_`` clips a model alone (a factor of max_norm / (norm + 1e-6), at most 1)."""
    grad = pack.flat.grad
    norms = grad.square().sum(1).sqrt()
    if max_norm:
        grad.mul_((max_norm / (norms + 1e-6)).clamp(max=1.0)[:, None])
    return norms


class PackAdamW:
    """AdamW over a pack's flat parameter with a learning rate and a weight decay per member ([K] tensors: the
    members' base rates, scaled at each step by the schedule's factor), torch's update otherwise (decoupled decay,
    bias corrections), in a few operators for all members and parameters. Hand-written: torch's AdamW takes one
    learning rate per parameter group, and the flat parameter holds K members. Decay spares what
    :meth:`Pack.decayed` spares; a weight outside ``reached`` (:meth:`Pack.reached_by`) is left alone, weight,
    moments and all, as torch's AdamW leaves a parameter no loss reached. :meth:`stop` freezes a member (a
    diverged one) while the others train on."""

    def __init__(self, pack: Pack, learning_rates: Sequence[float], weight_decays: Sequence[float],
                 betas=(0.9, 0.999), eps: float = 1e-8, decay_all: bool = False):
        device = pack.flat.device
        self.pack, self.betas, self.eps = pack, tuple(betas), eps
        self.decayed = pack.decayed(decay_all)
        self.reached = torch.ones_like(self.decayed)
        self.base_lr = torch.tensor(learning_rates, dtype=torch.float32, device=device)
        self.weight_decay = torch.tensor(weight_decays, dtype=torch.float32, device=device)
        self.step_count = 0
        self.first, self.second = torch.zeros_like(pack.flat), torch.zeros_like(pack.flat)

    @torch.no_grad()
    def step(self, factor: float = 1.0) -> None:
        """One update at ``factor`` x each member's base rate (the schedule's factor of this step)."""
        self.step_count += 1
        beta1, beta2 = self.betas
        p, grad, lr = self.pack.flat, self.pack.flat.grad, (self.base_lr * factor)[:, None]
        reached = self.reached
        p.mul_(1 - lr * self.weight_decay[:, None] * self.decayed * reached)
        self.first.lerp_(grad, (1 - beta1) * reached)
        self.second.mul_(torch.where(reached.bool(), beta2, 1.0)).addcmul_(grad, grad, value=1 - beta2)
        denominator = self.second.sqrt() / (1 - beta2 ** self.step_count) ** 0.5 + self.eps
        p.sub_(lr / (1 - beta1 ** self.step_count) * self.first / denominator * reached)

    def stop(self, member: int) -> None:
        """Member ``member`` takes no more steps: its rate (and so its decay) 0 from here."""
        self.base_lr[member] = 0.0

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.pack.flat.grad = None

    def state_dict(self) -> dict:
        """What a resumed run needs (``reached`` is traced again)."""
        return {"step_count": self.step_count, "first": self.first, "second": self.second, "base_lr": self.base_lr}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = state["step_count"]
        for name in ("first", "second", "base_lr"):
            getattr(self, name).copy_(state[name])
