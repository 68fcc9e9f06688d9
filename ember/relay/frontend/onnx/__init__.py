"""The ONNX importer: ``from_onnx(model) -> (IRModule, params)``.

    mod, params = relay.frontend.from_onnx("model.onnx", shape={"input": (1, 3, 224, 224)})
    factory = relay.build(mod, "llvm", params=params)

How it works: ``_load`` reads the model (a ModelProto or a file, external data included) and
its opset; ``_graph`` walks the graph in dependency order and converts each node with its
entry in the support table (``_table.SUPPORT``, one converter module per operator family:
``ops_math``, ``ops_conv``, ``ops_nn``, ``ops_shape``, ``ops_tensor``, ``ops_reduce``,
``ops_index``, ``ops_einsum``, ``ops_resize``, ``ops_control``, ``ops_sequence``, ``ops_rnn``,
``ops_scan``, the last two running their time steps through ``_recurrence``); ``_typer`` types
and folds what the converters build, ``_symbolic`` follows shapes through dynamic axes,
``_sequences`` holds ONNX sequences (a tuple, or a Prelude List on the VM), ``_options``
optionals known only at run time (Prelude Options), ``_boundary`` sequence and optional graph
inputs and outputs, and ``_narrow`` computes float16/bfloat16 models in float32 behind their
declared interface.
``docs/onnx.md`` is the user guide; ``docs/onnx_support.md`` lists the operators.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ....ir.expr import Function, Tuple, Var
from ....ir.module import IRModule
from ....runtime.errors import FrontendError, InternalError, OpNotImplemented, TVMError
from ....runtime.ndarray import array as _nd_array
from ._graph import Importer, Scope, _graphs_of, with_context
from ._load import DEFAULT_DOMAINS, load_model, model_opset
from ._proto import DTYPES, require_onnx
from ._narrow import entering, leaving, output_elem_types
from ._boundary import (
    STRUCTURED,
    declared_dims,
    element_ranks,
    graph_output,
    structured_input,
)
from ._sequences import import_module
from ._domains import describe, lookup, support_markdown
from ._table import SUPPORT, OpSupport
from ._versions import REVIEWED_OPSET, newest_opset

__all__ = ["REVIEWED_OPSET", "SUPPORT", "OpSupport", "from_onnx", "newest_opset",
           "support_markdown"]

MAX_LISTED_NODES = 5


def from_onnx(model: Any, shape: Mapping[str, Any] | None = None,
              dtype: str | Mapping[str, str] = "float32", opset: int | None = None,
              freeze_params: bool = True) -> tuple[IRModule, dict[str, Any]]:
    """Import an ONNX model as a Relay module.

    model: an ``onnx.ModelProto``, a path to a ``.onnx`` file (external data is read from the
    file's directory) or the file's bytes. shape: input name -> shape, binding the model's
    symbolic dims (ints make a symbolic axis static; a string or None keeps it symbolic; a
    ``dim_param``, a ``dim_value`` <= 0 and a dim with neither are symbolic; for a sequence
    or optional input, the shape of its tensors). dtype: the
    element type of inputs whose type the model leaves undefined (a dict: per input name).
    opset: the default-domain opset to follow instead of the model's. freeze_params:
    initializers become constants (True) or parameters of ``main`` returned in ``params``
    (False).

    Returns ``(mod, params)``; symbolic axes are ``?`` in ``main``'s types (build such a
    model with ``relay.vm.compile``). Raises OpNotImplemented (listing every node whose
    operator version ember does not import), FrontendError for a malformed model or a
    ``shape=`` that contradicts it, FileNotFoundError / IsADirectoryError for a path that is
    not a file, and ImportError when the ``onnx`` package is missing. Every error of a model
    read from a file starts with the file's path.
    """
    require_onnx()
    proto, where = load_model(model)
    try:
        return _import(proto, where, shape, dtype, opset, freeze_params)
    except TVMError as err:
        if where == "the model":  # not read from a file
            raise
        named = with_context(err, where)
        if named is err:
            raise
        raise named.with_traceback(err.__traceback__) from None


def _import(proto: Any, where: str, shape: Mapping[str, Any] | None,
            dtype: str | Mapping[str, str], opset: int | None,
            freeze_params: bool) -> tuple[IRModule, dict[str, Any]]:
    imp = Importer(model_opset(proto, opset, where), bool(freeze_params))
    _check_operators(proto.graph, imp.opset)
    scope = Scope(imp)
    scope.add_initializers(proto.graph, as_params=not imp.freeze_params)
    inputs = _graph_inputs(proto.graph, imp, scope, shape or {}, dtype)
    scope.convert_nodes(proto.graph.node)
    elems = output_elem_types(proto)
    outputs = [leaving(imp, graph_output(scope, scope.lookup(o.name), o), e,
                       f"graph output {o.name!r}") for o, e in zip(proto.graph.output, elems)]
    if not outputs:
        raise FrontendError("the graph has no outputs")
    body = outputs[0] if len(outputs) == 1 else Tuple(tuple(outputs))
    mod, params = _module(imp, inputs, body)
    open_inputs = [v.name_hint for v in inputs if v.type_annotation is None]
    if not open_inputs:
        return mod, params
    # Sequence inputs whose element rank the model leaves out: type inference found it from
    # their uses; import again with that rank and every size ``?`` (not the sizes of the
    # tensors they met, which need not be those of the caller's).
    if any(name in (shape or {}) for name in open_inputs):
        raise InternalError(f"onnx import: inputs {open_inputs} stayed untyped with shape=")
    ranks = element_ranks(mod, proto.graph, open_inputs)
    return _import(proto, where, {**(shape or {}), **ranks}, dtype, opset, freeze_params)


def _module(imp: Importer, inputs: list[Var], body: Any) -> tuple[IRModule, dict[str, Any]]:
    from ...analysis import free_vars
    from ...transform import DynamicToStatic, InferType
    from ...transform.dynamic_to_static import dynamic_ops

    extra = [v for v in free_vars(body) if v not in inputs]
    unknown = [v.name_hint for v in extra if v.name_hint not in imp.params]
    if unknown:
        raise FrontendError(f"the graph reads {', '.join(map(repr, unknown))}, which is not an "
                            "input or initializer of the main graph")
    mod = import_module(Function(tuple(inputs + extra), body), imp.used_prelude)
    params = {v.name_hint: _nd_array(imp.params[v.name_hint]) for v in extra}
    mod = InferType()(mod)
    if dynamic_ops(mod):  # values the import could not follow may be known after typing
        mod = DynamicToStatic()(mod)
    # The dim_param names of the inputs' symbolic axes (ember.compile checks that the axes
    # one name marks get one size in a call).
    mod.attrs["input_dims"] = {n: d for n, d in imp.input_dims.items() if any(d)}
    return mod, params


def _check_operators(graph: Any, opset: int) -> None:
    """OpNotImplemented listing every node (in the graph and its subgraphs) that cannot be
    imported, grouped by operator, version and reason; FrontendError when every one of them
    is an operator that does not exist at the model's opset (a malformed model)."""
    bad: dict[str, dict[str, None]] = {}  # "Op-version (why)" -> node names, in order
    malformed = True
    stack = [graph]
    while stack:
        g = stack.pop()
        for n in g.node:
            stack.extend(_graphs_of(n))
            version, _, why = lookup(n.domain, n.op_type, opset)
            key = describe(n.domain, n.op_type, version)
            malformed &= why is None or (version is None and n.domain in DEFAULT_DOMAINS)
            if why is not None:
                bad.setdefault(f"{key} ({why})", {})[n.name or "<unnamed>"] = None
    if not bad:
        return
    parts = []
    for key, found in bad.items():
        names = list(found)
        shown = ", ".join(repr(n) for n in names[:MAX_LISTED_NODES])
        more = f" and {len(names) - MAX_LISTED_NODES} more" if len(names) > MAX_LISTED_NODES \
            else ""
        parts.append(f"  {key}: node{'s' if len(names) > 1 else ''} {shown}{more}")
    count = sum(len(found) for found in bad.values())
    cls = FrontendError if malformed else OpNotImplemented
    raise cls(f"{count} node(s) use operators that ember cannot import (model opset "
              f"{opset}; operator-version, why, nodes):\n" + "\n".join(parts))


