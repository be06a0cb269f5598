"""Numerical precision of a job's forward passes: the config's ``precision`` (``auto``, ``bf16``, ``fp16`` or
``fp32``) resolved on the device the job runs on.

``bf16`` and ``fp16`` run forward passes under :func:`torch.autocast`: matmuls, convolutions and attention in
half precision, reductions, softmax-based losses and norms where torch's autocast policy keeps them in float32.
The weights stay float32 (the optimiser updates float32 master weights; nothing is cast with ``.half()``), so a
model written by a mixed-precision job loads and runs like any other. ``fp16``'s narrow range needs a gradient
scaler (:meth:`Precision.grad_scaler`): the loss is multiplied before backward so that small gradients do not
flush to zero, the gradients divided back before clipping, and a step whose gradients overflowed is skipped (the
scale then halves). ``bf16`` has float32's range and needs none. On an Ampere or newer GPU the float32 matmuls and
cuDNN convolutions and RNNs left under a mixed precision run in TF32; ``fp32`` is IEEE float32 throughout, TF32
off (cuDNN's default included), the reference the mixed precisions are compared with.

``auto`` is ``bf16`` on a CUDA GPU that computes in bfloat16 natively (Ampere and newer:
``torch.cuda.is_bf16_supported(including_emulation=False)``) and ``fp32`` elsewhere (CPU, older GPUs, MPS). It
resolves in the job, on the machine that runs it, and the job records what it resolved to. Attention needs no
setting here: transformers (5.x) gives every Hugging Face model that supports it PyTorch's fused
``scaled_dot_product_attention`` (``attn_implementation="sdpa"``, its default), which runs under autocast.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from kdflow.core.errors import UserError

log = logging.getLogger("kdflow")

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass(frozen=True)
class Precision:
    """A resolved precision on one kind of device: ``name`` (bf16, fp16 or fp32), the ``device_type`` autocast
    runs on, and whether float32 matmuls run in TF32 under it (``tf32``, a mixed precision on Ampere or newer).
    Picklable: the ranks of a data-parallel job get their parent's."""

    name: str = "fp32"
    device_type: str = "cpu"
    tf32: bool = False

    def __post_init__(self):
        if self.name not in DTYPES:
            raise UserError(f"precision {self.name!r} is not one of {', '.join(DTYPES)} (resolve 'auto' first)")

    @property
    def dtype(self) -> torch.dtype:
        return DTYPES[self.name]

    @property
    def mixed(self) -> bool:
        return self.name != "fp32"

    def autocast(self):
        """A context whose forward passes run in this precision. Backward passes belong outside it: autocast's
        backward runs in the dtypes its forward chose. On CUDA, entering it also sets the process's float32
        matmul mode for this precision (TF32 or IEEE), which stays set after the block, so that the backward pass
        computes as its forward did; a process running several precisions (a benchmark) gets each one's mode
        from the forward pass it last entered."""
        if self.device_type == "cuda":
            # cuBLAS matmuls, and cuDNN convolutions and RNNs. The flags torch.set_float32_matmul_precision sets,
            # not torch 2.9's per-backend fp32_precision: once those are set, torch.get_float32_matmul_precision()
            # (which torch.compile and other libraries call) raises on the mix of APIs.
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = self.tf32
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.mixed)

    def grad_scaler(self) -> torch.amp.GradScaler:
        """A gradient scaler, enabled for fp16 only (a disabled scaler passes losses and steps through)."""
        return torch.amp.GradScaler(self.device_type, enabled=self.name == "fp16")


FP32 = Precision()


def resolve_precision(setting: str, device: torch.device) -> Precision:
    """The config's ``precision`` on ``device`` (see the module docstring for ``auto``)."""
    if setting not in PRECISIONS:
        raise UserError(f"precision: {setting!r} is not one of {', '.join(PRECISIONS)}")
    device = torch.device(device)
    cuda = device.type == "cuda"
    name = setting
    if setting == "auto":
        name = "bf16" if cuda and torch.cuda.is_bf16_supported(including_emulation=False) else "fp32"
    elif name != "fp32" and not torch.amp.is_autocast_available(device.type):
        raise UserError(f"precision: {name} needs autocast, which torch does not have on {device.type}")
    elif name == "bf16" and cuda and not torch.cuda.is_bf16_supported(including_emulation=False):
        log.warning("precision bf16 on a GPU without native bfloat16 (%s): emulated and slow; fp16 or fp32 is faster",
                    torch.cuda.get_device_name(device))
    tf32 = name != "fp32" and cuda and torch.cuda.get_device_capability(device) >= (8, 0)
    resolved = Precision(name, device.type, tf32)
    log.info("precision %s%s on %s%s", name, " (auto)" if setting == "auto" else "", device,
             ", TF32 for the float32 matmuls left" if tf32 else "")
    return resolved

