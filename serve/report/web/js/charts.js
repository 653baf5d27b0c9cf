// Charts with uPlot. Every chart is registered so a re-render (live dashboard, resize)
// destroys the old ones first.
const charts = [];
const PALETTE = ['#2a5bd7', '#e4572e', '#29a36a', '#a05eb5', '#f0a202', '#17a2b8', '#8d6e63',
  '#d81b60', '#546e7a', '#7cb342', '#5e35b1', '#00897b'];

function destroyCharts() {
  while (charts.length) charts.pop().destroy();
}

function widthOf(el) {
  return Math.max(300, Math.floor((el.clientWidth || el.parentNode.clientWidth || 900) - 4));
}

function makeChart(el, opts, data) {
  const u = new uPlot(Object.assign({ width: widthOf(el) }, opts), data, el);
  charts.push(u);
  return u;
}

const xAxis = (label) => ({
  label: label,
  values: (u, vals) => vals.map((v) => (v === null ? '' : fmt.secs(v))),
});

function yAxis(label, f) {
  return { label: label, size: 72, values: (u, vals) => vals.map((v) => (v === null ? '' : f(v))) };
}

// The step timeline: each step's duration as stacked components (the top of the stack is
// the step's duration), GPU idle as a dashed line, warm-up steps shaded.
const STEP_PARTS = [
  ['wait_us', 'GPU wait (sync, D2H)', '#2a5bd7'],
  ['enqueue_us', 'enqueue (launch, copy)', '#29a36a'],
  ['api_us', 'other GPU API (alloc, free)', '#17a2b8'],
  ['gap_on_cpu_us', 'host gap: on-CPU', '#f0a202'],
  ['gap_preempted_us', 'host gap: preempted', '#e4572e'],
  ['gap_io_us', 'host gap: blocked on I/O', '#a05eb5'],
  ['gap_sleep_us', 'host gap: sleeping', '#8d6e63'],
  ['gap_unknown_us', 'host gap: state unknown', '#9e9e9e'],
  ['host_other_us', 'host, GPU busy', '#cfd8dc'],
];

function stepChart(el, s) {
  const p = s.points;
  const parts = STEP_PARTS.filter(([k]) => p[k] && p[k].some((v) => v > 0));
  const cum = [];
  let acc = p.t.map(() => 0);
  for (const [k] of parts) {
    acc = acc.map((v, i) => v + p[k][i]);
    cum.push(acc);
  }
  const series = [{ label: 'start', value: (u, v) => (v === null ? '\u2013' : fmt.secs(v)) }];
  const data = [p.t];
  for (let i = parts.length - 1; i >= 0; i--) {
    const [k, label, color] = parts[i];
    series.push({
      label: label, stroke: color, fill: color, width: 1, points: { show: false },
      value: (u, v, si, idx) => (idx === null || idx === undefined ? '\u2013' : fmt.us(p[k][idx])),
    });
    data.push(cum[i]);
  }
  series.push({ label: 'GPU idle (lower bound)', stroke: '#1d2330', dash: [4, 3], width: 1.5,
    points: { show: false }, value: (u, v) => fmt.us(v) });
  data.push(p.gpu_idle_us);
  const warm = p.warmup;
  return makeChart(el, {
    height: 280,
    title: 'Step duration and where it went' + (s.group > 1 ? ' (mean of every ' + s.group + ' steps)' : ''),
    scales: { x: { time: false } },
    axes: [xAxis('time since the trace started'), yAxis('per step', fmt.us)],
    series: series,
    cursor: { drag: { x: true, y: false } },
    hooks: {
      drawClear: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        ctx.fillStyle = 'rgba(120,120,120,0.12)';
        for (let i = 0; i < warm.length; i++) {
          if (!warm[i]) continue;
          const x0 = u.valToPos(p.t[i], 'x', true);
          const x1 = u.valToPos(i + 1 < p.t.length ? p.t[i + 1] : p.t[i] + p.dur_us[i] / 1e6, 'x', true);
          ctx.fillRect(x0, u.bbox.top, Math.max(1, x1 - x0), u.bbox.height);
        }
        ctx.restore();
      }],
    },
  }, data);
}

