'use strict';
// Signed ban changes (cluster({ banKey }), lib/cluster/ban-signature.js) on a real redis-server: a
// change that anyone able to PUBLISH or HSET on Redis writes without the key (unsigned, a wrong MAC,
// or a correctly signed message replayed after CLOCK_SKEW_MS) is ignored and counted, by the
// processes that hear it live and by one that loads the hash later; the processes' own changes pass.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const { needRedis } = require('../helpers/redis');
const { startNode, startNodesOnRedis } = require('../helpers/cluster-nodes');
const { BanSigner } = require('../../lib/cluster/ban-signature');
const { CLOCK_SKEW_MS } = require('../../lib/cluster/bans');

const KEY = 'a shared ban key of 32 bytes ...';
const CFG = { cluster: { storeTimeoutMs: 200, banKey: KEY, limits: [{ name: 'unused', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }] } };
const CHANNEL = 'tiergate:bans';
const HASH = 'tiergate:{bans}';
const forgedBan = (target, extra = {}) => JSON.stringify({ op: 'ban', target, cidr: false, durationMs: 600_000, reason: 'forged', source: 'operator', offense: 0, origin: 'forger', sentAt: Date.now(), ...extra });

test('with banKey, forged ban changes on Redis are ignored and counted', { timeout: 120_000 }, async (t) => {
  if (!needRedis(t)) return;
  const { redis, nodes, cfg } = await startNodesOnRedis(t, 2, CFG);
  const cli = (...a) => {
    const r = spawnSync('redis-cli', ['-p', String(redis.port), ...a], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
  };
  const status = (n, key) => n.call('status', { tier: 'paid', key });
  const until = (n, key, s = 403) => n.call('until403', { key, tier: 'paid', timeoutMs: 5000, status: s });

  await t.test('live: an unsigned PUBLISH, a wrong MAC, a forged lift and a replayed signed message change nothing', async () => {
    assert.equal((await nodes[0].call('bans', { op: 'ban', target: 'keep', durationMs: 600_000 })).value, 'published');
    assert.ok((await until(nodes[1], 'keep')) !== null, 'a signed ban is enforced');
    const before = (await nodes[1].call('stats')).bans.rejected;
    cli('PUBLISH', CHANNEL, forgedBan('victim'));
    cli('PUBLISH', CHANNEL, `s1.${'A'.repeat(43)}.${forgedBan('victim')}`);
    cli('PUBLISH', CHANNEL, JSON.stringify({ op: 'lift', target: 'keep', cidr: false, origin: 'forger', sentAt: Date.now() }));
    const old = forgedBan('replayed', { sentAt: Date.now() - 2 * CLOCK_SKEW_MS });
    cli('PUBLISH', CHANNEL, new BanSigner([Buffer.from(KEY)]).seal(CHANNEL, old));
    // Delivered after the forgeries on the same subscription: once it is enforced, they were handled.
    await nodes[0].call('bans', { op: 'ban', target: 'marker', durationMs: 600_000 });
    assert.ok((await until(nodes[1], 'marker')) !== null);
    assert.equal(await status(nodes[1], 'victim'), 200, 'no forged ban');
    assert.equal(await status(nodes[1], 'replayed'), 200, 'no replayed ban');
    assert.equal(await status(nodes[1], 'keep'), 403, 'no forged lift');
    assert.equal((await nodes[1].call('stats')).bans.rejected - before, 4, 'each forgery counted');
  });

  await t.test('reload: a forged hash entry is not loaded by a process that starts later; the signed ones are', async () => {
    cli('HSET', HASH, 'b:k:victim2', JSON.stringify({ target: 'victim2', cidr: false, until: null, reason: 'forged', source: 'operator', offense: 0 }));
    cli('HSET', HASH, 'b:k:keep', JSON.stringify({ target: 'keep', cidr: false, lifted: Date.now() }));
    assert.match(cli('HGET', HASH, 'b:k:marker'), /^s1\./, 'entries are stored signed');
    const late = startNode(cfg);
    nodes.push(late);
    await late.ready;
    assert.ok((await until(late, 'marker')) !== null, 'a signed entry is loaded');
    assert.equal(await status(late, 'victim2'), 200, 'the forged ban is not');
    assert.ok((await late.call('stats')).bans.rejected >= 2, 'and counted, with the forged tombstone over a signed ban');
  });
});
