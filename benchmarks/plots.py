"""The claims' figures: learning curves with the published reference drawn in,
and speed against agents, drawn from the same results files as the claim's table.

A claim of `benchmarks/claims.yaml` may carry a `figure:` entry; `benchmarks/tables.py`
parses it with `parse_figure`, draws it with `draw` into a PNG under `docs/figures/` and
links it inside the claim's generated block. Fields:

    kind      "curve": linear axes, one thin line per `by` group (a seed), a dashed line
              per reference; "speed": log-log axes, one marked line per series, each
              point labelled with its value
    path      the PNG, relative to the repository root (`docs/figures/NAME.png`)
    alt       the image's alt text in the Markdown link
    in        the pages that link it (default: the claim's `in`)
    results   alias -> results file, read by the figure only (the claim's own aliases are
              readable too): curves files (`reference-...-curves.csv`), per-update CSVs
    x, y      the columns plotted; xlabel, ylabel their axis labels
    columns   panels per row (default: all in one row)
    smooth    moving mean over this many points of each line (curves; default 1)
    panels    a list of {title, series, reference}; or `series` / `reference` at the top
              level for a one-panel figure
    series    {label, from: alias or [aliases], where: {column: value}, by: column,
              smooth: the figure's `smooth` for this series}
    reference {value, label, spread}: a horizontal line at `value` (a band of +- `spread`);
              numbers, or `{...}` templates filled like a table cell (tables.py)

matplotlib is imported on first use, on the Agg backend; `tables.py --check` never draws.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

KINDS = ("curve", "speed")


@dataclass(frozen=True)
class Series:
    """One line (or, with `by`, one line per group of rows) drawn from results rows."""

    label: str
    sources: tuple[str, ...]
    where: dict
    by: str | None = None
    smooth: int | None = None


@dataclass(frozen=True)
class Reference:
    """A published number drawn as a horizontal line; fields may be cell templates."""

    value: str
    label: str
    spread: str | None = None


@dataclass(frozen=True)
class Panel:
    title: str
    series: tuple[Series, ...]
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True)
class Figure:
    """A claim's figure: what to draw (`panels`), from which columns, into which file."""

    kind: str
    path: str
    alt: str
    x: str
    y: str
    xlabel: str
    ylabel: str
    panels: tuple[Panel, ...]
    pages: tuple[str, ...] = ()
    results: dict = field(default_factory=dict)
    columns: int = 0
    smooth: int = 1
    title: str = ""


def _series(where: str, spec: dict) -> Series:
    sources = spec.get("from")
    if not sources:
        raise ValueError(f"{where}: a series needs `from` (a results alias), got {spec!r}")
    return Series(
        label=str(spec.get("label", "")),
        sources=tuple([sources] if isinstance(sources, str) else sources),
        where=dict(spec.get("where") or {}),
        by=spec.get("by"),
        smooth=spec.get("smooth"),
    )


def _references(spec) -> tuple[Reference, ...]:
    items = spec if isinstance(spec, list) else [spec] if spec else []
    return tuple(
        Reference(
            value=str(r["value"]),
            label=str(r.get("label", "")),
            spread=None if r.get("spread") is None else str(r["spread"]),
        )
        for r in items
    )


def parse_figure(name: str, spec: dict, files: Sequence[str]) -> Figure:
    """The `figure:` entry of claim `name` (its pages default to `files`).

    Raises:
      ValueError: naming the claim and the field when the entry is incomplete.
    """
    where = f"table {name}: figure"
    kind = spec.get("kind")
    if kind not in KINDS:
        raise ValueError(f"{where}: kind must be one of {KINDS}, got {kind!r}")
    for key in ("path", "x", "y"):
        if not spec.get(key):
            raise ValueError(f"{where}: missing {key!r}")
    panels = spec.get("panels") or [
        {"title": "", "series": spec.get("series"), "reference": spec.get("reference")}
    ]
    parsed = []
    for i, panel in enumerate(panels):
        if not panel.get("series"):
            raise ValueError(f"{where}: panel {i + 1} has no series")
        parsed.append(
            Panel(
                title=str(panel.get("title", "")),
                series=tuple(_series(f"{where}, panel {i + 1}", s) for s in panel["series"]),
                references=_references(panel.get("reference")),
            )
        )
    return Figure(
        kind=kind,
        path=str(spec["path"]),
        alt=str(spec.get("alt", name)),
        x=str(spec["x"]),
        y=str(spec["y"]),
        xlabel=str(spec.get("xlabel", spec["x"])),
        ylabel=str(spec.get("ylabel", spec["y"])),
        panels=tuple(parsed),
        pages=tuple(spec.get("in") or files),
        results=dict(spec.get("results") or {}),
        columns=int(spec.get("columns", 0)),
        smooth=int(spec.get("smooth", 1)),
        title=str(spec.get("title", "")),
    )


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _moving_mean(y: np.ndarray, window: int) -> np.ndarray:
    """The mean of each point and the `window - 1` before it (fewer at the start)."""
    if window <= 1 or len(y) == 0:
        return y
    sums = np.cumsum(np.insert(y, 0, 0.0))
    ends = np.arange(1, len(y) + 1)
    starts = np.maximum(0, ends - window)
    return (sums[ends] - sums[starts]) / (ends - starts)


