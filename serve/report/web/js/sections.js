// The report's sections, in page order. Each returns { el, draw } where draw() (optional)
// renders its charts once el is in the page (charts need their width).

function headerSection(m) {
  const hd = m.header;
  const loss = hd.loss || {};
  const sev = { HIGH: 0, MEDIUM: 0, LOW: 0 };
  for (const c of m.chains) sev[c.severity] = (sev[c.severity] || 0) + 1;
  const lossStat = (label, key, testid) => (hd.loss_recorded
    ? stat(label, loss[key], testid, { bad: loss[key] > 0 })
    : stat(label, null, testid, { text: 'not recorded' }));
  const nodes = m.nodes.map((n) => n.node || '(unnamed)');
  const el = h('section', { class: 'card', id: 'header' },
    h('h1', null, 'Trace report'),
    h('div', { class: 'muted mono', 'data-testid': 'trace-path' }, m.trace.path),
    (hd.warnings || []).map((w) => h('div', { class: 'banner ' + w.level, 'data-testid': 'warning-' + w.level }, w.text)),
    h('div', { class: 'stats' },
      stat('calls', hd.calls, 'calls'),
      stat('processes with calls', hd.processes, 'processes'),
      stat('events (calls + host)', hd.events, 'events'),
      stat('host events', hd.host_events, 'host-events'),
      stat('calls that failed', hd.errors, 'errors', { bad: false }),
      stat('unfinished calls', hd.unfinished, 'unfinished'),
      lossStat('ring-buffer drops', 'ringbuf_drops', 'drops'),
      lossStat('calls not traced', 'lost_calls', 'lost-calls'),
      lossStat('store errors', 'store_errors', 'store-errors'),
      stat('causal chains', m.chains_total, 'chains',
        { text: fmt.count(m.chains_total) + (m.chains_total ? ' (' + sev.HIGH + ' high)' : '') })),
    kv([
      ['file format', m.trace.format],
      ['window', h('span', { 'data-testid': 'span' }, fmt.time(m.window.start_ns) + ' \u2192 ' +
        fmt.time(m.window.end_ns) + ' (' + fmt.secs(m.window.seconds) + ')')],
      ['node' + (nodes.length > 1 ? 's' : ''), h('span', { 'data-testid': 'nodes' }, nodes.join(', ') || '(none)')],
      ['generated', fmt.time(m.generated_at_ns) + ' by ingero ' + m.ingero_version],
    ]));
  return { el: el };
}

function shareBar(parts) {
  const bar = h('div', { class: 'sharebar' });
  const legend = h('div', { class: 'legend-inline' });
  for (const [label, share, color] of parts) {
    if (!(share > 0)) continue;
    bar.appendChild(h('span', { style: 'width:' + (share * 100).toFixed(2) + '%;background:' + color, title: label + ' ' + fmt.pct(share) }));
    legend.appendChild(h('span', null, h('i', { style: 'background:' + color }), label + ' ' + fmt.pct(share)));
  }
  return [bar, legend];
}

// The host's time outside GPU calls by what its threads did (the scheduler's intervals), as
// shares of the step; "unknown" where the trace has no scheduler events.
function hostTimeBar(t) {
  if (!t) return null;
  // The step chart's colours for the same states (charts.js).
  const parts = [['in its own code', t.on_cpu, '#f0a202'], ['preempted', t.preempted, '#e4572e'],
    ['in I/O', t.io, '#a05eb5'], ['asleep', t.sleep, '#8d6e63'],
    ['running or not unknown (no scheduler events)', t.unknown, '#e0e0e0']];
  if (!parts.some((p) => p[1] > 0)) return null;
  const attrs = { 'data-testid': 'host-time' };
  for (const k of ['on_cpu', 'preempted', 'io', 'sleep', 'unknown']) attrs['data-' + k.replace('_', '-')] = String(t[k]);
  return h('div', attrs, h('div', { class: 'small' }, 'Host time outside GPU calls, as shares of the step:'),
    shareBar(parts));
}

