// `ingero report` in a real browser: the one-file report of a real trace renders offline with
// no console errors, its numbers equal the SQL answers on the same file, the flame graph's
// root frames total the slow calls, and a full-page screenshot is a picture.
//   run.sh report_test.mjs --ingero BIN --out DIR --name NAME (--xz FILE.db.xz | --db FILE)
//          [--expect-steps] [--expect-nodes N] [--expect-kernels] [--expect-host-time]
//          [--expect-whole-steps TEXT] [--expect-folded]
// or, as root, the trace made here first: the step_faults launch loop traced with the stand-in
// libnvidia-ml.so.1 reporting 9% busy, whose report must draw the GPU-busy lane:
//   run.sh report_test.mjs --ingero BIN --out DIR --name NAME --step-faults BIN --nvml-dir DIR
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  Ingero, check, equal, chartInk, checkScreenshot, closeBrowser, exitWith, freshDir, launch, log,
  parseArgs, quantileSql, testValue, unxz, watchedPage,
} from './lib.mjs';

const a = parseArgs(process.argv.slice(2));
const out = freshDir(a.out);
let db = a.xz ? unxz(a.xz, path.join(out, a.name + '.db')) : a.db;
if (a['step-faults']) {
  db = path.join(out, a.name + '.db');
  const script = path.join(out, 'nvml.script');
  fs.writeFileSync(script, 'device uuid=GPU-fake-0 gpu=9 mem=3\nproc device=0 comm=step_faults sm=9 mem=1\n');
  const env = Object.assign({}, process.env, { LD_LIBRARY_PATH: a['nvml-dir'], FAKE_NVML_SCRIPT: script });
  const t = spawnSync(a.ingero, ['trace', '--no-live', '-q', '--db', db, '--device-poll-ms', '20', '--',
    a['step-faults'], 'launchloop', '100'], { env: env, encoding: 'utf8' });
  check(t.status === 0, 'ingero trace of the launch loop exits 0', t.stderr);
}
const html = path.join(out, a.name + '.html');
const ingero = new Ingero(a.ingero, db);

// 1. The report file.
const t0 = Date.now();
const r = ingero.run(['report', '--db', db, '-o', html]);
check(r.status === 0, 'ingero report exits 0', r.stderr);
const size = fs.statSync(html).size;
log('report: ' + size + ' bytes in ' + (Date.now() - t0) + ' ms: ' + r.stderr.trim());
check(size < 5 * 1024 * 1024, 'report is under 5 MiB', size);

// 2. SQL answers on the same file.
const sql = {
  calls: ingero.scalar('SELECT count(*) FROM calls'),
  processes: ingero.scalar('SELECT count(*) FROM (SELECT DISTINCT node, pid FROM calls)'),
  // Every call and host event once (a legacy file's own `events` table also holds the driver
  // calls made inside runtime calls, which `calls` counts in them).
  events: ingero.scalar('SELECT (SELECT count(*) FROM calls) + (SELECT count(*) FROM host_events)'),
  host: ingero.scalar('SELECT count(*) FROM host_events'),
  errors: ingero.scalar("SELECT count(*) FROM calls WHERE status = 'error'"),
  unfinished: ingero.scalar("SELECT count(*) FROM calls WHERE status = 'unfinished'"),
};
const hasLoss = ingero.hasColumn('sessions', 'ringbuf_drops');
if (hasLoss) {
  sql.drops = ingero.scalar('SELECT coalesce(sum(ringbuf_drops), 0) FROM sessions');
  sql.storeErrors = ingero.scalar('SELECT coalesce(sum(store_errors), 0) FROM sessions');
  sql.lost = ingero.scalar('SELECT coalesce(sum(lost_calls), 0) FROM sessions');
}
const perOp = ingero.query('SELECT vendor, api, op, count(*) AS calls, sum(dur_ns) AS sum, max(dur_ns) AS max, ' +
  "sum(status = 'error') AS errors, sum(status = 'untimed') AS untimed FROM calls GROUP BY vendor, api, op");
// Launches seen at entry only (--launch-timing) count their process and op's mean in totals.
const estimated = {};
for (const row of ingero.query('SELECT c.api, c.op, sum(coalesce(c.dur_ns, m.mean)) AS sum FROM calls c JOIN ' +
  '(SELECT pid, api, op, avg(dur_ns) AS mean FROM calls WHERE dur_ns IS NOT NULL GROUP BY pid, api, op) m ' +
  'ON m.pid = c.pid AND m.api = c.api AND m.op = c.op GROUP BY c.api, c.op')) estimated[row.api + '/' + row.op] = row.sum;
