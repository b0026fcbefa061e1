'use strict';
// One real overload: a CPU-heavy route (4 ms of CPU per request) in a child process, driven by far
// more concurrent clients than it can serve. Critical requests (POST /checkout, a protected tier) must
// all get 2xx while background requests (GET /reports/...) are shed with 503. Bounded: 2.5 s of load.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const path = require('node:path');
const { fork } = require('node:child_process');

const LOAD_MS = 2500;
const BACKGROUND_CLIENTS = 48;
const CRITICAL_CLIENTS = 4;

function once(child, pick) {
  return new Promise((resolve, reject) => {
    const onMessage = (m) => {
      const v = pick(m);
      if (v !== undefined) {
        child.off('message', onMessage);
        resolve(v);
      }
    };
    child.on('message', onMessage);
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
}

function hit(agent, port, method, urlPath) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, agent, headers: method === 'POST' ? { 'content-length': '0' } : {} }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    });
    req.setTimeout(15_000, () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ status: 0, error: err.message, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    req.end();
  });
}

function quantile(values, q) {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

test('under real overload critical keeps 2xx while background gets 503', { timeout: 30_000 }, async (t) => {
  const child = fork(path.join(__dirname, '..', 'fixtures', 'overload-server.js'), { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  t.after(() => child.kill());
  const port = await once(child, (m) => m.port);
  const agent = new http.Agent({ keepAlive: true, maxSockets: BACKGROUND_CLIENTS + CRITICAL_CLIENTS });
  t.after(() => agent.destroy());

  const results = { critical: [], background: [] };
  const deadline = Date.now() + LOAD_MS;
  async function client(kind) {
    // Closed loop, bounded in time and count.
    for (let i = 0; i < 20_000 && Date.now() < deadline; i++) {
      const r = kind === 'critical' ? await hit(agent, port, 'POST', '/checkout') : await hit(agent, port, 'GET', `/reports/${i}`);
      results[kind].push(r);
    }
  }
  await Promise.all([
    ...Array.from({ length: CRITICAL_CLIENTS }, () => client('critical')),
    ...Array.from({ length: BACKGROUND_CLIENTS }, () => client('background')),
  ]);
  child.send('stats');
  const stats = await once(child, (m) => m.stats);

  const count = (list, pred) => list.filter(pred).length;
  const crit = results.critical;
  const bg = results.background;
  const summary = {
    critical: { total: crit.length, ok: count(crit, (r) => r.status >= 200 && r.status < 300), p50: quantile(crit.map((r) => r.ms), 0.5), p99: quantile(crit.map((r) => r.ms), 0.99) },
    background: { total: bg.length, ok: count(bg, (r) => r.status === 200), shed: count(bg, (r) => r.status === 503), other: count(bg, (r) => r.status !== 200 && r.status !== 503) },
    server: { p99LagMs: stats.p99LagMs, episodes: stats.episodes, tiers: stats.tiers },
  };
  t.diagnostic(JSON.stringify(summary));

  assert.ok(crit.length >= 20, `enough critical requests were made (${crit.length})`);
  assert.equal(summary.critical.ok, crit.length, `every critical request got 2xx: ${JSON.stringify(crit.filter((r) => r.status !== 200).slice(0, 5))}`);
  assert.ok(summary.background.shed > 0, 'background requests were shed with 503');
  assert.equal(summary.background.other, 0, 'background got only 200 or 503 (no errors, no timeouts)');
  assert.equal(stats.tiers.critical.shed + stats.tiers.critical.tierFull, 0, 'the protected tier was never refused');
  assert.ok(stats.tiers.background.shed > 0);
  // The loop over capacity starts the controller's episode or the turn queue (whichever sees it
  // first); once the queue runs, it may do all the shedding while the controller's pressure stays 0.
  assert.ok(stats.episodes >= 1 || stats.queue.episodes >= 1, 'the controller or the turn queue acted');
});
