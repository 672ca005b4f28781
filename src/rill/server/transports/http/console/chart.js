// A live time chart drawn as SVG by hand (no chart library: the console ships offline): one
// series over a fixed window of time (5 minutes by default) ending now, with a y axis in the
// series' unit (SI prefixes: 1.5 k msg/s, 2 MB/s) starting at 0, an x axis of clock times, and
// the latest value as text (the chart is for sighted users; the figure carries the value).
// Samples older than the window are dropped; the line breaks where samples are missing; the time
// before the first sample (the page was not open) is shaded and says so; an idle series is a line
// on 0, with its axes.

const NS = "http://www.w3.org/2000/svg";
const HEIGHT = 150;
const MARGIN = { top: 10, right: 12, bottom: 22, left: 64 };
const PREFIXES = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];

// 1500 → "1.5 k", 2e6 → "2 M", 0.5 → "0.5", with ``unit`` after ("1.5 kB/s", "2 M msg/s").
export function si(value, unit = "") {
  const sign = value < 0 ? "-" : "";
  let n = Math.abs(value);
  let prefix = "";
  for (const [size, name] of PREFIXES) {
    if (n >= size) { n /= size; prefix = name; break; }
  }
  const digits = n === 0 ? "0" : n >= 100 || Number.isInteger(n) ? String(Math.round(n)) : n >= 10 ? n.toFixed(1) : n.toFixed(n < 1 ? 2 : 1);
  const text = digits.includes(".") ? digits.replace(/\.?0+$/, "") : digits;
  if (!unit) return `${sign}${text}${prefix ? ` ${prefix}` : ""}`;
  // "kB/s" (a prefix joins a symbol), "1.5 k msg/s" (and a word)
  const joined = /^[A-Z]/.test(unit) ? `${prefix}${unit}` : `${prefix ? `${prefix} ` : ""}${unit}`;
  return `${sign}${text} ${joined}`;
}

// A "nice" step (1, 2, 2.5 or 5 times a power of ten) that cuts 0..top into about ``parts``.
function niceStep(top, parts, whole) {
  const raw = top / parts;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw);
  return whole ? Math.max(1, Math.ceil(step)) : step;
}

function clock(ms, withSeconds) {
  return new Date(ms).toLocaleTimeString(undefined, {
    hour: "2-digit", minute: "2-digit", second: withSeconds ? "2-digit" : undefined, hour12: false,
  });
}

function node(tag, attributes = {}, text) {
  const element = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  if (text !== undefined) element.textContent = text;
  return element;
}

export class TimeChart {
  // ``unit``: "msg/s", "B/s", "msg" ...; ``whole``: the values are counts (integer ticks).
  constructor(title, { unit, whole = false, windowMs = 5 * 60 * 1000, periodMs = 2000 } = {}) {
    this.title = title;
    this.unit = unit;
    this.whole = whole;
    this.windowMs = windowMs;
    this.periodMs = periodMs;
    this.samples = []; // [time in ms, value], oldest first
    this.width = 400;
    this.svg = node("svg", { class: "chart", height: HEIGHT, "aria-hidden": "true" });
    this.value = document.createElement("output");
    this.value.className = "figure";
    this.value.textContent = si(0, unit);
    this.element = document.createElement("figure");
    this.element.className = "card chart-card";
    const caption = document.createElement("figcaption");
    const minutes = Math.round(windowMs / 60000);
    caption.append(`${title}: `, this.value, " ",
      Object.assign(document.createElement("small"), { className: "window", textContent: `last ${minutes} min` }));
    this.element.append(caption, this.svg);
    this.resize = new ResizeObserver(() => {
      const width = Math.round(this.svg.getBoundingClientRect().width);
      if (width && width !== this.width) { this.width = width; this.draw(); }
    });
    this.resize.observe(this.svg);
    this.draw();
  }

  push(value, at = Date.now()) {
    this.samples.push([at, value]);
    while (this.samples.length && this.samples[0][0] < at - this.windowMs) this.samples.shift();
    this.value.textContent = si(value, this.unit);
    this.draw(at);
  }

