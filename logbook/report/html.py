"""The report as one self-contained HTML file: inline CSS, figures as data: URIs, and a
small inline script that sorts a table by the column whose heading is clicked. Nothing
is fetched from the network."""

from __future__ import annotations

import base64
from html import escape

from logbook.report.blocks import (
    Block,
    Code,
    Document,
    Heading,
    Image,
    Items,
    KeyValues,
    Para,
    TableBlock,
)

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;
max-width:1280px;padding:0 16px;color:#1d1d1f}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;
margin-top:32px}h3{font-size:15px;margin-top:20px}
table{border-collapse:collapse;margin:8px 0;font-size:12px}
td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#f4f4f6}table.sortable th{cursor:pointer;user-select:none}
table.sortable th[aria-sort=ascending]::after{content:" \\25B2"}
table.sortable th[aria-sort=descending]::after{content:" \\25BC"}
table.kv th{width:300px;font-weight:normal;color:#555}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.warn{color:#8a4b00}li.warn,p.warn{background:#fff6e5}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:8px;overflow-x:auto;font-size:12px;
white-space:pre-wrap;word-break:break-all}
figure{margin:12px 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:12px;color:#555}.sev-critical{color:#b00020;font-weight:600}
.sev-warning{color:#a15c00}.sev-info{color:#555}
div.axis{font-size:12px;margin:4px 0}div.axis button{margin-left:4px;font-size:12px}
div.axis button[aria-pressed=true]{font-weight:600}
"""

# Sorts the rows of a table.sortable by the clicked column: numbers by value (the
# cell's data-v, else its text), the rest as text; a second click reverses.
SCRIPT = """
(function () {
  "use strict";
  function key(td) {
    var v = td.hasAttribute("data-v") ? td.getAttribute("data-v") : td.textContent;
    var n = v.trim() === "" ? NaN : Number(v);
    return isNaN(n) ? [1, v.toLowerCase()] : [0, n];
  }
  function compare(a, b) {
    if (a[0] !== b[0]) { return a[0] - b[0]; }
    return a[1] < b[1] ? -1 : (a[1] > b[1] ? 1 : 0);
  }
  var tables = document.querySelectorAll("table.sortable");
  Array.prototype.forEach.call(tables, function (table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var up = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
        rows.sort(function (a, b) {
          var c = compare(key(a.cells[col]), key(b.cells[col]));
          return up ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
"""


# Draws each interactive figure from its JSON spec, with buttons that put it on a step,
# wall-time or tokens axis (x values and overlay shapes precomputed for each).
PLOTS = """
(function () {
  "use strict";
  var divs = document.querySelectorAll("div.plot");
  Array.prototype.forEach.call(divs, function (div) {
    var spec = JSON.parse(document.getElementById(div.getAttribute("data-spec")).textContent);
    var steps = spec.data.map(function (t) { return t.x; });
    Plotly.newPlot(div, spec.data, spec.layout, spec.config);
    var buttons = div.parentNode.querySelectorAll("button[data-axis]");
    Array.prototype.forEach.call(buttons, function (b) {
      b.addEventListener("click", function () {
        var a = spec.axes[b.getAttribute("data-axis")];
        var data = spec.data.map(function (t, i) {
          var c = Object.assign({}, t); c.x = (a.x || steps)[i]; return c;
        });
        var lay = JSON.parse(JSON.stringify(spec.layout));
        lay.shapes = a.shapes;
        for (var i = 1; i <= spec.panels; i++) {
          var x = lay[i === 1 ? "xaxis" : "xaxis" + i];
          x.type = a.type;
          if (i === spec.panels) { x.title = {text: a.title}; }
        }
        Plotly.react(div, data, lay, spec.config);
        Array.prototype.forEach.call(buttons, function (o) {
          o.setAttribute("aria-pressed", o === b ? "true" : "false");
        });
      });
    });
  });
})();
"""


def to_html(doc: Document, plotly_src: str | None = None) -> str:
    """The whole document as an HTML page: self-contained, or with plotly.js read from
    ``plotly_src`` (a relative path) where many reports share one copy."""
    body = "\n".join(_block(b) for b in doc.blocks)
    plots = ""
    if any(isinstance(b, Image) and b.figure.interactive for b in doc.blocks):
        if plotly_src is not None:
            plots = f'<script src="{escape(plotly_src)}"></script>\n<script>{PLOTS}</script>\n'
        else:
            from logbook.report.interactive import plotly_js

            plots = f"<script>{plotly_js()}</script>\n<script>{PLOTS}</script>\n"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(doc.title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"{body}\n"
        '<p class="foot">Written by <code>logbook report</code> (schema logbook/1).</p>\n'
        f"<script>{SCRIPT}</script>\n{plots}</body>\n</html>\n"
    )


def _block(b: Block) -> str:
    if isinstance(b, Heading):
        anchor = f' id="{escape(b.anchor)}"' if b.anchor else ""
        return f"<h{b.level}{anchor}>{escape(b.text)}</h{b.level}>"
    if isinstance(b, Para):
        css = f' class="{b.css}"' if b.css else ""
        return f"<p{css}>{escape(b.text)}</p>"
    if isinstance(b, Items):
        css = f' class="{b.css}"' if b.css else ""
        return "<ul>" + "".join(f"<li{css}>{escape(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, KeyValues):
        rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in b.pairs)
        return f'<table class="kv"><tbody>{rows}</tbody></table>'
    if isinstance(b, TableBlock):
        return _table(b)
    if isinstance(b, Code):
        title = f"<h4>{escape(b.title)}</h4>" if b.title else ""
        return f"{title}<pre><code>{escape(chr(10).join(b.lines))}</code></pre>"
    if isinstance(b, Image):
        return _image(b)
    raise TypeError(f"unknown block {type(b).__name__}")


def _table(b: TableBlock) -> str:
    t = b.table
    css = "sortable" if b.sortable else ""
    anchor = f' id="{escape(b.anchor)}"' if b.anchor else ""
    head = "".join(f"<th>{escape(h)}</th>" for h in t.headers)
    rows = []
    sev = t.headers.index("severity") if "severity" in t.headers else -1
    for row in t.rows:
        cells = []
        for i, c in enumerate(row):
            attrs = ""
            if isinstance(c.key, float):
                attrs = f' data-v="{c.key:.17g}"'
                if i != sev:
                    attrs += ' class="num"'
            if i == sev:
                attrs += f' class="sev-{escape(c.text)}"'
            text = escape(c.text)
            if c.href:
                text = f'<a href="{escape(c.href)}">{text}</a>'
            cells.append(f"<td{attrs}>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<table class="{css}"{anchor}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _image(b: Image) -> str:
    fig = b.figure
    if fig.interactive:
        return _plot(fig)
    data = base64.b64encode(fig.png).decode("ascii")
    alt = escape(fig.title)
    return (
        f'<figure id="fig-{escape(fig.name)}"><img src="data:image/png;base64,{data}" '
        f'alt="{alt}"><figcaption>{escape(fig.caption)}</figcaption></figure>'
    )


AXIS_NAMES = {"step": "step", "time": "wall time", "tokens": "tokens"}


def _plot(fig) -> str:
    """An interactive figure: its div, its spec as JSON, the axis buttons."""
    from logbook.report.interactive import to_json

    name = escape(fig.name)
    axes = list(fig.interactive["axes"])
    buttons = ""
    if len(axes) > 1:
        buttons = (
            '<div class="axis">x axis: '
            + "".join(
                f'<button type="button" data-axis="{a}" aria-pressed="{str(a == "step").lower()}">'
                f"{AXIS_NAMES[a]}</button>"
                for a in axes
            )
            + "</div>"
        )
    return (
        f'<figure id="fig-{name}" class="interactive">{buttons}'
        f'<div class="plot" id="plot-{name}" data-spec="spec-{name}"></div>'
        f'<script type="application/json" id="spec-{name}">{to_json(fig.interactive)}</script>'
        f"<figcaption>{escape(fig.interactive['caption'])} (drag to zoom, double-click to "
        "reset; hover for values)</figcaption></figure>"
    )
