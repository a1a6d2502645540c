// A tiny line-chart drawer: SVG elements made with createElementNS, every label set as text.
// No library, no network. fastmqChart(container, points, options): points = [[timeMs, value], ...].
"use strict";
(function () {
  var NS = "http://www.w3.org/2000/svg";
  function node(name, attrs) {
    var n = document.createElementNS(NS, name);
    Object.keys(attrs || {}).forEach(function (k) { n.setAttribute(k, String(attrs[k])); });
    return n;
  }
  function label(x, y, text, anchor) {
    var t = node("text", { x: x, y: y, "text-anchor": anchor || "start" });
    t.textContent = text;
    return t;
  }
  function clock(ms) {
    var d = new Date(ms);
    return d.toTimeString().slice(0, 8);
  }
  // the step between the 4 grid lines: 1, 2 or 5 times a power of ten, at least 1 (counts are whole)
  function niceStep(v) {
    var raw = Math.max(v, 1) / 4, p = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (steps[i] * p >= raw) { return Math.max(1, steps[i] * p); } }
    return Math.max(1, 10 * p);
  }
  function fastmqChart(container, points, options) {
    var o = options || {};
    var w = o.width || 640, h = o.height || 200, left = 56, right = 12, top = 12, bottom = 26;
    var svg = node("svg", { "class": "chart", width: w, height: h, viewBox: "0 0 " + w + " " + h, role: "img" });
    var title = node("title");
    title.textContent = o.title || "chart";
    svg.appendChild(title);
    while (container.firstChild) { container.removeChild(container.firstChild); }
    container.appendChild(svg);
    var pw = w - left - right, ph = h - top - bottom;
    svg.appendChild(node("line", { "class": "axis", x1: left, y1: top + ph, x2: left + pw, y2: top + ph }));
    svg.appendChild(node("line", { "class": "axis", x1: left, y1: top, x2: left, y2: top + ph }));
    if (!points || points.length === 0) {
      svg.appendChild(label(left + pw / 2, top + ph / 2, o.empty || "no samples yet", "middle"));
      return svg;
    }
    var t0 = points[0][0], t1 = points[points.length - 1][0];
    if (o.windowMs) { t0 = Math.min(t0, t1 - o.windowMs); }
    if (t1 === t0) { t0 = t1 - 1000; }
    var step = niceStep(Math.max.apply(null, points.map(function (p) { return p[1]; }))), vmax = 4 * step;
    function x(t) { return left + (t - t0) / (t1 - t0) * pw; }
    function y(v) { return top + ph - v / vmax * ph; }
    for (var i = 0; i <= 4; i++) {
      var v = step * i, yy = y(v);
      svg.appendChild(node("line", { "class": "axis", x1: left, y1: yy, x2: left + pw, y2: yy, "stroke-dasharray": "2,3" }));
      svg.appendChild(label(left - 6, yy + 4, String(Math.round(v)), "end"));
    }
    svg.appendChild(label(left, h - 8, clock(t0)));
    svg.appendChild(label(left + pw, h - 8, clock(t1), "end"));
    var d = points.map(function (p, k) { return (k ? "L" : "M") + x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1); }).join(" ");
    var last = points[points.length - 1];
    svg.appendChild(node("path", { "class": "area", d: d + " L" + x(last[0]).toFixed(1) + "," + y(0) + " L" + x(points[0][0]).toFixed(1) + "," + y(0) + " Z" }));
    svg.appendChild(node("path", { "class": "line", d: d }));
    points.forEach(function (p) { svg.appendChild(node("circle", { cx: x(p[0]).toFixed(1), cy: y(p[1]).toFixed(1), r: 2, fill: "#1f6feb" })); });
    svg.setAttribute("data-points", String(points.length));
    return svg;
  }
  window.fastmqChart = fastmqChart;
})();
