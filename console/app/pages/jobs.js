// Jobs (#/jobs?queue=&status=&share=&name=&tag=&after=&before=): one page of jobs at a time,
// read on the server (Batch ListServiceJobs when a queue is chosen, else SageMaker
// ListTrainingJobs), next/previous through a stack of tokens, and live status from the event
// stream. The filters live in the hash, so a filtered list can be linked.
import { call, events } from '../api.js';
import { h, replace, section, errorBox, loading, time, status, hrefs } from '../dom.js';

export const PAGE_SIZE = 25;
export const BATCH_STATUSES = ['SUBMITTED', 'PENDING', 'RUNNABLE', 'SCHEDULED', 'STARTING', 'RUNNING', 'SUCCEEDED', 'FAILED'];
export const TRAINING_STATUSES = ['InProgress', 'Completed', 'Failed', 'Stopping', 'Stopped'];

// A datetime-local value (the user's time) as epoch milliseconds; null when empty or invalid.
function localToMs(value) {
  if (!value) return null;
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? null : ms;
}

// The ListServiceJobs request for the filters. Batch takes one of its filters at a time: the first
// given of name, share, after, before is sent, and the note names those left out. The tag filter
// (trainyard:tag) goes beside it.
export function batchRequest(f, token) {
  const input = { jobQueue: f.queue, maxResults: PAGE_SIZE };
  if (token) input.nextToken = token;
  const candidates = [];
  if (f.name) candidates.push(['name', { name: 'JOB_NAME', values: [f.name.includes('*') ? f.name : f.name + '*'] }]);
  if (f.share) candidates.push(['share', { name: 'SHARE_IDENTIFIER', values: [f.share] }]);
  if (localToMs(f.after) !== null) candidates.push(['after', { name: 'AFTER_CREATED_AT', values: [String(localToMs(f.after))] }]);
  if (localToMs(f.before) !== null) candidates.push(['before', { name: 'BEFORE_CREATED_AT', values: [String(localToMs(f.before))] }]);
  const tags = f.tag ? f.tag.split(',').map((t) => t.trim()).filter(Boolean) : [];
  const notes = [];
  let clientStatus = null;
  if (candidates.length || tags.length) {
    input.filters = candidates.length ? [candidates[0][1]] : [];
    if (tags.length) input.filters.push({ name: 'trainyard:tag', values: tags });
    if (candidates.length > 1) notes.push(`Batch lists with one filter at a time: filtering by ${candidates[0][0]}; ${candidates.slice(1).map((c) => c[0]).join(', ')} not applied.`);
    // Batch applies the status beside a share filter (and trainyard's tag filter), not beside the others.
    const kind = candidates.length ? candidates[0][0] : 'tag';
    if (f.status) {
      if (kind === 'share' || kind === 'tag') input.jobStatus = f.status;
      else { clientStatus = f.status; notes.push(`Batch ignores the status with a ${kind} filter: rows of other statuses on this page are hidden.`); }
    }
  } else if (f.status) {
    input.jobStatus = f.status;
  } else {
    // No status and no filter lists RUNNING only (AWS's rule); created after the epoch lists all, newest first.
    input.filters = [{ name: 'AFTER_CREATED_AT', values: ['0'] }];
  }
  return { input, notes, clientStatus };
}

export function trainingRequest(f, token) {
  const input = { MaxResults: PAGE_SIZE, SortBy: 'CreationTime', SortOrder: 'Descending' };
  if (token) input.NextToken = token;
  if (f.status) input.StatusEquals = f.status;
  if (f.name) input.NameContains = f.name;
  if (localToMs(f.after) !== null) input.CreationTimeAfter = localToMs(f.after) / 1000;
  if (localToMs(f.before) !== null) input.CreationTimeBefore = localToMs(f.before) / 1000;
  const notes = [];
  if (f.share) notes.push('The share filter needs a queue: not applied.');
  if (f.tag) notes.push('The tag filter needs a queue: not applied.');
  return { input, notes };
}

function batchRow(j, queue) {
  return h('tr', { testid: 'job-row', dataset: { jobName: j.jobName, jobId: j.jobId } },
    h('td', {}, h('a', { href: hrefs.job(j.jobName, { id: j.jobId, queue }) }, j.jobName)),
    h('td', { testid: 'job-status', class: 'status-cell' }, status(j.status)),
    h('td', {}, j.shareIdentifier || j.quotaShareName || '—'),
    h('td', {}, (j.capacityUsage || []).map((c) => `${c.quantity} × ${c.capacityUnit}`).join(', ')),
    h('td', {}, time(j.createdAt)),
    h('td', {}, time(j.startedAt)),
    h('td', { class: 'wrap reason' }, j.statusReason || ''));
}

