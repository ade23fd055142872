"""User-facing errors: the CLI prints them as one line and exits non-zero."""

EMPTY_QUESTION = 'empty question: cpr ask "which movies did [Ridley Scott] direct"'


class CprError(Exception):
    """An expected failure with a message that says what happened and what to do."""

    exit_code = 1


class ConnectionFailed(CprError):
    exit_code = 2


class BadInput(CprError):
    exit_code = 3


class Unattainable(BadInput):
    """An alpha the calibration cannot honour (too few questions, or retrieval recall)."""


class UnknownDataset(CprError):
    """A dataset name Neo4j does not hold (`cpr serve` answers 404); the message lists the
    known ones."""


class Conflict(CprError):
    """The request and the stored state disagree, e.g. no calibration matches the model or
    settings asked for (`cpr serve` answers 409)."""


class StaleCalibration(Conflict):
    """The graph changed since the calibration was made: its guarantee no longer holds."""


class HintFailed(CprError):
    """The hint LLM failed or replied with no usable JSON: never a silent switch to no hints."""
