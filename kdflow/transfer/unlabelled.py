"""The researcher's own unlabelled text as a transfer source (config ``unlabelled``): in-domain sentences (or
sentence pairs) that the teacher labels, beside or instead of GPT-2's (thesis §3.2 and Tang et al. rest on a
large teacher-labelled transfer set being worth more than the gold-labelled one alone).

A source is a UTF-8 text file, or a directory whose files (:func:`kdflow.core.io.input_files`) are read in order: one
example per line, no header, no quoting; a pair task's lines hold its two texts separated by one tab. Blank lines
are counted and dropped by the hygiene (:func:`kdflow.transfer.augmentation.build_transfer_set`); anything else
that does not fit the task's schema is an error naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kdflow.core.errors import UserError, not_utf8


class UnlabelledTextError(UserError, ValueError):
    """An unlabelled-text source that cannot be read as the task's examples."""


def read_unlabelled(paths: list[str | Path], pair: bool) -> pd.DataFrame:
    """Every line of ``paths`` as an example: ``text_a`` and (pair tasks) ``text_b``; blank lines as empty texts."""
    fields = 2 if pair else 1
    rows = []
    for path in map(Path, paths):
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise UnlabelledTextError(not_utf8(path, error)) from None
        lines = text.splitlines()
        if not any(line.strip() for line in lines):
            raise UnlabelledTextError(f"{path}: the unlabelled-text file holds no text")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                rows.append(("", "" if pair else None))
                continue
            parts = line.split("\t")
            if len(parts) != fields:
                expected = "two texts separated by a tab (a pair task)" if pair else "one sentence without tabs"
                raise UnlabelledTextError(f"{path}:{number}: {len(parts)} tab-separated fields; each line holds "
                                          f"{expected}")
            rows.append((parts[0], parts[1] if pair else None))
    return pd.DataFrame(rows, columns=["text_a", "text_b"])
