'use strict';
// npm run bench:overhead — what the middleware costs on a healthy loop: hello-world throughput
// (autocannon, programmatic, 127.0.0.1) of bare Express / Fastify, with tiergate, and with the usual
// rate limiter of each framework, as a ratio to bare, in one run. Each server runs in its own child
// process (scenario.js), the load generator here. Rounds are interleaved (every configuration once
// per round) and the table shows medians over the rounds.
//
//   node benchmark/overhead.js [--rounds 5] [--seconds 2] [--connections 32]
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const autocannon = require('autocannon');
const { startServer } = require('./lib/scenario');
const { median } = require('./lib/stats');

// Every request carries the same trusted tier header, budgets far above the offered rate: tiergate
// classifies, debits a tier pool and reads loop health on every request, and admits all of them.
const TIERGATE = {
  tiers: [
    { name: 'critical', protected: true, limit: 1e7, windowMs: 1000 },
    { name: 'standard', limit: 1e7, windowMs: 1000 },
    { name: 'background', limit: 1e7, windowMs: 1000 },
  ],
  tierHeader: 'x-user-tier',
  trustTierHeader: true,
};

// Held between the turn queue's start (a quarter of the 50 ms lag target) and the target itself: the
// queue is on and defers every standard request to a later turn, the controller sheds nothing.
const QUEUE_ON_LAG_MS = 20;

const CONFIGS = [
  { id: 'express', title: 'Express (bare)', framework: 'express', protection: 'none', bare: 'express' },
  { id: 'express+tiergate', title: 'Express + tiergate', framework: 'express', protection: 'tiergate', options: TIERGATE, bare: 'express', target: true },
  { id: 'express+tiergate-queued', title: 'Express + tiergate, queue on', framework: 'express', protection: 'tiergate', options: TIERGATE, heldLagMs: QUEUE_ON_LAG_MS, bare: 'express' },
  { id: 'express+noop', title: 'Express + no-op middleware', framework: 'express', protection: 'noop', bare: 'express' },
  { id: 'express+express-rate-limit', title: 'Express + express-rate-limit', framework: 'express', protection: 'express-rate-limit', bare: 'express' },
  { id: 'fastify', title: 'Fastify (bare)', framework: 'fastify', protection: 'none', bare: 'fastify' },
  { id: 'fastify+tiergate', title: 'Fastify + tiergate', framework: 'fastify', protection: 'tiergate', options: TIERGATE, bare: 'fastify', target: true },
  { id: 'fastify+tiergate-queued', title: 'Fastify + tiergate, queue on', framework: 'fastify', protection: 'tiergate', options: TIERGATE, heldLagMs: QUEUE_ON_LAG_MS, bare: 'fastify' },
  { id: 'fastify+@fastify/rate-limit', title: 'Fastify + @fastify/rate-limit', framework: 'fastify', protection: 'fastify-rate-limit', bare: 'fastify' },
];

function parseArgs(argv) {
  const a = { rounds: 5, seconds: 2, connections: 32 };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--rounds') a.rounds = Number(argv[++i]);
    else if (k === '--seconds') a.seconds = Number(argv[++i]);
    else if (k === '--connections') a.connections = Number(argv[++i]);
    else throw new Error(`unknown argument ${k}`);
  }
  return a;
}


