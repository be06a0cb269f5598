"""The error types kdflow reports to the user as one line (no traceback); torch-free, so the workflow
process can raise them while loading the config."""

from pathlib import Path


class UserError(Exception):
    """A problem the user can fix (bad input data, a missing file): reported as one line, not a traceback."""


class Terminated(UserError):
    """A job stopped by SIGTERM after saving its checkpoint: a rerun resumes from it."""


def not_utf8(path: str | Path, error: UnicodeDecodeError) -> str:
    """Where in the text file ``path`` a decoding ``error`` happened, by line and column: a reader that decodes
    in blocks knows neither."""
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as found:
                byte = line[found.start:found.start + 1].hex()
                return (f"{path}:{number}: byte 0x{byte} at column {found.start + 1} is not UTF-8 ({found.reason}); "
                        "save the file as UTF-8")
    return f"{path}: not UTF-8 ({error.reason}); save the file as UTF-8"
