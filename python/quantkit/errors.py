"""Exceptions raised by quantkit.

Every failure of the C++ library arrives as one of these, carrying the same one-line message the
CLI prints (naming the file, node, tensor or input at fault), the error category (``code``) and
the CLI's exit code for it (``exit_code``, docs/cli.md "Exit codes"). Each class also derives from the
closest built-in exception, so ``except ValueError`` keeps working around bad input.
"""

from __future__ import annotations


class QuantkitError(Exception):
    """Base class. ``code`` is the category name, ``exit_code`` the CLI's exit code; each
    subclass carries its own, so an error raised from Python code has the right ones too."""

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

    code, exit_code = "invalid argument", 2


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type (``samples="abc"``): a quantkit error with the CLI's exit code
    2, and still a ``TypeError`` for code that catches that."""


class InvalidModelError(QuantkitError, ValueError):
    """A model or data file is corrupt or breaks the ONNX rules."""

    code, exit_code = "invalid model", 2


class UnsupportedError(QuantkitError, NotImplementedError):
    """Valid input quantkit does not handle (an op, a dtype)."""

    code, exit_code = "unsupported", 3


class NotFoundError(QuantkitError, LookupError):
    """A file, tensor, node or input that was named does not exist."""

    code, exit_code = "not found", 2


class QuantkitIOError(QuantkitError, OSError):
    """Reading or writing failed."""

    code, exit_code = "I/O error", 4


class ResourceExhaustedError(QuantkitError, MemoryError):
    """Out of memory, or a request too large to honour."""

    code, exit_code = "resource exhausted", 5


class InternalError(QuantkitError, RuntimeError):
    """A quantkit bug: please report it with the message."""


class CancelledError(QuantkitError):
    """The call was stopped on request before it wrote anything. Ctrl-C raises KeyboardInterrupt
    (Python's own handler); this class is for a cancellation that came without one."""

    code, exit_code = "cancelled", 130


_BY_CODE = {
    "invalid argument": InvalidArgumentError,
    "invalid model": InvalidModelError,
    "unsupported": UnsupportedError,
    "not found": NotFoundError,
    "I/O error": QuantkitIOError,
    "resource exhausted": ResourceExhaustedError,
    "internal error": InternalError,
    "cancelled": CancelledError,
}
CANCELLED_MESSAGE = "cancelled (interrupted)"  # quantkit/cancel.h kCancelledMessage


def from_status(code: str, exit_code: int, message: str) -> QuantkitError:
    """The exception for a failed C++ Status (called by quantkit._core)."""
    if message == CANCELLED_MESSAGE:
        return CancelledError(message)
    return _BY_CODE.get(code, InternalError)(message, code, exit_code)


def argument_types_checked(func):
    """Wraps a public function so that a TypeError raised while its arguments are converted (a
    pybind11 "incompatible function arguments" from an option setter, ``os.fspath(3)``) arrives as
    InvalidArgumentTypeError naming the function, not as a bare TypeError."""
    import functools
    import re

    @functools.wraps(func)
    def checked(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except QuantkitError:
            raise
        except TypeError as e:
            text = str(e)
            # pybind11's message: "(): incompatible function arguments. The following argument types are
            # supported:\n    1. (self: quantkit._core.X, arg0: int) -> None\n\nInvoked with: <...>, 'abc'"
            wanted = re.search(r"arg0: ([\w.:\[\], ]+)\)", text)
            given = re.search(r"Invoked with: .*?, (.*)$", text, re.S)
            if wanted and given:
                text = f"an argument takes {wanted.group(1)}, got {given.group(1).strip()}"
            raise InvalidArgumentTypeError(f"{func.__name__}: {text.splitlines()[0] if text else 'wrong type'}") \
                from None
    return checked
