// Flame graphs (d3-flame-graph). The tree comes from the model: root -> outermost frames ->
// ... -> the GPU call at the tip; `value` counts calls (or samples), `t` their total time.
const flames = [];

const FLAME_HUES = { py: [205, 60], native: [28, 75], op: [2, 70], none: [0, 0], root: [220, 10] };

function hashName(s) {
  let x = 0;
  for (let i = 0; i < s.length; i++) x = (x * 31 + s.charCodeAt(i)) | 0;
  return Math.abs(x);
}

function flameColor(d) {
  const k = d.data.k || 'native';
  const [hue, sat] = FLAME_HUES[k] || FLAME_HUES.native;
  const light = 58 + (hashName(d.data.name || '') % 18);
  return 'hsl(' + hue + ',' + sat + '%,' + light + '%)';
}

// A copy of the tree whose widths are total time instead of calls.
function byTime(node) {
  const c = Object.assign({}, node, { value: node.t || 0 });
  if (node.children) c.children = node.children.map(byTime);
  return c;
}

function flameChart(container, tree, locations, unit, detailsEl) {
  const width = widthOf(container);
  const chart = flamegraph.default()
    .width(width)
    .cellHeight(18)
    .transitionDuration(0)
    .minFrameSize(1)
    .sort(true)
    .title('')
    .selfValue(false)
    .setColorMapper((d) => (d.highlight ? '#e600e6' : flameColor(d)))
    .label((d) => {
      const share = d.parent ? ' (' + fmt.pct((d.x1 - d.x0)) + ')' : '';
      const loc = d.data.li !== undefined && locations[d.data.li] ? '\n' + locations[d.data.li] : '';
      return d.data.name + share + '\n' + fmt.count(d.data.value) + ' ' + unit +
        (d.data.t ? ', ' + fmt.dur(d.data.t) : '') + loc;
    })
    .setDetailsElement(detailsEl);
  d3.select(container).datum(tree).call(chart);
  // Deep stacks make tall graphs: the box scrolls, starting at the roots (the bottom).
  container.scrollTop = container.scrollHeight;
  flames.push(chart);
  return chart;
}

// The section's body: toolbar (width by calls or time, search, reset) and the chart.
function flameBlock(flame, what, unit, testid) {
  const box = h('div', { class: 'flame', 'data-testid': testid });
  const details = h('div', { class: 'flame-details' });
  let chart = null;
  let mode = 'calls';
  const draw = () => {
    box.replaceChildren();
    chart = flameChart(box, mode === 'calls' ? flame.tree : byTime(flame.tree), flame.locations || [], unit, details);
  };
  const bCalls = h('button', { class: 'on', type: 'button' }, 'width: ' + unit);
  const bTime = h('button', { type: 'button' }, 'width: time');
  const setMode = (m) => {
    mode = m;
    bCalls.className = m === 'calls' ? 'on' : '';
    bTime.className = m === 'time' ? 'on' : '';
    draw();
  };
  bCalls.addEventListener('click', () => setMode('calls'));
  bTime.addEventListener('click', () => setMode('time'));
  const search = h('input', { type: 'search', placeholder: 'search frames (regular expression)' });
  search.addEventListener('input', () => {
    try {
      chart.search(search.value);
    } catch (e) {
      details.textContent = 'bad expression: ' + e.message;
    }
  });
  const reset = h('button', { type: 'button', onclick: () => chart && chart.resetZoom() }, 'reset zoom');
  const legend = h('div', { class: 'legend-inline' },
    h('span', null, h('i', { style: 'background:hsl(205,60%,65%)' }), 'Python frame'),
    h('span', null, h('i', { style: 'background:hsl(28,75%,65%)' }), 'native frame'),
    h('span', null, h('i', { style: 'background:hsl(2,70%,65%)' }), what),
    h('span', null, h('i', { style: 'background:hsl(0,0%,65%)' }), 'no stack recorded'));
  const toolbar = h('div', { class: 'toolbar' }, bCalls, bTime, search, reset);
  return { el: h('div', null, toolbar, legend, box, details), draw: draw };
}

