"""Small inline-SVG charts for the HTML report: lines, scatter with a front, horizontal bars.

Why not matplotlib here: the report is one self-contained HTML file a person
mails to a colleague. Hand-written SVG is a few kilobytes per chart, stays
sharp at any zoom, takes the page's font and colours from its CSS, carries a
tooltip on every point (``<title>``), and needs no import that takes seconds.
Every function returns an ``<svg>`` string; labels are escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape
from typing import Collection, Mapping, Sequence

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948",
           "#9c755f", "#ff9da7", "#3b3b98")
GREY = "#8a8f98"
W, H = 392, 270
LEFT, RIGHT, TOP, BOTTOM = 58, 14, 30, 42


@dataclass
class Series:
    label: str
    color: str
    points: list[tuple[float, float]]
    errors: list[tuple[float, float] | None] = field(default_factory=list)  # y interval per point
    tips: list[str] = field(default_factory=list)
    dashed: bool = False
    labels: list[str] = field(default_factory=list)  # scatter_front: printed beside points on the front
    point_colors: list[str] = field(default_factory=list)  # a colour per point (its config's), else color
    ring: bool = False  # points drawn as rings around what is drawn after them (an envelope's)


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = [round(start, 10)]
    while ticks[-1] < hi - step * 1e-9:  # the last tick covers hi: no point above the frame
        ticks.append(round(start + len(ticks) * step, 10))
    return ticks


def _num(x: float) -> str:
    """A tick or value label: ``12k``, ``1,500``, ``8``, ``2.5``, ``0.25``."""
    if abs(x) >= 10000:
        return f"{x / 1000:,.0f}k"
    if float(x).is_integer():
        return f"{int(x):,}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.1f}" if abs(x) >= 1 else f"{x:.2g}"


class _Frame:
    """Maps data to pixels; x linear or log2, y linear from ``y0``."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float], *, log2_x: bool, y_zero: bool,
                 x_ticks: Sequence[float] | None, width: int, height: int) -> None:
        self.log2_x, self.width, self.height = log2_x, width, height
        fx = [self._fx(x) for x in xs] or [0.0, 1.0]
        lo, hi = min(fx), max(fx)
        pad = (hi - lo) * 0.06 or 0.5
        self.x0, self.x1 = lo - pad, hi + pad
        ylo = 0.0 if y_zero else min(ys or [0.0])
        yhi = max(ys or [1.0])
        if not y_zero:
            span = (yhi - ylo) or abs(yhi) or 1.0
            ylo, yhi = ylo - span * 0.08, yhi + span * 0.08
        self.y_ticks = nice_ticks(ylo, yhi * (1.05 if y_zero else 1.0))
        self.y0, self.y1 = self.y_ticks[0], self.y_ticks[-1]
        if x_ticks is not None:
            self.x_ticks = list(x_ticks)
        elif log2_x or len(set(xs)) == 1:  # measured loads; one point: its own value, not "2, 2.2, 2.4"
            self.x_ticks = sorted(set(xs))
        else:
            self.x_ticks = [t for t in nice_ticks(min(xs or [0.0]), max(xs or [1.0])) if self.x0 <= t <= self.x1]

    def _fx(self, x: float) -> float:
        return math.log2(x) if self.log2_x and x > 0 else x

    def px(self, x: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return LEFT + (self._fx(x) - self.x0) / span * (self.width - LEFT - RIGHT)

    def py(self, y: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.height - BOTTOM - (y - self.y0) / span * (self.height - TOP - BOTTOM)


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Labels for an axis's ticks, as short as :func:`_num` makes them but never two alike
    (0.95 / 1.0 / 1.05 printed with one decimal read "1.0, 1.0, 1.1")."""
    labels = [_num(t) for t in ticks]
    digits = 0
    while len(set(labels)) < len(labels) and digits < 6:
        digits += 1
        labels = [_num(t) if abs(t) >= 10000 else f"{t:,.{digits}f}" for t in ticks]
    return labels


def _axes(f: _Frame, title: str, x_label: str, y_label: str) -> list[str]:
    w, h = f.width, f.height
    out = [f'<text class="t" x="{LEFT}" y="18">{escape(title)}</text>']
    for t, text in zip(f.y_ticks, tick_labels(f.y_ticks)):
        y = f.py(t)
        out.append(f'<line class="g" x1="{LEFT}" x2="{w - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(f'<text class="k" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{text}</text>')
    for t, text in zip(f.x_ticks, tick_labels(f.x_ticks)):
        x = f.px(t)
        out.append(f'<line class="g" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{h - BOTTOM}"/>')
        out.append(f'<text class="k" x="{x:.1f}" y="{h - BOTTOM + 15}" text-anchor="middle">{text}</text>')
    out.append(f'<line class="a" x1="{LEFT}" x2="{w - RIGHT}" y1="{h - BOTTOM}" y2="{h - BOTTOM}"/>')
    out.append(f'<line class="a" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{h - BOTTOM}"/>')
    out.append(f'<text class="l" x="{(LEFT + w - RIGHT) / 2:.0f}" y="{h - 6}" text-anchor="middle">'
               f'{escape(x_label)}</text>')
    out.append(f'<text class="l" transform="translate(13 {(TOP + h - BOTTOM) / 2:.0f}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    return out


def _svg(body: list[str], width: int, height: int, label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{escape(label)}">' + "".join(body) + "</svg>")


def line_chart(series: Sequence[Series], *, title: str, x_label: str, y_label: str,
               log2_x: bool = False, y_zero: bool = True, x_ticks: Sequence[float] | None = None,
               hlines: Sequence[tuple[float, str]] = (), width: int = W, height: int = H) -> str:
    """Lines with markers (and error bars where a point has an interval); ``hlines``:
    dashed reference lines (value, label), e.g. a baseline."""
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points] + [v for v, _ in hlines]
    ys += [e[1] for s in series for e in s.errors if e is not None]
    f = _Frame(xs, ys, log2_x=log2_x, y_zero=y_zero, x_ticks=x_ticks, width=width, height=height)
    body = _axes(f, title, x_label, y_label)
    for value, label in hlines:
        y = f.py(value)
        body.append(f'<line class="ref" x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        body.append(f'<text class="rl" x="{width - RIGHT - 2}" y="{y - 4:.1f}" text-anchor="end">'
                    f'{escape(label)}</text>')
    for s in series:
        pts = sorted(zip(s.points, s.errors or [None] * len(s.points), s.tips or [""] * len(s.points),
                         s.point_colors or [s.color] * len(s.points)), key=lambda p: p[0][0])
        if len(pts) > 1:
            path = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for (x, y), _, _, _ in pts)
            dash = ' stroke-dasharray="5 4"' if s.dashed else ""
            body.append(f'<polyline fill="none" stroke="{s.color}" stroke-width="2"{dash} points="{path}"/>')
        for (x, y), err, tip, fill in pts:
            cx, cy = f.px(x), f.py(y)
            if err is not None:
                lo, hi = f.py(err[0]), f.py(err[1])
                body.append(f'<path stroke="{fill}" stroke-width="1.4" d="M{cx:.1f} {lo:.1f}V{hi:.1f}'
                            f'M{cx - 4:.1f} {lo:.1f}h8M{cx - 4:.1f} {hi:.1f}h8"/>')
            text = tip or f"{s.label}: {_num(x)} -> {y:,.1f}"
            if s.ring:
                body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6.5" fill="none" stroke="{fill}" '
                            f'stroke-width="1.4"><title>{escape(text)}</title></circle>')
                continue
            r = 4.6 if s.point_colors else 3.6  # points that carry a config's colour: big enough to see it
            body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r}" fill="{fill}" stroke="#fff" '
                        f'stroke-width="1"><title>{escape(text)}</title></circle>')
    return _svg(body, width, height, title)


def scatter_front(series: Sequence[Series], front: Sequence[tuple[float, float]], *, title: str,
                  x_label: str, y_label: str, width: int = W, height: int = H,
                  labels: Mapping[tuple[float, float], str] | None = None,
                  hollow: Collection[tuple[float, float]] = ()) -> str:
    """Points per series, and the Pareto front as a dotted line through its points; ``labels``: text
    written next to those points, ``hollow``: points drawn as rings (e.g. a missed SLO).

    Every point is drawn in its series' colour first; the front's points get a dark ring on top
    (never a filled marker over another config's point), and every label stays inside the frame."""
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    f = _Frame(xs, ys, log2_x=False, y_zero=True, x_ticks=None, width=width, height=height)
    body = _axes(f, title, x_label, y_label)
    if len(front) > 1:
        path = " ".join(f"{f.px(x):.1f},{f.py(y):.1f}" for x, y in front)
        body.append(f'<polyline fill="none" stroke="#222" stroke-width="1.3" stroke-dasharray="2 3" '
                    f'points="{path}"/>')
    texts: dict[tuple[float, float], str] = {}
    for s in series:
        for (x, y), tip, label in zip(s.points, s.tips or [""] * len(s.points),
                                      s.labels or [""] * len(s.points)):
            ring = (x, y) in hollow
            fill = "none" if ring else s.color
            body.append(f'<circle cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="3.8" fill="{fill}" '
                        f'fill-opacity="0.85" stroke="{s.color if ring else "#fff"}" '
                        f'stroke-width="{1.4 if ring else 0.8}"><title>{escape(tip or s.label)}</title></circle>')
            if label and (x, y) in front:
                texts.setdefault((x, y), label)
    for x, y in front:  # rings around the front's points: the points under them stay visible
        body.append(f'<circle cx="{f.px(x):.1f}" cy="{f.py(y):.1f}" r="6.5" fill="none" stroke="#222" '
                    f'stroke-width="1.3"/>')
    for point, text in (labels or {}).items():
        texts.setdefault(point, text)
    body += _point_labels(f, texts, "pl")
    return _svg(body, width, height, title)


CHAR_W = 5.6  # px per character of a 10 px label (what the frame keeps a label inside by)


def _point_labels(f: _Frame, texts: Mapping[tuple[float, float], str], cls: str) -> list[str]:
    """Labels beside their points, kept inside the plot frame and off each other."""
    out: list[str] = []
    placed: list[tuple[float, float, float]] = []  # (left, right, baseline) of labels already drawn
    lo_x, hi_x = LEFT + 2, f.width - RIGHT - 2
    lo_y, hi_y = TOP + 10, f.height - BOTTOM - 3
    for (x, y), raw in sorted(texts.items(), key=lambda kv: -kv[0][1]):
        text = _clip(raw, int((hi_x - lo_x) / CHAR_W))
        w = len(text) * CHAR_W
        px, py = f.px(x), f.py(y)
        left = px + 11 + w > hi_x  # no room on the right: the label goes to the left of its point
        x0 = max(lo_x, px - 11 - w) if left else px + 11
        ly = min(max(py - 7, lo_y), hi_y)
        while any(abs(ly - b) < 11 and x0 < right and x0 + w > left_ for left_, right, b in placed):
            ly += 11
            if ly > hi_y:  # no room below: above the others instead
                ly = min(b for _, _, b in placed) - 11
                break
        ly = min(max(ly, lo_y), hi_y)
        placed.append((x0, x0 + w, ly))
        out.append(f'<text class="{cls}" x="{x0:.1f}" y="{ly:.1f}">{escape(text)}</text>')
    return out


@dataclass
class Bar:
    label: str
    value: float | None  # None: no bar, ``note`` instead (a failed trial)
    color: str
    note: str = ""
    error: tuple[float, float] | None = None


def bar_chart(bars: Sequence[Bar], *, title: str, x_label: str, width: int = 1240,
              row: int = 22, label_width: int = 300, value_width: int = 190) -> str:
    """Horizontal bars, one per row, values (and notes) printed at the bar's end."""
    height = TOP + row * len(bars) + 36
    values = [b.value for b in bars if b.value is not None] + [
        b.error[1] for b in bars if b.error is not None]
    ticks = nice_ticks(0.0, max(values or [1.0]))
    x0, x1 = label_width, width - value_width
    span = ticks[-1] or 1.0

    def px(v: float) -> float:
        return x0 + v / span * (x1 - x0)

    body = [f'<text class="t" x="8" y="18">{escape(title)}</text>']
    bottom = TOP + row * len(bars)
    for t in ticks:
        body.append(f'<line class="g" x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{TOP - 4}" y2="{bottom}"/>')
        body.append(f'<text class="k" x="{px(t):.1f}" y="{bottom + 14}" text-anchor="middle">{_num(t)}</text>')
    body.append(f'<text class="l" x="{(x0 + x1) / 2:.0f}" y="{bottom + 30}" text-anchor="middle">'
                f'{escape(x_label)}</text>')
    for i, b in enumerate(bars):
        y = TOP + i * row
        body.append(f'<text class="b" x="{x0 - 8}" y="{y + row / 2 + 4:.1f}" text-anchor="end">'
                    f'{escape(_clip(b.label, label_width // 7))}<title>{escape(b.label)}</title></text>')
        if b.value is None:
            body.append(f'<text class="n" x="{x0 + 6}" y="{y + row / 2 + 4:.1f}">{escape(b.note)}</text>')
            continue
        body.append(f'<rect x="{x0}" y="{y + 3}" width="{max(1.0, px(b.value) - x0):.1f}" height="{row - 6}" '
                    f'rx="2" fill="{b.color}"><title>{escape(f"{b.label}: {b.value:,.1f} {b.note}")}</title></rect>')
        end = px(b.value)
        if b.error is not None:
            lo, hi = px(b.error[0]), px(b.error[1])
            mid = y + row / 2
            body.append(f'<path stroke="#222" stroke-width="1.2" d="M{lo:.1f} {mid:.1f}H{hi:.1f}'
                        f'M{lo:.1f} {mid - 4:.1f}v8M{hi:.1f} {mid - 4:.1f}v8"/>')
            end = max(end, hi)
        body.append(f'<text class="v" x="{end + 5:.1f}" y="{y + row / 2 + 4:.1f}">{b.value:,.1f}'
                    f'{(" " + escape(b.note)) if b.note else ""}</text>')
    return _svg(body, width, height, title)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
