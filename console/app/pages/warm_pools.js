// Warm pools (#/warm-pools): training jobs whose instances are kept warm (ListTrainingJobs
// WarmPoolStatusEquals Available, then InUse), one page of each.
import { call } from '../api.js';
import { h, replace, section, table, status, errorBox, loading, time, duration, hrefs } from '../dom.js';

const row = (j) => h('tr', { testid: 'warm-pool-row', dataset: { jobName: j.TrainingJobName } },
  h('td', {}, h('a', { href: hrefs.job(j.TrainingJobName) }, j.TrainingJobName)),
  h('td', { testid: 'warm-pool-status' }, status(j.WarmPoolStatus && j.WarmPoolStatus.Status)),
  h('td', {}, status(j.TrainingJobStatus)),
  h('td', {}, time(j.TrainingEndTime)),
  h('td', {}, j.WarmPoolStatus && j.WarmPoolStatus.ResourceRetainedBillableTimeInSeconds !== undefined ? duration(j.WarmPoolStatus.ResourceRetainedBillableTimeInSeconds) : '—'),
  h('td', {}, (j.WarmPoolStatus && j.WarmPoolStatus.ReusedByJob) || ''));

export async function render(root, _params, _query, ctx) {
  const boxes = { Available: h('div', {}, loading()), InUse: h('div', {}, loading()) };
  replace(root, h('div', { class: 'page', testid: 'page-warm-pools' },
    h('h1', {}, 'Warm pools'),
    h('p', { class: 'muted' }, 'Instances kept after a job ends (ResourceConfig.KeepAlivePeriodInSeconds), for the next job with the same configuration.'),
    section('Available', boxes.Available), section('In use', boxes.InUse)));
  await Promise.all(Object.entries(boxes).map(([st, box]) =>
    call('sagemaker', 'ListTrainingJobs', { WarmPoolStatusEquals: st, MaxResults: 100, SortBy: 'CreationTime', SortOrder: 'Descending' }).then((r) => {
      if (!ctx.alive()) return;
      replace(box, table(['Training job', 'Warm pool', 'Job status', 'Ended', 'Retained', 'Reused by'], (r.TrainingJobSummaries || []).map(row)),
        r.NextToken ? h('p', { class: 'muted small' }, 'The first 100.') : null);
    }).catch((err) => replace(box, errorBox(err)))));
}