function trainingRow(j) {
  return h('tr', { testid: 'job-row', dataset: { jobName: j.TrainingJobName } },
    h('td', {}, h('a', { href: hrefs.job(j.TrainingJobName) }, j.TrainingJobName)),
    h('td', { testid: 'job-status', class: 'status-cell' }, status(j.TrainingJobStatus)),
    h('td', {}, j.SecondaryStatus || ''),
    h('td', {}, j.WarmPoolStatus ? j.WarmPoolStatus.Status || '' : ''),
    h('td', {}, time(j.CreationTime)),
    h('td', {}, time(j.TrainingEndTime)),
    h('td', {}, ''));
}

const BATCH_HEADERS = ['Name', 'Status', 'Share', 'Instances', 'Created', 'Started', 'Reason'];
const TRAINING_HEADERS = ['Name', 'Status', 'Secondary status', 'Warm pool', 'Created', 'Ended', ''];

function filtersForm(f, queues) {
  const statusSelect = h('select', { name: 'status', testid: 'filter-status' });
  const fillStatuses = (queue) => {
    replace(statusSelect, h('option', { value: '' }, 'any status'),
      (queue ? BATCH_STATUSES : TRAINING_STATUSES).map((s) => h('option', { value: s, selected: s === f.status }, s)));
  };
  fillStatuses(f.queue);
  const queueSelect = h('select', { name: 'queue', testid: 'filter-queue', onchange: (e) => fillStatuses(e.target.value) },
    h('option', { value: '' }, 'all (training jobs)'),
    queues.map((q) => h('option', { value: q, selected: q === f.queue }, q)),
    f.queue && !queues.includes(f.queue) ? h('option', { value: f.queue, selected: true }, f.queue) : null);
  const input = (name, label, attrs = {}) => h('label', {}, label, h('input', { name, value: f[name] || '', testid: 'filter-' + name, ...attrs }));
  return h('form', { class: 'filters', testid: 'jobs-filters' },
    h('label', {}, 'Queue', queueSelect),
    h('label', {}, 'Status', statusSelect),
    input('name', 'Name', { placeholder: 'prefix or part', spellcheck: 'false' }),
    input('share', 'Share', { spellcheck: 'false' }),
    input('tag', 'Tags', { placeholder: 'key=value, …', spellcheck: 'false' }),
    input('after', 'Created after', { type: 'datetime-local', step: 1 }),
    input('before', 'Created before', { type: 'datetime-local', step: 1 }),
    h('button', { type: 'submit', testid: 'filter-apply' }, 'Apply'),
    h('a', { href: '#/jobs', class: 'button-link' }, 'Clear'));
}

