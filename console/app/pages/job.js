// Job detail (#/jobs/NAME, with ?id=SERVICE_JOB_ID&queue=Q when it came through a queue): the
// training job (DescribeTrainingJob) and its service job (DescribeServiceJob): status and why it
// waits, the timeline, attempts, the request, artifacts, the log with a live tail and search,
// metric and system charts, events, cost, and the actions (stop, terminate, priority, warm pool).
import { call, ApiError } from '../api.js';
import { h, replace, section, table, fields, num, status, errorBox, loading, time, relativeTime, duration, json, hrefs, toMs, pre } from '../dom.js';
import { lineChart, seriesPoints } from '../chart.js';
import { waitReasonCell, jobIdOf } from './queue.js';
import { newestEvents, eventRow, TRAINING_DONE, SERVICE_DONE } from './common.js';

const LOG_GROUP = '/aws/sagemaker/TrainingJobs';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_LOG_LINES = 2000;

const trainingNameOf = (sj) => {
  const attempts = sj.latestAttempt ? [sj.latestAttempt] : [];
  const arn = ((sj.attempts && sj.attempts[sj.attempts.length - 1]) || attempts[0] || {}).serviceResourceId;
  if (arn && arn.value) return String(arn.value).split('/').pop();
  return null;
};

async function optional(promise) {
  try {
    return await promise;
  } catch (err) {
    if (err instanceof ApiError && (/NotFound|ValidationException|ClientException/.test(err.type) || err.status === 404)) return null;
    throw err;
  }
}

// Finds the training job and the service job that NAME (or ?id=) names.
async function resolve(name, query) {
  let id = query.get('id') || (UUID.test(name) ? name : null);
  const queue = query.get('queue');
  let service = id ? await optional(call('batch', 'DescribeServiceJob', { jobId: id })) : null;
  let trainingName = service ? trainingNameOf(service) : name;
  let training = trainingName ? await optional(call('sagemaker', 'DescribeTrainingJob', { TrainingJobName: trainingName })) : null;
  if (!service && !UUID.test(name)) {
    // The service job of a training job: by its name in the given queue, else in each queue (one
    // ListServiceJobs of at most one row per queue, never a walk over the jobs).
    let queues = queue ? [queue] : [];
    if (!queue) {
      const r = await optional(call('batch', 'DescribeJobQueues', { maxResults: 100 }));
      queues = ((r && r.jobQueues) || []).map((q) => q.jobQueueName);
    }
    const found = await Promise.all(queues.slice(0, 100).map((q) =>
      optional(call('batch', 'ListServiceJobs', { jobQueue: q, maxResults: 1, filters: [{ name: 'JOB_NAME', values: [name] }] }))));
    const hit = found.map((r) => r && (r.jobSummaryList || [])[0]).find(Boolean);
    if (hit) {
      id = hit.jobId;
      service = await optional(call('batch', 'DescribeServiceJob', { jobId: id }));
      if (!training && service && trainingNameOf(service)) {
        training = await optional(call('sagemaker', 'DescribeTrainingJob', { TrainingJobName: trainingNameOf(service) }));
      }
    }
  }
  if (!training && !service) throw new ApiError('ResourceNotFound', `No training job or service job named ${name}`, 404);
  return { training, service, queue: queue || (service && String(service.jobQueue || '').split('/').pop()) };
}

function timeline(training, service) {
  const items = [];
  for (const s of (service && service.trainyardStatusHistory) || []) items.push({ at: toMs(s.at), label: s.status, note: 'service job' });
  for (const t of (training && training.SecondaryStatusTransitions) || []) {
    items.push({ at: toMs(t.StartTime), end: toMs(t.EndTime), label: t.Status, note: t.StatusMessage || '' });
  }
  items.sort((a, b) => (a.at || 0) - (b.at || 0));
  return h('ol', { class: 'timeline', testid: 'status-timeline' }, items.map((it) => h('li', {},
    h('span', { class: 'tl-when' }, time(it.at)),
    h('span', { class: 'tl-what' }, status(it.label)),
    it.end && it.at ? h('span', { class: 'muted small' }, ' ', duration((it.end - it.at) / 1000)) : null,
    it.note ? h('div', { class: 'muted small wrap' }, it.note) : null)));
}