// The GPU-busy lane under the step timeline: each step's busy share as the device measured it
// (NVML, amdgpu), gaps where no device sample covers a step.
function busyLane(el, s) {
  const p = s.points;
  const src = s.summary.gpu_busy_source === 'nvml' ? 'NVML' : (s.summary.gpu_busy_source || 'device');
  return makeChart(el, {
    height: 120,
    title: 'GPU busy per step, measured (' + src + (s.summary.gpu_busy_scope === 'device' ? ', whole device' : '') + ')',
    scales: { x: { time: false }, y: { range: [0, 1] } },
    axes: [xAxis('time since the trace started'), yAxis('busy', (v) => fmt.pct(v))],
    series: [
      { label: 'start', value: (u, v) => (v === null ? '\u2013' : fmt.secs(v)) },
      { label: 'GPU busy', stroke: '#2e7d32', fill: 'rgba(46,125,50,0.18)', width: 1.5,
        points: { show: false }, spanGaps: false,
        value: (u, v, si, idx) => (idx === null || idx === undefined ? '\u2013'
          : v === null || v === undefined ? 'not measured' : fmt.pct(v)) },
    ],
  }, [p.t, p.gpu_busy]);
}

// Per-op call rates, and approximate p50/p99 per time bucket on a log scale.
function rateCharts(elRate, elLat, r) {
  const perS = (arr) => arr.map((c) => c / r.bucket_s);
  const rs = [{ label: 'bucket', value: (u, v) => (v === null ? '\u2013' : fmt.secs(v)) }];
  const rd = [r.t];
  r.series.forEach((s, i) => {
    rs.push({ label: s.op, stroke: PALETTE[i % PALETTE.length], width: 1.5, points: { show: false },
      value: (u, v) => (v === null ? '\u2013' : fmt.count(Math.round(v)) + '/s') });
    rd.push(perS(s.calls));
  });
  if (r.other_calls.some((c) => c > 0)) {
    rs.push({ label: 'other ops', stroke: '#9e9e9e', width: 1, points: { show: false },
      value: (u, v) => (v === null ? '\u2013' : fmt.count(Math.round(v)) + '/s') });
    rd.push(perS(r.other_calls));
  }
  makeChart(elRate, {
    height: 240, title: 'Calls per second, per op (' + fmt.secs(r.bucket_s) + ' buckets)',
    scales: { x: { time: false } },
    axes: [xAxis('time since the trace started'), yAxis('calls/s', (v) => fmt.count(Math.round(v)))],
    series: rs,
  }, rd);
  const ls = [{ label: 'bucket', value: (u, v) => (v === null ? '\u2013' : fmt.secs(v)) }];
  const ld = [r.t];
  r.series.forEach((s, i) => {
    const c = PALETTE[i % PALETTE.length];
    ls.push({ label: s.op + ' p50', stroke: c, width: 1.5, points: { show: false }, spanGaps: false,
      value: (u, v) => fmt.us(v) });
    ld.push(s.p50_us.map((v) => (v === null ? null : Math.max(v, 0.001))));
    ls.push({ label: s.op + ' p99', stroke: c, width: 1, dash: [5, 3], points: { show: false },
      value: (u, v) => fmt.us(v) });
    ld.push(s.p99_us.map((v) => (v === null ? null : Math.max(v, 0.001))));
  });
  makeChart(elLat, {
    height: 260, title: 'Latency per op: p50 (solid) and p99 (dashed), approximate per bucket',
    scales: { x: { time: false }, y: { distr: 3 } },
    axes: [xAxis('time since the trace started'), yAxis('latency', fmt.us)],
    series: ls,
  }, ld);
}

// One op's latency histogram: bars over quarter-octave bins.
function histChart(el, op) {
  const e = op.hist.edges_ns;
  const counts = op.hist.counts;
  const x = counts.map((_, i) => i);
  return makeChart(el, {
    height: 170,
    title: op.op + ' (' + fmt.count(op.calls) + ' calls)',
    legend: { show: false },
    scales: { x: { time: false, range: [-0.5, Math.max(counts.length - 0.5, 0.5)] } },
    axes: [
      { values: (u, vals) => vals.map((v) => (Number.isInteger(v) && v >= 0 && v < e.length ? fmt.dur(e[v]) : '')),
        space: 60 },
      yAxis('calls', (v) => fmt.count(v)),
    ],
    series: [{}, { label: 'calls', stroke: '#2a5bd7', fill: 'rgba(42,91,215,0.55)',
      paths: uPlot.paths.bars({ size: [0.92, 60] }), points: { show: false } }],
  }, [x, counts]);
}
