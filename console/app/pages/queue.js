// Queue (#/queues/NAME): what runs next and why (the snapshot's front 100, each reason in
// words, each estimated start), the shares against their entitlement now and over time, the
// running jobs (one page), and the preemptions with the work they threw away.
import { call, isUnknownAction } from '../api.js';
import { h, replace, section, table, num, status, errorBox, loading, time, relativeTime, hrefs, toMs, fields } from '../dom.js';
import { explainWait } from '../reasons.js';
import { lineChart } from '../chart.js';
import { newestEvents } from './common.js';

export const jobIdOf = (arn) => String(arn || '').split('/').pop();

// A wait reason: the sentence, the scheduler's own words on hover and in a smaller line.
export function waitReasonCell(reason, attrs = {}) {
  if (!reason) return h('td', { ...attrs, class: 'muted' }, 'not yet placed by a scheduling pass');
  return h('td', { ...attrs, class: 'wrap', title: reason, dataset: { reason } },
    explainWait(reason), h('div', { class: 'muted small' }, reason));
}

export function frontRow(job, i, queueName) {
  const id = jobIdOf(job.jobArn);
  return h('tr', { testid: 'front-row', dataset: { jobId: id } },
    h('td', { class: 'n' }, String(i + 1)),
    h('td', {}, h('a', { href: hrefs.job(id, { id, queue: queueName }) }, id.slice(0, 8)), h('div', { class: 'muted small mono' }, id)),
    h('td', {}, time(job.earliestTimeAtPosition)),
    h('td', { testid: 'estimated-start', dataset: { at: job.trainyardEstimatedStartTime || '' } },
      job.trainyardEstimatedStartTime ? relativeTime(job.trainyardEstimatedStartTime) : h('span', { class: 'muted' }, 'unknown')),
    waitReasonCell(job.trainyardWaitReason, { testid: 'wait-reason' }));
}

function sharesSection(standing) {
  if (!standing) return h('p', { class: 'muted' }, 'Share standings need the QueueStandings operation, which this server does not offer: —');
  const shares = standing.Shares || [];
  const counts = standing.Counts || {};
  return h('div', {},
    fields(Object.entries(counts).map(([k, v]) => [k, num(v)])),
    table(['Share', 'In use', 'Entitlement', 'Borrowed', 'Lent', 'Waiting', 'Weight'], shares.map((s) =>
      h('tr', { testid: 'share-row', dataset: { share: s.Share } },
        h('td', {}, s.Share || '(no share)'),
        h('td', { class: 'n' }, num(s.InUse)),
        h('td', { class: 'n' }, h('span', {}, num(s.Entitlement)), usageBar(s.InUse, s.Entitlement)),
        h('td', { class: 'n' }, num(s.Borrowed)), h('td', { class: 'n' }, num(s.Lent)),
        h('td', { class: 'n' }, num(s.Waiting)), h('td', { class: 'n' }, num(s.WeightFactor))))));
}

function usageBar(used, entitled) {
  const u = Number(used) || 0;
  const e = Number(entitled) || 0;
  if (e <= 0) return null;
  const pct = Math.min(200, (100 * u) / e);
  return h('span', { class: 'meter', title: `${num(u)} of ${num(e)} (${Math.round(pct)}%)` },
    h('span', { class: pct > 100 ? 'meter-fill over' : 'meter-fill', style: `width:${Math.min(100, pct / 2 * 1)}%` }));
}

// The share history as chart series: each share's in-use and entitlement.
export function shareSeries(history) {
  const series = new Map();
  for (const p of history.Points || []) {
    const t = toMs(p.Timestamp);
    for (const [share, v] of Object.entries(p.Shares || {})) {
      for (const [key, label] of [['InUse', 'in use'], ['Entitlement', 'entitlement'], ['Borrowed', 'borrowed'], ['Lent', 'lent']]) {
        if (v[key] === undefined) continue;
        const name = `${share} ${label}`;
        if (!series.has(name)) series.set(name, { label: name, points: [] });
        series.get(name).points.push([t, Number(v[key])]);
      }
    }
  }
  return [...series.values()];
}

function isPreemption(e) {
  const d = e.detail || {};
  const attempts = d.attempts || [];
  const last = attempts[attempts.length - 1];
  return Boolean(last && /^Preempted/.test(last.statusReason || '') && d.status === 'RUNNABLE');
}

