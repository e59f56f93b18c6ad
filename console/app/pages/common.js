// Reads several pages share.
import { call } from '../api.js';
import { h, time, hrefs, toMs } from '../dom.js';

// The newest `count` events that match `filter` (the trainyard Events operation reads forwards
// from a cursor): reads forwards from `window` events before the newest, at most `pages` pages of
// 1000, and keeps the last `count`. Bounded however many events are kept.
export async function newestEvents(filter = {}, count = 20, { window = 5000, pages = 5 } = {}) {
  const head = await call('trainyard', 'Events', { After: 'latest', Limit: 1 });
  const latest = Number(head.LatestSeq) || 0;
  const unfiltered = Object.keys(filter).length === 0;
  let after = Math.max(0, latest - (unfiltered ? count : window));
  let kept = [];
  for (let i = 0; i < pages; i++) {
    const r = await call('trainyard', 'Events', { ...filter, After: after, Limit: unfiltered ? Math.max(1, count) : 1000 });
    // Each entry is {Seq, Queue, Share, Event}: the event itself, as the stream carries it.
    kept = kept.concat((r.Events || []).map((x) => x.Event || x)).slice(-count);
    const next = Number(r.NextCursor);
    if (!r.Events || !r.Events.length || !(next > after) || next >= latest) break;
    after = next;
  }
  return { events: kept.reverse(), latest };
}

// What an event is about, in a few words, and where to go for it.
export function eventSummary(e) {
  const d = e.detail || {};
  const type = e['detail-type'] || '';
  if (type.startsWith('Batch')) {
    const name = d.jobName || d.jobId || '';
    return { subject: name, href: name ? hrefs.job(name, d.jobId ? { id: d.jobId } : undefined) : null, text: [d.status, d.statusReason].filter(Boolean).join(': ') };
  }
  if (type.startsWith('SageMaker Training')) {
    return { subject: d.TrainingJobName, href: d.TrainingJobName ? hrefs.job(d.TrainingJobName) : null, text: [d.TrainingJobStatus, d.SecondaryStatus, d.FailureReason].filter(Boolean).join(' · ') };
  }
  if (type.startsWith('SageMaker HyperParameter')) {
    return { subject: d.HyperParameterTuningJobName, href: d.HyperParameterTuningJobName ? hrefs.tuning(d.HyperParameterTuningJobName) : null, text: d.HyperParameterTuningJobStatus || '' };
  }
  if (type.includes('Alarm')) {
    return { subject: d.alarmName, href: null, text: [d.state && d.state.value, d.state && d.state.reason].filter(Boolean).join(': ') };
  }
  if (type.includes('CloudTrail')) {
    return { subject: d.eventName || d.action || '', href: null, text: [d.principal, d.httpStatus, d.denied ? 'denied' : ''].filter(Boolean).join(' · ') };
  }
  return { subject: (e.resources || [])[0] || '', href: null, text: '' };
}

export function eventRow(e, testid = 'event-row') {
  const s = eventSummary(e);
  return h('tr', { testid },
    h('td', {}, time(toMs(e.time))),
    h('td', {}, e['detail-type'] || ''),
    h('td', {}, s.href ? h('a', { href: s.href }, s.subject || '') : (s.subject || '')),
    h('td', { class: 'wrap' }, s.text));
}

// Training jobs' final statuses: polling stops there.
export const TRAINING_DONE = new Set(['Completed', 'Failed', 'Stopped']);
export const SERVICE_DONE = new Set(['SUCCEEDED', 'FAILED']);