export async function render(root, _params, query, ctx) {
  const f = Object.fromEntries(['queue', 'status', 'share', 'name', 'tag', 'after', 'before'].map((k) => [k, query.get(k) || '']));
  let queues = [];
  try {
    queues = ((await call('batch', 'DescribeJobQueues', { maxResults: 100 })).jobQueues || []).map((q) => q.jobQueueName);
  } catch { /* the list still works without the queue names */ }
  if (!ctx.alive()) return;

  const form = filtersForm(f, queues);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const data = new FormData(form);
    const q = new URLSearchParams();
    for (const [k, v] of data.entries()) if (String(v).trim()) q.set(k, String(v).trim());
    location.hash = '#/jobs' + (q.toString() ? '?' + q : '');
  });
  const notesBox = h('div', { testid: 'jobs-note', class: 'notes' });
  const tbody = h('tbody', {});
  const tableEl = h('table', { 'data-testid': 'jobs-table' },
    h('thead', {}, h('tr', {}, (f.queue ? BATCH_HEADERS : TRAINING_HEADERS).map((x) => h('th', {}, x)))), tbody);
  const prev = h('button', { type: 'button', testid: 'jobs-prev', disabled: true }, '← Previous');
  const next = h('button', { type: 'button', testid: 'jobs-next', disabled: true }, 'Next →');
  const pageLabel = h('span', { testid: 'jobs-page', class: 'muted' }, '');
  const errorSlot = h('div', {});
  replace(root, h('div', { class: 'page', testid: 'page-jobs' },
    h('h1', {}, 'Jobs'),
    section(f.queue ? `Service jobs of queue ${f.queue}` : 'Training jobs', form, notesBox, errorSlot,
      h('div', { class: 'table-wrap' }, tableEl),
      h('div', { class: 'pager' }, prev, pageLabel, next))));

  // tokens[i] is the token that reads page i (page 0: none). Only the current page is loaded.
  const tokens = [null];
  let pageIndex = 0;
  let clientStatus = null;

  const load = async (index) => {
    const token = tokens[index];
    errorSlot.textContent = '';
    prev.disabled = next.disabled = true;
    pageLabel.textContent = 'loading…';
    try {
      let rows;
      let nextToken;
      let notes;
      if (f.queue) {
        const req = batchRequest(f, token);
        clientStatus = req.clientStatus;
        const r = await call('batch', 'ListServiceJobs', req.input);
        rows = (r.jobSummaryList || []).filter((j) => !clientStatus || j.status === clientStatus).map((j) => batchRow(j, f.queue));
        nextToken = r.nextToken;
        notes = req.notes;
      } else {
        const req = trainingRequest(f, token);
        const r = await call('sagemaker', 'ListTrainingJobs', req.input);
        rows = (r.TrainingJobSummaries || []).map(trainingRow);
        nextToken = r.NextToken;
        notes = req.notes;
      }
      if (!ctx.alive()) return;
      pageIndex = index;
      tokens.length = index + 1;
      if (nextToken) tokens.push(nextToken);
      replace(tbody, rows.length ? rows : h('tr', { testid: 'jobs-empty' }, h('td', { colspan: 7, class: 'muted' }, 'No jobs match.')));
      replace(notesBox, notes.map((n) => h('p', { class: 'muted small' }, n)));
      pageLabel.textContent = `page ${index + 1}`;
      prev.disabled = index === 0;
      next.disabled = !nextToken;
    } catch (err) {
      if (!ctx.alive()) return;
      pageLabel.textContent = '';
      replace(errorSlot, errorBox(err, 'jobs-error'));
      prev.disabled = pageIndex === 0;
    }
  };
  prev.addEventListener('click', () => load(Math.max(0, pageIndex - 1)));
  next.addEventListener('click', () => load(pageIndex + 1));
  await load(0);

  // Live: a state change of a job on this page changes its status cell; a job new to the list
  // goes on top of the first page when it matches the filters this page can check itself.
  const matchesNew = (jobName, st) => {
    if (f.status && st !== f.status) return false;
    if (f.name && !jobName.toLowerCase().includes(f.name.replace(/\*$/, '').toLowerCase())) return false;
    return !f.share && !f.tag && !f.before;
  };
  const stream = events(f.queue ? { queue: f.queue } : {}, (e) => {
    if (!ctx.alive()) return;
    const type = e['detail-type'] || '';
    const d = e.detail || {};
    let row = null;
    let st;
    if (f.queue && (type === 'Batch Service Job State Change' || type === 'Batch Job Queue Blocked')) {
      st = d.status;
      row = [...tbody.querySelectorAll('tr[data-testid="job-row"]')].find((r) => r.dataset.jobId === d.jobId);
      if (!row && pageIndex === 0 && d.jobName && matchesNew(d.jobName, st)) {
        row = batchRow({ ...d, statusReason: d.statusReason }, f.queue);
        const empty = tbody.querySelector('[data-testid="jobs-empty"]');
        if (empty) empty.remove();
        tbody.insertBefore(row, tbody.firstChild);
        while (tbody.children.length > PAGE_SIZE) tbody.removeChild(tbody.lastChild);
        return;
      }
      if (row && d.statusReason !== undefined) {
        const reason = row.querySelector('.reason');
        if (reason) reason.textContent = d.statusReason || '';
      }
    } else if (!f.queue && type === 'SageMaker Training Job State Change') {
      st = d.TrainingJobStatus;
      row = [...tbody.querySelectorAll('tr[data-testid="job-row"]')].find((r) => r.dataset.jobName === d.TrainingJobName);
      if (!row && pageIndex === 0 && d.TrainingJobName && matchesNew(d.TrainingJobName, st)) {
        row = trainingRow(d);
        const empty = tbody.querySelector('[data-testid="jobs-empty"]');
        if (empty) empty.remove();
        tbody.insertBefore(row, tbody.firstChild);
        while (tbody.children.length > PAGE_SIZE) tbody.removeChild(tbody.lastChild);
        return;
      }
      if (row && row.children[2]) row.children[2].textContent = d.SecondaryStatus || '';
    }
    if (row && st) replace(row.querySelector('[data-testid="job-status"]'), status(st));
  });
  ctx.onLeave(() => stream.close());
}
