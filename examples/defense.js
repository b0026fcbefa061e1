'use strict';
// node examples/defense.js — the abuse-defense layers on a node:http server, with a self-contained
// challenge page (no third-party service). Open http://127.0.0.1:3000/ and reload quickly: after 5
// requests in 10 s the limit answers 429; two refusals later you are asked to solve the challenge; a
// right answer sets a pass cookie (bound to your address, signed, 10 minutes) and you are served
// again once the limit has room. Requests for missing pages count as probes (20 in a minute: banned
// for 30 minutes). `run({ port, windowMs })` starts it (port 0: any) and returns { server, port, gate }.
const crypto = require('node:crypto');
const http = require('node:http');
const { gatekeeper } = require('..');

const SECRET = process.env.PASS_SECRET || crypto.randomBytes(32).toString('hex');

/** The challenge: a sum to solve, its answer sealed (HMAC) in the form, valid for 2 minutes. */
function question() {
  const a = crypto.randomInt(2, 20);
  const b = crypto.randomInt(2, 20);
  const expires = Date.now() + 120_000;
  return { text: `${a} + ${b}`, seal: `${expires}.${seal(`${a + b}.${expires}`)}` };
}

function seal(msg) {
  return crypto.createHmac('sha256', SECRET).update(`challenge\0${msg}`).digest('base64url');
}

function solved(answer, sealed) {
  const [expires, mac] = String(sealed).split('.');
  if (!(Number(expires) > Date.now()) || typeof mac !== 'string') return false;
  const want = Buffer.from(seal(`${Number(answer)}.${expires}`));
  const got = Buffer.from(mac);
  return want.length === got.length && crypto.timingSafeEqual(want, got);
}

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function challengePage(back, wrong) {
  const q = question();
  return `<!doctype html><meta charset="utf-8"><title>One moment</title>
<body style="font:16px system-ui;max-width:30em;margin:4em auto">
<h1>Are you a person?</h1>
<p>We saw a burst of requests from your address. Solve this to continue.</p>
${wrong ? '<p style="color:#b00">That was not right; here is another one.</p>' : ''}
<form method="post" action="/challenge">
  <label>${esc(q.text)} = <input name="answer" inputmode="numeric" autofocus required></label>
  <input type="hidden" name="seal" value="${esc(q.seal)}">
  <input type="hidden" name="back" value="${esc(back)}">
  <button>Continue</button>
</form></body>`;
}

function run({ port = 3000, host = '127.0.0.1', windowMs = 10_000, quiet = false } = {}) {
  const app = gatekeeper.http({
    shed: false,
    limits: [{ name: 'per-ip', algorithm: 'sliding-window', limit: 5, windowMs }],
    challenge: {
      secret: SECRET,
      afterStrikes: 2,
      ttlSec: 600,
      respond: (info, req) => ({ status: 303, headers: { location: `/challenge?back=${encodeURIComponent(req.url)}` } }),
    },
    onBan: (e) => quiet || console.log(`ban ${e.kind}: ${e.ban.target} (${e.ban.reason}) until ${e.ban.until === null ? 'lifted' : new Date(e.ban.until).toISOString()}`),
  }, (req, res) => {
    if (req.url === '/' || req.url.startsWith('/?')) {
      const rl = req.rateLimit;
      res.setHeader('content-type', 'text/plain');
      return res.end(`Hello! ${rl ? `${rl.remaining} of ${rl.limit} left in this window.` : ''}\n`);
    }
    res.statusCode = 404;
    res.end('not found\n');
  });

  // The challenge itself is served before the gatekeeper: a challenged client must reach it.
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname !== '/challenge') return app(req, res);
    const back = url.searchParams.get('back') || '/';
    const safeBack = back.startsWith('/') && !back.startsWith('//') ? back : '/';
    if (req.method === 'GET') {
      res.setHeader('content-type', 'text/html; charset=utf-8');
      return res.end(challengePage(safeBack, false));
    }
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => {
      body += c;
      if (body.length > 4096) req.destroy();
    });
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const to = form.get('back') || '/';
      const dest = to.startsWith('/') && !to.startsWith('//') ? to : '/';
      if (!solved(form.get('answer'), form.get('seal'))) {
        res.setHeader('content-type', 'text/html; charset=utf-8');
        return res.end(challengePage(dest, true));
      }
      const { cookie, ttlSec } = app.defense.challenge;
      const pass = app.defense.mintPass(req);
      res.writeHead(303, { location: dest, 'set-cookie': `${cookie}=${pass}; Max-Age=${ttlSec}; Path=/; HttpOnly; SameSite=Lax` });
      res.end();
    });
  });
  return new Promise((resolve) => {
    server.listen(port, host, () => resolve({ server, port: server.address().port, gate: app }));
  });
}

if (require.main === module) {
  run().then(({ port }) => console.log(`tiergate defense example on http://127.0.0.1:${port}/ (reload quickly to be limited, then challenged)`));
}

module.exports = { run, question, solved };
