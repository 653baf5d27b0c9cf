// Sortable tables, and the table sections: per op (with histograms), per process, per tenant,
// per node, NCCL collectives per rank, host events.

// columns: { key, label, num, title, value(row) (default row[key]), show(raw, row) (text) }.
// Every cell keeps its raw value in data-value; rows carry data-key when opts.key is given.
function dataTable(columns, rows, opts) {
  const o = opts || {};
  const tbody = h('tbody');
  const raw = (c, r) => (c.value ? c.value(r) : r[c.key]);
  const fill = (list) => {
    tbody.replaceChildren(...list.map((r) => h('tr', { 'data-key': o.key ? o.key(r) : null },
      columns.map((c) => {
        const v = raw(c, r);
        return h('td', { class: c.num ? 'num' : null, 'data-col': c.key, 'data-value': v === null || v === undefined ? '' : String(v) },
          c.show ? c.show(v, r) : v === null || v === undefined ? '' : String(v));
      }))));
  };
  let sortKey = null;
  let asc = true;
  const sortBy = (c) => {
    asc = sortKey === c.key ? !asc : !c.num;
    sortKey = c.key;
    const list = rows.slice().sort((a, b) => {
      const x = raw(c, a);
      const y = raw(c, b);
      const cmp = c.num ? (Number(x) || 0) - (Number(y) || 0) : String(x).localeCompare(String(y));
      return asc ? cmp : -cmp;
    });
    fill(list);
  };
  const head = h('tr', null, columns.map((c) => h('th', { class: c.num ? 'num' : null, title: c.title || 'sort', 'data-col': c.key,
    onclick: () => sortBy(c) }, c.label)));
  fill(rows);
  return h('div', { class: 'tablewrap' }, h('table', { class: 'grid', 'data-testid': o.testid }, h('thead', null, head), tbody));
}

const C = {
  count: (key, label, title) => ({ key: key, label: label, num: true, title: title, show: (v) => fmt.count(v) }),
  dur: (key, label, title) => ({ key: key, label: label, num: true, title: title, show: (v) => fmt.dur(v) }),
  bytes: (key, label) => ({ key: key, label: label, num: true, show: (v) => (v ? fmt.bytes(v) : '') }),
  text: (key, label) => ({ key: key, label: label }),
  time: (key, label) => ({ key: key, label: label, num: true, show: (v) => fmt.time(v) }),
};

function opsSection(m) {
  // Folded calls (tiered retention) are read back through their per-second sketches.
  const q = m.header.quantiles === 'sketches' ? 'from 1%-accurate sketches (folded calls)' : 'exact, nearest rank';
  const cols = [C.text('op', 'op'), C.text('api', 'api'), C.text('kind', 'kind'), C.count('calls', 'calls'),
    C.count('errors', 'errors', 'returned an error'), C.count('unfinished', 'unfinished', 'still running when their thread exited'),
    C.dur('avg_ns', 'avg'), C.dur('p50_ns', 'p50', q), C.dur('p95_ns', 'p95', q), C.dur('p99_ns', 'p99', q), C.dur('max_ns', 'max'), C.dur('sum_ns', 'total time'),
    C.count('slow_calls', 'slow calls', 'at or above p95: in the flame graph'), C.bytes('bytes', 'bytes'),
    C.dur('off_cpu_ns', 'off-CPU', 'time the calling thread spent off-CPU during the calls')];
  const table = dataTable(cols, m.ops, { testid: 'ops-table', key: (r) => r.api + '/' + r.op });
  const top = m.ops.filter((o) => o.hist.counts.length).slice(0, 12);
  const boxes = top.map((o) => h('div', { class: 'chartbox', 'data-testid': 'histogram', 'data-op': o.op, 'data-total': o.hist.counts.reduce((a, b) => a + b, 0) }));
  const el = card('ops', 'Latency per op',
    m.ops.length ? table : h('p', { class: 'empty' }, 'No calls.'),
    top.length ? [h('h3', null, 'Latency histograms'), h('p', { class: 'muted small' },
      'Quarter-octave bins; the ' + top.length + ' ops with the most total time' + (m.ops.length > top.length ? ' (of ' + m.ops.length + ')' : '') + '.'),
    h('div', { class: 'charts' }, boxes)] : null);
  return { el: el, draw: () => top.forEach((o, i) => histChart(boxes[i], o)) };
}

function processSection(m) {
  const multi = m.nodes.length > 1;
  const tenants = m.processes.some((p) => p.tenant);
  const cols = [multi ? C.text('node', 'node') : null, C.count('pid', 'pid'), C.text('name', 'name'), C.text('role', 'role'),
    tenants ? C.text('tenant', 'tenant') : null,
    C.count('calls', 'calls'), C.count('threads', 'threads', 'threads that made calls'), C.count('errors', 'errors'),
    C.dur('busy_ns', 'time in calls'),
    C.dur('off_cpu_ns', 'off-CPU, its threads summed', 'each thread\'s time off its CPU, added up over the session: a thread asleep all along counts the whole session, so ten such threads count it ten times'),
    C.count('switches', 'switches'),
    C.count('involuntary', 'preempted', 'involuntary context switches'), C.count('page_allocs', 'page allocs'),
    C.count('block_ios', 'block I/Os')].filter(Boolean);
  const note = m.processes_total > m.processes.length
    ? h('p', { class: 'muted small' }, 'Showing ' + m.processes.length + ' of ' + m.processes_total + ' processes (most calls first).') : null;
  return { el: card('processes', 'Processes', note, dataTable(cols, m.processes, { testid: 'process-table', key: (r) => r.node + ':' + r.pid })) };
}

