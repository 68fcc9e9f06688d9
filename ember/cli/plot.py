"""Pictures (matplotlib, the optional ``[plot]`` extra): the memory plan and operator times.

Drawn with matplotlib's object API (``Figure``, no pyplot state and no display needed).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._console import CLIError, fmt_bytes

INSTALL_HINT = "pip install 'ember[plot]'  (or: pip install matplotlib)"
MAX_BARS = 25


def have_matplotlib() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require_matplotlib() -> None:
    """CLIError with the install line when matplotlib is missing."""
    if not have_matplotlib():
        raise CLIError("drawing a picture needs matplotlib, which is not installed", INSTALL_HINT)


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig: Any, path: str | Path) -> None:
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as err:
        raise CLIError(f"cannot write {path}: {err}") from None


def plot_memory(plan: dict[str, Any], title: str, path: str | Path) -> int:
    """Draw ``plan`` (``analysis.memory_plan``): one box per buffer, its lifetime across, its
    offset and size up; lines at the planned size and at the lower bound. Returns the number
    of boxes drawn."""
    require_matplotlib()
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FuncFormatter

    buffers: Sequence[Sequence[Any]] = plan.get("buffers") or []
    if not buffers:
        raise CLIError(f"{title}: no per-buffer memory plan to draw",
                       "libraries from `ember compile` (graph or aot executor) record one")
    fig = _figure(10, 5.5)
    ax = fig.add_subplot()
    colors = [f"C{i % 10}" for i in range(len(buffers))]
    top = max(b[3] + b[4] for b in buffers)
    steps = max(plan["steps"], max(b[2] for b in buffers) + 1)
    for (label, first, last, offset, size), color in zip(buffers, colors):
        width = last - first + 1
        ax.add_patch(Rectangle((first, offset), width, size, facecolor=color,
                               edgecolor="black", linewidth=0.6, alpha=0.8))
        if size > 0.06 * top and width >= 0.12 * steps:  # room for a label
            ax.text(first + width / 2, offset + size / 2, label.removeprefix("fused_")[:22],
                    ha="center", va="center", fontsize=7, clip_on=True)
    bound, planned = plan["lower_bound"], plan["planned_bytes"]
    ax.axhline(planned, color="black", linewidth=1.4, label=f"planned {fmt_bytes(planned)}")
    ax.axhline(bound, color="red", linestyle="--", linewidth=1.4,  # drawn over an equal plan
               label=f"lower bound {fmt_bytes(bound)}")
    ax.set_xlim(0, steps)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_bytes(v)))
    ax.set_ylim(0, max(top, planned, bound) * 1.08 or 1)
    ax.set_xlabel("step (fused operator calls in execution order)")
    arena = "arena" if plan["executor"] == "aot" else "intermediates' storage"
    ax.set_ylabel(f"offset in the {arena}")
    ax.set_title(f"{title}: {len(buffers)} intermediate buffers, {plan['executor']} executor")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    _save(fig, path)
    return len(buffers)


def plot_profile(rows: Sequence[dict[str, Any]], title: str, path: str | Path) -> int:
    """A horizontal bar chart of operator time (``rows`` from ``run.profile_rows``, longest
    first; at most ``MAX_BARS``). Returns the number of bars drawn."""
    require_matplotlib()
    rows = list(rows)[:MAX_BARS]
    if not rows:
        raise CLIError(f"{title}: the profile has no operators to draw")
    fig = _figure(10, 1.2 + 0.32 * len(rows))
    ax = fig.add_subplot()
    names = [r["name"].removeprefix("tvmgen_default_")[:48] for r in rows][::-1]
    times = [r["time_us"] for r in rows][::-1]
    bars = ax.barh(names, times, color="C0")
    for bar, r in zip(bars, rows[::-1]):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                f" {r['share']:.1f}%  x{r['calls']}", va="center", fontsize=7)
    ax.set_xlabel("time per run (us)")
    ax.set_title(f"{title}: operator time")
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlim(0, max(times) * 1.25 or 1)
    _save(fig, path)
    return len(rows)