def _graph_inputs(graph: Any, imp: Importer, scope: Scope, shape: Mapping[str, Any],
                  dtype: str | Mapping[str, str]) -> list[Var]:
    """One variable per graph input that is not an initializer, typed from the model and
    ``shape``/``dtype``; FrontendError naming the input for anything inconsistent."""
    from ._proto import value_info_type

    inits = {t.name for t in graph.initializer}
    infos = [vi for vi in graph.input if vi.name not in inits]
    names = [vi.name for vi in infos]
    for name in shape:
        if name not in names:
            known = ", ".join(map(repr, names)) or "none"
            kind = "an initializer, not an input" if name in inits else "not an input"
            raise FrontendError(f"shape= names {name!r}, which is {kind} of the model; its "
                                f"inputs are {known}")
    inputs = []
    for vi in infos:
        where = f"graph input {vi.name!r}"
        if vi.type.WhichOneof("value") in STRUCTURED:  # shape= gives its tensors' shape
            given = shape.get(vi.name)
            model = declared_dims(vi.type)
            dims = None if given is None else _input_dims(vi.name, model, given, where)
            var = structured_input(imp, vi, where, dims)
            scope.env[vi.name] = var
            inputs.append(var)
            continue
        elem = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else None
        override = dtype.get(vi.name) if isinstance(dtype, Mapping) else None
        if elem == 0 and override is None and not isinstance(dtype, Mapping):
            raise FrontendError(f"{where} has an undefined element type; give it with "
                                f"dtype={{{vi.name!r}: 'float32'}}")
        if elem == 0 and override is not None:
            vi_dtype, dims = override, value_info_type(_with_elem(vi, override), where)[1]
        else:
            vi_dtype, dims = value_info_type(vi, where)
            vi_dtype = override or vi_dtype
        if vi_dtype is None:
            raise FrontendError(f"{where} has no type")
        dims = _input_dims(vi.name, _unknown_as_symbolic(dims), shape.get(vi.name), where)
        var = imp.tensor_var(vi.name, vi_dtype, [imp.sizes.named(d) if not isinstance(d, int)
                                                 else d for d in dims])
        imp.input_dims[vi.name] = [d if isinstance(d, str) else None for d in dims]
        scope.env[vi.name] = entering(imp, var)
        inputs.append(var)
    return inputs