function requestSection(t, service) {
  const payload = service && service.serviceRequestPayload ? safeParse(service.serviceRequestPayload) : null;
  const req = t || payload || {};
  const channels = (req.InputDataConfig || []).map((c) => [c.ChannelName,
    (c.DataSource && c.DataSource.S3DataSource && c.DataSource.S3DataSource.S3Uri) || JSON.stringify(c.DataSource || {}),
    c.ContentType || '', c.InputMode || (req.AlgorithmSpecification && req.AlgorithmSpecification.TrainingInputMode) || '']);
  const hp = Object.entries(req.HyperParameters || {}).map(([k, v]) => [k, h('span', { class: 'mono' }, v)]);
  const rc = req.ResourceConfig || {};
  const sc = req.StoppingCondition || {};
  return h('div', { testid: 'request' },
    fields([
      ['Image', req.AlgorithmSpecification && (req.AlgorithmSpecification.TrainingImage || req.AlgorithmSpecification.AlgorithmName)],
      ['Instances', rc.InstanceCount !== undefined ? `${rc.InstanceCount} × ${rc.InstanceType}` : null],
      ['Volume', rc.VolumeSizeInGB !== undefined ? `${rc.VolumeSizeInGB} GB` : null],
      ['Warm pool keep-alive', rc.KeepAlivePeriodInSeconds !== undefined ? duration(rc.KeepAlivePeriodInSeconds) : null],
      ['Max runtime', sc.MaxRuntimeInSeconds !== undefined ? duration(sc.MaxRuntimeInSeconds) : null],
      ['Max wait (spot)', sc.MaxWaitTimeInSeconds !== undefined ? duration(sc.MaxWaitTimeInSeconds) : null],
      ['Managed spot', req.EnableManagedSpotTraining !== undefined ? String(Boolean(req.EnableManagedSpotTraining)) : null],
      ['Checkpoints', req.CheckpointConfig ? `${req.CheckpointConfig.S3Uri}${req.CheckpointConfig.LocalPath ? ' ← ' + req.CheckpointConfig.LocalPath : ''}` : null],
      ['Role', req.RoleArn],
      ['Scheduling priority', service && service.schedulingPriority !== undefined ? num(service.schedulingPriority) : null],
      ['Share', service && (service.shareIdentifier || service.quotaShareName)],
    ]),
    h('h3', {}, 'Hyperparameters'), table(['Name', 'Value'], hp),
    h('h3', {}, 'Channels'), table(['Channel', 'Source', 'Content type', 'Mode'], channels),
    h('details', {}, h('summary', {}, 'The whole request'), json(t ? stripTransient(t) : payload)));
}

function safeParse(text) {
  if (typeof text !== 'string') return text;
  try { return JSON.parse(text); } catch { return { payload: text }; }
}

function stripTransient(t) {
  const { SecondaryStatusTransitions, FinalMetricDataList, ...rest } = t;
  return rest;
}

// The confirmation every action asks for, then the API's answer or error in action-result.
function confirmAction(slot, result, question, run) {
  replace(slot, h('div', { class: 'confirm', testid: 'confirm-dialog', role: 'dialog' },
    h('p', {}, question),
    h('button', { type: 'button', class: 'danger', testid: 'confirm-button', onclick: async (e) => {
      e.target.disabled = true;
      try {
        const answer = await run();
        replace(result, h('div', { class: 'ok' }, h('strong', {}, 'Done. '), 'The API answered: '), json(answer));
      } catch (err) {
        replace(result, errorBox(err));
      }
      replace(slot);
    } }, 'Confirm'),
    h('button', { type: 'button', testid: 'cancel-button', onclick: () => replace(slot) }, 'Cancel')));
}

