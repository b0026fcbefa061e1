'use strict';
// The dashboard fixture app (fixtures/dashboard-app.js: Express with the gatekeeper, a concurrency
// gate, a lag monitor, a defense, /metrics and the dashboard) in a child process, and the bounded
// overload the dashboard and metrics tests put on it.
const http = require('node:http');
const path = require('node:path');
const { fork } = require('node:child_process');

/** Starts the app with `env` added; resolves { child, port }; the child is killed after test `t`. */
function startDashboardApp(t, env = {}) {
  const child = fork(path.join(__dirname, '..', 'fixtures', 'dashboard-app.js'), { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  t.after(() => child.kill());
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ child, port: m.port }));
    child.once('exit', (code) => reject(new Error(`app exited with ${code}`)));
  });
}

/**
 * Closed-loop clients for `ms` (and at most `max` requests each): critical POSTs to /checkout and
 * background GETs of /reports/N. Resolves the statuses seen per kind ({ critical: { 200: n, ... } }).
 */
async function overload(port, ms, { background = 32, critical = 4, max = 5000 } = {}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: background + critical });
  const deadline = Date.now() + ms;
  const statuses = { critical: {}, background: {} };
  const hit = (method, p) => new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: p, agent, headers: { 'content-length': '0' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(0));
    req.end();
  });
  const client = async (kind) => {
    for (let i = 0; i < max && Date.now() < deadline; i++) {
      const s = kind === 'critical' ? await hit('POST', '/checkout') : await hit('GET', `/reports/${i}`);
      statuses[kind][s] = (statuses[kind][s] || 0) + 1;
    }
  };
  await Promise.all([...Array(background)].map(() => client('background')).concat([...Array(critical)].map(() => client('critical'))));
  agent.destroy();
  return statuses;
}

module.exports = { startDashboardApp, overload };
