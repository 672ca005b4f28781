// A live line chart drawn as SVG by hand: the last N samples of one series (growing from the
// left until N are kept), with its latest
// value as text (the chart is decoration for sighted users; the text carries the figure).

const NS = "http://www.w3.org/2000/svg";

export class LineChart {
  constructor(title, format, size = 30) {
    this.format = format;
    this.size = size;
    this.values = [];
    this.svg = document.createElementNS(NS, "svg");
    this.svg.setAttribute("viewBox", "0 0 300 80");
    this.svg.setAttribute("preserveAspectRatio", "none");
    this.svg.setAttribute("aria-hidden", "true");
    this.svg.classList.add("chart");
    this.path = document.createElementNS(NS, "path");
    this.path.classList.add("line");
    this.area = document.createElementNS(NS, "path");
    this.area.classList.add("area");
    this.svg.append(this.area, this.path);
    this.value = document.createElement("output");
    this.value.className = "figure";
    this.value.textContent = "–";
    this.element = document.createElement("figure");
    this.element.className = "card chart-card";
    const caption = document.createElement("figcaption");
    caption.append(`${title}: `, this.value);
    this.element.append(caption, this.svg);
  }

  push(value) {
    this.values.push(value);
    if (this.values.length > this.size) this.values.shift();
    this.value.textContent = this.format(value);
    this.draw();
  }

  draw() {
    const top = Math.max(1, ...this.values);
    const step = 300 / (this.size - 1);
    const points = this.values.map((v, i) => [i * step, 76 - (v / top) * 70]); // oldest at the left
    if (!points.length) return;
    const line = points.map(([x, y], i) => `${i ? "L" : "M"}${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
    this.path.setAttribute("d", line);
    const first = points[0][0].toFixed(1);
    const last = points[points.length - 1][0].toFixed(1);
    this.area.setAttribute("d", `${line} L${last},78 L${first},78 Z`);
  }
}
