'use strict';
// bench:defense's harness (benchmark/lib): the crawler schedule says who sends what, the player
// accounts per class against a real server, the in-process chain harness tells admitted from
// refused for synchronous and asynchronous middleware, and the policy check catches a composition
// that enforces nothing while the peers' compositions pass it. Loads are small and bounded.
const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const net = require('node:net');
const { crawlSchedule, CLASSES, LEGIT, ROTATING, SUBNET, SUBNET_PREFIX } = require('../../benchmark/lib/crawl-traffic');
const { playSchedule, classWindow } = require('../../benchmark/lib/crawl-load');
const { requestPool, timeChain, send } = require('../../benchmark/lib/chain-harness');
const { checkComposition } = require('../../benchmark/lib/defense-check');
const { COMPOSITIONS } = require('../../benchmark/lib/defense-compositions');
const { POLICY, clients } = require('../../benchmark/lib/defense-policy');
const { cpuShare } = require('../../benchmark/lib/proc-cpu');

const slash24 = (ip) => ip.split('.').slice(0, 3).join('.');

test('crawlSchedule: seeded, time-ordered, at the rates asked, with the addresses each class is said to use', () => {
  const opts = { durationMs: 10_000, crawlStartMs: 4000, users: 200, userRate: 0.5, crawlIps: 50, crawlRate: 300, subnetRate: 60 };
  const ev = crawlSchedule(opts);
  assert.deepEqual(crawlSchedule(opts), ev);
  for (let i = 1; i < ev.length; i++) assert.ok(ev[i].t >= ev[i - 1].t);
  const of = (cls) => ev.filter((e) => e.cls === cls);
  // Legitimate: Poisson, 200 x 0.5 x 10 = 1000 expected (sd ~32); from the start.
  assert.ok(Math.abs(of(LEGIT).length - 1000) < 150, `legitimate ${of(LEGIT).length}`);
  assert.ok(of(LEGIT)[0].t < 1000);
  // Crawlers: uniform from the crawl start, exactly rate x 6 s.
  assert.equal(of(ROTATING).length, 1800);
  assert.equal(of(SUBNET).length, 360);
  assert.ok(of(ROTATING).every((e) => e.t >= 4000) && of(SUBNET).every((e) => e.t >= 4000));
  // Each legitimate user and each rotating address in a /24 of its own, apart from each other.
  const legit24 = new Set(of(LEGIT).map((e) => slash24(e.ip)));
  const rot24 = new Set(of(ROTATING).map((e) => slash24(e.ip)));
  assert.equal(new Set(of(LEGIT).map((e) => e.ip)).size, legit24.size);
  assert.equal(new Set(of(ROTATING).map((e) => e.ip)).size, 50);
  assert.equal(rot24.size, 50);
  for (const s of rot24) assert.ok(!legit24.has(s));
  // The /24 crawler: all of one /24, every address of it in turn.
  assert.ok(of(SUBNET).every((e) => slash24(e.ip) === SUBNET_PREFIX));
  assert.equal(new Set(of(SUBNET).map((e) => e.ip)).size, 254);
  assert.ok(ev.every((e) => net.isIPv4(e.ip) && e.path.startsWith('/api/items')));
  // No crawler, no crawler requests.
  assert.equal(crawlSchedule({ ...opts, crawlRate: 0, subnetRate: 0 }).filter((e) => e.cls !== LEGIT).length, 0);
});