function stepSeriesBlock(s) {
  const sum = s.summary;
  const box = h('div', { class: 'chartbox wide' });
  const measured = (s.points.gpu_busy || []).some((v) => v !== null && v !== undefined);
  const lane = measured ? h('div', { class: 'chartbox wide', 'data-testid': 'gpu-busy-lane' }) :
    h('div', { class: 'small muted', 'data-testid': 'gpu-busy-lane-absent' },
      'GPU busy not measured (no NVML or amdgpu samples cover these steps): the dashed GPU idle line is a lower bound from the syncs.');
  const where = s.node ? ' on ' + s.node : '';
  const el = h('div', { class: 'series', 'data-testid': 'step-series', 'data-pid': s.pid },
    h('h3', null, s.name + ' (pid ' + s.pid + ')' + where),
    h('div', { class: 'small muted' },
      num(s.steps, undefined, 'step-count'), ' steps (', fmt.count(sum.warmup_steps),
      ' warm-up, shaded); cadence: ', s.cadence, s.cadence_note ? ' \u2014 ' + s.cadence_note : ''),
    sum.text ? h('p', null, h('b', null, sum.text)) : null,
    h('div', { class: 'small' }, 'Steady steps: median ', fmt.dur(sum.median_ns), ', p90 ', fmt.dur(sum.p90_ns),
      ', ', fmt.count(sum.launches_per_step), ' launches and ', fmt.count(sum.round_trips_per_step),
      ' blocking round trips per step', sum.preempted_by ? '; CPU taken by ' + sum.preempted_by : ''),
    shareBar([
      ['GPU wait', sum.wait, '#2a5bd7'], ['enqueue', sum.enqueue, '#29a36a'], ['other GPU API', sum.api, '#17a2b8'],
      ['host gap (GPU idle)', sum.host_gap, '#f0a202'], ['host, GPU busy', Math.max(0, sum.host - sum.host_gap), '#cfd8dc']]),
    hostTimeBar(sum.host_time),
    sum.gap_where ? h('div', { class: 'small' }, 'Host gaps mostly ', sum.gap_cause || '', ' in ', h('span', { class: 'mono' }, sum.gap_where)) : null,
    s.calls_not_modelled ? h('div', { class: 'small muted' }, fmt.count(s.calls_not_modelled) +
      ' top-level calls beyond the step model\u2019s cap were not modelled.') : null,
    box, lane);
  return { el: el, draw: () => {
    stepChart(box, s);
    if (measured) busyLane(lane, s);
  } };
}

function timelineSection(m) {
  const rateEl = h('div', { class: 'chartbox wide', 'data-testid': 'rate-chart' });
  const latEl = h('div', { class: 'chartbox wide', 'data-testid': 'latency-chart' });
  const hasRates = m.rates.series.length > 0;
  const rates = hasRates ? [rateEl, latEl] : h('p', { class: 'empty' }, 'No calls in this window.');
  const drawRates = () => {
    if (hasRates) rateCharts(rateEl, latEl, m.rates);
  };
  if (!m.steps.length) {
    return {
      el: card('timeline', 'Calls over time',
        h('p', { class: 'muted' }, 'No step model: no process made enough periodic GPU calls. ' +
          'Calls per second and latency percentiles per op instead.'), rates),
      draw: drawRates,
    };
  }
  const series = m.steps.slice().sort((a, b) => b.steps - a.steps).slice(0, 8);
  const blocks = series.map(stepSeriesBlock);
  const total = m.steps_total ?? m.steps.length;
  const more = total > series.length
    ? h('p', { class: 'muted' }, fmt.count(total - series.length) + ' more processes with steps are not drawn.') : null;
  const det = h('details', { id: 'rates-details' }, h('summary', null, 'Calls per second and latency per op'), rates);
  // A chart drawn while hidden has no width: the rates are drawn when first opened.
  let drawn = false;
  const drawOnce = () => {
    if (det.open && !drawn) {
      drawn = true;
      drawRates();
    }
  };
  det.addEventListener('toggle', drawOnce);
  const el = card('timeline', 'Step timeline',
    h('p', { class: 'muted small' }, 'Each step of each GPU process: host time waiting for the GPU, enqueueing work, ' +
      'in other GPU API calls, and host gaps (GPU idle, no thread in a GPU call) by what the host thread was doing; ' +
      'under it, the GPU busy share the device measured (NVML, amdgpu) where it reported one.'),
    blocks.map((b) => b.el), more, det);
  return {
    el: el,
    draw: () => {
      blocks.forEach((b) => b.draw());
      drawOnce();
    },
  };
}

