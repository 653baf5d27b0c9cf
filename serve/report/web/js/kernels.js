// Kernels per step: each GPU process's kernels (names from the runtime's registration,
// driver look-ups and ELF symbols) with their launches per steady step and the line that
// launches them, and a chart of launches per step by kernel.

function kernelChart(el, k) {
  const p = k.points;
  const parts = p.series.map((s, i) => [s.counts, s.name, PALETTE[i % PALETTE.length]]);
  if (p.other.some((v) => v > 0)) parts.push([p.other, 'other kernels', '#9e9e9e']);
  const cum = [];
  let acc = p.t.map(() => 0);
  for (const [counts] of parts) {
    acc = acc.map((v, i) => v + counts[i]);
    cum.push(acc);
  }
  const series = [{ label: 'start', value: (u, v) => (v === null ? '\u2013' : fmt.secs(v)) }];
  const data = [p.t];
  for (let i = parts.length - 1; i >= 0; i--) {
    const [counts, label, color] = parts[i];
    series.push({
      label: label, stroke: color, fill: color, width: 1, points: { show: false },
      value: (u, v, si, idx) => (idx === null || idx === undefined ? '\u2013' : fmt.count(counts[idx])),
    });
    data.push(cum[i]);
  }
  return makeChart(el, {
    height: 260,
    title: 'Launches per step by kernel' + (k.group > 1 ? ' (mean of every ' + k.group + ' steps)' : ''),
    // Stacked counts: from zero, or the bottom kernel's share would vanish.
    scales: { x: { time: false }, y: { range: (u, min, max) => [0, Math.max(1, max) * 1.05] } },
    axes: [xAxis('time since the trace started'), yAxis('launches', (v) => fmt.count(Math.round(v)))],
    series: series,
    cursor: { drag: { x: true, y: false } },
  }, data);
}

function kernelBlock(k) {
  const cols = [C.text('name', 'kernel'), C.count('launches', 'launches'),
    C.count('per_step_median', 'per step', 'median over the steady steps'),
    C.count('per_step_max', 'most in a step'), C.count('steps_with', 'steps with it', 'steady steps that launched it'),
    C.text('where', 'launched from'), C.text('source', 'name from')];
  const table = dataTable(cols, k.kernels, { testid: 'kernels-table', key: (r) => r.name });
  const box = k.points ? h('div', { class: 'chartbox wide', 'data-testid': 'kernel-chart' }) : null;
  const where = k.node ? ' on ' + k.node : '';
  const el = h('div', { class: 'series', 'data-testid': 'kernel-series', 'data-pid': k.pid },
    h('h3', null, k.name + ' (pid ' + k.pid + ')' + where),
    h('div', { class: 'small muted' }, num(k.launches, undefined, 'kernel-launches'), ' launches of ',
      fmt.count(k.kernels_total), ' kernels',
      k.unnamed_launches ? ' (' + fmt.count(k.unnamed_launches) + ' launches of ' + fmt.count(k.unnamed_functions) +
        ' functions without a name)' : '',
      k.folded_launches ? '; ' + fmt.count(k.folded_launches) + ' older launches were folded and kept no function' : '',
      k.whole_steps_text ? h('span', { 'data-testid': 'kernels-whole-steps' },
        ' (per step: ' + k.whole_steps_text + ')') : ''),
    k.per_step ? h('p', null, h('b', { 'data-testid': 'kernels-per-step' }, k.per_step)) : null,
    table,
    k.kernels_total > k.kernels.length ? h('p', { class: 'muted small' }, (k.kernels_total - k.kernels.length) +
      ' less launched kernels are not listed.') : null,
    box);
  return { el: el, draw: () => (box ? kernelChart(box, k) : null) };
}

function kernelsSection(m) {
  const ks = m.kernels;
  if (!ks || !ks.named) return null;
  const shown = ks.processes.slice(0, 8);
  const blocks = shown.map(kernelBlock);
  const el = card('kernels', 'Kernels per step',
    h('p', { class: 'muted small' }, 'The kernels each GPU process launches, by name, with their launches per steady ' +
      'step and the line of code that launches them most.'),
    ks.unnamed_launches ? h('div', { class: 'banner notice', 'data-testid': 'unnamed-kernels' },
      fmt.count(ks.unnamed_launches) + ' launches (of ' + fmt.count(ks.unnamed_functions) + ' functions) have no kernel ' +
      'name: their kernels were registered before the trace began and the file has no symbol at them.') : null,
    shown.length ? blocks.map((b) => b.el) : h('p', { class: 'empty' }, 'No kernel launches in this window.'),
    ks.processes_total > shown.length ? h('p', { class: 'muted' }, (ks.processes_total - shown.length) +
      ' more processes are not shown.') : null);
  return { el: el, draw: () => blocks.forEach((b) => b.draw()) };
}
