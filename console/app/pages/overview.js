// Overview (#/): capacity by instance type, the queues with their depth and running counts,
// alarms firing and the newest events (followed live).
import { call, events, isUnknownAction } from '../api.js';
import { h, replace, section, table, num, status, errorBox, loading, hrefs, time, toMs } from '../dom.js';
import { newestEvents, eventRow } from './common.js';

const WAITING = ['SUBMITTED', 'PENDING', 'RUNNABLE'];
const ACTIVE = ['SCHEDULED', 'STARTING', 'RUNNING'];

export async function render(root, _params, _query, ctx) {
  const capacityBox = h('div', {}, loading());
  const queuesBox = h('div', {}, loading());
  const alarmsBox = h('div', {}, loading());
  const eventsBox = h('div', {}, loading());
  replace(root, h('div', { class: 'page', testid: 'page-overview' },
    h('h1', {}, 'Overview'),
    h('div', { class: 'grid' },
      section('Capacity by instance type', capacityBox),
      section('Alarms firing', alarmsBox)),
    section('Queues', queuesBox),
    section('Recent events', eventsBox)));

  const capacity = call('trainyard', 'DescribeCapacity', {}).then((r) => {
    const rows = (r.Capacity || []).map((c) => {
      const offered = c.Offered ?? c.Reported ?? c.Configured;
      const down = typeof c.Configured === 'number' && typeof offered === 'number' ? Math.max(0, c.Configured - offered) : null;
      return h('tr', { testid: 'capacity-row', dataset: { instanceType: c.InstanceType || c.CapacityKey } },
        h('td', {}, c.InstanceType || c.CapacityKey, c.ManagedSpot ? h('span', { class: 'tag' }, 'spot') : null),
        h('td', { class: 'n' }, num(c.InUse)), h('td', { class: 'n' }, num(c.Free)),
        h('td', { class: 'n' }, num(c.WarmPoolHeld)), h('td', { class: 'n' }, num(down)),
        h('td', { class: 'n' }, num(c.Configured)));
    });
    replace(capacityBox,
      table(['Instance type', 'In use', 'Free', 'Warm', 'Down', 'Configured'], rows, { 'data-testid': 'capacity-table' }),
      r.Problem ? h('p', { class: 'warn' }, r.Problem) : null,
      h('p', { class: 'muted small' }, 'Source: ', r.Source || '—', '. Down: configured but not offered by the cluster.'));
  }).catch((err) => replace(capacityBox, errorBox(err)));

  const queues = Promise.all([
    call('batch', 'DescribeJobQueues', { maxResults: 100 }),
    call('trainyard', 'QueueStandings', {}).catch((err) => (isUnknownAction(err) ? null : Promise.reject(err))),
  ]).then(([q, standings]) => {
    const byQueue = new Map(((standings && standings.Queues) || []).map((s) => [s.JobQueue, s]));
    const count = (s, list) => (s && s.Counts ? list.reduce((n, k) => n + (Number(s.Counts[k]) || 0), 0) : null);
    const rows = (q.jobQueues || []).map((jq) => {
      const s = byQueue.get(jq.jobQueueName);
      return h('tr', { testid: 'queue-row', dataset: { queue: jq.jobQueueName } },
        h('td', {}, h('a', { href: hrefs.queue(jq.jobQueueName) }, jq.jobQueueName)),
        h('td', {}, status(jq.state)), h('td', {}, (s && s.Kind) || (jq.schedulingPolicyArn ? 'FAIR_SHARE' : jq.jobQueueType || 'FIFO')),
        h('td', { class: 'n' }, num(jq.priority)),
        h('td', { class: 'n', testid: 'queue-depth' }, s ? num(count(s, WAITING)) : '—'),
        h('td', { class: 'n', testid: 'queue-running' }, s ? num(count(s, ACTIVE)) : '—'));
    });
    replace(queuesBox,
      table(['Queue', 'State', 'Kind', 'Priority', 'Waiting', 'Running'], rows, { 'data-testid': 'queues-table' }),
      standings ? null : h('p', { class: 'muted small' }, 'Depth and running counts need the QueueStandings operation, which this server does not offer.'),
      q.nextToken ? h('p', { class: 'muted small' }, 'Showing the first 100 queues.') : null);
  }).catch((err) => replace(queuesBox, errorBox(err)));

  const alarms = newestEvents({ DetailTypes: ['CloudWatch Alarm State Change'] }, 500).then(({ events: list }) => {
    const state = new Map();
    for (const e of list.slice().reverse()) state.set(e.detail && e.detail.alarmName, e);  // oldest first: the last wins
    const firing = [...state.values()].filter((e) => e.detail && e.detail.state && e.detail.state.value === 'ALARM');
    replace(alarmsBox, firing.length
      ? table(['Since', 'Alarm', 'Reason'], firing.map((e) => h('tr', { testid: 'alarm-row' },
        h('td', {}, time(toMs(e.time))), h('td', {}, e.detail.alarmName), h('td', { class: 'wrap' }, e.detail.state.reason || ''))))
      : h('p', { class: 'ok', testid: 'alarms-none' }, 'No alarm is firing.'));
  }).catch((err) => replace(alarmsBox, errorBox(err)));

  const recent = newestEvents({}, 20).then(({ events: list }) => {
    const tbody = h('tbody', {}, list.map((e) => eventRow(e)));
    replace(eventsBox, h('div', { class: 'table-wrap' }, h('table', { 'data-testid': 'events-table' },
      h('thead', {}, h('tr', {}, ['Time', 'Type', 'About', 'What'].map((x) => h('th', {}, x)))), tbody)));
    // Live: new events go on top; the table keeps 20.
    const stream = events({}, (e) => {
      if (!ctx.alive()) return;
      tbody.insertBefore(eventRow(e), tbody.firstChild);
      while (tbody.children.length > 20) tbody.removeChild(tbody.lastChild);
    });
    ctx.onLeave(() => stream.close());
  }).catch((err) => replace(eventsBox, errorBox(err)));

  await Promise.all([capacity, queues, alarms, recent]);
}
