// Every wait-reason form the scheduler writes (src/sched/schedule.cpp, src/control/jobs.cpp,
// docs/scheduling.md "Why a job waits") is turned into words by the console's table, not shown
// raw: a new or changed reason text fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { explainWait } from '../app/reasons.js';

const ID = '7c741408-4ebd-459d-9b71-f1dc89e86af5';
const REASONS = [
  ["waiting for capacity: service environment 'se' has 0 of 2 instances free; host has 0 free ml.m5.large; job needs 1", /needs 1 × ml\.m5\.large.*0 of 2 free in environment se/],
  ["waiting for capacity: service environment 'a' has 1 of 4 instances free; service environment 'b' has 0 of 2 instances free; host has 3 free ml.p4d.24xlarge; job needs 2; 2 instances are reserved for shares not active yet; capacity is reserved for it, expected in about 125 s", /environment a.*environment b.*2 instances are kept.*in about 2 min/],
  ["waiting for capacity: service environment 'se' has 0 of 2 instances free; host has 0 free ml.m5.large; job needs 1; capacity is reserved for it, expected at a time not yet known", /at a time not yet known/],
  [`waiting: the free capacity is reserved for job ${ID} (big-1), expected to start in about 30 s`, /held for big-1 \(7c741408\).*about 30 s/],
  [`queued behind job ${ID} (head-1); a job starts ahead of it only when it cannot delay it`, /behind head-1.*earlier only if/],
  [`queued behind job ${ID} (head-1)`, /^Waiting its turn behind head-1 \(7c741408\), the first job in line\.$/],
  [`waiting: share 'A' goes first, with job ${ID} (a-1); a job starts ahead of it only when it cannot delay it`, /share A.*a-1/],
  ["job queue 'gpu' is disabled", /queue gpu is disabled/],
  ["every service environment of job queue 'gpu' is disabled", /Every service environment of queue gpu/],
  ['waiting for its arrival batch to close at 1700000000000 (epoch ms): jobs that arrive together are placed together', /batch closes/],
  ['retrying after a capacity failure, not before 1700000000000 (epoch ms)', /could not get instances/],
  ['waiting for preempted jobs to give capacity back', /being freed/],
  ['reclaiming capacity lent to other shares (3 job(s) preempted)', /3 of their jobs preempted/],
  ["preempting 2 lower-priority job(s) of share 'A', and reclaiming capacity lent to other shares (1 job(s) preempted)", /2 lower-priority.*share A.*1 job\(s\) of other shares/],
  ['waiting for capacity: the share is within its quota, but the capacity is in use and not borrowed', /under its quota/],
  ["waiting for capacity: jobs of share 'A' submitted before it are placed first", /share A submitted before/],
  ["waiting: share 'A' is at its quota and preempts for a higher-priority job", /preempting for a higher-priority/],
  ["waiting to borrow: share 'A' is at its quota and no idle capacity can be lent", /no other share has idle capacity/],
  ["waiting: share 'A' is at its quota (2 of 2 ml.m5.large)", /quota \(2 of 2 ml\.m5\.large\)/],
  ['the job queue or its service environment is disabled', /disabled: nothing starts/],
  ['MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - Service environment(s) associated with the job queue cannot meet the capacity requirement of the job.', /never run in this queue/],
  ['MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share capacity limits.', /own limit/],
  ['MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requirements exceed quota share capacity limits and borrow limits.', /plus what the share may borrow/],
  ['MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED - Job requires borrowing that exceeds all configured borrowable capacity.', /all lending shares/],
  ['CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY', /waiting for instances/],
];

test('every scheduler wait reason is put into words', () => {
  for (const [reason, words] of REASONS) {
    const text = explainWait(reason);
    assert.notEqual(text, reason, `not translated: ${reason}`);
    assert.match(text, words, `for: ${reason}`);
  }
});

test('an unknown reason is shown as it is, and none is empty', () => {
  assert.equal(explainWait('something new'), 'something new');
  assert.equal(explainWait(''), '');
  assert.equal(explainWait(undefined), '');
});
