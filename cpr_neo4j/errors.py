"""User-facing errors: the CLI prints them as one line and exits non-zero."""


class CprError(Exception):
    """An expected failure with a message that says what happened and what to do."""

    exit_code = 1


class ConnectionFailed(CprError):
    exit_code = 2


class BadInput(CprError):
    exit_code = 3