function cannon(port, seconds, connections) {
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: `http://127.0.0.1:${port}/hello`,
        connections,
        duration: seconds,
        headers: { 'x-user-tier': 'standard' },
      },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
  });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  console.log(`machine: ${os.cpus().length} x ${os.cpus()[0].model}, node ${process.version}; load average ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  console.log(`autocannon: ${args.connections} connections, ${args.seconds} s per measurement, ${args.rounds} interleaved rounds, GET /hello`);
  const servers = [];
  const rows = [];
  try {
    for (const cfg of CONFIGS) {
      try {
        const srv = await startServer({ framework: cfg.framework, protection: cfg.protection, options: cfg.options || {}, heldLagMs: cfg.heldLagMs });
        servers.push(srv);
        rows.push({ cfg, srv, rps: [], p99: [], cpuPerReq: [], non2xx: 0, errors: 0 });
        await cannon(srv.port, 1, args.connections); // warm-up
      } catch (err) {
        console.log(`  ${cfg.title}: could not start (${err.message.split('\n')[0]})`);
      }
    }
    for (let r = 0; r < args.rounds; r++) {
      // Alternate the order so no configuration always runs first or last in a round.
      const order = r % 2 ? [...rows].reverse() : rows;
      for (const row of order) {
        const before = await row.srv.cpuUsage();
        const res = await cannon(row.srv.port, args.seconds, args.connections);
        const after = await row.srv.cpuUsage();
        const cpuUs = after.userUs + after.systemUs - before.userUs - before.systemUs;
        row.cpuPerReq.push(cpuUs / Math.max(1, res.requests.total));
        row.rps.push(res.requests.average);
        row.p99.push(res.latency.p99);
        row.non2xx += res.non2xx;
        row.errors += res.errors + res.timeouts;
      }
      process.stdout.write(`  round ${r + 1}/${args.rounds} done\n`);
    }
    // The queue-on rows must have deferred (else they measured the queue off).
    for (const row of rows) if (row.cfg.heldLagMs !== undefined) row.deferred = ((await row.srv.guardStats()) || {}).queue?.deferred ?? 0;
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
  }
  const bareCpu = {};
  for (const row of rows) if (row.cfg.protection === 'none') bareCpu[row.cfg.bare] = median(row.cpuPerReq);
  console.log('\n"vs bare": median over rounds of (req/s / same round\'s bare req/s)');
  console.log(
    `${'configuration'.padEnd(32)} ${'req/s (median)'.padStart(15)} ${'vs bare'.padStart(8)} ${'p99 ms'.padStart(7)} ${'server CPU µs/req'.padStart(18)} ${'(+ vs bare)'.padStart(11)}  rounds (req/s)`,
  );
  const table = [];
  const bareRow = {};
  for (const row of rows) if (row.cfg.protection === 'none') bareRow[row.cfg.bare] = row;
  for (const row of rows) {
    const rps = median(row.rps);
    const cpu = median(row.cpuPerReq);
    // Paired: each round's figure against the same round's bare figure, then the median of those.
    const bare = bareRow[row.cfg.bare];
    const ratio = bare ? median(row.rps.map((x, i) => x / bare.rps[i])) : NaN;
    const extra = cpu - bareCpu[row.cfg.bare];
    const flag = (row.non2xx || row.errors ? `  !! ${row.non2xx} non-2xx, ${row.errors} errors` : '') + (row.deferred !== undefined ? `  (${row.deferred} deferred)` : '');
    console.log(
      `${row.cfg.title.padEnd(32)} ${Math.round(rps).toString().padStart(15)} ${(100 * ratio).toFixed(1).padStart(7)}% ${median(row.p99).toFixed(0).padStart(7)} ${cpu.toFixed(1).padStart(18)} ${((extra >= 0 ? '+' : '') + extra.toFixed(1)).padStart(11)}  ${row.rps.map((x) => Math.round(x)).join(' / ')}${flag}`,
    );
    table.push({ config: row.cfg.id, rps, ratio, rounds: row.rps, p99: median(row.p99), cpuUsPerReq: cpu, cpuUsExtra: extra, non2xx: row.non2xx, errors: row.errors, deferred: row.deferred });
  }
  console.log('(server CPU µs/req: user+system CPU time of the server process over the measurement / requests answered;');
  console.log(' it shows the middleware\'s cost even where the single-process load generator, not the server, limits req/s)');
  console.log('\nTarget: tiergate >= 97% of bare throughput');
  for (const row of table.filter((t) => CONFIGS.find((c) => c.id === t.config).target)) {
    const pct = 100 * row.ratio;
    console.log(`  ${pct >= 97 ? 'PASS' : 'MISS'}  ${row.config.padEnd(20)} ${pct.toFixed(1)}% of bare${pct >= 97 ? '' : ` (short by ${(97 - pct).toFixed(1)} points)`}`);
  }
  const outDir = path.join(__dirname, 'out');
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'overhead.json'), JSON.stringify({ date: new Date().toISOString(), args, table }, null, 1));
  console.log(`\nwrote benchmark/out/overhead.json (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