export async function render(root, [name], _query, ctx) {
  const frontBox = h('div', {}, loading());
  const usageBox = h('div', {}, loading());
  const sharesBox = h('div', {}, loading());
  const chartBox = h('div', {}, loading());
  const runningBox = h('div', {}, loading());
  const preemptBox = h('div', {}, loading());
  replace(root, h('div', { class: 'page', testid: 'page-queue', dataset: { queue: name } },
    h('h1', {}, 'Queue ', h('span', { class: 'mono' }, name)),
    h('p', {}, h('a', { href: '#/jobs?' + new URLSearchParams({ queue: name }) }, 'All jobs of this queue')),
    section('What runs next (front of the queue)', frontBox),
    h('div', { class: 'grid' }, section('Capacity in use', usageBox), section('Shares', sharesBox)),
    section('Shares over time', chartBox),
    section('Running', runningBox),
    section('Preemptions and work lost', preemptBox)));

  const snapshot = call('batch', 'GetJobQueueSnapshot', { jobQueue: name }).then((snap) => {
    const front = (snap.frontOfQueue && snap.frontOfQueue.jobs) || [];
    replace(frontBox,
      h('p', { class: 'muted small' }, 'Last scheduling pass: ', time(snap.frontOfQueue && snap.frontOfQueue.lastUpdatedAt), '. The first 100 waiting jobs, in the order the scheduler considers them.'),
      table(['#', 'Job', 'Waiting since', 'Expected start', 'Why it waits'], front.map((j, i) => frontRow(j, i, name)), { 'data-testid': 'front-table' }));
    const util = snap.queueUtilization || {};
    const loss = snap.trainyardPreemptionLoss;
    replace(usageBox,
      table(['Instance type', 'In use'], (util.totalCapacityUsage || []).map((c) => [c.capacityUnit, num(c.quantity)])),
      util.fairshareUtilization ? h('p', {}, 'Active shares: ', num(util.fairshareUtilization.activeShareCount)) : null,
      (snap.trainyardWarmPools || []).length ? h('div', {}, h('h3', {}, 'Warm pools kept by this queue'),
        table(['Job', 'Instances', 'Until'], snap.trainyardWarmPools.map((w) => [h('a', { href: hrefs.job(w.trainingJobName) }, w.trainingJobName), `${w.instanceCount} × ${w.instanceType}`, time(w.expiresAt)]))) : null);
    return loss;
  });

  const shares = call('trainyard', 'QueueStandings', { JobQueue: name })
    .then((r) => (r.Queues || []).find((q) => q.JobQueue === name) || (r.Queues || [])[0] || null)
    .catch((err) => (isUnknownAction(err) ? null : Promise.reject(err)))
    .then((standing) => replace(sharesBox, sharesSection(standing)))
    .catch((err) => replace(sharesBox, errorBox(err)));

  const history = call('trainyard', 'ShareHistory', { JobQueue: name }).then((r) => {
    const series = shareSeries(r);
    replace(chartBox, lineChart({ title: 'Instances per share', testid: 'share-chart', series, yLabel: 'instances' }));
  }).catch((err) => replace(chartBox, isUnknownAction(err) ? h('p', { class: 'muted' }, 'Share history needs the ShareHistory operation, which this server does not offer: —') : errorBox(err)));

  const running = call('batch', 'ListServiceJobs', { jobQueue: name, jobStatus: 'RUNNING', maxResults: 100 }).then((r) => {
    replace(runningBox, table(['Job', 'Share', 'Instances', 'Started'], (r.jobSummaryList || []).map((j) =>
      h('tr', { testid: 'running-row' },
        h('td', {}, h('a', { href: hrefs.job(j.jobName, { id: j.jobId, queue: name }) }, j.jobName)),
        h('td', {}, j.shareIdentifier || j.quotaShareName || '—'),
        h('td', {}, (j.capacityUsage || []).map((c) => `${c.quantity} × ${c.capacityUnit}`).join(', ')),
        h('td', {}, time(j.startedAt))))),
    r.nextToken ? h('p', { class: 'muted small' }, 'The first 100 running jobs; ', h('a', { href: '#/jobs?' + new URLSearchParams({ queue: name, status: 'RUNNING' }) }, 'all of them'), '.') : null);
  }).catch((err) => replace(runningBox, errorBox(err)));

  const preemptions = Promise.all([
    snapshot.catch(() => null),
    newestEvents({ JobQueues: [name], DetailTypes: ['Batch Service Job State Change'] }, 1000),
  ]).then(([loss, { events: list }]) => {
    const rows = list.filter(isPreemption).slice(0, 20).map((e) => {
      const d = e.detail;
      const last = d.attempts[d.attempts.length - 1];
      return h('tr', { testid: 'preemption-row' },
        h('td', {}, time(toMs(e.time))),
        h('td', {}, h('a', { href: hrefs.job(d.jobName, { id: d.jobId, queue: name }) }, d.jobName)),
        h('td', {}, d.shareIdentifier || d.quotaShareName || '—'),
        h('td', { class: 'wrap' }, last.statusReason),
        h('td', { class: 'n' }, d.trainyardPreemptionLoss ? num(d.trainyardPreemptionLoss.instanceHours, 3) : '—'));
    });
    replace(preemptBox,
      loss ? h('p', { testid: 'preemption-loss' }, 'Work lost to preemptions across this queue: ',
        h('strong', {}, num(loss.instanceHours, 3)), ' instance-hours, ', h('strong', {}, num(loss.gpuHours, 3)), ' GPU-hours.') : null,
      table(['When', 'Job', 'Share', 'Reason', 'Lost so far (instance-h)'], rows));
  }).catch((err) => replace(preemptBox, errorBox(err)));

  await snapshot.catch((err) => replace(frontBox, errorBox(err)));
  // The snapshot changes at every scheduling pass: refreshed every 5 s while the page is open.
  ctx.every(5000, () => call('batch', 'GetJobQueueSnapshot', { jobQueue: name }).then((snap) => {
    if (!ctx.alive()) return;
    const front = (snap.frontOfQueue && snap.frontOfQueue.jobs) || [];
    const tbody = frontBox.querySelector('tbody');
    if (tbody) replace(tbody, front.length ? front.map((j, i) => frontRow(j, i, name)) : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'none')));
  }).catch(() => {}));
  await Promise.all([shares, history, running, preemptions]);
}