def lines(figure: Figure, series: Series, rows: Callable) -> list[tuple[np.ndarray, np.ndarray]]:
    """(x, y) arrays of `series`, one per `by` group, sorted by x, points without a number
    (an update where no episode ended) dropped, smoothed by `figure.smooth`.

    Raises:
      ValueError: when no row of the series' files matches its `where`.
    """
    groups: dict[object, list] = {}
    for n, alias in enumerate(series.sources):
        for r in rows(alias, **series.where):
            key = (n, r.get(series.by)) if series.by else 0
            groups.setdefault(key, []).append(r)
    if not groups:
        raise ValueError(
            f"series {series.label!r}: no rows of {series.sources} match {series.where}"
        )
    out = []
    for group in groups.values():
        points = sorted(
            (float(r[figure.x]), float(r[figure.y]))
            for r in group
            if isinstance(r.get(figure.y), float) and not np.isnan(r[figure.y])
        )
        x, y = (np.array(v, dtype=float) for v in zip(*points, strict=True)) if points else ([], [])
        smooth = figure.smooth if series.smooth is None else series.smooth
        out.append((np.asarray(x), _moving_mean(np.asarray(y), smooth)))
    return out


def _steps_axis(axis) -> None:
    """Env steps in engineering notation (200k, 1M), as the package's own plots."""
    from matplotlib.ticker import EngFormatter, MaxNLocator

    axis.set_major_locator(MaxNLocator(nbins=6))
    axis.set_major_formatter(EngFormatter(sep=""))


def _speed_axes(ax, points: dict[float, list[float]]) -> None:
    """Log-log: a tick at each agent count; env steps/s in engineering notation, with
    ticks at 1, 2 and 5 times each power of ten where the values span under 1.5 decades."""
    from matplotlib.ticker import EngFormatter, FixedLocator, LogLocator, NullFormatter, NullLocator

    xs = set(points)
    ys = [y for values in points.values() for y in values]

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(xs)))
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_minor_locator(NullLocator())
    if max(ys) / min(ys) < 30:
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(EngFormatter(sep=""))
    ax.yaxis.set_minor_formatter(NullFormatter())
    lo, hi = min(xs), max(xs)
    ax.set_xlim(lo / 1.6, hi * 1.6)


def _label_points(ax, points: dict[float, list[float]]) -> None:
    """Writes each point's value beside it (34.4M, 78.1k): at each x the highest above its
    point, the lowest below, the others level with it, so that close values stay apart."""
    for x, ys in points.items():
        ranked = sorted(ys)
        for rank, y in enumerate(ranked):
            top, bottom = rank == len(ranked) - 1, rank == 0
            offset, va = (
                ((6, 3), "bottom") if top else ((6, -3), "top") if bottom else ((8, 0), "center")
            )
            text = f"{y / 1e6:.3g}M" if y >= 1e6 else f"{y / 1e3:.3g}k"
            ax.annotate(text, (x, y), textcoords="offset points", xytext=offset, va=va, fontsize=7)


def _draw_panel(ax, figure: Figure, panel: Panel, rows: Callable, fill: Callable) -> None:
    colors = [f"C{i}" for i in range(10)]
    points: dict[float, list[float]] = {}
    for color, series in zip(colors, panel.series, strict=False):
        for i, (x, y) in enumerate(lines(figure, series, rows)):
            label = series.label if i == 0 else None
            for xi, yi in zip(x.tolist(), y.tolist(), strict=True):
                points.setdefault(xi, []).append(yi)
            if figure.kind == "speed":
                ax.plot(x, y, "o-", color=color, lw=1.5, label=label)
            else:
                ax.plot(x, y, color=color, lw=1, alpha=0.8, label=label)
    if figure.kind == "speed":
        _label_points(ax, points)
    for reference in panel.references:
        value = float(fill(reference.value))
        ax.axhline(value, color="k", ls="--", lw=1, label=fill(reference.label) or None)
        if reference.spread is not None:
            spread = float(fill(reference.spread))
            ax.axhspan(value - spread, value + spread, color="k", alpha=0.08)
    if figure.kind == "speed":
        _speed_axes(ax, points)
    else:
        _steps_axis(ax.xaxis)
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel(figure.xlabel)
    ax.set_ylabel(figure.ylabel)
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=7)


def draw(figure: Figure, rows: Callable, fill: Callable[[str], str]) -> bytes:
    """The figure as PNG bytes.

    Args:
      figure: what to draw.
      rows: `rows(alias, **where)`, the matching rows of a results file (tables.py).
      fill: fills a cell template (`{...}` fields) from the claim's results.
    """
    plt = _pyplot()
    n = len(figure.panels)
    cols = figure.columns or n
    nrows = -(-n // cols)
    width, height = (7.0, 4.4) if n == 1 else (4.8 * cols, 3.6 * nrows)
    fig, axes = plt.subplots(nrows, cols, figsize=(width, height), squeeze=False)
    try:
        for ax, panel in zip(axes.flat, figure.panels, strict=False):
            _draw_panel(ax, figure, panel, rows, fill)
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        if figure.title:
            fig.suptitle(figure.title, fontsize=11)
        fig.tight_layout()
        buffer = io.BytesIO()
        # No "Software" entry: the bytes then depend on the data and matplotlib's drawing only.
        fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
        return buffer.getvalue()
    finally:
        plt.close(fig)


def link(figure: Figure, page: str) -> str:
    """The Markdown image link to `figure` from `page` (both relative to the repository root)."""
    rel = os.path.relpath(figure.path, os.path.dirname(page) or ".")
    return f"![{figure.alt}]({Path(rel).as_posix()})"
