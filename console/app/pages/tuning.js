// Tuning (#/tuning, #/tuning/NAME): hyperparameter tuning jobs, one page; a tuning job's trials
// (one page of ListTrainingJobsForHyperParameterTuningJob), its objective over the trials and its
// best training job.
import { call } from '../api.js';
import { h, replace, section, table, fields, num, status, errorBox, loading, time, hrefs, toMs } from '../dom.js';
import { lineChart } from '../chart.js';

async function list(root, ctx) {
  const box = h('div', {}, loading());
  replace(root, h('div', { class: 'page', testid: 'page-tuning' }, h('h1', {}, 'Tuning jobs'), section('Hyperparameter tuning jobs', box)));
  try {
    const r = await call('sagemaker', 'ListHyperParameterTuningJobs', { MaxResults: 100, SortBy: 'CreationTime', SortOrder: 'Descending' });
    if (!ctx.alive()) return;
    replace(box, table(['Name', 'Status', 'Strategy', 'Trials (completed / running / failed)', 'Created'],
      (r.HyperParameterTuningJobSummaries || []).map((t) => {
        const c = t.TrainingJobStatusCounters || {};
        return h('tr', { testid: 'tuning-row', dataset: { tuningJob: t.HyperParameterTuningJobName } },
          h('td', {}, h('a', { href: hrefs.tuning(t.HyperParameterTuningJobName) }, t.HyperParameterTuningJobName)),
          h('td', {}, status(t.HyperParameterTuningJobStatus)), h('td', {}, t.Strategy || ''),
          h('td', {}, `${num(c.Completed || 0)} / ${num(c.InProgress || 0)} / ${num((c.RetryableError || 0) + (c.NonRetryableError || 0))}`),
          h('td', {}, time(t.CreationTime)));
      })), r.NextToken ? h('p', { class: 'muted small' }, 'The newest 100.') : null);
  } catch (err) {
    replace(box, errorBox(err));
  }
}

async function detail(root, name, ctx) {
  replace(root, h('div', { class: 'page', testid: 'page-tuning-job' }, loading()));
  const [t, trials] = await Promise.all([
    call('sagemaker', 'DescribeHyperParameterTuningJob', { HyperParameterTuningJobName: name }),
    call('sagemaker', 'ListTrainingJobsForHyperParameterTuningJob', { HyperParameterTuningJobName: name, MaxResults: 100, SortBy: 'CreationTime', SortOrder: 'Ascending' }),
  ]);
  if (!ctx.alive()) return;
  const objective = (t.HyperParameterTuningJobConfig && t.HyperParameterTuningJobConfig.HyperParameterTuningJobObjective) || {};
  const rows = trials.TrainingJobSummaries || [];
  const best = t.BestTrainingJob;
  const points = rows.filter((r) => r.FinalHyperParameterTuningJobObjectiveMetric)
    .map((r) => [toMs(r.CreationTime), Number(r.FinalHyperParameterTuningJobObjectiveMetric.Value)]);
  const hpNames = [...new Set(rows.flatMap((r) => Object.keys(r.TunedHyperParameters || {})))];
  replace(root, h('div', { class: 'page', testid: 'page-tuning-job', dataset: { tuningJob: name } },
    h('h1', {}, 'Tuning job ', h('span', { class: 'mono' }, name), ' ', status(t.HyperParameterTuningJobStatus)),
    h('div', { class: 'grid' },
      section('Summary', fields([
        ['Objective', objective.MetricName ? `${objective.Type} ${objective.MetricName}` : null],
        ['Strategy', t.HyperParameterTuningJobConfig && t.HyperParameterTuningJobConfig.Strategy],
        ['Created', time(t.CreationTime)], ['Ended', t.HyperParameterTuningEndTime ? time(t.HyperParameterTuningEndTime) : null],
        ['Failure', t.FailureReason],
      ])),
      section('Best job', best ? h('div', { testid: 'best-job' }, fields([
        ['Training job', h('a', { href: hrefs.job(best.TrainingJobName) }, best.TrainingJobName)],
        ['Objective', best.FinalHyperParameterTuningJobObjectiveMetric ? `${best.FinalHyperParameterTuningJobObjectiveMetric.MetricName} = ${num(best.FinalHyperParameterTuningJobObjectiveMetric.Value, 6)}` : null],
        ['Hyperparameters', Object.entries(best.TunedHyperParameters || {}).map(([k, v]) => `${k}=${v}`).join(', ')],
      ])) : h('p', { class: 'muted', testid: 'best-job' }, 'No trial has finished yet.'))),
    section('Objective over trials', lineChart({ title: objective.MetricName || 'objective', testid: 'objective-chart', series: [{ label: objective.MetricName || 'objective', points }] })),
    section('Trials', table(['Training job', 'Status', 'Objective', ...hpNames, 'Created'], rows.map((r) => h('tr', { testid: 'trial-row' },
      h('td', {}, h('a', { href: hrefs.job(r.TrainingJobName) }, r.TrainingJobName)),
      h('td', {}, status(r.TrainingJobStatus)),
      h('td', { class: 'n' }, r.FinalHyperParameterTuningJobObjectiveMetric ? num(r.FinalHyperParameterTuningJobObjectiveMetric.Value, 6) : '—'),
      hpNames.map((k) => h('td', { class: 'mono' }, (r.TunedHyperParameters || {})[k] ?? '')),
      h('td', {}, time(r.CreationTime)))), { 'data-testid': 'trials-table' }),
    trials.NextToken ? h('p', { class: 'muted small' }, 'The first 100 trials.') : null)));
}

export async function render(root, params, _query, ctx) {
  if (params.length && params[0]) return detail(root, params[0], ctx);
  return list(root, ctx);
}
