// Boot: the one-file report renders the model embedded in the page; the dashboard's page
// carries {live: {api, refresh_ms}} instead and polls the server for the model.
let current = null;
let renders = 0;

function render(model) {
  const app = document.getElementById('app');
  const open = new Set([...document.querySelectorAll('details[id]')].filter((d) => d.open).map((d) => d.id));
  const y = window.scrollY;
  destroyCharts();
  flames.length = 0;
  const sections = [headerSection(model), timelineSection(model), kernelsSection(model), chainsSection(model), flameSection(model),
    opsSection(model), collectivesSection(model), processSection(model), tenantsSection(model), nodesSection(model),
    hostSection(model)]
    .filter(Boolean);
  app.replaceChildren(...sections.map((s) => s.el));
  for (const id of open) {
    const d = document.getElementById(id);
    if (d) d.open = true;
  }
  for (const s of sections) {
    if (s.draw) s.draw();
  }
  window.scrollTo(0, y);
  document.getElementById('top-title').textContent = model.trace.path;
  current = model;
  renders++;
  document.body.dataset.renders = String(renders);
}

function showError(text) {
  const status = document.getElementById('live-status');
  status.textContent = text;
  status.className = 'live-status bad';
}

function startLive(live) {
  document.getElementById('top-title').textContent = live.title;
  let token = sessionStorage.getItem('ingero-token') || '';
  // The rest of the fragment: a token pasted as it is may hold '&' or '%' (encoded or not).
  const m = /(?:^#|&)token=(.*)$/.exec(location.hash);
  if (m) {
    try {
      token = decodeURIComponent(m[1]);
    } catch (e) {
      token = m[1];
    }
    sessionStorage.setItem('ingero-token', token);
    history.replaceState(null, '', location.pathname + location.search);
  }
  let etag = '';
  // Updates re-draw every chart (and reset a zoomed flame graph): the user may pause them.
  let paused = false;
  const pause = h('button', { type: 'button', class: 'pause', 'data-testid': 'pause' }, 'pause updates');
  pause.addEventListener('click', () => {
    paused = !paused;
    pause.textContent = paused ? 'resume updates' : 'pause updates';
    if (paused) document.getElementById('live-status').textContent = 'live \u00b7 paused';
  });
  document.querySelector('header.top').appendChild(pause);
  const poll = async () => {
    if (paused) {
      setTimeout(poll, live.refresh_ms);
      return;
    }
    try {
      const headers = {};
      if (token) headers.Authorization = 'Bearer ' + token;
      if (etag) headers['If-None-Match'] = etag;
      const r = await fetch(live.api, { headers: headers, cache: 'no-store' });
      const now = new Date().toISOString().slice(11, 19);
      if (r.status === 200) {
        etag = r.headers.get('ETag') || '';
        render(await r.json());
        const s = document.getElementById('live-status');
        s.className = 'live-status';
        s.textContent = 'live \u00b7 updated ' + now + ' UTC (built in ' + (r.headers.get('X-Ingero-Compute-Seconds') || '?') + ' s)';
      } else if (r.status === 304) {
        const s = document.getElementById('live-status');
        s.className = 'live-status';
        s.textContent = 'live \u00b7 unchanged at ' + now + ' UTC';
      } else if (r.status === 401) {
        showError('this dashboard needs its token: open ' + location.origin + location.pathname + '#token=TOKEN');
      } else {
        let msg = r.status + ' ' + r.statusText;
        try {
          msg = (await r.json()).error || msg;
        } catch (e) {
          // not JSON: keep the status line
        }
        showError('cannot build the report: ' + msg);
      }
    } catch (e) {
      showError('dashboard unreachable: ' + e.message);
    }
    setTimeout(poll, live.refresh_ms);
  };
  poll();
}

let resizeTimer = null;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (current) render(current);
  }, 250);
});

const boot = JSON.parse(document.getElementById('ingero-data').textContent);
if (boot.live) startLive(boot.live);
else render(boot);
