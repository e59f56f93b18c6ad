// Charts with uPlot (served as /console/vendor/uplot.js, a global). When it is not installed the
// chart's place says so and the page goes on.
import { h, replace, toMs } from './dom.js';

const PALETTE = ['#2f6fde', '#d9480f', '#2b8a3e', '#ae3ec9', '#e8590c', '#1098ad', '#5c940d', '#c2255c'];

export function haveCharts() {
  return typeof window.uPlot === 'function';
}

// Merges series of [timeMs, value] points onto one time axis (uPlot wants aligned columns);
// a series without a point at a time gets null there (a gap).
export function align(seriesList) {
  const times = [...new Set(seriesList.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const columns = seriesList.map((s) => {
    const col = new Array(times.length).fill(null);
    for (const [t, v] of s.points) col[index.get(t)] = v;
    return col;
  });
  return [times.map((t) => t / 1000), ...columns];
}

// lineChart({title, testid, series: [{label, points: [[timeMs, value]]}], yLabel})
// -> an element; call .update(series) on it to redraw with new points.
export function lineChart({ title, testid, series, yLabel, height = 220 }) {
  const box = h('div', { class: 'chart', testid });
  const heading = h('h3', {}, title);
  const body = h('div', { class: 'chart-body' });
  box.append(heading, body);
  let plot = null;
  let current = series;

  const draw = () => {
    if (!haveCharts()) {
      replace(body, h('p', { class: 'muted' }, 'charting library not installed'));
      return;
    }
    const points = current.reduce((n, s) => n + s.points.length, 0);
    box.dataset.points = String(points);
    if (points === 0) {
      if (plot) { plot.destroy(); plot = null; }
      replace(body, h('p', { class: 'muted' }, 'no data yet'));
      return;
    }
    const data = align(current);
    const width = Math.max(280, (body.clientWidth || box.clientWidth || 600) - 4);
    if (plot && plot.series.length === current.length + 1) {
      plot.setData(data);
      return;
    }
    if (plot) plot.destroy();
    replace(body);
    plot = new window.uPlot({
      width,
      height,
      scales: { x: { time: true } },
      axes: [{}, { label: yLabel || '' }],
      series: [{}, ...current.map((s, i) => ({ label: s.label, stroke: PALETTE[i % PALETTE.length], width: 2, spanGaps: true, points: { show: s.points.length < 60 } }))],
    }, data, body);
  };

  box.update = (next) => {
    current = next;
    draw();
  };
  // Drawn once the element is in the page (uPlot measures its parent).
  queueMicrotask(draw);
  requestAnimationFrame(() => { if (!plot) draw(); });
  return box;
}

// A chart of the trainyard series answer: [{MetricName, Points: [{Timestamp, Value}]}].
export function seriesPoints(points) {
  return (points || []).map((p) => [toMs(p.Timestamp), Number(p.Value)]).filter(([t, v]) => t !== null && !Number.isNaN(v));
}

// Horizontal bars, for comparisons (what-if): rows [{label, values: [{name, value}]}].
export function barChart({ title, testid, rows, unit = '' }) {
  const max = Math.max(1e-9, ...rows.flatMap((r) => r.values.map((v) => Number(v.value) || 0)));
  return h('div', { class: 'chart bars', testid },
    h('h3', {}, title),
    rows.map((r) => h('div', { class: 'bar-group' },
      h('div', { class: 'bar-label' }, r.label),
      r.values.map((v, i) => h('div', { class: 'bar-row' },
        h('span', { class: 'bar-name' }, v.name),
        h('span', { class: 'bar-track' },
          h('span', { class: 'bar', style: `width:${(100 * (Number(v.value) || 0)) / max}%;background:${PALETTE[i % PALETTE.length]}` })),
        h('span', { class: 'bar-value' }, v.value === null || v.value === undefined ? '—' : `${Number(v.value).toLocaleString(undefined, { maximumFractionDigits: 1 })}${unit}`))))));
}
