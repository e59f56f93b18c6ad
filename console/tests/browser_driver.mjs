// A headless Chromium for the console's browser tests (tests/integration/test_console.py), driven
// one JSON command per stdin line, one JSON answer per stdout line. The Python test owns the
// server and the AWS calls (boto3); this process owns the browser (Debian's chromium through
// playwright-core, no downloaded browser).
//
//   {"cmd": "goto", "url": U}                     -> {"status": HTTP status of the navigation, "url"}
//   {"cmd": "fill", "sel": CSS, "value": V}
//   {"cmd": "click", "sel": CSS}
//   {"cmd": "wait", "sel": CSS, "text"?: T, "timeout"?: ms} -> {"text"}: the element is visible
//                                                  (and its text contains T)
//   {"cmd": "text", "sel": CSS}                  -> {"text"}
//   {"cmd": "count", "sel": CSS}                 -> {"count"}
//   {"cmd": "eval", "js": EXPR}                  -> {"value"}: the page evaluates EXPR (awaited)
//   {"cmd": "cookies"}                           -> {"cookies"}: the context's cookies, flags included
//   {"cmd": "screenshot", "path": P}             -> {}: the whole page, PNG
//   {"cmd": "paint"}                             -> {"fcp", "load"}: paint and load timings, ms
//   {"cmd": "clearCookies"} | {"cmd": "close"}
// Errors answer {"error": message}; the test decides what they mean.
import { chromium } from 'playwright-core';
import readline from 'node:readline';

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
const consoleErrors = [];
page.on('pageerror', (e) => consoleErrors.push(String(e)));

const DEFAULT_TIMEOUT = 20000;

async function run(c) {
  switch (c.cmd) {
    case 'goto': {
      const res = await page.goto(c.url, { waitUntil: 'load', timeout: c.timeout || DEFAULT_TIMEOUT });
      return { status: res ? res.status() : 0, url: page.url() };
    }
    case 'fill':
      await page.locator(c.sel).first().fill(c.value, { timeout: c.timeout || DEFAULT_TIMEOUT });
      return {};
    case 'click':
      await page.locator(c.sel).first().click({ timeout: c.timeout || DEFAULT_TIMEOUT });
      return {};
    case 'wait': {
      const loc = c.text === undefined ? page.locator(c.sel).first() : page.locator(c.sel, { hasText: c.text }).first();
      await loc.waitFor({ state: 'visible', timeout: c.timeout || DEFAULT_TIMEOUT });
      return { text: await loc.textContent() };
    }
    case 'text':
      return { text: await page.locator(c.sel).first().textContent({ timeout: c.timeout || DEFAULT_TIMEOUT }) };
    case 'count':
      return { count: await page.locator(c.sel).count() };
    case 'eval':
      return { value: await page.evaluate(c.js) };
    case 'cookies':
      return { cookies: await context.cookies() };
    case 'clearCookies':
      await context.clearCookies();
      return {};
    case 'screenshot':
      await page.screenshot({ path: c.path, fullPage: true });
      return {};
    case 'paint':
      return await page.evaluate(() => {
        const fcp = performance.getEntriesByName('first-contentful-paint')[0];
        const nav = performance.getEntriesByType('navigation')[0];
        return { fcp: fcp ? fcp.startTime : null, load: nav ? nav.loadEventEnd : null };
      });
    case 'errors':
      return { errors: consoleErrors.splice(0) };
    case 'close':
      await browser.close();
      process.exit(0);
    default:
      throw new Error('unknown command ' + c.cmd);
  }
}

const lines = readline.createInterface({ input: process.stdin });
process.stdout.write(JSON.stringify({ ready: true }) + '\n');
for await (const line of lines) {
  let answer;
  try {
    answer = await run(JSON.parse(line));
  } catch (e) {
    answer = { error: String(e && e.message ? e.message : e) };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
}
await browser.close();
