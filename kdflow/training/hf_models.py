"""Small helpers around Hugging Face models shared by teachers, pseudo-heads, signals and students."""

from __future__ import annotations

import inspect
from functools import cache
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertTokenizer

from kdflow.core import run_files
from kdflow.core.errors import UserError
from kdflow.core.io import atomic_output, write_json

INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids")


@cache
def _accepted(forward_class: type) -> tuple[str, ...]:
    parameters = inspect.signature(forward_class.forward).parameters
    return tuple(key for key in INPUT_KEYS if key in parameters)  # DistilBERT-style models take no token types


def model_inputs(model, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch entries ``model.forward`` accepts, the padding mask in the 4-D form its attention uses."""
    inputs = {key: batch[key] for key in _accepted(type(model))}
    if "attention_mask" in inputs:
        inputs["attention_mask"] = attention_mask_4d(model, inputs["attention_mask"])
    return inputs


def attention_mask_4d(model, mask: torch.Tensor | None, causal: bool = False) -> torch.Tensor | None:
    """A [B, T] padding mask as the [B, 1, 1, T] mask the model's attention takes (with ``causal``, [B, 1, T, T]:
    each query sees the real keys up to itself), which transformers uses as it is: SDPA's True where a query may
    see a key, eager's 0 there and the dtype's minimum elsewhere. Given the 2-D mask, transformers 5 first asks
    whether every token is real (``padding_mask.all()``, to drop the mask), which makes every forward pass wait
    for the device. Other attention kernels (flash, flex) get the mask unchanged."""
    implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if mask is None or mask.ndim != 2 or implementation not in ("sdpa", "eager"):
        return mask
    keep = mask[:, None, None, :].bool()
    if causal:
        length = mask.shape[1]
        keep = keep & torch.ones(length, length, dtype=torch.bool, device=mask.device).tril()
    if implementation == "sdpa":
        return keep
    dtype = model.dtype
    return torch.zeros(keep.shape, dtype=dtype, device=mask.device).masked_fill(~keep, torch.finfo(dtype).min)


def load_classifier(path, **kwargs):
    """A sequence classifier in float32 (transformers 5 would otherwise keep a half-precision checkpoint's dtype)."""
    return AutoModelForSequenceClassification.from_pretrained(path, dtype=torch.float32, **kwargs)


def from_hub(load, name: str, **kwargs):
    """``load(name, **kwargs)``, a ``from_pretrained``, for a checkpoint named in the config: a hub name or a
    local directory. A name that is neither a directory nor obtainable from the hub (no network on a compute node,
    a typo) gets one message saying what to set, not the hub client's traceback."""
    try:
        return load(name, **kwargs)
    except OSError as error:
        if Path(name).is_dir():
            raise
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise UserError(
            f"{name!r} is not a local directory and could not be had from the Hugging Face hub ({reason}): check the "
            f"name, or on a machine without internet download it first where there is one (`hf download {name}`, "
            "into the cache HF_HOME names) and set HF_HUB_OFFLINE=1, or set the config's `model` to a local copy"
        ) from None


def build_classifier(model: str | None, architecture: dict | None, tokenizer, num_labels: int):
    """A sequence classifier from a checkpoint (``model``: hub name or directory) or, for a random
    initialisation, from ``architecture`` (``model_type`` plus config fields) sized to ``tokenizer``."""
    from transformers import AutoConfig

    if model:
        return from_hub(load_classifier, model, num_labels=num_labels)
    arch = {"pad_token_id": tokenizer.pad_token_id, **architecture}  # RoBERTa derives positions from it
    config = AutoConfig.for_model(arch.pop("model_type"), vocab_size=len(tokenizer), num_labels=num_labels, **arch)
    return AutoModelForSequenceClassification.from_config(config)


def build_tokenizer(spec: dict):
    """The checkpoint's own tokenizer, or a BERT WordPiece tokenizer over a vocabulary file (``tokenizer``)."""
    if spec.get("tokenizer"):
        vocab = Path(spec["tokenizer"])
        if not vocab.is_file():
            raise FileNotFoundError(f"tokenizer vocabulary {vocab} not found")
        return BertTokenizer(vocab=str(vocab), do_lower_case=True)
    return from_hub(AutoTokenizer.from_pretrained, spec["model"])


def save_trained(model, tokenizer, record: dict, model_dir: Path) -> None:
    """A fine-tuned Hugging Face model, its tokenizer and its training record (read by the job that evaluates it,
    :func:`kdflow.core.intermediates.read_training_record`), written into ``model_dir`` all at once."""
    with atomic_output(model_dir) as directory:
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        write_json(Path(directory) / run_files.TRAINING_RECORD, record)
