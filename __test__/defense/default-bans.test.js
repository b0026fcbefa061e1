'use strict';
// The ban rules are on whenever the abuse defense is, `bans` written or not (docs/defense.md, "The
// ban rules are on by default"): any defense option turns it on, `limits` alone bans after the third
// refusal within a minute for 5 minutes (up to 10% longer: the jitter), a deny list alone bans 20
// probes within a minute for 30; `bans: { rules: false }` is how to turn the rules off, `bans: false`
// is refused.
const test = require('node:test');
const assert = require('node:assert/strict');
const { gatekeeper } = require('../..');
const { FRAMEWORKS } = require('./apps');
const { request } = require('../helpers/http');

const MIN = 60_000;
const start = FRAMEWORKS['node:http'];
const ONE_PER_MINUTE = [{ name: 'one', algorithm: 'sliding-window', limit: 1, windowMs: MIN }];

test('limits alone: the third refusal within a minute bans the client for 5 to 5.5 minutes', async () => {
  const app = await start({ shed: false, trustProxy: true, limits: ONE_PER_MINUTE });
  try {
    const from = (path = '/hello') => request(app.port, { path, headers: { 'x-forwarded-for': '198.51.100.7' } });
    const t0 = Date.now();
    assert.equal((await from()).status, 200);
    assert.equal((await from()).status, 429);
    assert.equal((await from()).status, 429);
    assert.equal(app.defense.bans.get('198.51.100.7'), null, 'two refusals: not yet');
    assert.equal((await from()).status, 429);
    assert.equal((await from()).status, 403, 'the third refusal banned');
    const ban = app.defense.bans.get('198.51.100.7');
    assert.equal(ban.reason, 'rate-limit');
    assert.equal(ban.source, 'rule');
    const left = ban.until - t0;
    assert.ok(left >= 5 * MIN && left <= 5.5 * MIN + 5000, `ban for ${left} ms`);
  } finally {
    await app.stop();
  }
});

test('a deny list alone: 20 probe statuses within a minute ban the client for 30 to 33 minutes', async () => {
  const app = await start({ shed: false, trustProxy: true, deny: ['192.0.2.0/24'] });
  try {
    const from = (path) => request(app.port, { path, headers: { 'x-forwarded-for': '198.51.100.8' } });
    const t0 = Date.now();
    for (let i = 0; i < 19; i++) assert.equal((await from(`/nope/${i}`)).status, 404);
    assert.equal(app.defense.bans.get('198.51.100.8'), null, '19 probes: not yet');
    assert.equal((await from('/nope/19')).status, 404);
    assert.equal((await from('/hello')).status, 403, 'the 20th probe banned');
    const ban = app.defense.bans.get('198.51.100.8');
    assert.equal(ban.reason, 'probe');
    const left = ban.until - t0;
    assert.ok(left >= 30 * MIN && left <= 33 * MIN + 5000, `ban for ${left} ms`);
  } finally {
    await app.stop();
  }
});

test('bans: { rules: false } turns the rules off; the ban table and its API stay', async () => {
  const limits = [{ ...ONE_PER_MINUTE[0], routes: ['/hello'] }]; // the probes below are not limited: 404s
  const app = await start({ shed: false, trustProxy: true, limits, bans: { rules: false } });
  try {
    const from = (ip, path = '/hello') => request(app.port, { path, headers: { 'x-forwarded-for': ip } });
    assert.equal((await from('198.51.100.9')).status, 200);
    for (let i = 0; i < 6; i++) assert.equal((await from('198.51.100.9')).status, 429, 'refused, never banned');
    for (let i = 0; i < 25; i++) assert.equal((await from('198.51.100.9', `/nope/${i}`)).status, 404, 'a probe, never banned');
    assert.equal(app.defense.bans.list().length, 0);
    app.defense.bans.ban('198.51.100.9', { durationMs: MIN, reason: 'operator' });
    assert.equal((await from('198.51.100.9')).status, 403, "an operator's ban still holds");
  } finally {
    await app.stop();
  }
});

test('bans: false is refused (use bans: { rules: false }); fairShare: false alone turns no defense on', () => {
  assert.throws(() => gatekeeper({ shed: false, bans: false }), (e) => e instanceof TypeError && e.code === 'ERR_TIERGATE_INVALID_OPTION' && /options\.bans must be an object, got boolean/.test(e.message));
  assert.equal(gatekeeper({ shed: false, fairShare: false }).defense, null);
  assert.notEqual(gatekeeper({ shed: false, allow: ['10.0.0.0/8'] }).defense, null, 'an allow list alone turns the defense (and its rules) on');
});

test("a challenged client's requests to unknown routes are challenged, not probes: no probe ban", async () => {
  const limits = [{ ...ONE_PER_MINUTE[0], routes: ['/hello'] }];
  const app = await start({ shed: false, trustProxy: true, limits, challenge: { secret: 'a-secret-of-32-bytes-for-the-test' } });
  try {
    const from = (path = '/hello') => request(app.port, { path, headers: { 'x-forwarded-for': '198.51.100.11' } });
    assert.equal((await from()).status, 200);
    assert.equal((await from()).status, 429);
    assert.equal((await from()).status, 429, 'two strikes: challenged from now on');
    for (let i = 0; i < 25; i++) {
      const r = await from(`/nope/${i}`);
      assert.equal(r.status, 403);
      assert.equal(r.json.type, 'urn:tiergate:problem:challenge');
    }
    assert.equal(app.defense.bans.get('198.51.100.11'), null, 'past the probe rule\'s 20, still not banned');
  } finally {
    await app.stop();
  }
});
