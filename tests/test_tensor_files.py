"""kdflow's safetensors files: the same tensors and metadata are the same bytes whichever process writes them."""

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from kdflow.core.intermediates import DamagedFile
from kdflow.core.tensor_files import TensorFile, save_tensors

METADATA = {"transfer": "train", "teacher": "tiny_bert", "pooling": "cls", "layers": "4", "note": 'é "quoted" \\ \n ✓'}
WRITE = """
import sys, torch
from kdflow.core.tensor_files import save_tensors
tensors = {"logits": torch.arange(12.0).reshape(6, 2), "idx": torch.arange(6)}
save_tensors(tensors, sys.argv[1], {"transfer": "train", "teacher": "tiny_bert", "pooling": "cls", "layers": "4",
                                    "b": "1", "a": "2", "z": "3"})
"""


@pytest.mark.slow
def test_four_processes_write_the_same_file_byte_for_byte(tmp_path):
    """safetensors 0.8 draws its metadata's key order anew in each process: without sorting, these differ."""
    paths = [tmp_path / f"{i}.safetensors" for i in range(4)]
    for path in paths:
        subprocess.run([sys.executable, "-c", WRITE, str(path)], check=True)
    assert len({path.read_bytes() for path in paths}) == 1


def test_sorted_metadata_keeps_every_value_escaped_or_not_and_the_tensors(tmp_path):
    tensors = {"logits": torch.randn(5, 3), "idx": torch.arange(5)}
    path = tmp_path / "signals.safetensors"
    save_tensors(tensors, path, METADATA)
    with TensorFile(path) as opened:
        assert {key: opened.metadata[key] for key in METADATA} == METADATA
        torch.testing.assert_close(opened.get("logits"), tensors["logits"])
    header = json.loads(path.read_bytes()[8:8 + int.from_bytes(path.read_bytes()[:8], "little")])
    assert list(header["__metadata__"]) == sorted(header["__metadata__"])  # as written, not as read back
    loaded = load_file(str(path))
    assert torch.equal(loaded["idx"], tensors["idx"])


def test_a_damaged_tensor_is_still_named_after_the_header_is_rewritten(tmp_path):
    path = tmp_path / "signals.safetensors"
    save_tensors({"logits": torch.zeros(64, 4)}, path, METADATA)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with TensorFile(path) as opened, pytest.raises(DamagedFile, match="logits"):
        opened.get("logits")
