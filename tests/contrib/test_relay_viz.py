"""``tvm.contrib.relay_viz``: a module drawn as a text tree or as Graphviz DOT (no Graphviz
needed for either; laying out a picture needs the ``dot`` program and says so)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import ember as tvm
from ember import relay
from ember.contrib import relay_viz


def _mod():
    x = relay.var("x", shape=(1, 4))
    w = relay.var("w", shape=(3, 4))
    y = relay.nn.relu(relay.nn.dense(x, w))
    pair = relay.Tuple([y, y * relay.const(2.0)])
    mod = tvm.IRModule.from_expr(relay.Function([x, w], relay.TupleGetItem(pair, 1)))
    g = relay.GlobalVar("helper")
    a = relay.var("a", shape=(2,))
    mod[g] = relay.Function([a], relay.exp(a))
    return mod, {"w": np.ones((3, 4), "float32")}


def test_term_plotter_prints_each_function_main_first(capsys):
    mod, params = _mod()
    relay_viz.RelayVisualizer(mod, relay_param=params).render()
    out = capsys.readouterr().out
    assert out.index("@main(") < out.index("@helper(")
    lines = out.splitlines()
    assert lines[1] == "`--TupleGetItem idx: 1"
    assert "Var(Param) name_hint: w, shape: (3, 4), dtype: float32" in out
    assert "Var(Input) name_hint: x, shape: (1, 4), dtype: float32" in out
    assert "nn.dense" in out and "... (shown above)" in out  # relu is used twice


def test_term_plotter_writes_a_file(tmp_path):
    mod, params = _mod()
    path = tmp_path / "viz.txt"
    relay_viz.RelayVisualizer(mod, params, relay_viz.TermPlotter(),
                              relay_viz.TermVizParser()).render(str(path))
    assert path.read_text().startswith("@main(")


def test_dot_source_has_clusters_nodes_and_edges():
    mod, params = _mod()
    plotter = relay_viz.DotPlotter(graph_attr={"color": "red"},
                                   get_node_attr=lambda n: {"shape": "box"})
    relay_viz.RelayVisualizer(mod, params, plotter, relay_viz.DotVizParser())
    src = plotter.source()
    assert src.startswith("digraph {") and 'subgraph "cluster_main"' in src
    assert 'subgraph "cluster_helper"' in src and 'graph [color="red"]' in src
    assert 'label="Call nn.dense\\n' in src and "->" in src
    assert 'label="Var(Param)\\nname_hint: w' in src


def test_dot_render_source_only(tmp_path):
    mod, params = _mod()
    plotter = relay_viz.DotPlotter(render_kwargs={"format": "dot"})
    viz = relay_viz.RelayVisualizer(mod, params, plotter, relay_viz.DotVizParser())
    path = viz.render(str(tmp_path / "net"))
    assert path == str(tmp_path / "net") and open(path).read() == plotter.source()


def test_dot_layout_without_graphviz_names_the_source(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    mod, params = _mod()
    viz = relay_viz.RelayVisualizer(mod, params, relay_viz.DotPlotter(),
                                    relay_viz.DotVizParser())
    with pytest.raises(relay_viz.GraphvizNotFoundError, match=r"needs Graphviz's 'dot' "
                                                              r"program.*The DOT source is in"):
        viz.render(str(tmp_path / "net"))
    assert (tmp_path / "net").read_text().startswith("digraph {")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_dot_layout_with_graphviz(tmp_path):
    mod, params = _mod()
    plotter = relay_viz.DotPlotter(render_kwargs={"format": "svg"})
    out = relay_viz.RelayVisualizer(mod, params, plotter, relay_viz.DotVizParser()).render(
        str(tmp_path / "net"))
    assert out.endswith(".svg") and "<svg" in open(out).read()


def test_a_function_is_drawn_as_main(capsys):
    x = relay.var("x", shape=(2,))
    relay_viz.RelayVisualizer(relay.Function([x], relay.negative(x))).render()
    assert capsys.readouterr().out.startswith("@main(")


def test_deep_chain_renders_without_recursion():
    x = relay.var("x", shape=(2,))
    y = x
    for _ in range(5000):
        y = relay.negative(y)
    plotter = relay_viz.TermPlotter()
    relay_viz.RelayVisualizer(relay.Function([x], y), plotter=plotter)
    assert plotter.text().count("negative") == 5000


def test_deep_chain_prints_in_linear_size():
    """30,000 levels: fully indented lines would total 2.7 GB (and as long to build); past
    MAX_INDENT_LEVELS a line draws its innermost guides after [+N]."""
    x = relay.var("x", shape=(2,))
    y = x
    depth = 30_000
    for _ in range(depth):
        y = relay.negative(y)
    plotter = relay_viz.TermPlotter()
    relay_viz.RelayVisualizer(relay.Function([x], y), plotter=plotter)
    lines = plotter.text().splitlines()
    cap = relay_viz.terminal.MAX_INDENT_LEVELS
    assert len(lines) == 2 * depth + 2  # @main, and per level a Call and its op
    assert max(len(line) for line in lines[:-1]) <= len(f"[+{depth}]") + 3 * cap + 12
    assert lines[2] == "   |--negative "  # shallow levels keep their full indentation
    assert lines[2 * cap + 1] == "   " * cap + "`--Call "  # the Call at depth cap
    assert lines[2 * cap + 3] == "[+1]" + "   " * cap + "`--Call "
    assert lines[-1].startswith(f"[+{depth - cap}]" + "   " * cap + "`--Var(Input)")


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="relay_mod must be an IRModule"):
        relay_viz.RelayVisualizer("not a module")
    mod, _ = _mod()
    with pytest.raises(TypeError, match="plotter must be a relay_viz.Plotter"):
        relay_viz.RelayVisualizer(mod, plotter=object())
    with pytest.raises(TypeError, match="render_kwargs"):
        relay_viz.DotPlotter(render_kwargs={"engine": "neato"})
