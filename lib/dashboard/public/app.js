'use strict';
// The dashboard app: sign-in with the admin token (kept in this tab's sessionStorage, sent as a
// Bearer header; no cookie, so no cross-site request can use it), hash routes, the theme, and the
// library's live page fed by the dashboard's event stream. The decision service's pages are in
// service.js. Every figure comes from the server; the browser keeps no authoritative state.
(function app() {
  const TG = (window.TG = window.TG || {});
  const TOKEN_KEY = 'tiergate.token';
  const THEME_KEY = 'tiergate.theme';
  const main = document.getElementById('main');
  const nav = document.getElementById('nav');
  TG.pages = TG.pages || {};
  TG.state = { token: sessionStorage.getItem(TOKEN_KEY), info: null };

  // ---- DOM
  /** h('td', { class: 'num', dataset: { tier } }, 'text', child) — text is always textContent. */
  TG.h = function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'text') el.textContent = v;
      else el.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    return el;
  };
  const h = TG.h;
  TG.announce = (text) => { document.getElementById('announce').textContent = text; };
  TG.num = (v, digits = 0) => (v === null || v === undefined || Number.isNaN(v) ? '–' : Number(v).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }));

  // ---- API
  /** fetch with the token; resolves { status, ok, body } (body: parsed JSON or null). 401 signs out. */
  TG.api = async function api(url, { method = 'GET', body, signal, headers = {} } = {}) {
    const init = { method, signal, headers: { ...headers, authorization: `Bearer ${TG.state.token}` } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers['content-type'] = 'application/json';
    }
    const res = await fetch(url, init);
    let parsed = null;
    if (res.status !== 204) {
      const text = await res.text();
      try { parsed = text ? JSON.parse(text) : null; } catch { parsed = null; }
    }
    if (res.status === 401 && url.startsWith('api/dashboard/')) signOut('The token was refused.');
    return { status: res.status, ok: res.ok, body: parsed, headers: res.headers };
  };

  /** Reads `api/dashboard/stream` (Server-Sent Events over fetch, so the token goes in a header). */
  TG.stream = async function stream(onEvent, signal) {
    const res = await fetch('api/dashboard/stream', { headers: { authorization: `Bearer ${TG.state.token}`, accept: 'text/event-stream' }, signal });
    if (!res.ok) throw new Error(`stream answered ${res.status}`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let event = 'message';
        const data = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) event = line.slice(7);
          else if (line.startsWith('data: ')) data.push(line.slice(6));
        }
        if (data.length > 0) onEvent(event, JSON.parse(data.join('\n')));
      }
    }
  };

  // ---- theme
  const themeSelect = document.getElementById('theme');
  function applyTheme(v) {
    document.documentElement.dataset.theme = v;
    themeSelect.value = v;
  }
  applyTheme(localStorage.getItem(THEME_KEY) || 'system');
  themeSelect.addEventListener('change', () => {
    localStorage.setItem(THEME_KEY, themeSelect.value);
    applyTheme(themeSelect.value);
    route(); // charts read their colours when built
  });
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => {
    if (document.documentElement.dataset.theme === 'system') route();
  });

  // ---- sign-in
  function signOut(message) {
    TG.state.token = null;
    TG.state.info = null;
    sessionStorage.removeItem(TOKEN_KEY);
    renderSignIn(message);
  }
  document.getElementById('signout').addEventListener('click', () => {
    signOut('Signed out.');
  });

  let cleanup = null;
  function clear() {
    if (cleanup) cleanup();
    cleanup = null;
    main.replaceChildren();
  }

  function renderSignIn(message) {
    clear();
    nav.hidden = true;
    document.getElementById('signout').hidden = true;
    const input = h('input', { id: 'token', type: 'password', autocomplete: 'current-password', required: true, 'aria-describedby': 'signin-msg' });
    const msg = h('p', { id: 'signin-msg', class: message && message !== 'Signed out.' ? 'error' : 'muted', role: 'status' }, message || 'The admin token this dashboard was configured with.');
    const form = h('form', { class: 'stack panel signin', id: 'signin' },
      h('h1', {}, 'Sign in'),
      h('label', { for: 'token' }, 'Admin token', input),
      msg,
      h('button', { type: 'submit', class: 'primary' }, 'Sign in'));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      TG.state.token = input.value;
      const r = await TG.api('api/dashboard/info').catch(() => ({ ok: false, status: 0 }));
      if (!r.ok) {
        TG.state.token = null;
        msg.className = 'error';
        msg.textContent = r.status === 401 ? 'The token was refused.' : `The dashboard did not answer (${r.status}).`;
        input.focus();
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, input.value);
      TG.state.info = r.body;
      if (!location.hash || location.hash === '#/signin') location.hash = defaultPage();
      else route();
    });
    main.appendChild(form);
    input.focus();
  }

  // ---- routing
  function available() {
    const info = TG.state.info;
    const list = [];
    if (info && info.service) list.push(['overview', 'Overview'], ['clients', 'Clients'], ['analytics', 'Analytics'], ['bans', 'Bans'], ['lab', 'Request lab'], ['how', 'How it works']);
    // In the service the live page shows the service process itself; in an application, its tiers.
    if (info && info.library) list.push(['live', info.service ? 'Process' : 'Live']);
    return list;
  }
  function defaultPage() {
    const first = available()[0];
    return first ? `#/${first[0]}` : '#/live';
  }

  // After a navigation inside the app, focus moves to the new page's content (screen readers announce
  // it); on the first load it stays at the top, where the skip link is the first stop.
  let navigated = false;
  async function route() {
    if (!TG.state.token) return renderSignIn();
    if (!TG.state.info) {
      const r = await TG.api('api/dashboard/info').catch(() => ({ ok: false, status: 0 }));
      if (!r.ok) return r.status === 401 ? undefined : renderSignIn(`The dashboard did not answer (${r.status}).`);
      TG.state.info = r.body;
    }
    const [name, ...params] = (location.hash.replace(/^#\/?/, '') || defaultPage().slice(2)).split('/').map(decodeURIComponent);
    const pages = available();
    nav.replaceChildren(...pages.map(([id, label]) => h('a', { href: `#/${id}`, 'aria-current': id === name ? 'page' : undefined }, label)));
    nav.hidden = false;
    document.getElementById('signout').hidden = false;
    clear();
    const page = TG.pages[name];
    if (!page || !pages.some(([id]) => id === name)) {
      main.appendChild(h('p', {}, 'No such page. ', h('a', { href: defaultPage() }, 'Go to the first page')));
      return;
    }
    document.title = `${page.title} · tiergate`;
    cleanup = page.render(main, params, TG.state.info) || null;
    if (navigated) main.focus({ preventScroll: true });
  }
  TG.route = route;
  window.addEventListener('hashchange', () => {
    navigated = true;
    route();
  });

  // ---- the library's live page
  const WINDOW_SEC = 60;
  TG.pages.live = {
    title: 'Live',
    render(root, _params, info) {
      const lib = info.library;
      const tiers = lib.tiers.map((t) => t.name);
      const intervalSec = lib.intervalMs / 1000;
      const samples = [];
      let paused = false;
      const ctrl = new AbortController();

      const healthEl = h('span', { id: 'health', class: 'badge' }, '…');
      const updatedEl = h('span', { class: 'muted', id: 'updated' }, 'waiting for data');
      const pause = h('button', { type: 'button', id: 'pause', 'aria-pressed': 'false' }, 'Pause');
      pause.addEventListener('click', () => {
        paused = !paused;
        pause.setAttribute('aria-pressed', String(paused));
        pause.textContent = paused ? 'Resume' : 'Pause';
        if (!paused) redrawAll();
      });
      root.appendChild(h('h1', {}, 'Live'));
      root.appendChild(h('p', { class: 'row' }, 'Health: ', healthEl, updatedEl, pause));

      const tierBody = h('tbody', {});
      const hasGk = lib.components.includes('gatekeeper');
      const hasQueue = lib.components.includes('queue');
      // Shadow mode: what the gatekeeper would have shed, served (its own column and series).
      const shadow = hasGk && lib.shadow === true;
      if (hasGk) {
        const heads = ['Tier', 'Admitted /s', 'Shed /s', 'Tier full /s', 'Rate-limited /s', 'Refill scale', `Admitted (${WINDOW_SEC} s)`, `Shed (${WINDOW_SEC} s)`, `Rate-limited (${WINDOW_SEC} s)`];
        if (shadow) heads.push('Would shed /s (shadow)', `Would shed (${WINDOW_SEC} s)`);
        root.appendChild(h('section', { class: 'panel', 'aria-labelledby': 'tiers-h' },
          h('h2', { id: 'tiers-h' }, `Tiers (per second now; totals over the last ${WINDOW_SEC} s)${shadow ? ' — shadow mode: overload decisions counted, not enforced' : ''}`),
          h('div', { class: 'table-wrap' }, h('table', { id: 'tiers' },
            h('thead', {}, h('tr', {}, heads.map((c, i) => h('th', { class: i ? 'num' : undefined, scope: 'col' }, c)))),
            tierBody))));
      }
      const grid = h('div', { class: 'grid' });
      root.appendChild(grid);
      const charts = [];
      const add = (spec, pick) => {
        const c = TG.chart(grid, spec);
        charts.push({ c, pick });
        return c;
      };
      if (hasGk) {
        for (const t of lib.tiers) {
          const labels = ['admitted', 'shed', 'rate-limited'].concat(shadow ? ['would shed (shadow)'] : []);
          const colors = ['--ok', '--bad', '--warn'].concat(shadow ? ['--muted'] : []);
          add({ title: `${t.name}${t.protected ? ' (protected)' : ''}: decisions /s`, labels, colors, id: `chart-tier-${t.name}` }, (s) => {
            if (!s.gatekeeper) return labels.map(() => null);
            const x = s.gatekeeper.tiers[t.name];
            return [x.admitted, x.shed + x.tierFull, x.rateLimited].concat(shadow ? [x.shadowShed] : []);
          });
        }
        if (lib.learnedLimit) {
          add({ title: 'Learned concurrency limit: in flight, limit, waiting', labels: ['in flight', 'limit', 'waiting'], id: 'chart-learned' },
            (s) => (s.gatekeeper && s.gatekeeper.concurrency ? [s.gatekeeper.concurrency.inFlight, s.gatekeeper.concurrency.limit, s.gatekeeper.concurrency.waiting] : [null, null, null]));
        }
        add({ title: 'Controller: pressure and refill scales', labels: ['pressure', ...tiers.map((n) => `scale ${n}`)], min: 0, max: 1, id: 'chart-controller' },
          (s) => (s.gatekeeper ? [s.gatekeeper.pressure, ...tiers.map((n) => s.gatekeeper.tiers[n].refillScale)] : tiers.map(() => null).concat(null)));
      }
      add({ title: 'Event-loop lag (ms)', labels: ['lag', 'p99'], unit: ' ms', id: 'chart-lag' }, (s) => (s.loop ? [s.loop.lagMs, s.loop.p99LagMs] : [null, null]));
      add({ title: 'Event-loop utilisation', labels: ['ELU'], min: 0, max: 1, id: 'chart-elu' }, (s) => [s.loop ? s.loop.elu : null]);
      if (hasQueue) {
        add({ title: 'Queue depth by tier', labels: tiers, id: 'chart-queue' }, (s) => tiers.map((n) => (s.queue && s.queue.tiers[n] ? s.queue.tiers[n].queued : null)));
        add({ title: 'Queue wait p99 by tier (ms)', labels: tiers, unit: ' ms', id: 'chart-wait' }, (s) => tiers.map((n) => (s.queue && s.queue.tiers[n] ? s.queue.tiers[n].waitP99Ms : null)));
        add({ title: 'Concurrency: in flight and limit', labels: ['in flight', 'limit'], id: 'chart-inflight' }, (s) => (s.queue ? [s.queue.inFlight, s.queue.limit] : [null, null]));
      }
      // Bans come with the gatekeeper's abuse defense; without a gatekeeper there is nothing to say.
      const bansNote = h('section', { class: 'panel', id: 'bans-live' }, h('h2', {}, 'Bans'), h('p', { class: 'muted' }, 'Abuse defense is not reporting bans in this application.'));
      if (hasGk) root.appendChild(bansNote);
      let bansChart = null;

      function tierRows() {
        const last = samples[samples.length - 1];
        if (!last || !last.gatekeeper) return;
        const since = last.t - WINDOW_SEC * 1000;
        const win = samples.filter((s) => s.t > since && s.gatekeeper);
        const total = (n, f) => win.reduce((a, s) => a + s.gatekeeper.tiers[n][f] * intervalSec, 0);
        tierBody.replaceChildren(...lib.tiers.map((t) => {
          const now = last.gatekeeper.tiers[t.name];
          const cell = (field, v, d = 0) => h('td', { class: 'num', dataset: { tier: t.name, field } }, TG.num(v, d));
          return h('tr', { dataset: { tier: t.name } },
            h('th', { scope: 'row' }, t.name, t.protected ? h('span', { class: 'badge ok' }, ' protected') : null),
            cell('admitted', now.admitted), cell('shed', now.shed), cell('tierFull', now.tierFull), cell('rateLimited', now.rateLimited), cell('refillScale', now.refillScale, 2),
            cell('admittedTotal', Math.round(total(t.name, 'admitted'))), cell('shedTotal', Math.round(total(t.name, 'shed') + total(t.name, 'tierFull'))), cell('rateLimitedTotal', Math.round(total(t.name, 'rateLimited'))),
            shadow ? cell('shadowShed', now.shadowShed) : null, shadow ? cell('shadowShedTotal', Math.round(total(t.name, 'shadowShed'))) : null);
        }));
      }
      function healthView(s) {
        if (!s.health) return;
        healthEl.textContent = s.health.status === 'ok' ? 'ok' : `unavailable: ${s.health.reasons.join(', ')}`;
        healthEl.className = `badge ${s.health.status === 'ok' ? 'ok' : 'bad'}`;
        updatedEl.textContent = `updated ${new Date(s.t).toLocaleTimeString()}`;
      }
      const overridesEl = h('p', { id: 'limit-overrides', class: 'muted' });
      function bansView(s) {
        if (!s.bans) return;
        const o = s.bans.overrides;
        if (o) overridesEl.textContent = `Limit overrides in force: ${TG.num(o.local)}${o.cluster === null ? '' : ` (cluster: ${TG.num(o.cluster)})`}`;
        if (bansChart === null) {
          if (!bansNote.isConnected) root.appendChild(bansNote);
          bansNote.replaceChildren(overridesEl);
          bansChart = TG.chart(bansNote, { title: 'Bans: active, added /s, refused /s', labels: ['active', 'added /s', 'refused /s'], id: 'chart-bans' });
          bansChart.setData(samples.filter((x) => x.bans).map((x) => x.t / 1000), ...[0, 1, 2].map((i) => samples.filter((x) => x.bans).map((x) => [x.bans.active, x.bans.added, x.bans.refused][i])));
        } else bansChart.append(s.t / 1000, [s.bans.active, s.bans.added, s.bans.refused], !paused);
      }
      function redrawAll() {
        for (const { c, pick } of charts) {
          const cols = samples.map(pick);
          c.setData(samples.map((s) => s.t / 1000), ...cols[0] ? cols[0].map((_, i) => cols.map((r) => r[i])) : []);
        }
        tierRows();
        if (samples.length) healthView(samples[samples.length - 1]);
      }
      const keep = Math.ceil(lib.historySec / intervalSec);
      function onEvent(event, data) {
        if (event === 'history') {
          samples.splice(0, samples.length, ...data);
          redrawAll();
          for (const s of data) if (s.bans) bansView(s);
        } else if (event === 'sample') {
          samples.push(data);
          if (samples.length > keep) samples.shift();
          for (const { c, pick } of charts) c.append(data.t / 1000, pick(data), !paused);
          bansView(data);
          if (!paused) {
            tierRows();
            healthView(data);
          }
        }
      }
      (async function connect() {
        while (!ctrl.signal.aborted) {
          try {
            await TG.stream(onEvent, ctrl.signal);
          } catch (err) {
            if (ctrl.signal.aborted) return;
            updatedEl.textContent = 'stream interrupted; reconnecting';
          }
          await new Promise((r) => setTimeout(r, 2000));
        }
      })();
      return () => {
        ctrl.abort();
        for (const { c } of charts) c.destroy();
        if (bansChart) bansChart.destroy();
      };
    },
  };

  // Start once every script (uPlot, charts, service pages) has run: they are all deferred.
  document.addEventListener('DOMContentLoaded', route);
})();