function actionsSection(state, refresh, result) {
  const { training, service } = state;
  const slot = h('div', {});
  const buttons = [];
  if (training && (training.TrainingJobStatus === 'InProgress')) {
    buttons.push(h('button', { type: 'button', class: 'danger', testid: 'stop-button', onclick: () => confirmAction(slot, result,
      `Stop training job ${training.TrainingJobName}? It is sent SIGTERM and ends as Stopped.`,
      async () => { const r = await call('sagemaker', 'StopTrainingJob', { TrainingJobName: training.TrainingJobName }); refresh(); return r; }) }, 'Stop'));
  }
  if (service && !SERVICE_DONE.has(service.status)) {
    buttons.push(h('button', { type: 'button', class: 'danger', testid: 'terminate-button', onclick: () => confirmAction(slot, result,
      `Terminate service job ${service.jobName} (${service.jobId})? It ends as FAILED.`,
      async () => { const r = await call('batch', 'TerminateServiceJob', { jobId: service.jobId, reason: 'Terminated from the console' }); refresh(); return r; }) }, 'Terminate'));
    const priority = h('input', { type: 'number', min: 0, max: 9999, step: 1, value: service.schedulingPriority ?? '', testid: 'priority-input', class: 'narrow' });
    buttons.push(h('span', { class: 'inline' }, h('label', {}, 'Priority ', priority),
      h('button', { type: 'button', testid: 'priority-button', onclick: () => {
        const value = Number(priority.value);
        confirmAction(slot, result, `Set the scheduling priority of ${service.jobName} to ${priority.value}?`,
          async () => { const r = await call('batch', 'UpdateServiceJob', { jobId: service.jobId, schedulingPriority: value }); refresh(); return r; });
      } }, 'Change priority')));
  }
  if (training && training.ResourceConfig && training.ResourceConfig.KeepAlivePeriodInSeconds !== undefined &&
      (!training.WarmPoolStatus || ['Available', 'InUse'].includes(training.WarmPoolStatus.Status) || !TRAINING_DONE.has(training.TrainingJobStatus))) {
    const keep = h('input', { type: 'number', min: 0, max: 3600, step: 1, value: training.ResourceConfig.KeepAlivePeriodInSeconds, testid: 'keepalive-input', class: 'narrow' });
    buttons.push(h('span', { class: 'inline' }, h('label', {}, 'Keep warm (s) ', keep),
      h('button', { type: 'button', testid: 'keepalive-button', onclick: () => {
        const value = Number(keep.value);
        confirmAction(slot, result, `Keep ${training.TrainingJobName}'s warm pool for ${keep.value} s after the job ends?`,
          async () => { const r = await call('sagemaker', 'UpdateTrainingJob', { TrainingJobName: training.TrainingJobName, ResourceConfig: { KeepAlivePeriodInSeconds: value } }); refresh(); return r; });
      } }, 'Extend warm pool')));
  }
  return h('div', { class: 'actions' }, buttons.length ? buttons : h('p', { class: 'muted' }, 'No action applies to a job in this state.'), slot, result);
}

