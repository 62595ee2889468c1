"""Exceptions raised by quantkit.

Every failure of the C++ library arrives as one of these, carrying the same one-line message the
CLI prints (naming the file, node, tensor or input at fault), the error category (``code``) and
the CLI's exit code for it (``exit_code``, README "Exit codes"). Each class also derives from the
closest built-in exception, so ``except ValueError`` keeps working around bad input.
"""

from __future__ import annotations


class QuantkitError(Exception):
    """Base class. ``code`` is the category name, ``exit_code`` the CLI's exit code; each subclass
    carries its category's, so one raised from Python code (a batch of ``None``) has the right
    exit code too, not the base's 70."""

    code: str = "internal error"
    exit_code: int = 70

    def __init__(self, message: str, code: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(QuantkitError, ValueError):
    """Something impossible was asked: a bad option, a batch that does not fit the model."""

    code = "invalid argument"
    exit_code = 2


class InvalidModelError(QuantkitError, ValueError):
    """A model or data file is corrupt or breaks the ONNX rules."""

    code = "invalid model"
    exit_code = 2


class UnsupportedError(QuantkitError, NotImplementedError):
    """Valid input quantkit does not handle (an op, a dtype)."""

    code = "unsupported"
    exit_code = 3


class NotFoundError(QuantkitError, LookupError):
    """A file, tensor, node or input that was named does not exist."""

    code = "not found"
    exit_code = 2


class QuantkitIOError(QuantkitError, OSError):
    """Reading or writing failed."""

    code = "I/O error"
    exit_code = 4


class ResourceExhaustedError(QuantkitError, MemoryError):
    """Out of memory, or a request too large to honour."""

    code = "resource exhausted"
    exit_code = 5


class InternalError(QuantkitError, RuntimeError):
    """A quantkit bug: please report it with the message."""


_BY_CODE = {
    "invalid argument": InvalidArgumentError,
    "invalid model": InvalidModelError,
    "unsupported": UnsupportedError,
    "not found": NotFoundError,
    "I/O error": QuantkitIOError,
    "resource exhausted": ResourceExhaustedError,
    "internal error": InternalError,
}


def from_status(code: str, exit_code: int, message: str) -> QuantkitError:
    """The exception for a failed C++ Status (called by quantkit._core)."""
    return _BY_CODE.get(code, InternalError)(message, code, exit_code)
