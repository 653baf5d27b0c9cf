// Shared by the browser tests: arguments, the ingero binary, SQL answers through
// `ingero query --json`, Debian's chromium through puppeteer-core, and page checks.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';

export const SKIP = 77;

// --key value pairs; flags without a value are true.
export function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) o[k] = argv[++i];
    else o[k] = true;
  }
  return o;
}

export function log(...a) {
  console.log('[' + new Date().toISOString().slice(11, 23) + ']', ...a);
}

let failures = 0;
export function check(ok, what, detail) {
  if (ok) {
    log('ok   ' + what);
  } else {
    failures++;
    log('FAIL ' + what + (detail === undefined ? '' : ': ' + (typeof detail === 'string' ? detail : JSON.stringify(detail))));
  }
  return ok;
}
export function equal(actual, expected, what) {
  return check(String(actual) === String(expected), what + ' = ' + expected, 'got ' + actual);
}
export function failed() {
  return failures;
}

export function freshDir(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

// Decompresses a fixture at test time (the repository keeps them as .xz).
export function unxz(src, dest) {
  const r = spawnSync('sh', ['-c', 'xz -dc "$0" > "$1"', src, dest]);
  if (r.status !== 0) throw new Error('xz -dc ' + src + ' failed: ' + r.stderr);
  return dest;
}

export class Ingero {
  constructor(bin, db) {
    this.bin = bin;
    this.db = db;
  }
  run(args, opts) {
    return spawnSync(this.bin, args, Object.assign({ encoding: 'utf8', maxBuffer: 256 << 20 }, opts || {}));
  }
  // Rows of a read-only statement, as objects.
  query(sql) {
    const r = this.run(['query', '--json', '--db', this.db, sql]);
    if (r.status !== 0) throw new Error('ingero query failed (' + r.status + '): ' + r.stderr + '\n' + sql);
    return JSON.parse(r.stdout);
  }
  scalar(sql) {
    const rows = this.query(sql);
    return rows.length ? Object.values(rows[0])[0] : null;
  }
  hasColumn(table, column) {
    return this.query("SELECT count(*) AS n FROM pragma_table_info('" + table + "') WHERE name = '" + column + "'")[0].n > 0;
  }
}

// Nearest-rank quantile per (vendor, api, op), in SQL: the value at rank ceil(q * n).
export function quantileSql(q100) {
  return 'SELECT vendor, api, op, n, min(dur_ns) AS v FROM (SELECT vendor, api, op, dur_ns, ' +
    'count(*) OVER (PARTITION BY vendor, api, op) AS n, ' +
    'row_number() OVER (PARTITION BY vendor, api, op ORDER BY dur_ns) AS r FROM calls ' +
    // Launches seen at entry only have no duration: quantiles are of the timed calls.
    'WHERE dur_ns IS NOT NULL) ' +
    'WHERE r >= (' + q100 + ' * n + 99) / 100 GROUP BY vendor, api, op';
}

export async function launch(chromium) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ingero-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run', '--user-data-dir=' + profile],
    protocolTimeout: 120000,
  });
  browser.profileDir = profile;
  return browser;
}

export async function closeBrowser(browser) {
  if (!browser) return;
  await browser.close();
  fs.rmSync(browser.profileDir, { recursive: true, force: true });
}

// A page that records console errors, uncaught exceptions and every request it makes.
export async function watchedPage(browser) {
  const page = await browser.newPage();
  page.errors = [];
  page.requests = [];
  page.on('console', (m) => {
    if (m.type() === 'error') page.errors.push('console: ' + m.text());
  });
  page.on('pageerror', (e) => page.errors.push('exception: ' + e.message));
  page.on('requestfailed', (r) => page.errors.push('request failed: ' + r.url()));
  page.on('request', (r) => page.requests.push(r.url()));
  // A failed response's body says why (the console line gives only the status).
  page.on('response', async (r) => {
    if (r.status() < 400) return;
    let body = '';
    try {
      body = (await r.text()).slice(0, 500);
    } catch (e) {
      body = '(body unreadable: ' + e.message + ')';
    }
    page.errors.push('response ' + r.status() + ' ' + r.url() + ': ' + body);
  });
  await page.setViewport({ width: 1400, height: 1000 });
  return page;
}

// The figure a data-testid carries (data-value), or null.
export async function testValue(page, id) {
  return page.evaluate((i) => {
    const el = document.querySelector('[data-testid="' + i + '"]');
    return el ? el.getAttribute('data-value') : null;
  }, id);
}

// Checks a PNG screenshot: its size, and that it is a picture (decoded by the browser
// itself: most pixels differ from the page background, and there are many colours).
export async function checkScreenshot(browser, file, minWidth, minHeight, minKiB) {
  const png = fs.readFileSync(file);
  check(png.slice(1, 4).toString() === 'PNG', 'screenshot is a PNG');
  const w = png.readUInt32BE(16);
  const hgt = png.readUInt32BE(20);
  check(w >= minWidth && hgt >= minHeight, 'screenshot is at least ' + minWidth + 'x' + minHeight, w + 'x' + hgt);
  check(png.length > minKiB * 1024, 'screenshot holds more than ' + minKiB + ' KiB of picture', png.length + ' bytes');
  const page = await browser.newPage();
  const stats = await page.evaluate(async (b64) => {
    const img = new Image();
    img.src = 'data:image/png;base64,' + b64;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let content = 0;
    const colours = new Set();
    for (let i = 0; i < d.length; i += 4) {
      const bg = (d[i] === 0xf5 && d[i + 1] === 0xf6 && d[i + 2] === 0xf8) || (d[i] === 255 && d[i + 1] === 255 && d[i + 2] === 255);
      if (!bg) content++;
      if (colours.size < 5000) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    }
    return { pixels: d.length / 4, content: content, colours: colours.size };
  }, png.toString('base64'));
  await page.close();
  const share = stats.content / stats.pixels;
  check(share > 0.05, 'screenshot: more than 5% of pixels are not background', (100 * share).toFixed(1) + '%');
  check(stats.colours >= 64, 'screenshot: at least 64 colours', stats.colours);
  return stats;
}

// Pixels drawn on each uPlot canvas of the page (a chart that drew nothing has 0).
export async function chartInk(page) {
  return page.evaluate(() => [...document.querySelectorAll('.uplot canvas')].map((c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
    return n;
  }));
}

export function exitWith(code) {
  log(failed() ? failed() + ' check(s) failed' : 'all checks passed');
  process.exit(code !== undefined ? code : failed() ? 1 : 0);
}

export function tmpName(prefix) {
  return path.join(os.tmpdir(), prefix + '-' + process.pid + '-' + Date.now());
}
