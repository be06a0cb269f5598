"""The one error type kdflow reports to the user as one line (no traceback); torch-free, so the workflow
process can raise it while loading the config."""


class UserError(Exception):
    """A problem the user can fix (bad input data, a missing file): reported as one line, not a traceback."""
