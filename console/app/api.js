// The console's one way to the server: every read and action goes through POST /console/api/call
// (the same operation, validation, authorization and audit as the wire API), carrying the
// session's CSRF token; live updates come from the server-sent events of /console/api/events.

export class ApiError extends Error {
  constructor(type, message, status) {
    super(message || type);
    this.name = 'ApiError';
    this.type = type;        // the AWS error code, e.g. ValidationException
    this.__type = type;
    this.status = status;    // the HTTP status
  }
}

let sessionPromise = null;

export function toSignin() {
  if (!location.pathname.startsWith('/console/signin')) location.assign('/console/signin');
}

async function readBody(response) {
  const text = await response.text();
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    return { message: text };
  }
}

// An AWS error's code: the body's __type, else Batch's x-amzn-ErrorType header. Either may carry a
// namespace or a documentation URL ("ns#Code", "Code:http://..."): only the code is kept.
function errorType(body, response) {
  let type = (body && (body.__type || body.code || body.Code)) || response.headers.get('x-amzn-ErrorType') || '';
  type = String(type);
  if (type.includes('#')) type = type.slice(type.lastIndexOf('#') + 1);
  if (type.includes(':')) type = type.slice(0, type.indexOf(':'));
  return type || `HTTP ${response.status}`;
}

export function errorFrom(body, response) {
  const message = (body && (body.message || body.Message)) || response.statusText || '';
  return new ApiError(errorType(body, response), message, response.status);
}

// The signed-in session: {principal, accessKeyId, csrfToken, expiresAt, region, accountId}.
// Without one the browser goes to the sign-in page.
export function session() {
  if (!sessionPromise) {
    sessionPromise = fetch('/console/api/session', { credentials: 'same-origin', cache: 'no-store' }).then(async (r) => {
      const body = await readBody(r);
      if (r.status === 401) {
        sessionPromise = null;
        toSignin();
        throw errorFrom(body, r);
      }
      if (!r.ok) {
        sessionPromise = null;
        throw errorFrom(body, r);
      }
      return body;
    });
  }
  return sessionPromise;
}

// call('sagemaker', 'DescribeTrainingJob', {TrainingJobName}) -> the operation's JSON answer.
// Throws an ApiError (type = the AWS error code, message) when the server refuses.
export async function call(api, action, input = {}) {
  const s = await session();
  const r = await fetch('/console/api/call', {
    method: 'POST',
    credentials: 'same-origin',
    cache: 'no-store',
    headers: { 'Content-Type': 'application/json', 'X-Trainyard-Csrf': s.csrfToken },
    body: JSON.stringify({ api, action, input }),
  });
  const body = await readBody(r);
  if (r.status === 401) {
    sessionPromise = null;
    toSignin();
    throw errorFrom(body, r);
  }
  if (!r.ok) throw errorFrom(body, r);
  return body;
}

// True when the server does not know the operation (an action another part of the server adds
// later, such as QueueStandings or WhatIf): pages show "—" or a note instead of failing.
export function isUnknownAction(err) {
  if (!(err instanceof ApiError)) return false;
  if (err.status === 404 || err.status === 501) return true;
  if (/^(UnknownOperation|InvalidAction|UnsupportedOperation|NotImplemented)/i.test(err.type)) return true;
  return /unknown (operation|action)|not (supported|implemented)|no such (operation|action)/i.test(err.message);
}

export async function signout() {
  const s = await session().catch(() => null);
  if (s) {
    await fetch('/console/api/signout', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'X-Trainyard-Csrf': s.csrfToken },
    }).catch(() => {});
  }
  sessionPromise = null;
  location.assign('/console/signin');
}

// Every detail-type the server emits (docs/events.md). Server-sent events with an `event:` line
// reach only listeners of that name, so each is listened to.
export const DETAIL_TYPES = [
  'Batch Service Job State Change',
  'Batch Job Queue Blocked',
  'SageMaker Training Job State Change',
  'SageMaker HyperParameter Tuning Job State Change',
  'CloudWatch Alarm State Change',
  'AWS API Call via CloudTrail',
];

// events({queue: 'Q', 'detail-type': [...]}, (event, seq) => ...) follows the event stream from
// now on (the browser reconnects with Last-Event-ID by itself). Returns {close()}.
export function events(params, onEvent) {
  const qs = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value === undefined || value === null || value === '') continue;
    for (const v of Array.isArray(value) ? value : [value]) qs.append(key, String(v));
  }
  const source = new EventSource('/console/api/events' + (qs.toString() ? '?' + qs : ''), { withCredentials: true });
  const handle = (message) => {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    onEvent(event, Number(message.lastEventId) || 0);
  };
  for (const type of ['message', ...DETAIL_TYPES]) source.addEventListener(type, handle);
  return { close: () => source.close(), source };
}
