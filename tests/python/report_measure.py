"""What a person sees in a rendered HTML report, measured in headless Chromium (used by test_report.py).

measure(page, chromium_args, workdir) copies the page, appends a script that reads the laid-out page (bounding
boxes and computed colours, after CSS and layout), runs Chromium --dump-dom on the copy and returns what the
script wrote: per <svg>, its axes (quantity, scale, the tick labels' text and the tick marks' screen positions,
the title), the colours of its marks, the rendered widths of its pass rectangles, its lines with an id (the
capacity lines) and its element counts; per section, the colours its legend shows. The report itself is not
changed: the script runs only in the copy.

The checks (check_axes, check_legends, check_line_at, ...) judge those measurements against what a reader
needs: round ticks with units, axes from 0 for times and bytes, a capacity line where the axis says the
capacity is, every colour drawn explained by a legend entry, and a timeline whose passes are wide enough to
see, with labels."""

import json
import math
import os
import re
import subprocess

_SCRIPT = r"""
<script>
(function () {
  function hex(c) {
    var m = /rgba?\((\d+),\s*(\d+),\s*(\d+)(?:,\s*([\d.]+))?\)/.exec(c || '');
    if (!m || (m[4] !== undefined && +m[4] === 0)) return null;
    return '#' + [m[1], m[2], m[3]].map(function (v) { return (+v).toString(16).padStart(2, '0'); }).join('');
  }
  function box(e) { var b = e.getBoundingClientRect(); return {l: b.left, r: b.right, t: b.top, b: b.bottom}; }
  var out = {svgs: [], legends: {}};
  document.querySelectorAll('svg').forEach(function (svg) {
    var sec = svg.closest('section');
    var o = {id: svg.id, section: sec ? sec.id : '', box: box(svg), axes: [], marks: {}, lines: {}, n_shapes: 0,
             work: [], labels: 0, agg: 0};
    svg.querySelectorAll('g.axis').forEach(function (g) {
      var a = {axis: g.dataset.axis, quantity: g.dataset.quantity, scale: g.dataset.scale, min: +g.dataset.min,
               max: +g.dataset.max, ticks: [], title: ''};
      var labels = g.querySelectorAll('.tick-label'), marks = g.querySelectorAll('line.tick');
      labels.forEach(function (t, i) {
        var m = marks[i] ? box(marks[i]) : box(t);
        a.ticks.push({text: t.textContent, box: box(t), at: a.axis === 'x' ? (m.l + m.r) / 2 : (m.t + m.b) / 2});
      });
      var ti = g.querySelector('.axis-title');
      a.title = ti ? ti.textContent : '';
      o.axes.push(a);
    });
    svg.querySelectorAll('rect, circle, path, polyline, line, polygon').forEach(function (e) {
      if (e.closest('g.axis')) return;
      o.n_shapes++;
      var s = getComputedStyle(e), line = e.tagName === 'line' || s.fill === 'none';
      var c = line ? hex(s.stroke) : hex(s.fill);
      if (c) o.marks[c] = (o.marks[c] || 0) + 1;
      if (e.id) o.lines[e.id] = box(e);
      if (e.classList.contains('work')) o.work.push({w: e.getBoundingClientRect().width, fill: c});
      if (e.classList.contains('agg')) o.agg++;
    });
    o.labels = svg.querySelectorAll('text.pass-lbl').length;
    out.svgs.push(o);
  });
  document.querySelectorAll('section').forEach(function (sec) {
    var cs = [];
    sec.querySelectorAll('.legend i').forEach(function (i) {
      var s = getComputedStyle(i);
      [hex(s.backgroundColor), s.borderTopStyle !== 'none' ? hex(s.borderTopColor) : null,
       s.borderBottomStyle !== 'none' ? hex(s.borderBottomColor) : null].forEach(function (c) { if (c) cs.push(c); });
    });
    out.legends[sec.id] = cs;
  });
  var pre = document.createElement('pre');
  pre.id = 'measured';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def measure(page, chromium_args, workdir, name="measured"):
    """The measurements of page as rendered (a dict, see the module's doc; "dom" holds the page's DOM as
    --dump-dom gives it), or None when Chromium failed."""
    with open(page, encoding="utf-8") as f:
        html = f.read()
    copy = os.path.join(workdir, name + ".html")
    with open(copy, "w", encoding="utf-8") as f:
        f.write(html.replace("</body>", _SCRIPT + "</body>"))
    dom = subprocess.run(chromium_args + ["--window-size=1100,1200", "--dump-dom", "file://" + copy],
                         capture_output=True, text=True, timeout=180).stdout
    m = re.search(r'<pre id="measured">(.*?)</pre>', dom, re.S)
    if not m:
        return None
    text = m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    out = json.loads(text)
    out["dom"] = dom[:m.start()] + dom[m.end():]  # the page's DOM after its script ran, without the measurements
    return out


UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "MiB": 2.0 ** 20, "GiB": 2.0 ** 30, "TiB": 2.0 ** 40}
SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6}


def tick_value(text, quantity):
    """A tick label's value in the axis's base unit (seconds, bytes, a count); None when it does not read as a
    number with the unit its quantity needs ("20 GiB", "1.5 ms", "10k")."""
    if quantity in ("time", "bytes"):
        m = re.fullmatch(r"(\d+(?:\.\d+)?) (s|ms|µs|MiB|GiB|TiB)", text.strip())
        if not m or (m.group(2) in ("s", "ms", "µs")) != (quantity == "time"):
            return None
        return float(m.group(1)) * UNITS[m.group(2)]
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(k|M)?", text.strip())
    return float(m.group(1)) * SUFFIX[m.group(2) or ""] if m else None


def fit(axis):
    """The least-squares line from a tick's value (log10 on a log axis) to its screen position: (a, b, worst
    residual in pixels), or None with fewer than 2 readable ticks."""
    pts = []
    for t in axis["ticks"]:
        v = tick_value(t["text"], axis["quantity"])
        if v is None or (axis["scale"] == "log" and v <= 0):
            return None
        pts.append((math.log10(v) if axis["scale"] == "log" else v, t["at"]))
    if len(pts) < 2:
        return None
    n = len(pts)
    mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
    a = my - b * mx
    return a, b, max(abs(a + b * p[0] - p[1]) for p in pts)


def position(axis, value):
    """Where the axis puts value on screen, from its ticks."""
    f = fit(axis)
    if f is None:
        return None
    return f[0] + f[1] * (math.log10(value) if axis["scale"] == "log" else value)


def axis_problems(axis):
    """What is wrong with one axis as a reader sees it (an empty list when nothing)."""
    bad = []
    if len(axis["ticks"]) < 3:
        bad.append("%d ticks" % len(axis["ticks"]))
    vals = [tick_value(t["text"], axis["quantity"]) for t in axis["ticks"]]
    if any(v is None for v in vals):
        bad.append("tick labels without a number and unit: %s" % [t["text"] for t in axis["ticks"]])
        return bad
    if axis["quantity"] in ("time", "bytes") and axis["scale"] == "linear" and (not vals or vals[0] != 0 or axis["min"] != 0):
        bad.append("a %s axis that does not start at 0 (%s)" % (axis["quantity"], vals[:1]))
    f = fit(axis)
    if f is None or f[2] > 1.0:
        bad.append("ticks not evenly placed for their values (worst %.1f px)" % (f[2] if f else float("nan")))
    lo, hi = ("l", "r") if axis["axis"] == "x" else ("t", "b")
    boxes = sorted((t["box"][lo], t["box"][hi]) for t in axis["ticks"])
    if any(boxes[i + 1][0] < boxes[i][1] - 0.5 for i in range(len(boxes) - 1)):
        bad.append("tick labels overlap")
    if not axis["title"].strip():
        bad.append("no title")
    return bad


def legend_problems(meas, section):
    """Colours drawn in the section's charts that no legend entry of the section shows."""
    shown = set(meas["legends"].get(section, []))
    drawn = set()
    for s in meas["svgs"]:
        if s["section"] == section:
            drawn |= set(s["marks"])
    return sorted(drawn - shown)


def svg(meas, ident):
    return next((s for s in meas["svgs"] if s["id"] == ident), None)
