"""Exception hierarchy of streamridge.

Every error a user can cause derives from :class:`StreamRidgeError`; the command
line prints its message as one line and exits with code 2.  Errors that are also
``ValueError`` (bad data or parameters) subclass it so that scikit-learn's
conventions hold.
"""

from __future__ import annotations


class StreamRidgeError(Exception):
    """Base class of every error raised on purpose by streamridge."""


class InputError(StreamRidgeError, ValueError):
    """The data (shape, dtype, values) cannot be used as given."""


class NonFiniteError(InputError):
    """NaN or infinite values were found in X, y or the sample weights."""


class ParameterError(StreamRidgeError, ValueError, TypeError):
    """An estimator or command-line parameter is out of range or of the wrong type.

    Also a ``TypeError``, as scikit-learn's ``InvalidParameterError``: callers that
    catch either (scikit-learn raises TypeError for a grid of strings) catch it.
    """


class ScaleError(InputError):
    """The data's magnitude overflows or underflows float64 statistics; the fix is to rescale it."""


class FoldError(InputError):
    """The fold scheme cannot be applied (too few rows or groups, empty fold)."""


class SourceError(StreamRidgeError, OSError):
    """A data source (file, store, array name, URL) cannot be opened or read."""


class ModelFileError(StreamRidgeError, OSError):
    """A model or statistics file is missing, corrupted or of another version."""


class IncompatibleStatsError(StreamRidgeError, ValueError):
    """Two statistics objects (or a checkpoint) describe different problems."""


class SchedulerError(StreamRidgeError, OSError):
    """A dask scheduler (cluster address) cannot be reached or failed."""


class CheckpointError(IncompatibleStatsError):
    """A checkpoint belongs to other data or options and cannot be resumed."""


class OutputError(StreamRidgeError, OSError):
    """An output path cannot or must not be written (it exists, is an input, is not ours)."""
