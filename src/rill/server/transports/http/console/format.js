// Human units: sizes, counts, durations, rates, timestamps (local time, UTC in the title).

const SIZE_UNITS = ["B", "KB", "MB", "GB", "TB", "PB"];

// A byte count (a number, or the API's "1234 B" text) as "4.2 MB".
export function bytes(value) {
  let n = typeof value === "string" ? Number.parseFloat(value) : value;
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  let unit = 0;
  while (n >= 1000 && unit < SIZE_UNITS.length - 1) { n /= 1000; unit += 1; }
  return unit === 0 ? `${n} B` : `${n.toFixed(n < 10 ? 1 : 0)} ${SIZE_UNITS[unit]}`;
}

export function bytesOf(text) {
  return typeof text === "string" ? Number.parseFloat(text) : Number(text || 0);
}

export function count(n) {
  return Number(n).toLocaleString("en-US");
}

export function plural(n, word) {
  return `${count(n)} ${word}${n === 1 ? "" : "s"}`;
}

// A duration in µs as "3 d 4 h", "12 min 5 s", "850 ms".
export function duration(microseconds) {
  const ms = microseconds / 1000;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  let s = Math.floor(ms / 1000);
  const parts = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];
  const out = [];
  for (const [size, name] of parts) {
    if (s >= size) { out.push(`${Math.floor(s / size)} ${name}`); s %= size; }
    if (out.length === 2) break;
  }
  return out.join(" ");
}

export function rate(perSecond, unit) {
  if (unit === "B") return `${bytes(Math.round(perSecond))}/s`;
  return `${perSecond < 10 ? perSecond.toFixed(1) : count(Math.round(perSecond))} ${unit}/s`;
}

// Topic settings: 0 and 2^64-1 mean "server default" / "never"/"unlimited".
export function isUnbounded(value) {
  return Number(value) >= 2 ** 63;
}

export function expiry(microseconds) {
  if (isUnbounded(microseconds) || !microseconds) return "never";
  return duration(microseconds);
}

export function maxSize(value) {
  if (isUnbounded(value) || !value) return "unlimited";
  return bytes(value);
}

// A <time> element for a µs timestamp: local time shown, UTC on hover (title).
export function timestamp(microseconds) {
  const date = new Date(microseconds / 1000);
  const element = document.createElement("time");
  element.dateTime = date.toISOString();
  element.title = `${date.toISOString().replace("T", " ").replace("Z", "")} UTC`;
  element.textContent = date.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
    second: "2-digit",
  });
  return element;
}
