'use strict';
// Child processes running __test__/fixtures/cluster-node.js, driven by IPC: `node.call(op, args)`.
const { fork } = require('node:child_process');
const path = require('node:path');
const { STORES } = require('./cluster-stores');

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'cluster-node.js');

function startNode(cfg) {
  const child = fork(FIXTURE, [JSON.stringify(cfg)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pending = new Map();
  let seq = 0;
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    for (const { reject } of pending.values()) reject(new Error(`cluster node exited (${code ?? signal})`));
    resolve({ code, signal });
  }));
  const ready = new Promise((resolve, reject) => {
    child.once('message', (m) => (m.ready ? resolve() : reject(new Error(m.error))));
    exited.then(() => reject(new Error('cluster node exited before it was ready')));
  });
  child.on('message', (m) => {
    const p = pending.get(m.id);
    if (p === undefined) return;
    pending.delete(m.id);
    if (m.error) p.reject(new Error(m.error));
    else p.resolve(m.value);
  });
  return {
    child,
    ready,
    exited,
    call(op, args) {
      const id = ++seq;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        child.send({ id, op, args });
      });
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      await Promise.race([this.call('close'), exited]).catch(() => {});
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** `n` nodes of one config, all ready. */
async function startNodes(n, cfg) {
  const nodes = Array.from({ length: n }, () => startNode(cfg));
  try {
    await Promise.all(nodes.map((x) => x.ready));
  } catch (err) {
    await Promise.all(nodes.map((x) => x.close()));
    throw err;
  }
  return nodes;
}

/**
 * A server of the test's own (`kind`: one of ./cluster-stores.js) and `n` nodes on it (`cfg` plus
 * `store`: its cluster() option), stopped after test `t` (nodes pushed onto `nodes` later are closed
 * too). Resolves { server, nodes, cfg }.
 */
async function startNodesOnStore(t, n, cfg, kind) {
  const server = await kind.start();
  const on = { store: server.option, ...cfg };
  const nodes = [];
  t.after(async () => {
    await Promise.all(nodes.map((x) => x.close()));
    await server.stop();
  });
  nodes.push(...(await startNodes(n, on)));
  return { server, nodes, cfg: on };
}

/** startNodesOnStore on a redis-server: resolves { redis (./redis.js's server), nodes, cfg }. */
async function startNodesOnRedis(t, n, cfg) {
  const { server, nodes, cfg: on } = await startNodesOnStore(t, n, cfg, STORES[0]);
  return { redis: server.server, nodes, cfg: on };
}

module.exports = { startNode, startNodes, startNodesOnRedis, startNodesOnStore };
