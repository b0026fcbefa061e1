'use strict';
// Real decision-service processes (bin/tiergate.js) and a real PostgreSQL cluster for the service
// suites: each started on a free port in a temporary folder, and stopped after.
const fs = require('node:fs');
const os = require('node:os');
const net = require('node:net');
const http = require('node:http');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');

const BIN = path.join(__dirname, '..', '..', 'bin', 'tiergate.js');
const TOKEN = 'test-admin-token-0123456789';
const START_MS = 20_000;

function tmpdir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * Starts `tiergate serve` with `flags` (an object of --kebab flags) and `env`; resolves once it prints
 * its listening line. `output` collects everything it wrote.
 */
function startService({ flags = {}, env = {}, token = TOKEN, execArgv = [] } = {}) {
  const args = [BIN, 'serve', '--port', '0', '--log-level', 'warn'];
  for (const [k, v] of Object.entries(flags)) args.push(`--${k}`, String(v));
  const childEnv = { ...process.env, ...env };
  delete childEnv.DATABASE_URL;
  if (token !== null) childEnv.TIERGATE_ADMIN_TOKEN = token;
  else delete childEnv.TIERGATE_ADMIN_TOKEN;
  const child = spawn(process.execPath, [...execArgv, ...args], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const svc = { child, output: '', url: null, exited: null };
  svc.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  child.stdout.setEncoding('utf8').on('data', (d) => { svc.output += d; });
  child.stderr.setEncoding('utf8').on('data', (d) => { svc.output += d; });
  svc.ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`service did not start in ${START_MS} ms:\n${svc.output}`)); }, START_MS);
    const onData = () => {
      const m = /tiergate: listening on (http:\/\/\S+)\n/.exec(svc.output);
      if (m) { clearTimeout(timer); svc.url = m[1]; resolve(svc); }
    };
    child.stdout.on('data', onData);
    svc.exited.then(({ code, signal }) => { clearTimeout(timer); if (!svc.url) reject(Object.assign(new Error(`service exited ${code ?? signal}:\n${svc.output}`), { code, output: svc.output })); });
  });
  svc.stop = async (signal = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return svc.exited;
  };
  return svc;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });

/** One HTTP request; resolves { status, headers, body } with the body parsed when it is JSON. */
function request(base, method, urlPath, { body, token, headers = {}, raw } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(urlPath, base);
    const h = { ...headers };
    if (token) h.authorization = `Bearer ${token}`;
    let payload = raw;
    if (body !== undefined) { payload = JSON.stringify(body); h['content-type'] = 'application/json'; }
    if (payload !== undefined) h['content-length'] = Buffer.byteLength(payload);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: h, agent, timeout: 15_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c) => { text += c; }).on('end', () => {
        let parsed = text;
        if (/json/.test(res.headers['content-type'] || '')) parsed = JSON.parse(text);
        resolve({ status: res.statusCode, headers: res.headers, body: parsed });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${urlPath} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

const admin = (base, method, p, body) => request(base, method, p, { body, token: TOKEN });
const check = (base, clientKey, cost) => request(base, 'POST', '/api/v1/rate-limit/check', { body: cost === undefined ? { clientKey } : { clientKey, cost } });

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
    s.on('error', reject);
  });
}

function pgBin(name) {
  const base = '/usr/lib/postgresql';
  if (fs.existsSync(base)) {
    const versions = fs.readdirSync(base).filter((v) => /^\d+$/.test(v)).sort((a, b) => b - a);
    for (const v of versions) if (fs.existsSync(path.join(base, v, 'bin', name))) return path.join(base, v, 'bin', name);
  }
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : null;
}

/** Why PostgreSQL tests cannot run here, or false. */
function pgMissing() {
  return pgBin('initdb') && pgBin('pg_ctl') ? false : 'PostgreSQL server binaries are not installed (.ci/run installs them)';
}

/**
 * A PostgreSQL cluster of its own: initdb in a temporary folder, started on a free port. PostgreSQL
 * refuses to run as root, so as root the cluster belongs to the unprivileged `postgres` user.
 */
async function startPostgres({ settings = [] } = {}) {
  const dir = tmpdir('tiergate-pg-');
  const data = path.join(dir, 'data');
  const asRoot = process.getuid && process.getuid() === 0;
  const run = (bin, args) => {
    const cmd = asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
    const res = spawnSync(cmd[0], cmd[1], { encoding: 'utf8', timeout: 60_000 });
    if (res.status !== 0) throw new Error(`${bin} ${args.join(' ')} failed: ${res.error || ''}${res.stdout}${res.stderr}`);
    return res;
  };
  if (asRoot) spawnSync('chown', ['postgres:', dir]);
  run(pgBin('initdb'), ['-D', data, '-U', 'tiergate', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const port = await freePort();
  const opts = [`-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`, ...settings.map((x) => `-c ${x}`)].join(' ');
  run(pgBin('pg_ctl'), ['-D', data, '-o', opts, '-l', path.join(dir, 'log'), '-w', '-t', '30', 'start']);
  let stopped = false;
  const postmaster = Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return {
    url: `postgres://tiergate@127.0.0.1:${port}/postgres`,
    port,
    postmaster,
    /** Sends `sig` to the postmaster and then every process it started (SIGSTOP freezes the server
     * whole: a hung host; SIGCONT thaws it). Returns the pids signalled. */
    signal(sig) {
      const children = spawnSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);
      const pids = [postmaster, ...children];
      for (const pid of pids) {
        try { process.kill(pid, sig); } catch (err) { if (err.code !== 'ESRCH') throw err; }
      }
      return pids;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      this.signal('SIGCONT'); // never leave a frozen server behind
      try { run(pgBin('pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop']); } finally { fs.rmSync(dir, { recursive: true, force: true }); }
    },
  };
}

/** Whether `key`'s row is locked by another session (tried with NOWAIT from pg client `c`, then let go). */
async function rowIsLocked(c, key) {
  try {
    await c.query('BEGIN');
    await c.query('SELECT 1 FROM clients WHERE client_key = $1 FOR UPDATE NOWAIT', [key]);
    return false;
  } catch (err) {
    if (err.code === '55P03') return true;
    throw err;
  } finally {
    await c.query('ROLLBACK');
  }
}

module.exports = { TOKEN, BIN, tmpdir, startService, request, admin, check, agent, startPostgres, pgMissing, rowIsLocked };