// Per pod or container: shown when the trace names a tenant or tenants preempted each other.
function tenantsSection(m) {
  const t = m.tenants;
  if (!t || (!t.named && !t.preemptions.length)) return null;
  const multi = m.nodes.length > 1;
  const cols = [multi ? C.text('node', 'node') : null, C.text('name', 'tenant'), C.text('kind', 'kind'),
    C.count('calls', 'GPU calls'), C.dur('api_ns', 'time in calls'),
    C.dur('preempted_ns', 'preempted', 'involuntary off-CPU time of its GPU threads'),
    C.dur('preempted_by_others_ns', 'by other tenants', 'of which tasks of other tenants held the CPU'),
    C.dur('preempting_ns', 'took from others', 'time its tasks held the CPU while other tenants\' GPU threads waited')].filter(Boolean);
  const across = t.preemptions.length ? [h('h3', null, 'Who preempted whom'), dataTable([multi ? C.text('node', 'node') : null,
    C.text('victim', 'GPU threads of'), C.text('by', 'lost the CPU to'), C.dur('ns', 'time'), C.count('count', 'preemptions'),
    { key: 'top_comm', label: 'mostly', value: (r) => r.top_comm + ' (pid ' + r.top_pid + ')' }].filter(Boolean),
  t.preemptions, { testid: 'tenant-preemptions', key: (r) => r.node + ':' + r.victim + '>' + r.by })] : null;
  return { el: card('tenants', 'Tenants', dataTable(cols, t.rows, { testid: 'tenant-table', key: (r) => r.node + ':' + r.name }), across) };
}

function nodesSection(m) {
  const byNode = {};
  for (const s of m.header.sessions) {
    const k = s.node || '';
    byNode[k] = byNode[k] || s;
  }
  const one = m.nodes.length === 1 && m.nodes[0].node === '' ? m.header.sessions[0] : null;
  const rows = m.nodes.map((n) => {
    const s = byNode[n.node] || one || {};
    return Object.assign({}, n, {
      host: [s.host, s.kernel, s.os_release].filter(Boolean).join(', '),
      hw: [s.cpu_model ? s.cpu_model + (s.cpu_cores ? ' \u00d7' + s.cpu_cores : '') : '', s.mem_total ? fmt.bytes(s.mem_total * 1048576) : '', s.gpu_model || ''].filter(Boolean).join(', '),
    });
  });
  const cols = [C.text('node', 'node'), C.count('calls', 'calls'), C.count('processes', 'processes'), C.count('errors', 'errors'),
    C.count('unfinished', 'unfinished'), C.dur('busy_ns', 'time in calls'), C.time('first_ns', 'first call'), C.time('last_ns', 'last call end'),
    C.text('host', 'host'), C.text('hw', 'hardware')];
  return { el: card('nodes', m.nodes.length > 1 ? 'Nodes' : 'Node', dataTable(cols, rows, { testid: 'node-table', key: (r) => r.node })) };
}

function collectivesSection(m) {
  if (!m.collectives.length) return null;
  const cols = [C.count('rank', 'rank'), C.count('pid', 'pid'), C.count('calls', 'calls'), C.count('matched', 'matched',
    'calls matched across ranks by sequence'), C.bytes('bytes', 'bytes'), C.dur('median_lag_ns', 'median lag', 'behind the first rank to arrive'),
  C.dur('wait_imposed_ns', 'wait imposed', 'time the other ranks waited for this one'), C.dur('barrier_wait_ns', 'barrier wait'),
  C.count('barrier_syncs', 'barrier syncs')];
  const groups = m.collectives.map((g) => h('div', { class: 'series', 'data-testid': 'collective', 'data-op': g.op },
    h('h3', null, g.op + ' on communicator ' + g.communicator + (g.node ? ' (node ' + g.node + ')' : '')),
    h('div', { class: 'small muted' }, fmt.count(g.ranks) + ' ranks' + (g.ranks > g.rows.length ? ', first ' + g.rows.length + ' shown' : '')),
    dataTable(cols, g.rows, { key: (r) => String(r.rank) })));
  return { el: card('collectives', 'Collectives per rank', groups) };
}

function hostSection(m) {
  const ops = Object.entries(m.header.host_ops || {}).map(([name, o]) => ({ name: name, count: o.count,
    avg_ns: o.count && o.sum_ns ? Math.round(o.sum_ns / o.count) : null, max_ns: o.max_ns || null }));
  if (!ops.length) return null;
  const cols = [C.text('name', 'event'), C.count('count', 'count'), C.dur('avg_ns', 'avg'), C.dur('max_ns', 'max')];
  return { el: card('host', 'Host events', dataTable(cols, ops, { testid: 'host-table', key: (r) => r.name })) };
}