def _with_elem(vi: Any, dtype: str) -> Any:
    onnx = require_onnx()
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(vi)
    copy.type.tensor_type.elem_type = {v: k for k, v in DTYPES.items()}[dtype]
    return copy


def _fmt_dims(dims: list[Any]) -> str:
    """``(batch, 3, ?)``: a model's declared dims, ``?`` for unknown ones."""
    text = ", ".join("?" if d is None else str(d) for d in dims)
    return f"({text},)" if len(dims) == 1 else f"({text})"


def _unknown_as_symbolic(dims: list[Any] | None) -> list[Any] | None:
    """An input's declared dims with every size an exporter writes for "unknown" made
    symbolic (None): ``dim_value`` -1 (Paddle, tf2onnx), any other negative value and 0.
    onnxruntime treats negative sizes so; a declared 0 it holds to an empty axis, but an
    input that can only ever be empty is an exporter's placeholder, and a symbolic axis still
    accepts size 0."""
    if dims is None:
        return None
    return [None if isinstance(d, int) and d <= 0 else d for d in dims]


def _input_dims(name: str, model: list[Any] | None, given: Any, where: str) -> list[Any]:
    """The dims of an input: the model's, overridden by ``shape=`` (which must agree)."""
    if given is None:
        if model is None:
            raise FrontendError(f"{where} has no shape in the model (not even a rank); give "
                                f"it with shape={{{name!r}: (...)}} (input_shapes= in "
                                "ember.compile, --input-shapes in the ember command)")
        return model
    try:
        given = list(given)
    except TypeError:
        raise FrontendError(f"shape={{{name!r}: {given!r}}} is not a sequence of sizes") from None
    for d in given:
        if isinstance(d, bool) or not (d is None or isinstance(d, str) or (
                isinstance(d, int) and d >= 0)):
            raise FrontendError(f"shape= for {name!r}: {d!r} is not a size (an int >= 0, or a "
                                "string / None for a symbolic axis)")
    if model is not None:
        if len(model) != len(given):
            raise FrontendError(f"shape= gives {name!r} rank {len(given)} {tuple(given)}, but "
                                f"the model declares rank {len(model)} {_fmt_dims(model)}")
        for k, (m, g) in enumerate(zip(model, given)):
            if isinstance(m, int) and isinstance(g, int) and m != g:
                raise FrontendError(f"shape= gives {name!r} the shape {tuple(given)}, but the "
                                    f"model declares {_fmt_dims(model)}: dimension {k} is {m}, "
                                    f"not {g}")
            if isinstance(m, int) and not isinstance(g, int):
                given[k] = m
    return given

