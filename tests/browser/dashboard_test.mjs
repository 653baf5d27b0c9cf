// `ingero dashboard` without privileges: its HTTP rules (token on the API, Host and Origin
// checks, ETag), one computation for many tabs, and a page that follows the file: the trace
// file is replaced under the running dashboard and the page shows the new numbers.
//   run.sh dashboard_test.mjs --ingero BIN --out DIR --first A.db --second B.db
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import {
  Ingero, check, equal, closeBrowser, exitWith, freshDir, launch, log, parseArgs, testValue, watchedPage,
} from './lib.mjs';

const a = parseArgs(process.argv.slice(2));
const out = freshDir(a.out);
const db = path.join(out, 'live.db');
fs.copyFileSync(a.first, db);
const TOKEN = 'dashboard-test-token-7f3a';

// Starts the dashboard; resolves with its URL once it prints it.
function startDashboard(args, env) {
  const p = spawn(a.ingero, ['dashboard', '--db', db, '--http', '127.0.0.1:0', ...args],
    { env: Object.assign({}, process.env, env), stdio: ['ignore', 'pipe', 'pipe'] });
  p.errText = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('dashboard printed no URL: ' + p.errText)), 20000);
    p.stderr.on('data', (d) => {
      p.errText += d;
      const m = /at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(p.errText);
      if (m && !p.url) {
        p.url = m[1];
        clearTimeout(timer);
        resolve(p);
      }
    });
    p.on('exit', (code) => reject(new Error('dashboard exited ' + code + ': ' + p.errText)));
  });
}

// One raw request (node:http lets us send any Host and Origin).
function request(url, headers) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { headers: headers || {} }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const first = new Ingero(a.ingero, a.first).scalar('SELECT count(*) FROM calls');
const second = new Ingero(a.ingero, a.second).scalar('SELECT count(*) FROM calls');
check(first !== second, 'the two files differ in calls', [first, second]);

const dash = await startDashboard(['--refresh', '1'], { INGERO_DASHBOARD_TOKEN: TOKEN });
log('dashboard at ' + dash.url);
const api = dash.url + 'api/report';
const auth = { Authorization: 'Bearer ' + TOKEN };
let browser = null;
try {
  // HTTP rules.
  const pageRes = await request(dash.url);
  equal(pageRes.status, 200, 'GET / without a token (the page holds no data)');
  check(/script-src 'sha256-/.test(pageRes.headers['content-security-policy'] || ''), 'page has a CSP with the script hash', pageRes.headers['content-security-policy']);
  check(/connect-src 'self'/.test(pageRes.headers['content-security-policy'] || ''), 'CSP: connections to this origin only');
  check(!pageRes.body.includes('"header"'), 'page carries no trace data');
  const noToken = await request(api);
  equal(noToken.status, 401, 'GET /api/report without the token');
  check(/Bearer/.test(noToken.headers['www-authenticate'] || ''), 'WWW-Authenticate: Bearer');
  equal((await request(api, { Authorization: 'Bearer wrong' })).status, 401, 'GET /api/report with a wrong token');
  const port = new URL(dash.url).port;
  equal((await request(api, Object.assign({ Host: 'evil.example:' + port }, auth))).status, 403, 'foreign Host (DNS rebinding)');
  equal((await request(api, Object.assign({ Origin: 'http://evil.example' }, auth))).status, 403, 'foreign Origin');
  const ok = await request(api, auth);
  equal(ok.status, 200, 'GET /api/report with the token');
  equal(JSON.parse(ok.body).header.calls, first, 'API model calls equal SQL');
  const etag = ok.headers.etag;
  equal((await request(api, Object.assign({ 'If-None-Match': etag }, auth))).status, 304, 'unchanged model: 304');

  // Many tabs, one computation: concurrent requests after the cache expired share one model.
  await new Promise((r) => setTimeout(r, 1200));
  fs.utimesSync(db, new Date(), new Date());  // the file "changed"
  const burst = await Promise.all(Array.from({ length: 8 }, () => request(api, auth)));
  const tags = new Set(burst.map((b) => b.headers.etag));
  check(burst.every((b) => b.status === 200), '8 concurrent requests answered 200', burst.map((b) => b.status));
  equal(tags.size, 1, 'they share one computation (one ETag)');
  check(!tags.has(etag), 'a changed file gives a new model', [...tags]);

  // The page, with the token in the URL fragment.
  browser = await launch(a.chromium);
  const page = await watchedPage(browser);
  await page.goto(dash.url + '#token=' + TOKEN, { waitUntil: 'load' });
  await page.waitForSelector('body[data-renders="1"]', { timeout: 30000 });
  equal(await testValue(page, 'calls'), first, 'dashboard shows the first file\'s calls');
  equal(await page.evaluate(() => location.hash), '', 'the token left the address bar');
  const status = await page.$eval('[data-testid="live-status"]', (e) => e.textContent);
  check(/^live/.test(status), 'live status shown', status);

  // Replace the file under the running dashboard while updates are paused: the page keeps
  // what it shows; resumed, it follows.
  await page.click('[data-testid="pause"]');
  fs.copyFileSync(a.second, db + '.next');
  fs.renameSync(db + '.next', db);
  await new Promise((r) => setTimeout(r, 2500));
  equal(await testValue(page, 'calls'), first, 'paused: the page still shows the first file');
  await page.click('[data-testid="pause"]');
  await page.waitForFunction((want) => {
    const el = document.querySelector('[data-testid="calls"]');
    return el && el.getAttribute('data-value') === String(want);
  }, { timeout: 20000, polling: 200 }, second);
  equal(await testValue(page, 'calls'), second, 'dashboard shows the second file\'s calls');
  check(page.errors.length === 0, 'no console errors or exceptions', page.errors);
  const foreign = page.requests.filter((u) => !u.startsWith(dash.url) && !u.startsWith('data:'));
  check(foreign.length === 0, 'no requests beyond the dashboard', foreign);

  // A page without the token says so.
  const bare = await watchedPage(browser);
  await bare.goto(dash.url, { waitUntil: 'load' });
  await bare.waitForFunction(() => /needs its token/.test(document.getElementById('live-status').textContent), { timeout: 15000 });
  check(true, 'a page without the token asks for it');
} finally {
  await closeBrowser(browser);
  const exited = dash.exitCode !== null ? Promise.resolve(dash.exitCode) : new Promise((r) => dash.on('exit', (c) => r(c)));
  dash.kill('SIGTERM');
  const code = await exited;
  equal(code, 0, 'dashboard exits 0 on SIGTERM');
}
exitWith();