  stop() {
    this.resize.disconnect();
  }

  draw(now = Date.now()) {
    const { top: mt, right: mr, bottom: mb, left: ml } = MARGIN;
    const width = this.width;
    const plotW = Math.max(10, width - ml - mr);
    const plotH = HEIGHT - mt - mb;
    const start = now - this.windowMs;
    const peak = Math.max(0, ...this.samples.map(([, v]) => v));
    const reach = peak > 0 ? peak : (this.whole ? 4 : 1); // idle: a scale of 0..1 (0..4 for counts)
    const step = niceStep(reach, peak > 0 || this.whole ? 4 : 2, this.whole);
    const top = Math.max(step, Math.ceil(reach / step) * step);
    const x = (t) => ml + ((t - start) / this.windowMs) * plotW;
    const y = (v) => mt + plotH - (v / top) * plotH;
    this.svg.setAttribute("viewBox", `0 0 ${width} ${HEIGHT}`);
    this.svg.setAttribute("width", width);

    const parts = [];
    const yAxis = node("g", { class: "axis y-axis" });
    for (let v = 0; v <= top + step / 1000; v += step) {
      const at = y(v).toFixed(1);
      yAxis.append(node("line", { class: "grid", x1: ml, x2: ml + plotW, y1: at, y2: at }),
        node("text", { x: ml - 6, y: at, "text-anchor": "end", "dominant-baseline": "middle" }, si(v, this.unit)));
    }
    parts.push(yAxis);

    const xAxis = node("g", { class: "axis x-axis" });
    const tick = this.windowMs <= 2 * 60 * 1000 ? 30000 : 60000; // a label a minute (30 s on short windows)
    for (let t = Math.ceil(start / tick) * tick; t <= now; t += tick) {
      const at = x(t).toFixed(1);
      xAxis.append(node("line", { class: "tick", x1: at, x2: at, y1: mt + plotH, y2: mt + plotH + 4 }),
        node("text", { x: at, y: HEIGHT - 4, "text-anchor": "middle" }, clock(t, tick < 60000)));
    }
    xAxis.append(node("line", { class: "base", x1: ml, x2: ml + plotW, y1: mt + plotH, y2: mt + plotH }));
    parts.push(xAxis);

    // before the first sample (the page was not open): said, not left blank
    const first = this.samples.length ? this.samples[0][0] : now;
    if (first > start + this.periodMs) {
      const edge = x(first);
      const shade = node("g", { class: "nodata" });
      shade.append(node("rect", { x: ml, y: mt, width: Math.max(0, edge - ml).toFixed(1), height: plotH }));
      if (edge - ml > 130) {
        shade.append(node("text", { x: ((ml + edge) / 2).toFixed(1), y: mt + plotH / 2, "text-anchor": "middle", "dominant-baseline": "middle" },
          `no samples before ${clock(first, true)}`));
      }
      parts.unshift(shade);
    }

    // the series: one path, broken where a sample is missing (a gap of over 2.5 periods)
    let line = "";
    let area = "";
    let run = [];
    const flush = () => {
      if (!run.length) return;
      const d = run.map(([t, v], i) => `${i ? "L" : "M"}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      line += `${d} `;
      area += `${d} L${x(run[run.length - 1][0]).toFixed(1)},${y(0)} L${x(run[0][0]).toFixed(1)},${y(0)} Z `;
      run = [];
    };
    for (const sample of this.samples) {
      if (run.length && sample[0] - run[run.length - 1][0] > 2.5 * this.periodMs) flush();
      run.push(sample);
    }
    flush();
    if (line) parts.push(node("path", { class: "area", d: area.trim() }), node("path", { class: "line", d: line.trim() }));
    if (this.samples.length) {
      const [t, v] = this.samples[this.samples.length - 1];
      parts.push(node("circle", { class: "dot", cx: x(t).toFixed(1), cy: y(v).toFixed(1), r: 3 }));
    }
    this.svg.replaceChildren(...parts);
  }
}
