// Building the page. Text from the server (job names, logs, tags, reasons) is only ever set as
// textContent or an attribute value: nothing the server sends is parsed as HTML.

// h('tr', {testid: 'job-row', dataset: {jobName}, onclick}, child, 'text', [more children])
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'testid') el.setAttribute('data-testid', value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'text') el.textContent = String(value);
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'value') el.value = value;
    else if (key === 'checked' || key === 'disabled' || key === 'selected') el[key] = Boolean(value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function replace(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// A timestamp as the APIs send it: epoch seconds (SageMaker, may be fractional), epoch
// milliseconds (Batch, trainyard) or an ISO 8601 string (events). Null when absent.
export function toMs(value) {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value === 'number') return value > 1e11 ? value : value * 1000;
  if (/^\d+(\.\d+)?$/.test(String(value))) return toMs(Number(value));
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? null : ms;
}

const localFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

// A <time>: the user's local time, the UTC time on hover.
export function time(value) {
  const ms = toMs(value);
  if (ms === null) return h('span', { class: 'muted' }, '—');
  const d = new Date(ms);
  return h('time', { datetime: d.toISOString(), title: d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') }, localFormat.format(d));
}

const relativeFormat = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });

// "in 4 min", "3 hours ago".
export function relative(ms, now = Date.now()) {
  const s = (ms - now) / 1000;
  const abs = Math.abs(s);
  if (abs < 45) return relativeFormat.format(Math.round(s), 'second');
  if (abs < 45 * 60) return relativeFormat.format(Math.round(s / 60), 'minute');
  if (abs < 36 * 3600) return relativeFormat.format(Math.round(s / 3600), 'hour');
  return relativeFormat.format(Math.round(s / 86400), 'day');
}

// A time shown both ways: "in 4 min (12 Mar 2026, 10:04:00)".
export function relativeTime(value) {
  const ms = toMs(value);
  if (ms === null) return h('span', { class: 'muted' }, 'unknown');
  return h('span', {}, relative(ms) + ' (', time(ms), ')');
}

export function duration(seconds) {
  if (seconds === undefined || seconds === null || Number.isNaN(Number(seconds))) return '—';
  let s = Math.round(Number(seconds));
  if (s < 60) return `${s} s`;
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hr = Math.floor(s / 3600); s -= hr * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  return [d && `${d} d`, hr && `${hr} h`, m && `${m} min`, !d && !hr && s && `${s} s`].filter(Boolean).join(' ');
}

export function num(value, digits = 2) {
  if (value === undefined || value === null || value === '') return '—';
  const n = Number(value);
  if (Number.isNaN(n)) return String(value);
  return Number.isInteger(n) ? n.toLocaleString() : n.toLocaleString(undefined, { maximumFractionDigits: digits });
}

// A status as a coloured badge; testid lets tests read it.
export function status(value, testid) {
  const text = value ? String(value) : '—';
  return h('span', { class: 'status status-' + text.toLowerCase().replace(/[^a-z]/g, ''), testid }, text);
}

// table(['Name', 'Status'], rows) where rows are arrays of cells or <tr> elements.
export function table(headers, rows, attrs = {}) {
  return h('div', { class: 'table-wrap' },
    h('table', attrs,
      h('thead', {}, h('tr', {}, headers.map((x) => h('th', {}, x)))),
      h('tbody', {}, rows.length ? rows.map((r) => (r instanceof Node ? r : h('tr', {}, r.map((c) => h('td', {}, c)))))
        : h('tr', {}, h('td', { colspan: headers.length, class: 'muted' }, 'none'))),
    ));
}

// A definition list of [label, value] pairs, skipping absent values.
export function fields(pairs) {
  return h('dl', { class: 'fields' },
    pairs.filter(([, v]) => v !== undefined && v !== null && v !== '').map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

export function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', {}, title), ...children);
}

export function errorBox(err, testid) {
  const type = err && (err.type || err.name);
  return h('div', { class: 'error', role: 'alert', testid }, type ? h('strong', {}, type + ': ') : null, (err && err.message) || String(err));
}

export function loading(text = 'Loading…') {
  return h('p', { class: 'muted loading' }, text);
}

export function pre(text, attrs = {}) {
  return h('pre', attrs, text);
}

export function json(value) {
  return h('pre', { class: 'json' }, JSON.stringify(value, null, 2));
}

export function link(href, text, attrs = {}) {
  return h('a', { href, ...attrs }, text);
}

// A hash route for a job, a queue or a tuning job, with names encoded.
export const hrefs = {
  job: (name, extra) => '#/jobs/' + encodeURIComponent(name) + (extra ? '?' + new URLSearchParams(extra) : ''),
  queue: (name) => '#/queues/' + encodeURIComponent(name),
  tuning: (name) => '#/tuning/' + encodeURIComponent(name),
};
