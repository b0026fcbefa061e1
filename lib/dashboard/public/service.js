'use strict';
// The decision service's pages: overview, clients (list, create, edit, delete, detail), analytics,
// bans, the request lab and how each algorithm works. Each reads and writes the service's own HTTP
// API (its admin endpoints with the admin token); nothing here is simulated or kept as the truth.
(function service() {
  const TG = (window.TG = window.TG || {});
  TG.pages = TG.pages || {};
  const h = (...a) => TG.h(...a);
  const base = () => TG.state.info.service.apiBase;
  const admin = (p, o) => TG.api(`${base()}/admin${p}`, o);
  const RANGES = ['1m', '5m', '15m', '1h', '24h'];
  const RATE = [['requestsPerSecond', 'Requests per second (refill)', 'any'], ['burstSize', 'Burst size (capacity)', '1']];
  const WINDOW = [['maxRequests', 'Max requests per window', '1'], ['windowSeconds', 'Window (seconds)', '1']];
  const ALGORITHMS = {
    token_bucket: { label: 'Token bucket', fields: RATE },
    sliding_window: { label: 'Sliding window', fields: WINDOW },
    fixed_window: { label: 'Fixed window', fields: WINDOW },
    sliding_counter: { label: 'Sliding counter', fields: WINDOW },
    gcra: { label: 'GCRA', fields: RATE },
  };
  const KEY_RULE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

  const when = (v) => (v ? new Date(v).toLocaleString() : '–');
  const time = (v) => (v ? new Date(v).toLocaleTimeString() : '–');
  const policyText = (c) => (!ALGORITHMS[c.algorithm] ? c.algorithm : ALGORITHMS[c.algorithm].fields === RATE ? `${c.requestsPerSecond}/s, burst ${c.burstSize}` : `${c.maxRequests} per ${c.windowSeconds} s`);
  const clientHref = (key) => `#/clients/${encodeURIComponent(key)}`;

  function errorText(r) {
    if (r.body && r.body.message) return `${r.body.message}${r.body.error ? ` (${r.body.error})` : ''}`;
    return `The service answered ${r.status}.`;
  }
  /** The field a VALIDATION_ERROR names: the service's messages start with it ("burstSize must be ..."). */
  function fieldOf(body) {
    const m = body && body.error === 'VALIDATION_ERROR' && typeof body.message === 'string' ? /^(\w+) /.exec(body.message) : null;
    return m ? m[1] : null;
  }

  /** A table with a header row around `tbody` (the caller fills and refills it). */
  function table(id, headers, tbody, caption) {
    return h('div', { class: 'table-wrap' }, h('table', { id },
      caption ? h('caption', { class: 'visually-hidden' }, caption) : null,
      h('thead', {}, h('tr', {}, headers.map(([label, num]) => h('th', { scope: 'col', class: num ? 'num' : undefined }, label)))),
      tbody));
  }

  function activityRows(list) {
    return (list || []).map((a) => h('tr', {},
      h('td', {}, time(a.timestamp)),
      h('td', {}, a.clientKey ? h('a', { href: clientHref(a.clientKey) }, a.clientKey) : '–'),
      h('td', {}, h('span', { class: `badge ${a.allowed ? 'ok' : 'bad'}` }, a.allowed ? 'allowed' : 'denied')),
      h('td', { class: 'num' }, TG.num(a.cost)),
      h('td', { class: 'num' }, TG.num(a.responseTimeMs, 2))));
  }
  const ACTIVITY_HEAD = [['Time'], ['Client'], ['Decision'], ['Cost', true], ['Response (ms)', true]];

  /** A refresh loop for a page: runs `fn` now and every `ms` until the page is left. */
  function every(ms, fn) {
    let stopped = false;
    let timer = null;
    const tick = async () => {
      if (stopped) return;
      try { await fn(); } catch (err) { /* shown by fn's own error line */ }
      if (!stopped) timer = setTimeout(tick, ms);
    };
    tick();
    return () => { stopped = true; clearTimeout(timer); };
  }

  function seriesOf(points) {
    const xs = points.map((p) => Date.parse(p.timestamp) / 1000);
    return { xs, incoming: points.map((p) => p.incoming), allowed: points.map((p) => p.allowed), denied: points.map((p) => p.denied), latency: points.map((p) => p.averageResponseTimeMs) };
  }

  // ---- overview
  TG.pages.overview = {
    title: 'Overview',
    render(root) {
      root.appendChild(h('h1', {}, 'Overview'));
      const err = h('p', { class: 'error', role: 'alert' });
      const cards = h('div', { class: 'cards', id: 'overview-cards' });
      const recent = h('tbody', {});
      root.append(err, cards);
      const grid = h('div', { class: 'grid' });
      root.appendChild(grid);
      const traffic = TG.chart(grid, { title: 'Traffic, last 15 minutes (per bucket)', labels: ['incoming', 'allowed', 'denied'], colors: ['--s0', '--ok', '--bad'], id: 'chart-overview' });
      root.appendChild(h('section', { class: 'panel' }, h('h2', {}, 'Recent decisions'),
        h('div', { class: 'table-wrap' }, h('table', { id: 'recent' }, h('thead', {}, h('tr', {}, ACTIVITY_HEAD.map(([l, n]) => h('th', { scope: 'col', class: n ? 'num' : undefined }, l)))), recent))));
      const card = (k, v, cls) => h('div', { class: 'card' }, h('div', { class: `v ${cls || ''}`, dataset: { card: k } }, v), h('div', { class: 'k' }, k));
      const stop = every(3000, async () => {
        const [ov, clients, an, ready] = await Promise.all([admin('/overview'), admin('/clients'), admin('/analytics?range=5m'), fetch('/health/ready').then(async (r) => ({ ok: r.ok, body: await r.json().catch(() => null) }), () => ({ ok: false }))]);
        const an15 = await admin('/analytics?range=15m');
        if (!ov.ok) { err.textContent = errorText(ov); return; }
        err.textContent = '';
        const list = clients.ok ? clients.body.clients : [];
        const activeSince = Date.now() - 5 * 60_000;
        const active = list.filter((c) => c.lastActivityAt && Date.parse(c.lastActivityAt) > activeSince).length;
        const pts = an.ok ? an.body.points.filter((p) => p.incoming > 0) : [];
        const latency = pts.length ? pts.reduce((a, p) => a + p.averageResponseTimeMs * p.incoming, 0) / pts.reduce((a, p) => a + p.incoming, 0) : null;
        const storeMs = ready.body && ready.body.store ? ready.body.store.latencyMs : undefined;
        const storeType = ready.body && ready.body.store ? ready.body.store.type : 'store';
        cards.replaceChildren(
          card('Configured clients', TG.num(ov.body.totalClients)),
          card('Active (5 min)', TG.num(active)),
          card('Allowed', TG.num(ov.body.totalAllowed), 'ok'),
          card('Denied', TG.num(ov.body.totalDenied), 'bad'),
          card('Decision latency (5 min avg, ms)', latency === null ? '–' : TG.num(latency, 2)),
          card(`Store (${storeType})`, ready.ok ? `ready${storeMs !== undefined && storeMs !== null ? ` · ${TG.num(storeMs, 2)} ms` : ''}` : 'not ready', ready.ok ? 'ok' : 'bad'));
        recent.replaceChildren(...activityRows(ov.body.recentActivity));
        if (an15.ok) {
          const s = seriesOf(an15.body.points);
          traffic.setData(s.xs, s.incoming, s.allowed, s.denied);
        }
      });
      return () => { stop(); traffic.destroy(); };
    },
  };

  // ---- clients: list, create
  function policyForm(initial, onSubmit, submitLabel) {
    const errors = {};
    const form = h('form', { class: 'stack panel', id: 'client-form', novalidate: true });
    const msg = h('p', { class: 'error', role: 'alert', id: 'form-error' });
    const keyInput = h('input', { id: 'f-clientKey', name: 'clientKey', required: true, value: initial.clientKey || '', readonly: initial.clientKey ? true : undefined, 'aria-describedby': 'e-clientKey', autocomplete: 'off', spellcheck: 'false' });
    errors.clientKey = h('span', { class: 'field-error', id: 'e-clientKey' });
    const algo = h('select', { id: 'f-algorithm', name: 'algorithm' }, Object.entries(ALGORITHMS).map(([v, a]) => h('option', { value: v, selected: v === (initial.algorithm || 'token_bucket') ? true : undefined }, a.label)));
    errors.algorithm = h('span', { class: 'field-error', id: 'e-algorithm' });
    const fieldsBox = h('div', { class: 'stack' });
    const inputs = {};
    function drawFields() {
      fieldsBox.replaceChildren();
      for (const [name, label, step] of ALGORITHMS[algo.value].fields) {
        inputs[name] = h('input', { id: `f-${name}`, name, type: 'number', step, min: '0', required: true, inputmode: 'decimal', value: initial[name] !== undefined ? String(initial[name]) : '', 'aria-describedby': `e-${name}` });
        errors[name] = h('span', { class: 'field-error', id: `e-${name}` });
        fieldsBox.appendChild(h('label', { for: `f-${name}` }, label, inputs[name], errors[name]));
      }
    }
    algo.addEventListener('change', drawFields);
    drawFields();
    const submit = h('button', { type: 'submit', class: 'primary' }, submitLabel);
    form.append(
      h('label', { for: 'f-clientKey' }, 'Client key', keyInput, h('span', { class: 'muted' }, 'Letters, digits and . _ : - (up to 128), starting with a letter or digit.'), errors.clientKey),
      h('label', { for: 'f-algorithm' }, 'Algorithm', algo, errors.algorithm),
      fieldsBox, msg, submit);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      for (const el of Object.values(errors)) el.textContent = '';
      for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
      msg.textContent = '';
      const policy = { clientKey: keyInput.value.trim(), algorithm: algo.value };
      for (const [name] of ALGORITHMS[algo.value].fields) {
        const raw = inputs[name].value.trim();
        // Sent as typed: the service validates and its message is shown (an empty field is sent as null).
        policy[name] = raw === '' ? null : Number(raw);
      }
      submit.disabled = true;
      try {
        const r = await onSubmit(policy);
        if (r && !r.ok) {
          // The API's own message, beside the field it names when it names one.
          const field = fieldOf(r.body) || (r.body && r.body.error === 'DUPLICATE_CLIENT_KEY' ? 'clientKey' : null);
          if (field && errors[field]) {
            errors[field].textContent = r.body.message;
            const input = field === 'clientKey' ? keyInput : inputs[field];
            if (input) {
              input.setAttribute('aria-invalid', 'true');
              input.focus();
            }
          }
          msg.textContent = errorText(r);
        }
      } finally {
        submit.disabled = false;
      }
    });
    return form;
  }
  TG.policyKeyRule = KEY_RULE;

  TG.pages.clients = {
    title: 'Clients',
    render(root, params) {
      if (params[0] === 'new') return renderNew(root);
      if (params[0]) return renderClient(root, params[0], params[1] === 'edit');
      root.appendChild(h('h1', {}, 'Clients'));
      const search = h('input', { id: 'client-search', type: 'search', placeholder: 'Search by key', 'aria-label': 'Search clients by key' });
      const filter = h('select', { id: 'client-filter', 'aria-label': 'Filter by algorithm' }, h('option', { value: '' }, 'All algorithms'), Object.entries(ALGORITHMS).map(([v, a]) => h('option', { value: v }, a.label)));
      const count = h('span', { class: 'muted', role: 'status' });
      root.appendChild(h('div', { class: 'row' }, search, filter, h('a', { href: '#/clients/new', id: 'new-client' }, 'New client'), count));
      const err = h('p', { class: 'error', role: 'alert' });
      const body = h('tbody', {});
      root.append(err, h('div', { class: 'panel' }, table('clients', [['Client'], ['Algorithm'], ['Policy'], ['Requests', true], ['Last activity']], body, 'Clients')));
      let list = [];
      const draw = () => {
        const q = search.value.trim().toLowerCase();
        const shown = list.filter((c) => (!q || c.clientKey.toLowerCase().includes(q)) && (!filter.value || c.algorithm === filter.value));
        count.textContent = `${shown.length} of ${list.length}`;
        body.replaceChildren(...shown.map((c) => h('tr', { dataset: { client: c.clientKey } },
          h('th', { scope: 'row' }, h('a', { href: clientHref(c.clientKey) }, c.clientKey)),
          h('td', {}, ALGORITHMS[c.algorithm] ? ALGORITHMS[c.algorithm].label : c.algorithm),
          h('td', {}, policyText(c)),
          h('td', { class: 'num' }, TG.num(c.totalRequests)),
          h('td', {}, when(c.lastActivityAt)))));
      };
      search.addEventListener('input', draw);
      filter.addEventListener('change', draw);
      admin('/clients').then((r) => {
        if (!r.ok) { err.textContent = errorText(r); return; }
        list = r.body.clients;
        draw();
      });
      return null;
    },
  };

  function renderNew(root) {
    root.append(h('h1', {}, 'New client'), h('p', {}, h('a', { href: '#/clients' }, '← Clients')));
    root.appendChild(policyForm({}, async (policy) => {
      const r = await admin('/clients', { method: 'POST', body: policy });
      if (r.ok) {
        TG.announce(`Client ${policy.clientKey} created`);
        location.hash = clientHref(r.body.client.clientKey);
      }
      return r;
    }, 'Create client'));
    return null;
  }

  function renderClient(root, key, editing) {
    root.append(h('h1', {}, `Client ${key}`), h('p', {}, h('a', { href: '#/clients' }, '← Clients')));
    const err = h('p', { class: 'error', role: 'alert' });
    root.appendChild(err);
    const detail = h('div', { class: 'grid', id: 'client-detail' });
    root.appendChild(detail);
    admin(`/clients/${encodeURIComponent(key)}`).then((r) => {
      if (!r.ok) { err.textContent = errorText(r); return; }
      const c = r.body.client;
      if (editing) {
        detail.replaceWith(policyForm(c, async (policy) => {
          const u = await admin(`/clients/${encodeURIComponent(key)}`, { method: 'PUT', body: policy });
          if (u.ok) { TG.announce('Policy saved; the client\'s state was reset'); location.hash = clientHref(key); }
          return u;
        }, 'Save policy (resets its state)'));
        return;
      }
      const dialog = h('dialog', { id: 'confirm-delete', 'aria-labelledby': 'confirm-h' },
        h('h2', { id: 'confirm-h' }, `Delete ${key}?`),
        h('p', {}, 'Its policy, state and history are removed. Checks for this key will answer 404.'),
        h('form', { method: 'dialog', class: 'row' }, h('button', { value: 'cancel', autofocus: true }, 'Cancel'), h('button', { value: 'delete', class: 'danger', id: 'confirm-delete-yes' }, 'Delete')));
      dialog.addEventListener('close', async () => {
        if (dialog.returnValue !== 'delete') return;
        const d = await admin(`/clients/${encodeURIComponent(key)}`, { method: 'DELETE' });
        if (d.ok) { TG.announce(`Client ${key} deleted`); location.hash = '#/clients'; } else err.textContent = errorText(d);
      });
      const policy = h('section', { class: 'panel' }, h('h2', {}, 'Policy'),
        h('dl', {}, ...Object.entries(c).filter(([k]) => !['totalRequests', 'lastActivityAt'].includes(k)).flatMap(([k, v]) => [h('dt', { class: 'muted' }, k), h('dd', { dataset: { field: k } }, String(v))])),
        h('div', { class: 'row' }, h('a', { href: `${clientHref(key)}/edit`, id: 'edit-client' }, 'Edit policy'), h('button', { type: 'button', class: 'danger', id: 'delete-client', onclick: () => dialog.showModal() }, 'Delete…'), h('a', { href: `#/lab/${encodeURIComponent(key)}` }, 'Open in the request lab')),
        dialog);
      const state = h('section', { class: 'panel', id: 'client-state' }, h('h2', {}, 'Current state'), h('p', { class: 'muted' }, 'Loading…'));
      const recent = h('tbody', {});
      detail.append(policy, state);
      root.appendChild(h('section', { class: 'panel' }, h('h2', {}, 'Recent activity'), h('div', { class: 'table-wrap' }, h('table', { id: 'client-activity' }, h('thead', {}, h('tr', {}, ACTIVITY_HEAD.map(([l, n]) => h('th', { scope: 'col', class: n ? 'num' : undefined }, l)))), recent))));
      const stop = every(3000, async () => {
        const a = await admin(`/clients/${encodeURIComponent(key)}/activity`);
        if (!a.ok) { state.replaceChildren(h('h2', {}, 'Current state'), h('p', { class: 'error' }, errorText(a))); return; }
        const s = a.body.summary || {};
        const cs = a.body.currentState || {};
        state.replaceChildren(h('h2', {}, 'Current state'),
          h('dl', {}, ...Object.entries(cs).flatMap(([k, v]) => [h('dt', { class: 'muted' }, k), h('dd', { dataset: { state: k } }, typeof v === 'number' && !Number.isInteger(v) ? TG.num(v, 3) : String(v))])),
          h('p', {}, `Requests ${TG.num(s.totalRequests)} · allowed `, h('strong', { dataset: { summary: 'allowed' } }, TG.num(s.allowedRequests)), ` · denied `, h('strong', { dataset: { summary: 'denied' } }, TG.num(s.deniedRequests))));
        recent.replaceChildren(...activityRows(a.body.recentActivity));
      });
      cleanupHolder.fn = stop;
    });
    const cleanupHolder = { fn: null };
    return () => cleanupHolder.fn && cleanupHolder.fn();
  }

  // ---- analytics
  TG.pages.analytics = {
    title: 'Analytics',
    render(root, params) {
      let range = RANGES.includes(params[0]) ? params[0] : '5m';
      root.appendChild(h('h1', {}, 'Analytics'));
      const pills = h('div', { class: 'pills', role: 'group', 'aria-label': 'Range' });
      const source = h('span', { class: 'muted', id: 'analytics-source' });
      root.appendChild(h('div', { class: 'row' }, pills, source));
      const err = h('p', { class: 'error', role: 'alert' });
      root.appendChild(err);
      const grid = h('div', { class: 'grid' });
      root.appendChild(grid);
      const traffic = TG.chart(grid, { title: 'Checks per bucket', labels: ['incoming', 'allowed', 'denied'], colors: ['--s0', '--ok', '--bad'], id: 'chart-analytics', maxPoints: 2000 });
      const latency = TG.chart(grid, { title: 'Average response time (ms)', labels: ['average'], unit: ' ms', id: 'chart-latency', maxPoints: 2000 });
      const totals = h('p', { id: 'analytics-totals', role: 'status' });
      root.appendChild(totals);
      const drawPills = () => pills.replaceChildren(...RANGES.map((r) => h('button', { type: 'button', 'aria-pressed': String(r === range), onclick: () => { range = r; drawPills(); load(); } }, r)));
      drawPills();
      async function load() {
        const r = await admin(`/analytics?range=${range}`);
        if (!r.ok) { err.textContent = errorText(r); return; }
        err.textContent = '';
        const s = seriesOf(r.body.points);
        traffic.setData(s.xs, s.incoming, s.allowed, s.denied);
        latency.setData(s.xs, s.latency);
        traffic.el.dataset.points = String(r.body.points.filter((p) => p.incoming > 0).length);
        source.textContent = `source: ${r.body.dataSource}`;
        const sum = (f) => r.body.points.reduce((a, p) => a + p[f], 0);
        totals.textContent = `${range}: ${TG.num(sum('incoming'))} checks, ${TG.num(sum('allowed'))} allowed, ${TG.num(sum('denied'))} denied, in ${r.body.points.length} buckets.`;
      }
      const stop = every(2000, load);
      return () => { stop(); traffic.destroy(); latency.destroy(); };
    },
  };

  // ---- bans
  TG.pages.bans = {
    title: 'Bans',
    render(root) {
      root.appendChild(h('h1', {}, 'Bans'));
      const err = h('p', { class: 'error', role: 'alert' });
      const body = h('tbody', {});
      const key = h('input', { id: 'ban-key', required: true, autocomplete: 'off', spellcheck: 'false' });
      const ttl = h('input', { id: 'ban-ttl', type: 'number', min: '1', step: '1', inputmode: 'numeric', placeholder: 'permanent' });
      const reason = h('input', { id: 'ban-reason', maxlength: '200' });
      const form = h('form', { class: 'row panel', id: 'ban-form' },
        h('label', { for: 'ban-key' }, 'Client key', key),
        h('label', { for: 'ban-ttl' }, 'Duration (seconds; empty: until lifted)', ttl),
        h('label', { for: 'ban-reason' }, 'Reason', reason),
        h('button', { type: 'submit', class: 'primary' }, 'Add ban'));
      root.append(form, err, h('section', { class: 'panel' }, table('bans', [['Client key'], ['Reason'], ['Since'], ['Until'], ['Action']], body, 'Bans')));
      async function load() {
        const r = await admin('/bans');
        if (!r.ok) { err.textContent = errorText(r); return; }
        const list = r.body.bans || [];
        body.replaceChildren(...(list.length ? list.map((b) => h('tr', { dataset: { ban: b.clientKey } },
          h('th', { scope: 'row' }, b.clientKey),
          h('td', {}, b.reason || '–'),
          h('td', {}, when(b.createdAt)),
          h('td', {}, b.expiresAt ? when(b.expiresAt) : 'until lifted'),
          h('td', {}, h('button', { type: 'button', class: 'danger', 'aria-label': `Lift the ban on ${b.clientKey}`, onclick: async () => {
            const d = await admin(`/bans/${encodeURIComponent(b.clientKey)}`, { method: 'DELETE' });
            if (!d.ok) err.textContent = errorText(d);
            else TG.announce(`Ban on ${b.clientKey} lifted`);
            load();
          } }, 'Lift')))) : [h('tr', {}, h('td', { colspan: '5', class: 'muted' }, 'No bans.'))]));
      }
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        err.textContent = '';
        const ban = { clientKey: key.value.trim() };
        if (ttl.value.trim() !== '') ban.durationSeconds = Number(ttl.value);
        if (reason.value.trim() !== '') ban.reason = reason.value.trim();
        const r = await admin('/bans', { method: 'POST', body: ban });
        if (!r.ok) { err.textContent = errorText(r); return; }
        TG.announce(`${ban.clientKey} banned`);
        form.reset();
        load();
      });
      load();
      return null;
    },
  };

  // ---- request lab
  TG.pages.lab = {
    title: 'Request lab',
    render(root, params) {
      root.appendChild(h('h1', {}, 'Request lab'));
      root.appendChild(h('p', { class: 'muted' }, 'Fires real checks at the service (POST /rate-limit/check) and shows each decision. They count against the client like any other.'));
      const client = h('select', { id: 'lab-client', required: true });
      const count = h('input', { id: 'lab-count', type: 'number', min: '1', max: '1000', step: '1', value: '100', required: true, inputmode: 'numeric' });
      const conc = h('input', { id: 'lab-concurrency', type: 'number', min: '1', max: '100', step: '1', value: '10', required: true, inputmode: 'numeric' });
      const cost = h('input', { id: 'lab-cost', type: 'number', min: '1', step: '1', value: '1', inputmode: 'numeric' });
      // Only when the service requires caller API keys on the check (its --api-keys); kept in this page only.
      const apiKey = h('input', { id: 'lab-api-key', type: 'password', autocomplete: 'off', placeholder: 'if the check requires one' });
      const run = h('button', { type: 'submit', class: 'primary', id: 'lab-run' }, 'Run');
      const cancel = h('button', { type: 'button', id: 'lab-cancel', disabled: true }, 'Cancel');
      const form = h('form', { class: 'row panel', id: 'lab-form', novalidate: true },
        h('label', { for: 'lab-client' }, 'Client', client),
        h('label', { for: 'lab-count' }, 'Checks (1–1000)', count),
        h('label', { for: 'lab-concurrency' }, 'Concurrency (1–100)', conc),
        h('label', { for: 'lab-cost' }, 'Cost', cost),
        h('label', { for: 'lab-api-key' }, 'API key', apiKey),
        run, cancel);
      const err = h('p', { class: 'error', role: 'alert', id: 'lab-error' });
      const progress = h('progress', { id: 'lab-progress', max: '1', value: '0' });
      const summary = h('div', { class: 'cards', id: 'lab-summary' });
      const body = h('tbody', {});
      root.append(form, err, progress, summary, h('section', { class: 'panel' }, h('h2', {}, 'Decisions'), table('lab-results', [['#', true], ['Status', true], ['Decision'], ['Remaining', true], ['Retry-After', true], ['Time (ms)', true]], body, 'Each check')));
      admin('/clients').then((r) => {
        if (!r.ok) { err.textContent = errorText(r); return; }
        client.replaceChildren(...r.body.clients.map((c) => h('option', { value: c.clientKey, selected: c.clientKey === params[0] ? true : undefined }, `${c.clientKey} (${policyText(c)})`)));
        if (r.body.clients.length === 0) err.textContent = 'No clients yet: create one first.';
      });
      let ctrl = null;
      const card = (k, v, cls) => h('div', { class: 'card' }, h('div', { class: `v ${cls || ''}`, dataset: { lab: k } }, v), h('div', { class: 'k' }, k));
      cancel.addEventListener('click', () => ctrl && ctrl.abort());
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        err.textContent = '';
        const n = Number(count.value);
        const c = Number(conc.value);
        const k = Number(cost.value || 1);
        if (!Number.isInteger(n) || n < 1 || n > 1000) { err.textContent = 'Checks must be a whole number from 1 to 1000.'; count.focus(); return; }
        if (!Number.isInteger(c) || c < 1 || c > 100) { err.textContent = 'Concurrency must be a whole number from 1 to 100.'; conc.focus(); return; }
        if (!Number.isInteger(k) || k < 1) { err.textContent = 'Cost must be a whole number of at least 1.'; cost.focus(); return; }
        if (!client.value) { err.textContent = 'Choose a client.'; return; }
        ctrl = new AbortController();
        run.disabled = true;
        cancel.disabled = false;
        body.replaceChildren();
        progress.max = n;
        progress.value = 0;
        const results = [];
        let next = 0;
        const t0 = performance.now();
        const draw = (done) => {
          const allowed = results.filter((x) => x.allowed === true).length;
          const denied = results.filter((x) => x.allowed === false).length;
          const errors = results.filter((x) => x.error).length;
          const secs = (performance.now() - t0) / 1000;
          summary.replaceChildren(card('Sent', TG.num(results.length)), card('Allowed', TG.num(allowed), 'ok'), card('Denied', TG.num(denied), 'bad'), card('Errors', TG.num(errors), errors ? 'warn' : ''),
            card('Achieved rate (checks/s)', TG.num(results.length / Math.max(secs, 0.001), 1)), card('State', done));
          progress.value = results.length;
        };
        const one = async (i) => {
          const started = performance.now();
          try {
            const body2 = { clientKey: client.value };
            if (k !== 1) body2.cost = k;
            const headers = { 'content-type': 'application/json' };
            if (apiKey.value) headers.authorization = `Bearer ${apiKey.value}`;
            const res = await fetch(`${base()}/rate-limit/check`, { method: 'POST', headers, body: JSON.stringify(body2), signal: ctrl.signal });
            const j = await res.json().catch(() => null);
            // 200 allowed, 429 denied by the policy, 403 denied by a ban; anything else is an error.
            const decided = (res.status === 200 || res.status === 429 || (res.status === 403 && j && j.error === 'BANNED')) && j !== null;
            return { i, status: res.status, allowed: decided ? j.allowed : undefined, banned: res.status === 403, remaining: j && j.remaining, retryAfter: res.headers.get('retry-after'), ms: performance.now() - started, error: decided ? null : (j && j.error) || `HTTP ${res.status}` };
          } catch (e2) {
            return { i, status: 0, ms: performance.now() - started, error: e2.name === 'AbortError' ? 'cancelled' : e2.message };
          }
        };
        const worker = async () => {
          while (next < n && !ctrl.signal.aborted) {
            const r = await one(next++);
            if (r.error === 'cancelled') continue;
            results.push(r);
            body.appendChild(h('tr', { dataset: { result: r.allowed === true ? 'allowed' : r.allowed === false ? 'denied' : 'error' } },
              h('td', { class: 'num' }, String(r.i + 1)), h('td', { class: 'num' }, String(r.status || '–')),
              h('td', {}, r.error ? h('span', { class: 'badge bad' }, r.error) : h('span', { class: `badge ${r.allowed ? 'ok' : 'bad'}` }, r.allowed ? 'allowed' : r.banned ? 'denied (banned)' : 'denied')),
              h('td', { class: 'num' }, TG.num(r.remaining)), h('td', { class: 'num' }, r.retryAfter || '–'), h('td', { class: 'num' }, TG.num(r.ms, 1))));
            if (results.length % 10 === 0) draw('running');
          }
        };
        draw('running');
        await Promise.all([...Array(Math.min(c, n))].map(worker));
        draw(ctrl.signal.aborted ? 'cancelled' : 'done');
        TG.announce(`Request lab ${ctrl.signal.aborted ? 'cancelled' : 'done'}: ${results.filter((x) => x.allowed === true).length} allowed of ${results.length}`);
        run.disabled = false;
        cancel.disabled = true;
      });
      return () => ctrl && ctrl.abort();
    },
  };

  // ---- how it works
  TG.pages.how = {
    title: 'How it works',
    render(root) {
      const p = (...c) => h('p', {}, ...c);
      const code = (t) => h('code', {}, t);
      root.appendChild(h('div', { class: 'prose' },
        h('h1', {}, 'How the algorithms decide'),
        p('Every check asks one question: may this client spend ', code('cost'), ' (default 1) now? The service decides inside a store transaction that commits before the answer is sent (checks that arrive together share one), so the state survives a restart and instances sharing one PostgreSQL database never hand out the same quota twice. A denial takes nothing.'),
        h('h2', { id: 'token-bucket' }, 'Token bucket (token_bucket)'),
        p('The client has a bucket of at most ', code('burstSize'), ' tokens, which refills continuously at ', code('requestsPerSecond'), ' tokens per second, fractions included, and never above the burst. A check that finds at least ', code('cost'), ' tokens takes them and is allowed; otherwise it is denied and takes nothing.'),
        p(code('remaining'), ' is the whole tokens left; ', code('Retry-After'), ' is the time until the next whole token (at least 1 s, rounded up); ', code('resetAt'), ' is when the bucket would be full again.'),
        p('Use it for a steady rate with room for short bursts: a burst of ', code('burstSize'), ' passes at once, then one request per 1/', code('requestsPerSecond'), ' seconds.'),
        h('h2', { id: 'sliding-window' }, 'Sliding window (sliding_window)'),
        p('At most ', code('maxRequests'), ' allowed requests in any ', code('windowSeconds'), '-second window ending now: an exact rolling window, not fixed buckets, so no burst of twice the limit can pass at a window boundary. The service remembers the time of each counted request; a denied request is not counted.'),
        p(code('remaining'), ' is ', code('maxRequests'), ' minus the requests counted in the last window; ', code('resetAt'), ' and ', code('Retry-After'), ' are when the oldest counted request leaves the window.'),
        p('Use it when the contract is "N per period", exactly.'),
        h('h2', { id: 'fixed-window' }, 'Fixed window (fixed_window)'),
        p('A count of allowed requests per ', code('windowSeconds'), '-second window, the windows aligned on the clock; the count starts again at each edge. The cheapest state (one number), at a price: a client can pass up to twice ', code('maxRequests'), ' across an edge (the end of one window and the start of the next). ', code('resetAt'), ' and ', code('Retry-After'), ' are the window\'s end.'),
        h('h2', { id: 'sliding-counter' }, 'Sliding counter (sliding_counter)'),
        p('Two counts, the previous fixed window\'s and the current one\'s; the previous is weighted by how much of it the sliding window still covers. Close to the exact window for large limits, with two numbers instead of a time per request; it assumes the previous window\'s requests were spread evenly, so it can be off by that assumption. ', code('Retry-After'), ' is the moment the estimate leaves room for the check.'),
        h('h2', { id: 'gcra' }, 'GCRA (gcra)'),
        p('The generic cell rate algorithm: a meter of the next request\'s theoretical arrival time, moving ', code('1/requestsPerSecond'), ' seconds per unit; a check passes if it ends no more than ', code('burstSize'), ' units ahead of now. It admits what a token bucket of the same rate and burst admits, with one number of state; ', code('resetAt'), ' is when the meter is back to now (the whole burst available).'),
        h('h2', {}, 'Under concurrency'),
        p('Simultaneous checks are decided one at a time per client: 500 simultaneous checks on a window of 100 allow exactly 100. Try it in the ', h('a', { href: '#/lab' }, 'request lab'), '.')));
      return null;
    },
  };
})();
