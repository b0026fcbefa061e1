'use strict';
// The turn budget on a real server: during a shed episode, an unprotected request that arrives once the
// current event-loop turn has run `shed.turnBudgetMs` is shed; protected tiers and requests outside an
// episode are not. Two requests are made to arrive in one turn by blocking this loop while their bytes
// reach the kernel: the loop then reads both sockets in the same poll, and the first one's handler runs
// 15 ms before the second one's gate decision.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { gatekeeper } = require('..');
const { listen, close } = require('./helpers/http');

const BIG = 1e9;
const TIERS = [
  { name: 'critical', protected: true, capacity: BIG, refillPerSec: BIG },
  { name: 'standard', capacity: BIG, refillPerSec: BIG },
  { name: 'background', capacity: BIG, refillPerSec: BIG },
];
// 50..150 ms; lag 60 gives pressure 0.1: background at 0.8 of its refill, standard at full refill.
const SHED = { targetLagMs: 50, criticalLagMs: 150, holdMs: 0, recoveryMs: 0, integralMs: 0, confirmMs: 0, turnBudgetMs: 5 };

function busy(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

async function serve(t, options) {
  const handler = gatekeeper.http(options, (req, res) => {
    if (req.url === '/slow') busy(15);
    res.writeHead(200);
    res.end('ok');
  });
  const server = http.createServer(handler);
  const port = await listen(server);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
  t.after(() => {
    agent.destroy();
    return close(server);
  });
  const get = (path, tier) =>
    new Promise((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path, agent, headers: { 'x-user-tier': tier } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      });
      req.on('error', reject);
    });
  // Two warm keep-alive connections, so the pair below needs no accept.
  await Promise.all([get('/', 'critical'), get('/', 'critical')]);
  /** A slow request and then `tier`'s, both read by the server in one loop turn. */
  const pairInOneTurn = async (tier) => {
    const both = Promise.all([get('/slow', 'standard'), get('/', tier)]);
    busy(30); // the requests were written synchronously above; both are in the kernel when this ends
    return both;
  };
  return { gate: handler, pairInOneTurn };
}

test('during an episode, an unprotected request late in a turn is shed; a protected one is not', async (t) => {
  const { gate, pairInOneTurn } = await serve(t, { tiers: TIERS, trustTierHeader: true, shed: SHED });
  gate.injectHealth({ lagMs: 60 });
  assert.ok(gate.stats().pressure > 0);
  assert.deepEqual(await pairInOneTurn('standard'), [200, 503]);
  assert.deepEqual(await pairInOneTurn('critical'), [200, 200]);
  const s = gate.stats().tiers;
  assert.equal(s.standard.turnShed, 1);
  assert.equal(s.standard.shed, 1);
  assert.equal(s.critical.turnShed, 0);
});

test('outside an episode, or with turnBudgetMs 0, a long turn sheds nothing', async (t) => {
  const healthy = await serve(t, { tiers: TIERS, trustTierHeader: true, shed: SHED });
  healthy.gate.injectHealth({ lagMs: 0 });
  assert.deepEqual(await healthy.pairInOneTurn('standard'), [200, 200]);
  const off = await serve(t, { tiers: TIERS, trustTierHeader: true, shed: { ...SHED, turnBudgetMs: 0 } });
  off.gate.injectHealth({ lagMs: 60 });
  assert.ok(off.gate.stats().pressure > 0);
  assert.deepEqual(await off.pairInOneTurn('standard'), [200, 200]);
  assert.equal(off.gate.stats().tiers.standard.turnShed, 0);
});

test('turnBudgetMs is validated', () => {
  for (const bad of [-1, NaN, Infinity, '5', 60_001]) {
    assert.throws(() => gatekeeper({ shed: { turnBudgetMs: bad } }), /options\.shed\.turnBudgetMs must be/);
  }
});
