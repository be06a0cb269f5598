"""kdflow's own intermediate files (everything under ``results/``): checked before a job uses them, read with one
clear message when damaged.

A file written by one job and read by another can be damaged in between: a node that crashed before the file
reached its disk, a full disk, a copy cut short. Before a rule job runs (:func:`kdflow.core.job_setup.rule_job`),
its inputs under ``results/`` are checked by structure, reading a few bytes of the large ones: a JSON file must
parse, a Parquet file must end in its footer, a safetensors file must be as long as its header says. Deeper
damage (a run of zeros inside a file of the right length) is caught where a checksum is cheap: kdflow's safetensors
files carry a CRC-32 of each tensor, checked as the tensor is read, and its Parquet files carry page checksums,
checked as they are read (:mod:`kdflow.core.tensor_files`). Either way a :class:`DamagedFile` names the file and
what is wrong with it. This module imports no torch: the reporting jobs that only check and read tables start
without it (importing torch costs a job 2-3 s).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from kdflow.core import run_files
from kdflow.core.errors import UserError

RESULTS = "results"  # where the workflow's rules write (every path in rules/*.smk starts with it)


class DamagedFile(UserError):
    """An intermediate file that cannot be what its writer wrote: truncated, unparsable or failing its checksum."""

    def __init__(self, path: str | Path, problem: str):
        self.path, self.problem = Path(path), problem
        super().__init__(f"{path} is damaged or incomplete ({problem})")


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


# Structural checks, before a job uses its inputs.


def check_inputs(paths: Iterable[str | Path]) -> None:
    """Check every kdflow file among a job's inputs (files, and the files inside directories, under ``results/``)."""
    for path in map(Path, paths):
        if path.parts[:1] != (RESULTS,) or not path.exists():
            continue  # the user's own files (raw data, word vectors) are checked by their readers
        for file in sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
            check_file(file)


def check_file(path: Path) -> None:
    checks = {".json": _check_json, ".parquet": _check_parquet, ".safetensors": _check_safetensors}
    check = checks.get(Path(path).suffix)
    if check is not None:
        check(Path(path))


def _check_json(path: Path) -> None:
    read_json(path)


def _check_parquet(path: Path) -> None:
    try:
        pq.read_metadata(path)
    except (OSError, pa.ArrowException) as error:
        raise DamagedFile(path, f"not a complete Parquet file: {first_line(error)}") from None


def _check_safetensors(path: Path) -> None:
    """The 8-byte header length, the JSON header, and a file exactly as long as the tensors the header lists."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        prefix = f.read(8)
        header_size = int.from_bytes(prefix, "little") if len(prefix) == 8 else None
        if header_size is None or header_size > size - 8:
            raise DamagedFile(path, f"{size:,} bytes, cut off inside its safetensors header")
        try:
            header = json.loads(f.read(header_size))
            end = max((entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"), default=0)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as error:
            raise DamagedFile(path, f"unreadable safetensors header: {first_line(error)}") from None
    if 8 + header_size + end != size:
        raise DamagedFile(path, f"{size:,} bytes where its header describes {8 + header_size + end:,}")


# Readers and writers.


def read_json(path: str | Path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise DamagedFile(path, f"not UTF-8 text: {error.reason} at byte {error.start}") from None
    except json.JSONDecodeError as error:
        raise DamagedFile(path, f"not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}") from None




def read_training_record(model_dir: str | Path, what: str) -> dict:
    """The training record a fine-tuning job wrote into ``model_dir``, which holds ``what`` (e.g. "teacher")."""
    path = Path(model_dir) / run_files.TRAINING_RECORD
    if not path.exists():
        raise DamagedFile(path, f"missing: the {what} beside it has no training record (written by an older "
                                f"kdflow: fine-tune it again)")
    return read_json(path)


def write_parquet(frame: pd.DataFrame | pa.Table, path: str | Path) -> None:
    """A frame (without its index) or a table as Parquet, with a checksum of every page."""
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, path, write_page_checksum=True)


def read_parquet(path: str | Path, **options) -> pd.DataFrame:
    """A Parquet file as a frame, its page checksums verified (where its writer wrote them)."""
    try:
        return pd.read_parquet(path, page_checksum_verification=True, **options)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as error:
        raise DamagedFile(path, f"unreadable Parquet: {first_line(error)}") from None