test('playSchedule sends each request with its address in X-Forwarded-For and accounts per class', async (t) => {
  const seen = [];
  const server = http.createServer((req, res) => {
    const ip = req.headers['x-forwarded-for'];
    seen.push(ip);
    // The /24 crawler is refused, the rest served after 20 ms.
    if (ip.startsWith(`${SUBNET_PREFIX}.`)) {
      res.writeHead(429);
      res.end();
    } else setTimeout(() => res.end('ok'), 20);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  const events = crawlSchedule({ durationMs: 600, crawlStartMs: 200, users: 40, userRate: 2, crawlIps: 10, crawlRate: 100, subnetRate: 50 });
  // A generous timeout: on a busy machine a late answer must not read as a refusal.
  const r = await playSchedule({ port: server.address().port, events, classes: CLASSES, timeoutMs: 10_000, bucketMs: 100 });
  assert.equal(seen.length, events.length);
  assert.deepEqual([...seen].sort(), events.map((e) => e.ip).sort());
  for (const cls of [LEGIT, ROTATING]) {
    assert.equal(r.classes[cls].sent, events.filter((e) => e.cls === cls).length);
    assert.equal(r.classes[cls].ok, r.classes[cls].sent);
    assert.ok(r.classes[cls].okLatency.every((ms) => ms >= 15), 'latency from the send');
  }
  assert.equal(r.classes[SUBNET].ok, 0);
  assert.deepEqual(r.classes[SUBNET].statuses, { 429: events.filter((e) => e.cls === SUBNET).length });
  const okInTimeline = r.timeline.reduce((n, row) => n + (row.goodput[CLASSES[ROTATING]] * r.bucketMs) / 1000, 0);
  assert.equal(Math.round(okInTimeline), r.classes[ROTATING].ok);
  const w = classWindow(events, ROTATING, r, 200, 400);
  assert.equal(w.sent, 20);
  assert.equal(w.ok, 20);
  assert.equal(w.servedPct, 100);
});

test('timeChain and send tell admitted from refused, for synchronous and asynchronous middleware', async () => {
  const pool = requestPool(clients({ ips: 64, users: 8 }));
  const refuseOdd = (req, res, next) => {
    if (Number(req.headers['x-user-id'].slice(1)) % 2) {
      res.writeHead(429);
      res.end();
    } else next();
  };
  const later = (req, res, next) => setImmediate(next);
  assert.deepEqual(await timeChain([], pool, 100).then((r) => [r.admitted, r.refused]), [100, 0]);
  assert.deepEqual(await timeChain([refuseOdd], pool, 100).then((r) => [r.admitted, r.refused]), [50, 50]);
  assert.deepEqual(await timeChain([later, refuseOdd, later], pool, 100).then((r) => [r.admitted, r.refused]), [50, 50]);
  const r = await send([later, refuseOdd], pool[1]);
  assert.equal(r.admitted, false);
  assert.equal(r.status, 429);
  await assert.rejects(send([(req, res, next) => next(new Error('boom'))], pool[0]), /boom/);
});

test('the policy check fails a composition that enforces nothing and passes the peers\' compositions', async () => {
  const nothing = () => [(req, res, next) => next()];
  const failed = await checkComposition(nothing);
  assert.ok(failed.some((f) => f.startsWith('deny-listed address')), failed.join('; '));
  assert.ok(failed.some((f) => f.startsWith('address A after the window')), failed.join('; '));
  for (const id of ['erl', 'rlf']) assert.deepEqual(await checkComposition(COMPOSITIONS.find((c) => c.id === id).build), [], id);
});

test('the cost policy refuses none of the measurement\'s clients by its deny list', () => {
  const list = new net.BlockList();
  for (const c of POLICY.deny) {
    const [a, bits] = c.split('/');
    list.addSubnet(a, Number(bits), net.isIPv6(a) ? 'ipv6' : 'ipv4');
  }
  const { addrs } = clients();
  assert.ok(addrs.some((a) => net.isIPv6(a)) && addrs.some((a) => net.isIPv4(a)));
  assert.equal(addrs.filter((a) => list.check(a, net.isIPv6(a) ? 'ipv6' : 'ipv4')).length, 0);
  assert.ok(list.check('240.2.7.7', 'ipv4'), 'the check\'s deny-listed address is in the list');
});

test('cpuShare interpolates CPU seconds between samples', () => {
  const s = [{ t: 0, cpu: 0 }, { t: 1000, cpu: 0.5 }, { t: 2000, cpu: 1.5 }];
  assert.equal(cpuShare(s, 0, 1000), 0.5);
  assert.equal(cpuShare(s, 1000, 2000), 1);
  assert.equal(cpuShare(s, 500, 1500), 0.75);
  assert.equal(cpuShare([], 0, 1), null);
});

test('the crawler incident\'s variants: the bounds tell the schedule\'s crawlers from its users, and every configuration is one the gatekeeper accepts', () => {
  const { gatekeeper } = require('../..');
  const { DEFAULTS, VARIANTS, configurations } = require('../../benchmark/lib/crawl-scenario');
  const configs = configurations(700, { ...DEFAULTS, variants: VARIANTS });
  const ids = configs.map((c) => c.id);
  assert.deepEqual(ids, ['baseline', 'before', 'after', 'fair', 'after-burst', 'fair-burst', 'fair-shed', 'oracle-first', 'oracle-deny']);
  for (const c of configs) gatekeeper(c.options); // throws on an option it does not take
  const list = (cidrs) => {
    const b = new net.BlockList();
    for (const c of cidrs) {
      const [addr, bits] = c.split('/');
      b.addSubnet(addr, Number(bits), 'ipv4');
    }
    return b;
  };
  const byId = Object.fromEntries(configs.map((c) => [c.id, c.options]));
  const deny = list(byId['oracle-deny'].deny);
  const allow = list(byId['oracle-first'].allow);
  const ev = crawlSchedule({ durationMs: 4000, crawlStartMs: 1000, users: 300, userRate: 1, crawlIps: 100, crawlRate: 500, subnetRate: 100 });
  for (const e of ev) {
    const user = e.cls === LEGIT;
    assert.equal(deny.check(e.ip, 'ipv4'), !user, e.ip);
    assert.equal(allow.check(e.ip, 'ipv4'), user, e.ip);
  }
  // The burst variants add the per-second limit to the limited configurations and change nothing else.
  for (const [v, base] of [['after-burst', 'after'], ['fair-burst', 'fair']]) {
    const extra = byId[v].limits.filter((l) => !byId[base].limits.some((b) => b.name === l.name));
    assert.deepEqual(extra, [{ name: 'per-ip-burst', by: 'ip', algorithm: 'sliding-window', limit: DEFAULTS.burstLimit, windowMs: 1000 }]);
    assert.deepEqual({ ...byId[v], limits: null }, { ...byId[base], limits: null });
  }
});

test('crawl-bound\'s address policy: limits per address and per /24 in arrival order, strikes and bans, exempt users', () => {
  const { addressPolicy } = require('../../benchmark/crawl-bound');
  const crawler = (ip) => ({ cls: ROTATING, ip });
  // 3 per second per address; 3 refusals ban the address.
  const p = addressPolicy({ limits: [{ n: 3, windowMs: 1000 }] });
  const seq = [0, 100, 200, 300, 400, 500].map((t) => p(crawler('45.0.0.9'), t));
  assert.deepEqual(seq, [true, true, true, false, false, false]);
  assert.equal(p(crawler('45.0.0.9'), 5000), false, 'banned after 3 refusals, whatever the window');
  assert.equal(p(crawler('45.0.1.9'), 5000), true, 'another address is not');
  // A /24 limit's refusals strike and ban the /24.
  const q = addressPolicy({ limits: [{ n: 2, windowMs: 1000, subnet: true }], banAfter: 1 });
  assert.deepEqual([1, 2, 3].map((i) => q(crawler(`${SUBNET_PREFIX}.${i}`), i)), [true, true, false]);
  assert.equal(q(crawler(`${SUBNET_PREFIX}.77`), 9000), false);
  // The bound that serves each crawler address once: users always pass.
  const o = addressPolicy({ limits: [{ n: 1, windowMs: 60_000 }], banAfter: 1, usersExempt: true });
  assert.deepEqual([o(crawler('45.0.0.1'), 0), o(crawler('45.0.0.1'), 1), o(crawler('45.0.0.2'), 2)], [true, false, true]);
  for (let t = 0; t < 10; t++) assert.equal(o({ cls: LEGIT, ip: '81.0.0.17' }, t), true);
});
