"""The base of user-facing engine errors: the CLI prints their message on one line, no traceback."""


class TbuildError(Exception):
    """A problem the user can fix (bad data, a missing file, a corrupt checkpoint)."""
