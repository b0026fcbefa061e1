'use strict';
// Cluster-wide named limits on a real redis-server and on a real PostgreSQL: the gatekeeper's `limits: [{ ..., cluster: true }]`
// funded from cluster mode's leases (a sliding window and a token bucket), 4 processes firing at once:
// exactly the limit admitted across them in exact mode, the rest refused 429 by the named limit.
const test = require('node:test');
const assert = require('node:assert/strict');
const { STORES } = require('../helpers/cluster-stores');
const { startNodesOnStore } = require('../helpers/cluster-nodes');

const sum = (rs, status) => rs.reduce((a, r) => a + (r.statuses[status] || 0), 0);
const late = async (nodes) => (await Promise.all(nodes.map((n) => n.call('stats')))).reduce((a, s) => a + s.timeouts + s.waitTimeouts, 0);

const LIMIT = 100;
const CFG = {
  // Closed, so that a store answer slower than storeTimeoutMs (a stalled loop on a loaded machine)
  // can only refuse, never admit from a share.
  cluster: {
    storeTimeoutMs: 200,
    minHolders: 4,
    limits: [
      { name: 'search', algorithm: 'sliding-window', limit: LIMIT, windowMs: 60_000, fallback: 'closed', retryMs: 100 },
      { name: 'export', algorithm: 'token-bucket', limit: 0, windowMs: 1000, burst: LIMIT, fallback: 'closed', retryMs: 100 },
    ],
  },
  defense: {
    limits: [
      { name: 'search', by: { header: 'x-key' }, tiers: 'paid', cluster: true },
      { name: 'export', by: { header: 'x-key' }, tiers: 'free', cluster: true },
    ],
    bans: { rules: false },
  },
};

for (const kind of STORES) test(`${kind.name}: cluster limits of the gatekeeper: exactly the limit admitted across 4 processes`, { timeout: 120_000 }, async (t) => {
  if (!kind.need(t)) return;
  const { nodes } = await startNodesOnStore(t, 4, CFG, kind);

  for (const [limit, tier] of [['search', 'paid'], ['export', 'free']]) {
    await t.test(`${limit}: 4 processes x 500 simultaneous requests on one key of limit ${LIMIT}`, async (t2) => {
      const before = await late(nodes);
      const rs = await Promise.all(nodes.map((n) => n.call('burst', { n: 500, key: `k-${limit}`, tier })));
      const admitted = sum(rs, 200);
      assert.equal(admitted + sum(rs, 429), 2000, `every refusal is the named limit's 429: ${JSON.stringify(rs)}`);
      assert.ok(admitted <= LIMIT, `never above the limit: ${admitted}`);
      const lateAnswers = (await late(nodes)) - before;
      if (lateAnswers === 0) assert.equal(admitted, LIMIT, JSON.stringify(rs));
      else t2.diagnostic(`${lateAnswers} store answers came after storeTimeoutMs (a loaded machine): ${admitted} of ${LIMIT} admitted, none above`);
      const stats = await Promise.all(nodes.map((n) => n.call('defense', { op: 'stats' })));
      const refused = stats.reduce((a, s) => a + s.clusterLimits.find((l) => l.name === limit).refused, 0);
      assert.equal(refused, sum(rs, 429), 'each refusal counted against its limit');
    });
  }

  await t.test('another key has its own allowance; the refusal names the limit', async () => {
    const rs = await Promise.all(nodes.map((n) => n.call('burst', { n: 5, key: 'k-other', tier: 'paid' })));
    assert.equal(sum(rs, 200), 20);
    const body = await nodes[0].call('body', { key: 'k-search', tier: 'paid' });
    assert.equal(body.status, 429);
    assert.ok(Number(body.headers['retry-after']) >= 1);
    assert.equal(JSON.parse(body.body).limit, 'search');
  });
});
