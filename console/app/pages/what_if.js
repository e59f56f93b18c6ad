// What if (#/what-if): replays the queue's recent history through the simulator with changed
// share weights or quotas (trainyard WhatIf) and shows, per share, what happened, what the
// simulator makes of today's settings, and what it makes of the changed ones.
import { call, isUnknownAction } from '../api.js';
import { h, replace, section, table, num, errorBox, loading, duration } from '../dom.js';
import { barChart } from '../chart.js';

function changeRow() {
  return h('div', { class: 'inline change', testid: 'what-if-change-row' },
    h('select', { name: 'kind' }, h('option', { value: 'weight' }, 'weight factor'), h('option', { value: 'quota' }, 'quota (instances)')),
    h('input', { name: 'share', placeholder: 'share', spellcheck: 'false' }),
    h('input', { name: 'value', type: 'number', step: 'any', min: 0, placeholder: 'value', class: 'narrow' }),
    h('button', { type: 'button', onclick: (e) => e.target.parentElement.remove() }, 'Remove'));
}

function stats(s) {
  return s ? [duration(s.MeanWaitSeconds), duration(s.P90WaitSeconds), `${num(s.UtilizationPercent, 1)}%`] : ['—', '—', '—'];
}

function result(r) {
  const shares = r.Shares || [];
  return h('div', { testid: 'what-if-result' },
    h('p', {}, `${num(r.Jobs)} jobs of queue ${r.JobQueue}`, r.Window ? ` submitted in the window replayed.` : '.'),
    table(['Share', 'Jobs', 'Mean wait: actual', 'simulated now', 'with changes', 'P90 wait: actual', 'simulated now', 'with changes', 'Utilization: actual', 'simulated now', 'with changes'],
      shares.map((s) => {
        const [am, ap, au] = stats(s.Actual);
        const [bm, bp, bu] = stats(s.Baseline);
        const [sm, sp, su] = stats(s.Simulated);
        return h('tr', { testid: 'what-if-share-row', dataset: { share: s.Share } },
          h('td', {}, s.Share || '(none)'), h('td', { class: 'n' }, num(s.Actual && s.Actual.Jobs)),
          h('td', {}, am), h('td', {}, bm), h('td', { class: 'em' }, sm),
          h('td', {}, ap), h('td', {}, bp), h('td', { class: 'em' }, sp),
          h('td', {}, au), h('td', {}, bu), h('td', { class: 'em' }, su));
      })),
    barChart({ title: 'Mean wait per share (minutes)', testid: 'what-if-chart', rows: shares.map((s) => ({
      label: s.Share || '(none)',
      values: [['actual', s.Actual], ['simulated, today\'s settings', s.Baseline], ['simulated, with changes', s.Simulated]]
        .map(([n, v]) => ({ name: n, value: v ? Number(v.MeanWaitSeconds) / 60 : null })),
    })) }),
    (r.Notes || []).map((n) => h('p', { class: 'muted small', testid: 'what-if-note' }, n)));
}

export async function render(root, _params, query, ctx) {
  let queues = [];
  try {
    queues = ((await call('batch', 'DescribeJobQueues', { maxResults: 100 })).jobQueues || []).map((q) => q.jobQueueName);
  } catch { /* typed by hand then */ }
  if (!ctx.alive()) return;
  const changes = h('div', {}, changeRow());
  const out = h('div', {});
  const form = h('form', { class: 'filters', testid: 'what-if-form' },
    h('label', {}, 'Queue', h('select', { name: 'queue', testid: 'what-if-queue', required: true },
      queues.map((q) => h('option', { value: q, selected: q === query.get('queue') }, q)))),
    h('label', {}, 'History (hours)', h('input', { name: 'hours', type: 'number', min: 1, max: 720, value: query.get('hours') || 24, testid: 'what-if-hours', class: 'narrow' })),
    h('fieldset', {}, h('legend', {}, 'Changes'), changes, h('button', { type: 'button', onclick: () => changes.append(changeRow()) }, 'Add a change')),
    h('button', { type: 'submit', testid: 'what-if-run' }, 'Simulate'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const input = { JobQueue: form.queue.value, HistoryHours: Number(form.hours.value) };
    for (const row of changes.children) {
      const share = row.querySelector('[name=share]').value.trim();
      const value = row.querySelector('[name=value]').value;
      if (!share || value === '') continue;
      const key = row.querySelector('[name=kind]').value === 'weight' ? 'ShareWeights' : 'QuotaLimits';
      input[key] = { ...(input[key] || {}), [share]: Number(value) };
    }
    replace(out, loading('Replaying the history…'));
    try {
      const r = await call('trainyard', 'WhatIf', input);
      if (ctx.alive()) replace(out, result(r));
    } catch (err) {
      replace(out, isUnknownAction(err) ? h('p', { class: 'muted', testid: 'what-if-note' }, 'This server does not offer the WhatIf operation.') : errorBox(err));
    }
  });
  replace(root, h('div', { class: 'page', testid: 'page-what-if' },
    h('h1', {}, 'What if'),
    h('p', { class: 'muted' }, 'Replays this queue\'s recent jobs through the scheduler simulator with other share weights or quotas, and shows each share\'s waits and utilization: what happened, what the simulator makes of today\'s settings (how far to trust it), and with your changes.'),
    section('Scenario', form), section('Result', out)));
}
