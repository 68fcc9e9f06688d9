"""The program as text, both ways: the ``bytecode`` listing, and an assembler that reads it.

The listing (``Executable.bytecode``) prints, per function::

    VM Function[0]: main(x, y)
    # reg file size = 4
    # instruction count = 3
    opcode, fields # inst(text):
     0: 16 2 64 2 32 1 0 3   # alloc_storage $3 $2 64 float32 0
     ...

``parse_functions`` reads that listing back (using the text after ``#``), or a hand-written
program in the same instruction syntax, one instruction per line, with optional labels::

    sum(n):
        load_consti $1 0
        if $0 $1 @base @step     # jump operands: an offset, or @label
    base:
        ret $1
    step:
        ...

The register file size is read from ``# reg file size = N`` or taken as one more than the
highest register used. ``# param types = float32[3], -`` declares parameter types.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .instructions import BY_MNEMONIC, Instruction, InvokePacked, Kind
from .program import ListInfo, TensorInfo, VMFunction
from .serialize import to_fields

# ---- printing -------------------------------------------------------------------------------


def format_function(index: int, func: VMFunction) -> str:
    """The listing of one function (see the module docstring)."""
    lines = [f"VM Function[{index}]: {func.name}({', '.join(func.params)})",
             f"# reg file size = {func.register_file_size}",
             f"# instruction count = {len(func.instructions)}"]
    if func.param_types:
        lines.append("# param types = " + ", ".join("-" if t is None else str(t)
                                                    for t in func.param_types))
    lines.append("opcode, fields # inst(text):")
    width = len(str(max(len(func.instructions) - 1, 0)))
    for pc, ins in enumerate(func.instructions):
        numbers = " ".join(str(v) for v in [int(ins.opcode), *to_fields(ins)])
        lines.append(f" {pc:>{width}}: {numbers}   # {ins}")
    return "\n".join(lines) + "\n"


def format_functions(funcs: Iterable[VMFunction]) -> str:
    return "\n".join(format_function(i, f) for i, f in enumerate(funcs))


# ---- parsing --------------------------------------------------------------------------------
class AssemblyError(ValueError):
    """Text that is not a valid instruction or function: names the line."""


_OPERAND = {
    Kind.REG: r"\$\d+", Kind.DST: r"\$\d+", Kind.REGS: r"(?:\$\d+(?:\s*,\s*\$\d+)*)?",
    Kind.INT: r"-?\d+", Kind.SHAPE: r"\[[\d,\s]*\]", Kind.DTYPE: r"\w+",
    Kind.FUNC: r"VMFunc\[\d+\]", Kind.CONST: r"Const\[\d+\]", Kind.PACKED: r"PackedFunc\[\d+\]",
    Kind.JUMP: r"(?:-?\d+|@[\w.]+)", Kind.DEVICE: r"\d+",
}
# Counts that the text leaves out: field -> the list field whose length it is.
_DERIVED = {"num_fields": "fields", "num_free_vars": "free_vars", "arity": "args"}
_HEADER = re.compile(r"^(?:VM Function\[\d+\]:\s*)?([A-Za-z_][\w.]*)\s*\(([^)]*)\)\s*:?\s*$")
_LISTED = re.compile(r"^\s*\d+:\s*[-\d\s]*#\s*(.*)$")
_LABEL = re.compile(r"^([A-Za-z_][\w.]*):$")
_TYPE = re.compile(r"^(\w+)\[([^\]]*)\]$")


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _pattern(cls: type[Instruction]) -> re.Pattern[str]:
    """The regex of ``cls.TEXT``, one named group per operand (compiled on first use)."""
    if cls.mnemonic in _PATTERNS:
        return _PATTERNS[cls.mnemonic]
    kinds = dict(zip(cls.FIELDS, cls.KINDS))
    kinds.update(inputs=Kind.REGS, outputs=Kind.REGS)  # InvokePacked's text
    parts = re.split(r"\{(\w+)\}", cls.TEXT)
    regex = "".join(r"\s*".join(re.escape(w) for w in p.split(" ")) if i % 2 == 0
                    else f"(?P<{p}>{_OPERAND[kinds[p]]})" for i, p in enumerate(parts))
    pattern = _PATTERNS[cls.mnemonic] = re.compile("^" + regex + "$")
    return pattern


def _value(kind: Kind, text: str) -> Any:
    if kind in (Kind.REGS, Kind.SHAPE):
        return tuple(int(t.strip().lstrip("$")) for t in text.strip("[]").split(",") if t.strip())
    if kind is Kind.DTYPE or (kind is Kind.JUMP and text.startswith("@")):
        return text
    return int(re.sub(r"[^\d-]", "", text))


def parse_instruction(text: str) -> Instruction:
    """One instruction from its text form (jump labels left as ``"@name"`` strings)."""
    text = text.strip()
    cls = BY_MNEMONIC.get(text.split(" ", 1)[0])
    match = _pattern(cls).match(text) if cls else None
    if cls is None or match is None:
        raise AssemblyError(f"not an instruction: {text!r}"
                            + (f" (expected {cls.TEXT})" if cls else ""))
    groups = match.groupdict()
    if cls is InvokePacked:
        inputs, outputs = (_value(Kind.REGS, groups[k]) for k in ("inputs", "outputs"))
        return InvokePacked(_value(Kind.PACKED, groups["packed_index"]),
                            len(inputs) + len(outputs), len(outputs), inputs + outputs)
    values = {name: _value(kind, groups[name])
              for name, kind in zip(cls.FIELDS, cls.KINDS) if name in groups}
    for name, source in _DERIVED.items():
        if name in cls.FIELDS and name not in values:
            values[name] = len(values[source])
    return cls(**values)


def _param_types(text: str, where: str) -> tuple[TensorInfo | ListInfo | None, ...]:
    out: list[TensorInfo | ListInfo | None] = []
    for item in re.split(r",\s*(?![^\[]*\])", text.strip()):
        m = _TYPE.match(item.strip())
        lm = re.fullmatch(r"List\[cons=(\d+), nil=(\d+)\]", item.strip())
        if item.strip() == "-":
            out.append(None)
        elif lm:
            out.append(ListInfo(int(lm.group(1)), int(lm.group(2))))
        elif m:
            dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
            out.append(TensorInfo(m.group(1), tuple(-1 if d in ("?", "-1") else int(d)
                                                    for d in dims)))
        else:
            raise AssemblyError(f"{where}: bad parameter type {item!r}")
    return tuple(out)


def parse_functions(text: str) -> list[VMFunction]:
    """Functions from a listing or hand-written assembly (see the module docstring)."""
    funcs: list[VMFunction] = []
    current: dict[str, Any] | None = None

    def finish() -> None:
        if current is not None:
            funcs.append(_build(current))

    for lineno, raw in enumerate(text.splitlines(), 1):
        where = f"line {lineno}"
        listed = _LISTED.match(raw)
        line = listed.group(1).strip() if listed else raw.split("#", 1)[0].strip()
        comment = raw.split("#", 1)[1].strip() if "#" in raw and not listed else ""
        if current is not None and comment.startswith("reg file size ="):
            current["size"] = int(comment.split("=")[1])
        elif current is not None and comment.startswith("param types ="):
            current["types"] = _param_types(comment.split("=", 1)[1], where)
        if not line or line.startswith("opcode, fields"):
            continue
        header, label = _HEADER.match(line), _LABEL.match(line)
        if header:
            finish()
            params = tuple(p.strip() for p in header.group(2).split(",") if p.strip())
            current = {"name": header.group(1), "params": params, "code": [], "labels": {},
                       "size": None, "types": ()}
        elif current is None:
            raise AssemblyError(f"{where}: expected a function header such as 'main(x, y):', "
                                f"got {line!r}")
        elif label:
            current["labels"][label.group(1)] = len(current["code"])
        else:
            try:
                current["code"].append((parse_instruction(line), where))
            except AssemblyError as err:
                raise AssemblyError(f"{where}: {err}") from None
    finish()
    return funcs


def _build(state: dict[str, Any]) -> VMFunction:
    code: list[Instruction] = []
    for pc, (ins, where) in enumerate(state["code"]):
        changes = {}
        for name, kind, value in ins.operands():
            if kind is Kind.JUMP and isinstance(value, str):
                if value[1:] not in state["labels"]:
                    raise AssemblyError(f"{where}: unknown label {value}")
                changes[name] = state["labels"][value[1:]] - pc
        code.append(ins.replace(**changes) if changes else ins)
    used = [r for ins in code for r in (*ins.reads(), *ins.writes())]
    size = state["size"] if state["size"] is not None else max([len(state["params"]) - 1, *used],
                                                                default=-1) + 1
    return VMFunction(state["name"], state["params"], tuple(code), size,
                      param_types=state["types"])
