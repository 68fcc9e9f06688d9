"""The ``ember`` command."""
from __future__ import annotations

import argparse
import sys


def _demo(args: argparse.Namespace) -> int:
    print("ember demo: not available yet. It will compile a bundled model with every executor "
          "(graph, AOT, VM), check the results against the reference interpreter and print "
          "latency and memory; it arrives with the executors.", file=sys.stderr)
    return 2


def _version(args: argparse.Namespace) -> int:
    import ember

    print(f"ember {ember.__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ember", description="ember model compiler and runtime")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("demo", help="compile a bundled model with every executor and report").set_defaults(func=_demo)
    sub.add_parser("version", help="print the version").set_defaults(func=_version)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
