"""The ``ember`` command: ``demo``, ``compile``, ``tune``, ``run``, ``inspect``, ``rpc-server``,
``rpc-tracker``, ``version``.

``main(argv)`` runs one command and returns its exit status (0 ok, 1 failure, 2 usage error,
130 interrupted). A failure prints one line, ``ember <command>: error: <what>``, and a hint;
``--verbose`` adds the traceback. Each command lives in its own module with an
``add_parser(subparsers, parents)`` and a ``main(args)``; heavy imports happen inside them, so
``ember --help`` and ``ember run`` on a library never load the compiler.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any, NoReturn

from ._console import CLIError

RPC_FRONT_ENDS = {"rpc-server": "ember.runtime.rpc.server",
                  "rpc-tracker": "ember.runtime.rpc.tracker"}
RPC_EXAMPLES = {
    "rpc-server": """examples:
  ember rpc-server                                  # 127.0.0.1:9091, this machine only
  ember rpc-server --host 0.0.0.0 --secret-file ~/.ember-secret   # reachable: require a secret
  ember rpc-server --tracker 10.0.0.2:9190 --key rpi4              # join a tracker's pool
  then, on the client: ember run model.so --rpc HOST:9091""",
    "rpc-tracker": """examples:
  ember rpc-tracker                                 # 127.0.0.1:9190
  ember rpc-tracker --host 0.0.0.0 --port 9190      # for servers on other machines""",
}
MAIN_EXAMPLES = """\
examples:
  ember demo                                   # compile and check a bundled model, 3 executors
  ember compile model.onnx -o model.so         # a model in, one library out
  ember tune model.onnx                        # measure kernel tiles; later builds use them
  ember run model.so --print-top 5             # run it (random inputs unless --inputs)
  ember inspect model.so --plot memory.png     # what was built, the memory plan as a picture
  ember rpc-server                             # serve remote runs (ember run --rpc HOST:PORT)
`ember COMMAND --help` shows each command's options and examples.
"""


class _Parser(argparse.ArgumentParser):
    """argparse with ember's error format: one line, a hint, exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\nhint: {self.prog} --help\n")
        sys.exit(2)


def _demo(args: argparse.Namespace) -> int:
    from .demo import main as demo_main

    return demo_main(args.model, args.json)


def _version(args: argparse.Namespace) -> int:
    import ember

    print(f"ember {ember.__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command (the RPC front ends are listed; their own parsers run)."""
    from . import compile as compile_cmd
    from . import inspect as inspect_cmd
    from . import run as run_cmd
    from . import tune as tune_cmd

    parser = _Parser(prog="ember", description="ember: compile deep-learning models to C and "
                     "run them.", epilog=MAIN_EXAMPLES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true",
                        help="print the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    demo = sub.add_parser("demo", parents=[common], help="compile a bundled model with every "
                          "executor, check it against the reference interpreter, print latency "
                          "and memory", epilog="examples:\n  ember demo\n  ember demo --model "
                          "resnet18-64 --json",
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--model", default="mlp", choices=["mlp", "resnet18-64", "mobilenet-64"])
    demo.add_argument("--json", action="store_true", help="print the results as JSON")
    demo.set_defaults(func=_demo)
    compile_cmd.add_parser(sub, [common])
    tune_cmd.add_parser(sub, [common])
    run_cmd.add_parser(sub, [common])
    inspect_cmd.add_parser(sub, [common])
    for name in RPC_FRONT_ENDS:
        sub.add_parser(name, help=f"start an RPC {name[4:]} (the options of python -m "
                       f"ember.exec.{name.replace('-', '_')})", add_help=False)
    sub.add_parser("version", parents=[common], help="print the version",
                   epilog="example:\n  ember version        # ember 0.1.0",
                   formatter_class=argparse.RawDescriptionHelpFormatter).set_defaults(
                       func=_version)
    return parser


def _run_rpc(name: str, argv: list[str]) -> int:
    import importlib

    module = importlib.import_module(RPC_FRONT_ENDS[name])
    status: int = module.main(argv, prog=f"ember {name}", epilog=RPC_EXAMPLES[name])
    return status


# exception class name -> hint, for errors that come from below the CLI
_HINTS = {
    "FileNotFoundError": "check the path",
    "ModelInputError": "`ember inspect ARTIFACT` lists the inputs with their shapes and dtypes",
    "CompileError": "the C compiler failed; EMBER_KEEP_TEMPS=1 keeps the sources it was given",
    "OpNotImplemented": "the ONNX operators ember imports are listed in docs/onnx_support.md",
    "FrontendError": "docs/onnx.md describes the importer; --input-shapes names model inputs",
    "TensorTooLargeError": ("--input-shapes binds an input's sizes; --pass-config "
                            "relay.build.max_tensor_bytes=N builds for a larger machine"),
    "ArtifactError": "the file is damaged, or was not written by this ember; compile it again",
    "DiagnosticError": "the Relay text format is described in docs/text_format.md",
    "ImportError": "install what the message names",
    "RPCConnectionError": "is a server running there? start one with `ember rpc-server`",
    "TuningRecordError": "`ember tune --help` says where the record files are",
    "AotOptionError": "see `ember compile --help` for the valid executor/runtime combinations",
}


def _hint_for(err: BaseException) -> str:
    for cls in type(err).__mro__:
        if cls.__name__ in _HINTS:
            return _HINTS[cls.__name__]
    return "run with --verbose for the traceback"


def _report(command: str, err: BaseException, hint: str | None, as_json: bool) -> None:
    text = str(err).strip() or type(err).__name__
    first, *rest = text.splitlines()
    if not isinstance(err, CLIError):
        first = f"{type(err).__name__}: {first}"
    sys.stderr.write(f"ember {command}: error: {first}\n")
    for line in rest[:8]:  # a parse error's source line and caret
        sys.stderr.write(f"    {line}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
    if as_json:
        print(json.dumps({"error": text, "hint": hint}))


def main(argv: list[str] | None = None) -> int:
    """Run the ``ember`` command with ``argv`` (default ``sys.argv[1:]``); the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in RPC_FRONT_ENDS:
        return _run_rpc(argv[0], argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    verbose, as_json = getattr(args, "verbose", False), getattr(args, "json", False)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        sys.stderr.write(f"ember {args.command}: interrupted\n")
        return 130
    except BrokenPipeError:  # the reader stopped early (`ember inspect m.so --ir | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CLIError as err:
        if verbose:
            traceback.print_exc()
        hint = err.hint or f"`ember {args.command} --help` shows the options and examples"
        _report(args.command, err, hint, as_json)
        return err.code
    except Exception as err:  # noqa: BLE001  every failure becomes one line (+ traceback)
        if verbose:
            traceback.print_exc()
        hint: Any = _hint_for(err)
        if verbose and hint == "run with --verbose for the traceback":
            hint = None
        _report(args.command, err, hint, as_json)
        return 1


if __name__ == "__main__":
    sys.exit(main())
