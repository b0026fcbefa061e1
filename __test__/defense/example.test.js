'use strict';
// examples/defense.js runs: limited, challenged, the page solved, the pass cookie honoured, served.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { run } = require('../../examples/defense');
const { close } = require('../helpers/http');

function send(port, { method = 'GET', path = '/', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

test('examples/defense.js: refused, challenged, solved, served', async () => {
  const { server, port, gate } = await run({ port: 0, windowMs: 1500, quiet: true });
  try {
    for (let i = 0; i < 5; i++) assert.equal((await send(port)).status, 200);
    assert.equal((await send(port)).status, 429);
    assert.equal((await send(port)).status, 429);
    const c = await send(port, { path: '/?x=1' });
    assert.equal(c.status, 303);
    assert.equal(c.headers.location, '/challenge?back=%2F%3Fx%3D1');
    const page = await send(port, { path: c.headers.location });
    assert.equal(page.status, 200);
    const [, a, b] = /(\d+) \+ (\d+) =/.exec(page.body);
    const seal = /name="seal" value="([^"]+)"/.exec(page.body)[1];
    const form = (answer) => new URLSearchParams({ answer: String(answer), seal, back: '/?x=1' }).toString();
    const post = (answer) => send(port, { method: 'POST', path: '/challenge', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form(answer) });
    const wrong = await post(Number(a) + Number(b) + 1);
    assert.equal(wrong.status, 200);
    assert.match(wrong.body, /not right/);
    const ok = await post(Number(a) + Number(b));
    assert.equal(ok.status, 303);
    assert.equal(ok.headers.location, '/?x=1');
    const cookie = ok.headers['set-cookie'][0].split(';')[0];
    assert.match(cookie, /^tiergate_pass=p1\./);
    // Served once the 1.5 s window has room; never challenged again meanwhile.
    const deadline = Date.now() + 5000;
    let r;
    do {
      r = await send(port, { headers: { cookie } });
      assert.notEqual(r.status, 303);
      if (r.status !== 200) await new Promise((res) => setTimeout(res, 50));
    } while (r.status !== 200 && Date.now() < deadline);
    assert.equal(r.status, 200);
    assert.match(r.body, /^Hello! \d of 5 left/);
    assert.equal(gate.defense.bans.list().length, 0);
  } finally {
    await close(server);
  }
});
