'use strict';
// Real Redis for the cluster-mode suites: redis-server processes on free loopback ports, each in its
// own temporary folder, without persistence (a restart comes back empty), stopped by the suite. A
// 3-master Redis Cluster is made with `redis-cli --cluster create`. `.ci/run` installs redis-server.
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

function haveRedis() {
  return spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).status === 0;
}

/** Skips the test without redis-server on PATH, except in CI (where `.ci/run` installs it). */
function needRedis(t) {
  if (haveRedis()) return true;
  if (process.env.CI) throw new Error('redis-server is not installed (.ci/run installs it)');
  t.skip('redis-server is not installed (apt-get install redis-server)');
  return false;
}

function portFree(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** A free port whose cluster bus port (+10000) is free too. */
async function freePort() {
  for (let i = 0; i < 200; i++) {
    const port = 20000 + Math.floor(Math.random() * 30000);
    if ((await portFree(port)) && (await portFree(port + 10000))) return port;
  }
  throw new Error('no free port');
}

/** Resolves once the server at `port` answers PING (within `ms`). */
async function ready(port, ms = 10_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.setTimeout(500, () => { s.destroy(); resolve(false); });
      s.once('error', () => resolve(false));
      s.once('connect', () => s.write('PING\r\n'));
      s.once('data', (d) => { s.destroy(); resolve(d.toString().startsWith('+PONG')); });
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis on port ${port} did not answer within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One redis-server: `{ port, url, kill(signal), start(), stop() }`. `args`: extra server options. */
async function redisServer(args = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tiergate-redis-'));
  const port = await freePort();
  const server = {
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    proc: null,
    async start() {
      const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--protected-mode', 'no', ...args], { stdio: 'ignore' });
      server.proc = proc;
      server.exited = new Promise((resolve) => proc.once('exit', resolve));
      await ready(port);
    },
    /** Ends the server at once (SIGKILL by default) and waits for it to be gone. */
    async kill(signal = 'SIGKILL') {
      if (server.proc === null) return;
      server.proc.kill(signal);
      await server.exited;
      server.proc = null;
    },
    async stop() {
      await server.kill('SIGTERM');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  await server.start();
  return server;
}

/** A Redis Cluster of three masters, no replicas: `{ nodes: [{ host, port }], stop() }`. */
async function redisCluster() {
  const servers = [];
  for (let i = 0; i < 3; i++) servers.push(await redisServer(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000']));
  const stop = () => Promise.all(servers.map((s) => s.stop()));
  const create = spawnSync('redis-cli', ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`), '--cluster-replicas', '0', '--cluster-yes'], { encoding: 'utf8', timeout: 30_000 });
  if (create.status !== 0) {
    await stop();
    throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
  }
  const deadline = Date.now() + 20_000;
  for (;;) {
    const ok = servers.every((s) => /cluster_state:ok/.test(spawnSync('redis-cli', ['-p', String(s.port), 'cluster', 'info'], { encoding: 'utf8' }).stdout));
    if (ok) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error('the cluster did not reach cluster_state:ok');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { servers, nodes: servers.map((s) => ({ host: '127.0.0.1', port: s.port })), stop };
}

module.exports = { needRedis, redisServer, redisCluster };
