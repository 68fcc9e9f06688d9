"""The ``ember`` command."""
from __future__ import annotations

import argparse
import sys


def _demo(args: argparse.Namespace) -> int:
    from .demo import main as demo_main

    return demo_main(args.model, args.json)


def _version(args: argparse.Namespace) -> int:
    import ember

    print(f"ember {ember.__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ember", description="ember model compiler and runtime")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="compile a bundled model with every executor, check "
                          "it against the reference interpreter, print latency and memory")
    demo.add_argument("--model", default="mlp", choices=["mlp", "resnet18-64", "mobilenet-64"])
    demo.add_argument("--json", action="store_true", help="print the results as JSON")
    demo.set_defaults(func=_demo)
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
