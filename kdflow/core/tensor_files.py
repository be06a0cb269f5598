"""kdflow's safetensors files: every tensor written with its CRC-32 in the file's metadata and checked against it
as it is read, so that damage inside a file of the right length (:mod:`kdflow.core.intermediates` checks the
length) is named rather than computed with."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from kdflow.core.intermediates import DamagedFile, first_line

CHECKSUMS = "crc32"  # safetensors metadata: {tensor name: CRC-32 of its bytes}


def tensor_checksum(tensor: torch.Tensor) -> int:
    return zlib.crc32(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())


def save_tensors(tensors: dict[str, torch.Tensor], path: str | Path, metadata: dict[str, str] | None = None) -> None:
    """Tensors as safetensors, with each one's CRC-32 in the metadata (checked by :class:`TensorFile`); the same
    tensors and metadata are the same bytes in every process (:func:`sort_metadata`)."""
    tensors = {name: tensor.detach().cpu().contiguous() for name, tensor in tensors.items()}
    checksums = json.dumps({name: tensor_checksum(tensor) for name, tensor in tensors.items()})
    save_file(tensors, str(path), metadata={**(metadata or {}), CHECKSUMS: checksums})
    sort_metadata(path)


def sort_metadata(path: str | Path) -> None:
    """Rewrite a safetensors file's metadata in key order, in place. safetensors (0.8) writes it from a Rust
    HashMap, whose order is drawn anew in each process, so two runs wrote equal tensors as different bytes. The
    header keeps its length (the same pairs in another order, in serde_json's compact form, padded with the
    spaces safetensors pads with), so the tensors' offsets stay valid."""
    with open(path, "r+b") as handle:
        length = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(length))
        metadata = header.get("__metadata__") or {}
        if len(metadata) < 2:
            return
        header["__metadata__"] = dict(sorted(metadata.items()))
        text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
        if len(text) > length:  # cannot happen for the same pairs; refuse rather than move the tensors
            raise ValueError(f"{path}: the sorted header ({len(text)} bytes) outgrows the written one ({length})")
        handle.seek(8)
        handle.write(text.ljust(length, b" "))


class TensorFile:
    """A safetensors file opened for reading: its metadata, tensor names and shapes, and tensors checked against
    their CRC-32 as they are read (files written without checksums are read unchecked)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._file = safe_open(str(self.path), framework="pt")
        except SafetensorError as error:
            raise DamagedFile(self.path, f"unreadable safetensors: {first_line(error)}") from None
        self.metadata = self._file.metadata() or {}
        self._checksums = json.loads(self.metadata.get(CHECKSUMS, "{}"))

    def __enter__(self) -> "TensorFile":
        return self

    def __exit__(self, *exc) -> None:
        self._file.__exit__(*exc)

    def keys(self) -> list[str]:
        return list(self._file.keys())

    def shape(self, name: str) -> list[int]:
        return self._file.get_slice(name).get_shape()

    def get(self, name: str) -> torch.Tensor:
        try:
            tensor = self._file.get_tensor(name)
        except SafetensorError as error:
            raise DamagedFile(self.path, f"tensor {name!r} unreadable: {first_line(error)}") from None
        if name in self._checksums and tensor_checksum(tensor) != self._checksums[name]:
            raise DamagedFile(self.path, f"tensor {name!r} does not match the checksum written with it")
        return tensor


def load_tensors(path: str | Path, names: Iterable[str] | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file (or those in ``names``), each checked against its checksum."""
    with TensorFile(path) as file:
        return {name: file.get(name) for name in (file.keys() if names is None else names)}
