// DOM building. Text always goes in as text nodes (never innerHTML): every string in the
// model may come from a traced program (process names, paths, frames).
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  appendKids(el, kids);
  return el;
}

function appendKids(el, kids) {
  for (const k of kids) {
    if (k === null || k === undefined || k === false) continue;
    if (Array.isArray(k)) appendKids(el, k);
    else if (k instanceof Node) el.appendChild(k);
    else el.appendChild(document.createTextNode(String(k)));
  }
}

function card(id, title, ...kids) {
  return h('section', { class: 'card', id: id }, h('h2', null, title), ...kids);
}

// A figure with its exact value kept for machines (tests, copy-paste).
function num(value, text, testid) {
  return h('span', { 'data-value': value === null || value === undefined ? '' : String(value), 'data-testid': testid },
    text === undefined ? fmt.count(value) : text);
}

function stat(label, value, testid, opts) {
  const o = opts || {};
  return h('div', { class: 'stat' + (o.bad ? ' bad' : '') },
    h('div', { class: 'v' }, num(value, o.text, testid)),
    h('div', { class: 'l' }, label));
}

function kv(pairs) {
  const dl = h('dl', { class: 'kv' });
  for (const [k, v] of pairs) {
    if (v === null || v === undefined || v === '') continue;
    dl.appendChild(h('dt', null, k));
    dl.appendChild(h('dd', null, v));
  }
  return dl;
}

function baseName(p) {
  const s = String(p || '');
  const i = s.lastIndexOf('/');
  return i < 0 ? s : s.slice(i + 1);
}
