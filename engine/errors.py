"""User-facing engine errors: the CLI prints their message on one line, no traceback."""


class TbuildError(Exception):
    """A problem the user can fix (bad data, a missing file, a corrupt checkpoint)."""


class DataError(TbuildError):
    """Bad or missing data; ``str()`` is one line naming the spec field or file at fault."""


class CheckpointError(TbuildError):
    """A checkpoint that cannot be read (missing, truncated, corrupt or of another model)."""