const q = {};
for (const p of [50, 95, 99]) for (const row of ingero.query(quantileSql(p))) q[row.api + '/' + row.op + '/' + p] = row.v;
// Slow calls: at or above their op's p95, for ops with at least two calls.
const slow = ingero.scalar('SELECT count(*) FROM calls c JOIN (' + quantileSql(95) +
  ') p ON p.vendor = c.vendor AND p.api = c.api AND p.op = c.op WHERE p.n >= 2 AND c.dur_ns >= p.v');
const perProc = ingero.query('SELECT node, pid, count(*) AS calls FROM calls GROUP BY node, pid');
const perNode = ingero.query('SELECT node, count(*) AS calls FROM calls GROUP BY node');
const nodes = ingero.scalar('SELECT count(*) FROM (SELECT node FROM calls UNION SELECT node FROM host_events)');
const explain = JSON.parse(ingero.run(['explain', '--json', '--db', db]).stdout);
// explain --json has one shape: every node's chains at the top level, node by node.
const chains = explain.chains;
log('SQL: ' + JSON.stringify(sql) + ', slow calls ' + slow + ', chains ' + chains.length);

// 3. The page, offline.
const browser = await launch(a.chromium);
try {
  const page = await watchedPage(browser);
  await page.goto('file://' + html, { waitUntil: 'load' });
  await page.waitForSelector('body[data-renders="1"]', { timeout: 30000 });
  await page.waitForSelector('[data-testid="flame-calls"] svg g', { timeout: 30000 });
  await new Promise((res) => setTimeout(res, 300));  // d3's zero-length transitions settle

  equal(await testValue(page, 'calls'), sql.calls, 'header calls');
  equal(await testValue(page, 'processes'), sql.processes, 'header processes');
  equal(await testValue(page, 'events'), sql.events, 'header events');
  equal(await testValue(page, 'host-events'), sql.host, 'header host events');
  equal(await testValue(page, 'errors'), sql.errors, 'header errors');
  equal(await testValue(page, 'unfinished'), sql.unfinished, 'header unfinished');
  if (hasLoss) {
    equal(await testValue(page, 'drops'), sql.drops, 'header ring-buffer drops');
    equal(await testValue(page, 'store-errors'), sql.storeErrors, 'header store errors');
    equal(await testValue(page, 'lost-calls'), sql.lost, 'header calls not traced');
    const loud = await page.$$('[data-testid="warning-error"]');
    check((loud.length > 0) === (sql.drops + sql.storeErrors + sql.lost > 0), 'a loss banner shows exactly when something was lost');
  } else {
    const text = await page.$eval('[data-testid="drops"]', (e) => e.textContent);
    equal(text, 'not recorded', 'legacy file: drops are "not recorded"');
    const folded = ingero.scalar('SELECT coalesce(sum(nested_calls), 0) FROM calls');
    const body = await page.$eval('body', (e) => e.textContent);
    check(folded > 0 ? body.includes('(read-only); ' + folded + ' driver calls made inside runtime calls are counted in them')
      : !body.includes('made inside runtime calls'),
    'legacy file: the driver calls counted in their runtime calls are said with its format', folded);
  }

  // Per-op table: calls, errors, total and max time, exact percentiles.
  const rows = await page.$$eval('[data-testid="ops-table"] tbody tr', (trs) => trs.map((tr) => {
    const o = { key: tr.getAttribute('data-key') };
    for (const td of tr.children) o[td.getAttribute('data-col')] = td.getAttribute('data-value');
    return o;
  }));
  equal(rows.length, perOp.length, 'op table rows');
  const sketched = (await page.$eval('[data-testid="ops-table"] th[data-col="p50_ns"]', (th) => th.title)).includes('sketches');
  let opOk = 0;
  for (const e of perOp) {
    const row = rows.find((x) => x.key === e.api + '/' + e.op);
    if (!check(row, 'op row ' + e.op)) continue;
    const key = e.api + '/' + e.op;
    const want = { calls: e.calls, sum_ns: e.untimed ? estimated[key] : e.sum, max_ns: e.max, errors: e.errors,
      p50_ns: q[key + '/50'], p95_ns: q[key + '/95'], p99_ns: q[key + '/99'] };
    // Exact, but for what the report estimates or sketches: an estimated total (untimed
    // launches) and percentiles of folded calls (1%-accurate sketches, the header says so).
    const near = (k) => (k === 'sum_ns' && e.untimed) || (k.startsWith('p') && sketched);
    const bad = Object.entries(want).filter(([k, v]) => near(k)
      ? Math.abs(Number(row[k]) - Number(v)) > 0.01 * Number(v) + 1
      : String(row[k]) !== String(v));
    if (check(!bad.length, e.op + ': calls, errors, total, max, p50/p95/p99 equal SQL', bad.map(([k, v]) => k + ' ' + row[k] + ' != ' + v).join(', '))) opOk++;
  }
  // Histograms total their op's calls.
  const hists = await page.$$eval('[data-testid="histogram"]', (els) => els.map((e) => [e.getAttribute('data-op'), e.getAttribute('data-total')]));
  check(hists.length > 0, 'latency histograms drawn', hists.length);
  for (const [op, total] of hists) {
    const want = perOp.filter((e) => e.op === op).reduce((s, e) => s + e.calls, 0);
    equal(total, want, 'histogram of ' + op + ' totals its calls');
  }
  // Per process and per node.
  const procRows = await page.$$eval('[data-testid="process-table"] tbody tr', (trs) => trs.map((tr) => [tr.getAttribute('data-key'),
    tr.querySelector('[data-col="calls"]').getAttribute('data-value')]));
  for (const p of perProc) {
    const row = procRows.find(([k]) => k === p.node + ':' + p.pid);
    equal(row ? row[1] : 'missing', p.calls, 'process ' + p.pid + ' calls');
  }
  // Its off-CPU column is its threads' time off-CPU added up, and says so (docs/engine.md).
  const offCpuHead = await page.$eval('[data-testid="process-table"] th[data-col="off_cpu_ns"]',
    (th) => [th.textContent, th.getAttribute('title')]);
  equal(offCpuHead[0].startsWith('off-CPU, its threads summed'), true, 'process off-CPU header: ' + offCpuHead[0]);
  equal(offCpuHead[1].includes('ten such threads count it ten times'), true, 'process off-CPU title: ' + offCpuHead[1]);
  const nodeRows = await page.$$eval('[data-testid="node-table"] tbody tr', (trs) => trs.map((tr) => [tr.getAttribute('data-key'),
    tr.querySelector('[data-col="calls"]').getAttribute('data-value')]));
  equal(nodeRows.length, nodes, 'node table rows (every node with events)');
  for (const n of perNode) {
    const row = nodeRows.find(([k]) => k === n.node);
    equal(row ? row[1] : 'missing', n.calls, 'node ' + (n.node || '(unnamed)') + ' calls');
  }
  if (a['expect-nodes']) equal(nodeRows.length, a['expect-nodes'], 'nodes');

  // Collectives per rank: each (op, rank)'s calls equal SQL.
  const collSql = ingero.query("SELECT op, rank, count(*) AS n FROM calls WHERE kind = 'collective' GROUP BY op, rank");
  const collDom = await page.$$eval('[data-testid="collective"]', (groups) => groups.flatMap((g) =>
    [...g.querySelectorAll('tbody tr')].map((tr) => [g.getAttribute('data-op'), tr.getAttribute('data-key'),
      Number(tr.querySelector('[data-col="calls"]').getAttribute('data-value'))])));
  if (a['expect-collectives']) check(collSql.length > 0 && collDom.length > 0, 'collectives shown', collDom);
  for (const c of collSql) {
    const n = collDom.filter(([op, rank]) => op === c.op && rank === String(c.rank)).reduce((s2, r2) => s2 + r2[2], 0);
    equal(n, c.n, 'collective ' + c.op + ' rank ' + c.rank + ' calls');
  }
  check(collDom.length === 0 || collSql.length > 0, 'no collectives table without collective calls');

  // Causal chains: the engine's, as explain reports them.
  const cards = await page.$$eval('[data-testid="chain"]', (els) => els.map((e) => e.getAttribute('data-severity') + ':' + e.getAttribute('data-rule')));
  equal(cards.join(' '), chains.map((c) => c.severity + ':' + c.rule).join(' '), 'chain cards (severity:rule) equal explain --json');

  // Flame graph: the drawn hierarchy's root frames total the slow calls: those at or above
  // their op's p95, by SQL; where the p95 comes from sketches (folded calls), by the op
  // table's own count of them, which the SQL p95 can differ from within the sketch's 1%.
  const slowWant = sketched ? rows.reduce((s, r) => s + Number(r.slow_calls || 0), 0) : slow;
  equal(await testValue(page, 'flame-total'), slowWant, 'flame graph total (slow calls)');
  const roots = await page.$eval('[data-testid="flame-calls"] svg', (svg) => {
    const root = [...svg.querySelectorAll('g')].map((g) => g.__data__).find((d) => d && d.depth === 0);
    return root ? { children: root.children.length, sum: root.children.reduce((s, c) => s + c.value, 0), value: root.value } : null;
  });
  check(roots && roots.children > 0, 'flame graph has root frames', roots);
  equal(roots.sum, slowWant, 'flame graph: the root frames total the slow calls');
  const pyFrames = await page.$eval('[data-testid="flame-calls"] svg', (svg) =>
    [...svg.querySelectorAll('g')].filter((g) => g.__data__ && g.__data__.data.k === 'py').length);
  if (a['expect-python']) check(pyFrames > 0, 'flame graph shows Python frames', pyFrames);

  // Step timeline (or rates).
  const series = await page.$$('[data-testid="step-series"]');
  if (a['expect-steps']) check(series.length > 0, 'step timeline drawn', series.length);
  if (series.length) {
    const steps = await testValue(page, 'step-count');
    check(Number(steps) > 0, 'steps counted', steps);
    check((await page.$$('[data-testid="step-series"] canvas')).length > 0, 'step chart drawn');
    // The host's time outside GPU calls split as the model has it, series by series.
    const model = JSON.parse(ingero.run(['report', '--db', db, '--json', '-o', '-']).stdout);
    const drawn = await page.$$eval('[data-testid="step-series"]', (els) => els.map((e) => {
      const t = e.querySelector('[data-testid="host-time"]');
      return [e.getAttribute('data-pid'), t ? ['on-cpu', 'preempted', 'io', 'sleep', 'unknown']
        .map((k) => t.getAttribute('data-' + k)) : null];
    }));
    for (const [pid, shares] of drawn) {
      const m = model.steps.find((x) => String(x.pid) === pid);
      const t = m && m.summary.host_time;
      const want = t && Object.values(t).some((v) => v > 0)
        ? ['on_cpu', 'preempted', 'io', 'sleep', 'unknown'].map((k) => String(t[k])) : null;
      equal(shares, want, 'host time split of pid ' + pid);
    }
    if (a['expect-host-time']) {
      check(drawn.some(([, sh]) => sh && Number(sh[0]) > 0 && Number(sh[4]) === 0),
        'host time split from the scheduler drawn', JSON.stringify(drawn));
    }
    // The GPU-busy lane where the devices measured the steps; else a line saying they did not.
    if (a['step-faults']) {
      check((await page.$$('[data-testid="gpu-busy-lane"] canvas')).length > 0, 'GPU-busy lane drawn');
    } else {
      check((await page.$$('[data-testid="gpu-busy-lane-absent"]')).length > 0, 'no GPU-busy lane: said so');
      check((await page.$$('[data-testid="gpu-busy-lane"]')).length === 0, 'no GPU-busy lane drawn');
    }
    // The rates wait behind a disclosure: opening it draws them.
    check((await page.$$('[data-testid="rate-chart"] canvas')).length === 0, 'rates not drawn while folded');
    await page.$eval('#rates-details > summary', (s) => s.click());
    await page.waitForSelector('[data-testid="rate-chart"] canvas', { timeout: 10000 });
  }
  // Kernels per step: each process's kernels, their launches equal SQL's per (pid, kernel), the
  // chart drawn; the section only where the trace names kernels.
  const kernelBlocks = await page.$$('[data-testid="kernel-series"]');
  const named = ingero.hasColumn('sessions', 'unnamed_launches') &&
    ingero.scalar('SELECT count(*) FROM kernel_names') + ingero.scalar('SELECT coalesce(sum(unnamed_launches), 0) FROM sessions') > 0;
  check((kernelBlocks.length > 0) === named, 'kernels per step shown exactly where the trace names kernels', kernelBlocks.length);
  if (a['expect-kernels']) check(kernelBlocks.length > 0, 'kernels per step shown', kernelBlocks.length);
  if (kernelBlocks.length) {
    const perKernel = ingero.query('SELECT pid, count(*) AS n FROM calls WHERE kind = \'launch\' AND func IS NOT NULL ' +
      'GROUP BY pid, coalesce(kernel, func)');
    const dom = await page.$$eval('[data-testid="kernel-series"]', (els) => els.map((e) => [e.getAttribute('data-pid'),
      [...e.querySelectorAll('[data-testid="kernels-table"] tbody tr')].map((tr) =>
        Number(tr.querySelector('[data-col="launches"]').getAttribute('data-value')))]));
    // A compacted trace's table counts the folded form's kernels (runs of several keep how many
    // launches of each), where SQL still reads the full rows: equal all the same.
    for (const [pid, counts] of a['expect-whole-steps'] ? [] : dom) {
      const want = perKernel.filter((r) => String(r.pid) === pid).map((r) => r.n).sort((x, y) => y - x);
      equal(counts.sort((x, y) => y - x).join(','), want.join(','), 'pid ' + pid + ': launches per kernel equal SQL');
    }
    check((await page.$$('[data-testid="kernel-chart"] canvas')).length > 0, 'launches-per-step chart drawn');
    if (a['expect-folded']) {
      check(ingero.scalar('SELECT coalesce(sum(folded), 0) FROM call_store') > 0, 'launches were folded');
      check((await page.$$('[data-testid="kernels-whole-steps"]')).length === 0,
        'every steady step counted by kernel: no note on which steps');
    }
    if (typeof a['expect-whole-steps'] === 'string') {
      const text = await page.$eval('[data-testid="kernels-whole-steps"]', (e) => e.textContent);
      equal(text, a['expect-whole-steps'], 'which steps the per-step figures come from');
    }
    if (typeof a['expect-kernels'] === 'string') {
      const text = await page.$eval('[data-testid="kernels-per-step"]', (e) => e.textContent);
      equal(text, a['expect-kernels'], 'the kernels of a step, in one sentence');
    }
  }
  check((await page.$$('[data-testid="rate-chart"] canvas')).length > 0, 'call-rate chart drawn');
  check((await page.$$('[data-testid="latency-chart"] canvas')).length > 0, 'latency chart drawn');
  const ink = await chartInk(page);
  check(ink.length > 0 && ink.every((n) => n > 0), 'every chart canvas has drawn pixels', ink);

  // Use it: zoom into a frame, switch the flame to time, search; nothing may throw.
  await page.$eval('[data-testid="flame-calls"] svg g:nth-of-type(2)', (g) => g.dispatchEvent(new MouseEvent('click', { bubbles: true })));
  await page.evaluate(() => [...document.querySelectorAll('#flame button')].find((b) => b.textContent === 'width: time').click());
  await page.type('#flame input[type=search]', 'cuda');
  await new Promise((res) => setTimeout(res, 300));
  await page.evaluate(() => [...document.querySelectorAll('#flame button')].find((b) => b.textContent === 'width: calls').click());
  await page.$eval('#flame input[type=search]', (i) => {
    i.value = '';
    i.dispatchEvent(new Event('input'));
  });
  await page.evaluate(() => [...document.querySelectorAll('#flame button')].find((b) => b.textContent === 'reset zoom').click());

  check(page.errors.length === 0, 'no console errors or exceptions', page.errors);
  const foreign = page.requests.filter((u) => !u.startsWith('file://') && !u.startsWith('data:') && !u.startsWith('about:'));
  check(foreign.length === 0, 'no network requests (offline)', foreign);

  const shot = path.join(out, a.name + '.png');
  await page.screenshot({ path: shot, fullPage: true });
  await checkScreenshot(browser, shot, 1400, 2000, 50);
  // The first screenful (header and timeline), as docs/ shows it.
  await page.evaluate(() => window.scrollTo(0, 0));
  const top = path.join(out, a.name + '-top.png');
  await page.screenshot({ path: top });
  await checkScreenshot(browser, top, 1400, 1000, 50);
  const flameShot = path.join(out, a.name + '-flame.png');
  await (await page.$('#flame')).screenshot({ path: flameShot });
  await checkScreenshot(browser, flameShot, 1000, 300, 10);
  log('screenshot: ' + shot + ' (op rows checked: ' + opOk + ')');
} finally {
  await closeBrowser(browser);
}
exitWith();
