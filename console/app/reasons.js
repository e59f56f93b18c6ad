// Why a job waits, in words. The scheduler writes each RUNNABLE job's reason
// (trainyardWaitReason; docs/scheduling.md, "Why a job waits"); this table turns each form into a
// sentence for people who do not know the scheduler's terms. The original text stays on hover.
import { relative } from './dom.js';

const about = (s) => {
  const n = Number(s);
  if (n < 60) return `about ${n} s`;
  if (n < 3600) return `about ${Math.round(n / 60)} min`;
  return `about ${(n / 3600).toFixed(1)} h`;
};
const at = (ms) => relative(Number(ms));
const jobRef = (id, name) => (name ? `${name} (${id.slice(0, 8)})` : id);
const expected = (text) => {
  const m = /in about (\d+) s/.exec(text);
  return m ? `in ${about(m[1])}` : 'at a time not yet known';
};

// [pattern, words]: the first pattern that matches the start of the reason wins.
export const WAIT_REASONS = [
  [/^CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY/, () => 'Next in line, waiting for instances to become free.'],
  [/^MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE/, () =>
    'It can never run in this queue: it needs more instances than its service environments (or this host) can ever provide. Change the job or the environment.'],
  [/^MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share capacity limits and borrow limits/, () =>
    'It can never run: it needs more than its quota share\'s limit plus what the share may borrow.'],
  [/^MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requires borrowing/, () =>
    'It can never run: it would have to borrow more than all lending shares together can lend.'],
  [/^MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED/, () =>
    'It can never run: it needs more than its quota share\'s own limit, and the share may not borrow.'],
  [/^MISCONFIGURATION:/, () => 'It can never run as configured.'],
  [/^waiting for capacity:((?: service environment '[^']*' has \d+ of \d+ instances free;)+) host has (\d+) free (\S+); job needs (\d+)(.*)$/, (m) => {
    const envs = [...m[1].matchAll(/service environment '([^']*)' has (\d+) of (\d+) instances free/g)]
      .map((e) => `${e[2]} of ${e[3]} free in environment ${e[1]}`).join(', ');
    let s = `First in line, but it does not fit yet: it needs ${m[4]} × ${m[3]}, and there are ${envs} (${m[2]} ${m[3]} free on the host).`;
    const reserved = /(\d+) instances are reserved for shares not active yet/.exec(m[5]);
    if (reserved) s += ` ${reserved[1]} instances are kept for shares that have no jobs yet.`;
    if (/capacity is reserved for it/.test(m[5])) s += ` Capacity is reserved for it, expected ${expected(m[5])}; smaller jobs start before it only if they cannot delay it.`;
    return s;
  }],
  [/^waiting: the free capacity is reserved for job (\S+)(?: \((.*?)\))?, expected to start (.*)$/, (m) =>
    `It would fit now, but the free capacity is held for ${jobRef(m[1], m[2])}, the next job of a higher-priority queue, expected to start ${expected(m[3])}.`],
  [/^queued behind job (\S+)(?: \((.*?)\))?(; a job starts ahead of it only when it cannot delay it)?/, (m) =>
    `Waiting its turn behind ${jobRef(m[1], m[2])}, the first job in line.` + (m[3] ? ' It can start earlier only if that does not delay that job.' : '')],
  [/^waiting: share '([^']*)' goes first, with job (\S+)(?: \((.*?)\))?(;.*)?/, (m) =>
    `Fair share: share ${m[1]} has used less of its entitlement, so its job ${jobRef(m[2], m[3])} goes first.` + (m[4] ? ' This job can start earlier only if that does not delay it.' : '')],
  [/^job queue '([^']*)' is disabled/, (m) => `The queue ${m[1]} is disabled: nothing in it starts until it is enabled.`],
  [/^every service environment of job queue '([^']*)' is disabled/, (m) => `Every service environment of queue ${m[1]} is disabled: nothing starts until one is enabled.`],
  [/^the job queue or its service environment is disabled/, () => 'The queue or its service environment is disabled: nothing starts until it is enabled.'],
  [/^waiting for its arrival batch to close at (\d+)/, (m) =>
    `It arrived at an idle queue together with other jobs; they are placed together, fairly, when the batch closes ${at(m[1])}.`],
  [/^retrying after a capacity failure, not before (\d+)/, (m) =>
    `Its last attempt could not get instances; it is placed again ${at(m[1])}. Jobs behind it go on meanwhile.`],
  [/^waiting for preempted jobs to give capacity back/, () =>
    'Capacity for it is being freed: jobs using it were preempted and are finishing their grace period.'],
  [/^reclaiming capacity lent to other shares \((\d+) job/, (m) =>
    `Its share lent capacity to others; it is being taken back (${m[1]} of their jobs preempted).`],
  [/^preempting (\d+) lower-priority job\(s\) of share '([^']*)'(, and reclaiming capacity lent to other shares \((\d+))?/, (m) =>
    `${m[1]} lower-priority job(s) of its own share ${m[2]} are being preempted to make room for it` + (m[3] ? `, and ${m[4]} job(s) of other shares give back borrowed capacity.` : '.')],
  [/^waiting for capacity: the share is within its quota, but the capacity is in use and not borrowed/, () =>
    'Its share is under its quota, but the capacity is in use by jobs that cannot be preempted yet (for example, within their minimum runtime).'],
  [/^waiting for capacity: jobs of share '([^']*)' submitted before it are placed first/, (m) =>
    `Jobs of share ${m[1]} submitted before it are placed first.`],
  [/^waiting: share '([^']*)' is at its quota and preempts for a higher-priority job/, (m) =>
    `Share ${m[1]} is at its quota and is preempting for a higher-priority job of its own; its other jobs do not borrow meanwhile.`],
  [/^waiting to borrow: share '([^']*)' is at its quota and no idle capacity can be lent/, (m) =>
    `Share ${m[1]} has used its quota, and no other share has idle capacity to lend.`],
  [/^waiting: share '([^']*)' is at its quota \((.*?)\)/, (m) =>
    `Share ${m[1]} is at its quota (${m[2]}) and may not borrow more.`],
];

// The reason in words, or the reason itself when no form matches.
export function explainWait(reason) {
  if (!reason) return '';
  for (const [pattern, words] of WAIT_REASONS) {
    const m = pattern.exec(reason);
    if (m) return words(m);
  }
  return reason;
}
