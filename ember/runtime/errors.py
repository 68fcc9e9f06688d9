"""Exception classes shared by every layer.

Each class subclasses the matching builtin as well, so callers can catch either
(``except NotImplementedError`` catches ``OpNotImplemented``).
"""
from __future__ import annotations

_REPORT = "This is a bug in ember; please report it with the code that triggered it."


class TVMError(RuntimeError):
    """An error raised by the runtime or by compiled code (the C message is kept verbatim)."""


class InternalError(TVMError):
    """An invariant of ember itself broke: '<what>. This is a bug in ember; ...'."""

    def __init__(self, msg: str = "") -> None:
        super().__init__(f"{msg}\n{_REPORT}" if msg else _REPORT)


class OpError(TVMError):
    """An operator was used wrongly: '<op>: <requirement>, got <value>'."""


class OpNotImplemented(OpError, NotImplementedError):
    """An operator (or a lowering of it) is not implemented: '<op>: not implemented for ...'."""


class OpAttributeRequired(OpError, AttributeError):
    """A required attribute of an operator is missing: '<op>: attribute <name> is required'."""


class OpAttributeInvalid(OpError, AttributeError):
    """An attribute value is invalid: '<op>: attribute <name> must be ..., got ...'."""


class OpAttributeUnImplemented(OpError, NotImplementedError):
    """An attribute value is valid but not supported yet."""


class DiagnosticError(TVMError):
    """Errors found while parsing or checking a program, with source locations."""


class TypeInferenceError(DiagnosticError, TypeError):
    """A program is ill-typed: names the op or function, argument, expected and actual type."""


class CompilerNotFoundError(TVMError):
    """No C compiler was found; the message says which were tried and how to install one."""


class CompileError(TVMError):
    """The C compiler failed; the message carries the command line, stderr and the kept source."""


class ArtifactError(TVMError):
    """A file to load is missing, truncated or not an ember artifact: names the file and why."""


class CpuFeatureError(ArtifactError):
    """A library needs CPU features this machine lacks: names them and how to rebuild."""


class TuningRecordError(TVMError, ValueError):
    """A tuning record file cannot be used: '<file>: <what is wrong>' (not JSON, not a record
    file, an entry with missing or invalid fields or tiles the kernel cannot run)."""


class FrontendError(TVMError, ValueError):
    """A model given to a frontend is malformed or contradicts itself (or the caller's
    ``shape=``): '<where>: <what is wrong>', naming the file, node (name and op type),
    input or initializer."""


class TensorTooLargeError(TVMError, ValueError):
    """A model declares a tensor larger than the machine could allocate, found before any code
    is generated: '<where>: input 'x' has shape (...) of float32: 12.0 TiB (...), more than
    ...'."""


class RPCError(TVMError):
    """An error in the RPC layer."""


class ArgumentError(TVMError, ValueError):
    """A bad argument to a runtime call (an executor input, a device, a params dict...):
    'set_input('data'): expected float32[1, 3], got float64[1, 3] (input 0 of 2)'."""


class ArgumentTypeError(TVMError, TypeError):
    """An argument of the wrong Python type: 'set_input('data'): expected an array (NDArray,
    numpy array, number or nested list), got NoneType (input 0 of 2)'."""


class ArgumentIndexError(TVMError, IndexError):
    """An index out of range; the message names the count: 'get_output: index 3 out of range
    (this model has 1 output)'."""


class ConcurrentUseError(TVMError):
    """Two threads used one executor module at once, or one thread's inputs or outputs were
    overwritten by another's: 'graph executor: run() while another thread is in set_input();
    a module serves one thread at a time (one module per thread, or ember.compile's model,
    which any number of threads may share)'."""


class FunctionNotFoundError(TVMError, AttributeError):
    """A module has no function of that name (an AttributeError too, as in the Relay-era API):
    '<module> has no function named 'f''."""


def add_note(err: BaseException, note: str) -> None:
    """Attach context to an exception on its way up (PEP 678 notes). On Python 3.10, which has
    no ``add_note``, the note still lands in ``err.__notes__`` (tracebacks do not print it)."""
    if hasattr(err, "add_note"):
        err.add_note(note)
        return
    try:
        notes = err.__dict__.setdefault("__notes__", [])
        notes.append(note)
    except (AttributeError, TypeError):  # exceptions without a __dict__
        pass


class EnvironmentSettingError(TVMError, ValueError):
    """An ember environment variable (``EMBER_DEBUG``, ...) holds a value it cannot take."""
