// The console's single page: a header (principal, region, sign out), the nav, and a hash router
// over the pages in pages/. Each page reads through api.js only (POST /console/api/call and the
// event stream) and renders text with textContent only.
//
// Stable data-testid attributes (the browser tests rely on them; keep them when changing pages):
//   sign-in:   signin-form, signin-access-key-id, signin-secret-access-key, signin-button, signin-error
//   header:    nav, principal, region, signout-button, main
//   pages:     page-overview, page-queue, page-jobs, page-job, page-warm-pools, page-tuning,
//              page-tuning-job, page-what-if, page-not-found; page-error (a page that failed to load)
//   overview:  capacity-table, capacity-row (data-instance-type), queue-row (data-queue),
//              queue-depth, queue-running, alarm-row, event-row
//   queue:     front-row (data-job-id) with cells wait-reason, estimated-start; share-row
//              (data-share); share-chart; running-row; preemption-row; preemption-loss
//   jobs:      jobs-filters, filter-status, filter-queue, filter-share, filter-name, filter-tag,
//              filter-after, filter-before, filter-apply, jobs-table, job-row (data-job-name,
//              data-job-id when it came through a queue) with cell job-status; jobs-prev, jobs-next,
//              jobs-page, jobs-note
//   job:       job-name, job-status, secondary-status, wait-reason, estimated-start, status-timeline,
//              attempts-table, request, artifacts, log-tail, log-search, log-search-button,
//              log-search-results, metric-chart-<MetricName>, system-chart-<MetricName>,
//              job-events, cost, stop-button, terminate-button, priority-input, priority-button,
//              keepalive-input, keepalive-button, confirm-dialog, confirm-button, cancel-button,
//              action-result
//   warm pools: warm-pool-row (data-job-name), warm-pool-status
//   tuning:    tuning-row (data-tuning-job), trials-table, trial-row, objective-chart, best-job
//   what if:   what-if-form, what-if-queue, what-if-hours, what-if-change-row, what-if-run,
//              what-if-result, what-if-share-row (data-share), what-if-chart, what-if-note
import { session, signout } from './api.js';
import { h, replace, errorBox } from './dom.js';
import * as overview from './pages/overview.js';
import * as queue from './pages/queue.js';
import * as jobs from './pages/jobs.js';
import * as job from './pages/job.js';
import * as warmPools from './pages/warm_pools.js';
import * as tuning from './pages/tuning.js';
import * as whatIf from './pages/what_if.js';

const main = document.getElementById('main');

// [path pattern, page module, nav entry]; a pattern's groups are the page's parameters.
const ROUTES = [
  [/^\/?$/, overview, 'overview'],
  [/^\/queues\/([^/]+)$/, queue, 'overview'],
  [/^\/jobs$/, jobs, 'jobs'],
  [/^\/jobs\/([^/]+)$/, job, 'jobs'],
  [/^\/warm-pools$/, warmPools, 'warm-pools'],
  [/^\/tuning$/, tuning, 'tuning'],
  [/^\/tuning\/([^/]+)$/, tuning, 'tuning'],
  [/^\/what-if$/, whatIf, 'what-if'],
];

// What a page started (timers, event streams) is stopped when the user leaves it.
let cleanups = [];
let generation = 0;

export function parseHash(hash) {
  const raw = (hash || '').replace(/^#/, '');
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  return { path: path || '/', query };
}

async function route() {
  for (const fn of cleanups) {
    try { fn(); } catch { /* a page's cleanup never stops the next page */ }
  }
  cleanups = [];
  const mine = ++generation;
  const { path, query } = parseHash(location.hash);
  let page = null;
  let params = [];
  let nav = '';
  for (const [pattern, module, entry] of ROUTES) {
    const m = pattern.exec(path);
    if (m) {
      page = module;
      params = m.slice(1).map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
      nav = entry;
      break;
    }
  }
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.route === nav);
  if (!page) {
    replace(main, h('div', { testid: 'page-not-found', class: 'page' }, h('h1', {}, 'Not found'), h('p', {}, 'No page at ' + path + '. '), h('a', { href: '#/' }, 'Overview')));
    return;
  }
  const ctx = {
    // alive() is false once the user has moved to another page: late answers are dropped.
    alive: () => mine === generation,
    onLeave: (fn) => cleanups.push(fn),
    every: (ms, fn) => {
      const id = setInterval(() => { if (mine === generation) fn(); }, ms);
      cleanups.push(() => clearInterval(id));
    },
  };
  try {
    await page.render(main, params, query, ctx);
  } catch (err) {
    if (ctx.alive()) replace(main, h('div', { class: 'page', testid: 'page-error' }, h('h1', {}, 'Could not load this page'), errorBox(err)));
  }
}

async function start() {
  const s = await session();
  document.getElementById('principal').textContent = s.principal || s.accessKeyId || '';
  document.getElementById('principal').title = s.accessKeyId ? 'access key ' + s.accessKeyId : '';
  document.getElementById('region').textContent = [s.region, s.accountId].filter(Boolean).join(' · ');
  document.getElementById('signout').addEventListener('click', () => signout());
  window.addEventListener('hashchange', route);
  await route();
}

start().catch((err) => {
  if (err && err.status === 401) return;  // on its way to the sign-in page
  replace(main, h('div', { class: 'page', testid: 'page-error' }, h('h1', {}, 'The console could not start'), errorBox(err)));
});