// A chain's card: the summary line always shows; the evidence, stacks and fixes fold (open
// for HIGH and MEDIUM chains).
function chainCard(c) {
  const meta = [c.rule, c.op, c.pids && c.pids.length ? 'pid ' + c.pids.join(', ') : '', c.node ? 'node ' + c.node : '',
    c.p50_ns ? 'p50 ' + fmt.dur(c.p50_ns) : '', c.p99_ns ? 'p99 ' + fmt.dur(c.p99_ns) : ''].filter(Boolean).join(' \u00b7 ');
  const body = h('details', { open: c.severity !== 'LOW' },
    h('summary', null, 'Evidence, stacks and fixes'),
    c.explanation ? h('p', { class: 'small' }, c.explanation) : null,
    c.timeline.length ? [h('h4', null, 'Evidence'), h('ul', { class: 'timeline' }, c.timeline.map((t) =>
      h('li', null, h('span', { class: 'layer' }, t.layer), t.detail)))] : null,
    c.stacks.map((s) => [h('h4', null, 'Stack: ' + (s.header ? s.header + ', ' : '') + 'pid ' + s.pid + ' tid ' + s.tid),
      h('pre', null, s.frames.join('\n'))]),
    c.fixes.length ? [h('h4', null, 'Fix'), h('ol', { class: 'fixes' }, c.fixes.map((f) => h('li', null, f)))] : null);
  return h('div', { class: 'chain ' + c.severity, 'data-testid': 'chain', 'data-severity': c.severity, 'data-rule': c.rule },
    h('h3', null, h('span', { class: 'sev ' + c.severity }, c.severity), c.summary),
    h('div', { class: 'meta' }, meta),
    h('div', null, h('b', null, 'Root cause: '), c.root_cause),
    body);
}

function chainsSection(m) {
  const shown = m.chains.length;
  const el = card('chains', 'Causal chains',
    shown ? h('p', { class: 'muted small' }, 'Symptom, evidence layer by layer, root cause and fixes; HIGH first.' +
      (m.chains_total > shown ? ' Showing ' + shown + ' of ' + m.chains_total + '.' : ''))
      : h('p', { class: 'empty', 'data-testid': 'no-chains' }, 'No causal chain: nothing in this window needs explaining.'),
    m.chains.map(chainCard));
  return { el: el };
}

function flameSection(m) {
  const f = m.flame.calls;
  const blocks = [];
  const parts = [h('p', { class: 'small' }, num(f.total, undefined, 'flame-total'),
    ' slow calls (each at or above its op\u2019s p95) from ', fmt.count(f.stacks), ' call stacks',
    f.without_stack ? '; ' + fmt.count(f.without_stack) + ' of them were recorded without a stack' : '',
    f.truncated ? '; the tree was cut at its node limit (deeper frames folded)' : '',
    '. Programs\u2019 entry points at the bottom, the GPU API call at each tip. Click a frame to zoom.')];
  if (f.total > 0) {
    const b = flameBlock(f, 'GPU API call', 'calls', 'flame-calls');
    blocks.push(b);
    parts.push(b.el);
  }
  const s = m.flame.samples;
  if (s && s.total > 0) {
    const b = flameBlock(s, 'frame', 'samples', 'flame-samples');
    blocks.push(b);
    parts.push(h('h3', null, 'On-CPU samples of the GPU processes'),
      h('p', { class: 'small' }, num(s.total, undefined, 'samples-total'), ' samples from ', fmt.count(s.stacks), ' stacks.'), b.el);
  }
  return { el: card('flame', 'Where the slow calls come from', parts), draw: () => blocks.forEach((b) => b.draw()) };
}
