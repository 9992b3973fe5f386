// Number, time and state formatting shared by tables, charts and tooltips, plus a tiny DOM
// builder. Values arrive as the API's JSON: 64-bit integers are strings, so `num` first.

export function num(value) {
  if (value === null || value === undefined || value === '') return NaN;
  return typeof value === 'number' ? value : Number(value);
}

const SI = [
  [1e12, 'T'],
  [1e9, 'B'],
  [1e6, 'M'],
  [1e3, 'K'],
];

// 425984 → "426K", 3.1e9 → "3.10B": counts of parameters and tokens.
export function count(value) {
  const v = num(value);
  if (!Number.isFinite(v)) return '—';
  for (const [scale, suffix] of SI) {
    if (Math.abs(v) >= scale) return `${(v / scale).toPrecision(3)}${suffix}`;
  }
  return String(Math.round(v));
}

// 2e10 → "2.00e10": FLOPs, whose magnitudes researchers read as powers of ten.
export function flops(value) {
  const v = num(value);
  if (!Number.isFinite(v)) return '—';
  if (v === 0) return '0';
  const [mantissa, exponent] = v.toExponential(2).split('e');
  return `${mantissa}e${Number(exponent)}`;
}

// 61.2e9 → "61.2 GB": bytes in decimal units, three significant figures (as core::HumanBytes).
const BYTE_UNITS = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
export function bytes(value) {
  let v = num(value);
  if (!Number.isFinite(v)) return '—';
  let unit = 0;
  while (Math.abs(v) >= 999.5 && unit < BYTE_UNITS.length - 1) {
    v /= 1000;
    unit += 1;
  }
  return unit === 0 ? `${Math.round(v)} B` : `${v.toPrecision(3)} ${BYTE_UNITS[unit]}`;
}

export function percent(fraction, digits = 1) {
  const v = num(fraction);
  return Number.isFinite(v) ? `${(100 * v).toFixed(digits)}%` : '—';
}

export function fixed(value, digits = 3) {
  const v = num(value);
  return Number.isFinite(v) ? v.toFixed(digits) : '—';
}

// A BPC difference with a real minus sign; negative (lower BPC) is better.
export function signed(value, digits = 3) {
  const v = num(value);
  if (!Number.isFinite(v)) return '—';
  const text = Math.abs(v).toFixed(digits);
  if (Number(text) === 0) return text;
  return v > 0 ? `+${text}` : `\u2212${text}`;
}

export function dateTime(timestamp) {
  if (!timestamp) return '—';
  const date = new Date(timestamp);
  if (Number.isNaN(date.getTime()) || date.getTime() <= 0) return '—';
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
         `${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

export function duration(seconds) {
  const s = num(seconds);
  if (!Number.isFinite(s) || s <= 0) return '—';
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

// "RUN_STATE_RUNNING" → "RUNNING", "SWEEP_STATE_ACTIVE" → "ACTIVE".
export function stateName(state) {
  return String(state || '').replace(/^(RUN|SWEEP)_STATE_/, '') || 'UNKNOWN';
}

export const FINAL_RUN_STATES = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);

export function isLiveRun(run) {
  return !FINAL_RUN_STATES.has(stateName(run.state));
}

// "1dense+SE", "all-moe", "interleaved" or "dense" for a RunSpec's model.
export function layoutName(model) {
  if (!model || model.architecture !== 'ARCHITECTURE_MOE') return 'dense';
  switch (model.moe?.layout) {
    case 'MOE_LAYOUT_ONE_DENSE_SHARED_EXPERT': return '1dense+SE';
    case 'MOE_LAYOUT_ALL_MOE': return 'all-moe';
    case 'MOE_LAYOUT_INTERLEAVED': return 'interleaved';
    default: return 'moe';
  }
}

// h('a', {href, class: 'x'}, 'text', child): attributes starting with "on" become listeners,
// `dataset` an object of data-* attributes, `style` CSS text set through the CSSOM (the
// scheduler's Content-Security-Policy refuses style attributes written as markup or with
// setAttribute); null/false children are skipped.
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) element.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === 'dataset') Object.assign(element.dataset, value);
    else if (key === 'class') element.className = value;
    else if (key === 'style') element.style.cssText = value;
    else element.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

export function stateBadge(state) {
  const name = stateName(state);
  return h('span', {class: `badge state-${name.toLowerCase()}`}, name);
}