// The log: the instance's newest lines, then every second what was appended, while the job runs.
function logSection(name, isRunning, ctx) {
  const select = h('select', { testid: 'log-stream' });
  const tail = h('pre', { class: 'log', testid: 'log-tail' }, '');
  const searchInput = h('input', { type: 'search', placeholder: 'filter pattern: terms, "phrases", -exclusions', testid: 'log-search', spellcheck: 'false' });
  const searchResults = h('div', { testid: 'log-search-results' });
  const note = h('p', { class: 'muted small' });
  let token = null;
  let stream = null;
  let busy = false;

  const appendLines = (list) => {
    if (!list.length) return;
    const stick = tail.scrollTop + tail.clientHeight >= tail.scrollHeight - 8;
    tail.append(document.createTextNode(list.map((e) => e.message.replace(/\n$/, '')).join('\n') + '\n'));
    if (tail.textContent.length > 400000) {
      const lines = tail.textContent.split('\n');
      tail.textContent = lines.slice(-MAX_LOG_LINES).join('\n');
    }
    if (stick) tail.scrollTop = tail.scrollHeight;
  };

  const poll = async () => {
    if (!stream || busy || !ctx.alive()) return;
    busy = true;
    try {
      const input = { logGroupName: LOG_GROUP, logStreamName: stream, limit: 1000 };
      if (token) input.nextToken = token;
      else input.startFromHead = false;
      const r = await call('logs', 'GetLogEvents', input);
      if (!ctx.alive()) return;
      appendLines(r.events || []);
      if (r.nextForwardToken) token = r.nextForwardToken;
    } catch (err) {
      note.textContent = `${err.type || ''}: ${err.message}`;
    } finally {
      busy = false;
    }
  };

  const open = async (name) => {
    stream = name;
    token = null;
    tail.textContent = '';
    await poll();
  };
  select.addEventListener('change', () => open(select.value));

  const search = async () => {
    const pattern = searchInput.value;
    replace(searchResults, loading('Searching…'));
    try {
      const r = await call('logs', 'FilterLogEvents', { logGroupName: LOG_GROUP, logStreamNamePrefix: name + '/', filterPattern: pattern, limit: 200 });
      const list = r.events || [];
      replace(searchResults,
        h('p', { class: 'muted small' }, `${list.length} matching line(s)${r.nextToken ? ' (the first 200)' : ''}`),
        pre(list.map((e) => `${new Date(e.timestamp).toISOString()}  ${e.logStreamName}  ${e.message.replace(/\n$/, '')}`).join('\n'), { class: 'log', testid: 'log-search-lines' }));
    } catch (err) {
      replace(searchResults, errorBox(err));
    }
  };
  searchInput.addEventListener('keydown', (e) => { if (e.key === 'Enter') search(); });

  const box = h('div', {},
    h('div', { class: 'inline' }, h('label', {}, 'Instance ', select), note),
    tail,
    h('div', { class: 'inline search' }, searchInput, h('button', { type: 'button', testid: 'log-search-button', onclick: search }, 'Search')),
    searchResults);

  const start = call('logs', 'DescribeLogStreams', { logGroupName: LOG_GROUP, logStreamNamePrefix: name + '/', limit: 50 }).then(async (r) => {
    const streams = (r.logStreams || []).map((s) => s.logStreamName);
    if (!streams.length) {
      note.textContent = 'No log yet.';
    }
    replace(select, streams.map((s) => h('option', { value: s }, s)));
    if (streams.length) await open(streams[0]);
    // Only this job's log is polled, once a second, while it runs.
    let finalRead = false;
    ctx.every(1000, async () => {
      if (!isRunning()) {
        if (!finalRead && stream) { finalRead = true; await poll(); }
        return;
      }
      if (!stream) {
        const again = await call('logs', 'DescribeLogStreams', { logGroupName: LOG_GROUP, logStreamNamePrefix: name + '/', limit: 50 }).catch(() => null);
        const found = ((again && again.logStreams) || []).map((s) => s.logStreamName);
        if (found.length && ctx.alive()) {
          note.textContent = '';
          replace(select, found.map((s) => h('option', { value: s }, s)));
          await open(found[0]);
        }
        return;
      }
      await poll();
    });
  }).catch((err) => { note.textContent = `${err.type || ''}: ${err.message}`; });
  return { box, start };
}

function metricCharts(training, ctx, isRunning) {
  const defs = (training.AlgorithmSpecification && training.AlgorithmSpecification.MetricDefinitions) || [];
  const charts = new Map(defs.map((d) => [d.Name, lineChart({ title: d.Name, testid: 'metric-chart-' + d.Name, series: [{ label: d.Name, points: [] }] })]));
  const note = h('p', { class: 'muted small' });
  const refresh = async () => {
    try {
      const r = await call('trainyard', 'MetricSeries', { TrainingJobName: training.TrainingJobName });
      if (!ctx.alive()) return;
      for (const s of r.Series || []) {
        let chart = charts.get(s.MetricName);
        if (!chart) {
          chart = lineChart({ title: s.MetricName, testid: 'metric-chart-' + s.MetricName, series: [] });
          charts.set(s.MetricName, chart);
          grid.append(chart);
        }
        chart.update([{ label: s.MetricName, points: seriesPoints(s.Points) }]);
      }
    } catch (err) {
      note.textContent = `${err.type || ''}: ${err.message}`;
    }
  };
  const grid = h('div', { class: 'charts' }, [...charts.values()]);
  ctx.every(5000, () => { if (isRunning()) refresh(); });
  return { box: h('div', {}, defs.length ? null : h('p', { class: 'muted' }, 'The job has no metric definitions.'), grid, note), start: refresh() };
}

