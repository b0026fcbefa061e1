'use strict';
// The challenge step-up before a prefix ban: refusals by a /24 limit strike the /24 (and a rule then
// bans it as a CIDR); with a challenge, those strikes count for it too, so the /24's clients are
// challenged before the ban, and a client with a valid pass goes on without striking the /24.
const test = require('node:test');
const assert = require('node:assert/strict');
const { FRAMEWORKS } = require('./apps');
const { request } = require('../helpers/http');

const SECRET = 'a-test-secret-of-32-bytes-long!!';

test('a /24 whose limit refuses is challenged before the rate-limit rule bans it; a pass goes on', async () => {
  const app = await FRAMEWORKS['node:http']({
    shed: false,
    trustProxy: true,
    // Exact sliding window: 1.5 s is far longer than the sequence before the challenge takes.
    limits: [{ name: 'per-subnet', by: { prefix: { v4: 24, v6: 48 } }, algorithm: 'sliding-window', limit: 4, windowMs: 1500 }],
    challenge: { secret: SECRET, afterStrikes: 2, respond: () => ({ status: 401, body: 'solve me' }) },
  });
  try {
    const get = (ip, headers = {}) => request(app.port, { path: '/hello', headers: { 'x-forwarded-for': ip, ...headers } });
    const statuses = [];
    for (let host = 1; host <= 10; host++) statuses.push((await get(`203.0.113.${host}`)).status);
    // Four served, two refused (two strikes on the /24), then every address of it is challenged.
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429, 401, 401, 401, 401]);
    assert.deepEqual(app.defense.bans.list(), [], 'challenged, not banned');
    // A client of the /24 that solved the challenge: never challenged, never banned, served once the
    // window has room; its refusals meanwhile strike nothing.
    const pass = app.defense.mintPass('203.0.113.50', { ttlSec: 600 });
    const deadline = Date.now() + 5000;
    let r;
    do {
      r = await get('203.0.113.50', { 'x-tiergate-pass': pass });
      assert.ok(r.status === 200 || r.status === 429, `with a pass: ${r.status}`);
      if (r.status !== 200) await new Promise((res) => setTimeout(res, 50));
    } while (r.status !== 200 && Date.now() < deadline);
    assert.equal(r.status, 200);
    assert.deepEqual(app.defense.bans.list(), []);
    // The others are still challenged; another /24 is served.
    assert.equal((await get('203.0.113.9')).status, 401);
    assert.equal((await get('198.51.100.1')).status, 200);
  } finally {
    await app.stop();
  }
});