function systemCharts(training, ctx, isRunning) {
  const grid = h('div', { class: 'charts' });
  const charts = new Map();
  const note = h('p', { class: 'muted small' });
  const refresh = async () => {
    try {
      const r = await call('trainyard', 'SystemMetrics', { TrainingJobName: training.TrainingJobName });
      if (!ctx.alive()) return;
      const byMetric = new Map();
      for (const s of r.Series || []) {
        if (!byMetric.has(s.MetricName)) byMetric.set(s.MetricName, []);
        byMetric.get(s.MetricName).push({ label: s.Host, points: seriesPoints(s.Points) });
      }
      for (const [metric, series] of byMetric) {
        if (!charts.has(metric)) {
          const chart = lineChart({ title: metric, testid: 'system-chart-' + metric, series, yLabel: '%' });
          charts.set(metric, chart);
          grid.append(chart);
        } else {
          charts.get(metric).update(series);
        }
      }
      note.textContent = byMetric.size ? '' : 'No samples yet.';
    } catch (err) {
      note.textContent = `${err.type || ''}: ${err.message}`;
    }
  };
  ctx.every(10000, () => { if (isRunning()) refresh(); });
  return { box: h('div', {}, grid, note), start: refresh() };
}

export async function render(root, [name], query, ctx) {
  replace(root, h('div', { class: 'page', testid: 'page-job' }, loading()));
  let state = await resolve(name, query);
  if (!ctx.alive()) return;
  const { training, service } = state;
  const jobName = (training && training.TrainingJobName) || (service && service.jobName) || name;
  const isRunning = () => {
    const t = state.training;
    const s = state.service;
    if (t) return !TRAINING_DONE.has(t.TrainingJobStatus);
    return Boolean(s && !SERVICE_DONE.has(s.status));
  };

  const statusEl = h('span', { testid: 'job-status' });
  const secondaryEl = h('span', { testid: 'secondary-status', class: 'muted' });
  const waitBox = h('div', {});
  const actionsBox = h('div', {});
  // Outlives the actions box, which each refresh redraws: the answer to an action stays in view.
  const actionResult = h('div', { testid: 'action-result', class: 'action-result' });
  const timelineBox = h('div', {});
  const attemptsBox = h('div', {});
  const summaryBox = h('div', {});

  const paintStatus = () => {
    const t = state.training;
    const s = state.service;
    replace(statusEl, status(t && (!s || s.status !== 'RUNNABLE') ? t.TrainingJobStatus : s.status));
    secondaryEl.textContent = t ? [t.SecondaryStatus, s ? `service job ${s.status}` : null].filter(Boolean).join(' · ') : '';
    replace(summaryBox, fields([
      ['Service job', s ? h('span', { class: 'mono' }, s.jobId) : null],
      ['Queue', state.queue ? h('a', { href: hrefs.queue(state.queue) }, state.queue) : null],
      ['Created', time((t && t.CreationTime) || (s && s.createdAt))],
      ['Started', t && t.TrainingStartTime ? time(t.TrainingStartTime) : s && s.startedAt ? time(s.startedAt) : null],
      ['Ended', t && t.TrainingEndTime ? time(t.TrainingEndTime) : s && s.stoppedAt ? time(s.stoppedAt) : null],
      ['Training time', t && t.TrainingTimeInSeconds !== undefined ? duration(t.TrainingTimeInSeconds) : null],
      ['Billable time', t && t.BillableTimeInSeconds !== undefined ? duration(t.BillableTimeInSeconds) : null],
      ['Failure', t && t.FailureReason ? h('span', { class: 'wrap' }, t.FailureReason) : s && s.status === 'FAILED' && s.statusReason ? s.statusReason : null],
      ['Warm pool', t && t.WarmPoolStatus ? `${t.WarmPoolStatus.Status}${t.WarmPoolStatus.ResourceRetainedBillableTimeInSeconds !== undefined ? ', retained ' + duration(t.WarmPoolStatus.ResourceRetainedBillableTimeInSeconds) : ''}` : null],
      ['Work lost to preemptions', s && s.trainyardPreemptionLoss ? `${num(s.trainyardPreemptionLoss.instanceHours, 3)} instance-h, ${num(s.trainyardPreemptionLoss.gpuHours, 3)} GPU-h` : null],
    ]));
    replace(timelineBox, timeline(t, s));
    const attempts = (s && s.attempts) || [];
    replace(attemptsBox, table(['#', 'Training job', 'Started', 'Stopped', 'Reason'], attempts.map((a, i) => {
      const tn = a.serviceResourceId && String(a.serviceResourceId.value || '').split('/').pop();
      return [String(i + 1), tn ? h('a', { href: hrefs.job(tn) }, tn) : '—', time(a.startedAt), time(a.stoppedAt), h('span', { class: 'wrap' }, a.statusReason || '')];
    }), { 'data-testid': 'attempts-table' }), s && s.preemptionSummary ? h('p', {}, 'Preempted ', num(s.preemptionSummary.preemptedAttemptCount), ' time(s).') : null,
    t && !s ? h('p', { class: 'muted small' }, 'Created directly (CreateTrainingJob): one attempt, this training job.') : null);
    replace(actionsBox, actionsSection(state, refresh, actionResult));
  };

  const paintWait = async () => {
    const s = state.service;
    if (!s || s.status !== 'RUNNABLE') {
      replace(waitBox);
      return;
    }
    let estimate = null;
    let queued = null;
    if (state.queue) {
      const snap = await optional(call('batch', 'GetJobQueueSnapshot', { jobQueue: state.queue }));
      const front = (snap && snap.frontOfQueue && snap.frontOfQueue.jobs) || [];
      const i = front.findIndex((j) => jobIdOf(j.jobArn) === s.jobId);
      if (i >= 0) { estimate = front[i].trainyardEstimatedStartTime || null; queued = i + 1; }
    }
    if (!ctx.alive()) return;
    const reason = s.trainyardWaitReason || (s.status === 'RUNNABLE' ? s.statusReason : '');
    replace(waitBox, h('div', { class: 'waiting card' },
      h('h2', {}, 'Why it waits'),
      h('table', {}, h('tbody', {},
        h('tr', {}, h('th', {}, 'Reason'), waitReasonCell(reason, { testid: 'wait-reason' })),
        h('tr', {}, h('th', {}, 'Expected start'), h('td', { testid: 'estimated-start', dataset: { at: estimate || '' } },
          estimate ? relativeTime(estimate) : h('span', { class: 'muted' }, queued ? 'unknown' : 'unknown (not in the first 100 of its queue)'))),
        queued ? h('tr', {}, h('th', {}, 'Place in line'), h('td', {}, `${queued} of the first 100`)) : null))));
  };

  async function refresh() {
    try {
      const next = { ...state };
      if (state.service) next.service = await call('batch', 'DescribeServiceJob', { jobId: state.service.jobId });
      const tn = (next.service && trainingNameOf(next.service)) || (state.training && state.training.TrainingJobName);
      if (tn) next.training = await optional(call('sagemaker', 'DescribeTrainingJob', { TrainingJobName: tn }));
      if (!ctx.alive()) return;
      const becameTraining = !state.training && next.training;
      state = next;
      paintStatus();
      paintWait();
      if (becameTraining) location.reload();  // a waiting job started: show its log and charts
    } catch { /* the next refresh tries again */ }
  }

  const logsBox = h('div', {});
  const metricsBox = h('div', {});
  const systemBox = h('div', {});
  const eventsBox = h('div', {}, loading());
  const costBox = h('div', {}, loading());
  const artifacts = training ? fields([
    ['Model', training.ModelArtifacts && h('span', { class: 'mono' }, training.ModelArtifacts.S3ModelArtifacts)],
    ['Output path', training.OutputDataConfig && h('span', { class: 'mono' }, training.OutputDataConfig.S3OutputPath)],
    ['Final metrics', (training.FinalMetricDataList || []).map((m) => `${m.MetricName} = ${num(m.Value, 6)}`).join(', ')],
  ]) : h('p', { class: 'muted' }, 'None until it runs.');

  replace(root, h('div', { class: 'page', testid: 'page-job', dataset: { jobName } },
    h('h1', {}, h('span', { testid: 'job-name', class: 'mono' }, jobName), ' ', statusEl, ' ', secondaryEl),
    waitBox,
    section('Actions', actionsBox),
    h('div', { class: 'grid' }, section('Summary', summaryBox), section('Status history', timelineBox)),
    section('Attempts', attemptsBox),
    section('Log', logsBox),
    training ? section('Metrics', metricsBox) : null,
    training ? section('System metrics (CPU, memory, GPU)', systemBox) : null,
    section('Request', requestSection(training, service)),
    section('Artifacts', h('div', { testid: 'artifacts' }, artifacts)),
    section('Events: preemptions, interruptions, checkpoints', eventsBox),
    section('Cost', costBox)));
  paintStatus();
  const waiting = paintWait();

  const loads = [waiting];
  if (training) {
    const logs = logSection(training.TrainingJobName, isRunning, ctx);
    replace(logsBox, logs.box);
    const metrics = metricCharts(training, ctx, isRunning);
    replace(metricsBox, metrics.box);
    const system = systemCharts(training, ctx, isRunning);
    replace(systemBox, system.box);
    loads.push(logs.start, metrics.start, system.start);
  } else {
    replace(logsBox, h('p', { class: 'muted', testid: 'log-tail' }, 'No log until the job starts.'));
  }

  const pattern = training && !service ? { detail: { TrainingJobName: [training.TrainingJobName] } } : service ? { detail: { jobId: [service.jobId] } } : null;
  loads.push((pattern ? newestEvents({ EventPattern: pattern }, 50) : Promise.resolve({ events: [] })).then(async ({ events: list }) => {
    let all = list;
    if (training && service) {
      const more = await newestEvents({ EventPattern: { detail: { TrainingJobName: [training.TrainingJobName] } } }, 50);
      all = [...list, ...more.events].sort((a, b) => (toMs(b.time) || 0) - (toMs(a.time) || 0)).slice(0, 50);
    }
    replace(eventsBox, h('div', { class: 'table-wrap' }, h('table', { 'data-testid': 'job-events' },
      h('thead', {}, h('tr', {}, ['Time', 'Type', 'About', 'What'].map((x) => h('th', {}, x)))),
      h('tbody', {}, all.length ? all.map((e) => eventRow(e, 'job-event-row')) : h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'none'))))));
  }).catch((err) => replace(eventsBox, errorBox(err))));

  loads.push((training ? call('trainyard', 'CostReport', state.queue ? { JobQueue: state.queue } : {}) : Promise.resolve(null)).then((r) => {
    const row = r && (r.Jobs || []).find((j) => j.TrainingJobName === training.TrainingJobName);
    replace(costBox, row ? h('div', { testid: 'cost' }, fields([
      ['Cost', `$${num(row.CostUsd, 4)}`], ['On demand', `$${num(row.OnDemandCostUsd, 4)}`], ['Savings', `${num(row.SavingsPercent, 1)}%`],
      ['Billable', duration(row.BillableTimeInSeconds)], ['Spot interruptions', num(row.SpotInterruptions)],
      ['Instance time lost to interruptions', row.InterruptionLossInstanceSeconds ? duration(row.InterruptionLossInstanceSeconds) : null],
    ])) : h('p', { class: 'muted', testid: 'cost' }, 'Nothing to pay for until the job runs.'));
  }).catch((err) => replace(costBox, errorBox(err))));

  // While the job is not finished its status is read again every 3 s.
  ctx.every(3000, () => { if (isRunning()) refresh(); });
  await Promise.all(loads);
}
