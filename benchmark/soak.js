'use strict';
// npm run soak — a long run of mixed, hostile load against Express with the gatekeeper in front of the
// concurrency gate (benchmark/lib/soak-server.js, a child process: its memory is measured alone), from
// the load generator here (benchmark/lib/soak-load.js: keep-alive clients across tiers, surges,
// disconnects, pipelining with resets, slowloris, slow uploads and readers, a key flood, malformed
// requests). Not part of npm test: it takes minutes, and its verdict is about memory and leaks.
//
//   node benchmark/soak.js [--duration 10m] [--sample 5s] [--rss-bound-mb 16] [--flood-rate 3500]
//                          [--max-concurrent 24] [--seed 1] [--drain-timeout 30s] [--no-out]
//                          [--clients kind=n,...]   (kinds and defaults: CLIENTS below)
//
// The server is sampled every few seconds. At the end the load stops, every client connection is cut,
// and the server must drain. The exit code is 1 when: the gate's inFlight or queued is not back to 0, a
// server connection stays open, RSS grew more than --rss-bound-mb over the second half of the run
// (least-squares fit), the server reported any warning, uncaught exception, unhandled rejection or
// unexpected handler error, the generator hit an error of its own, or the server did not exit by
// itself once closed. Writes benchmark/out/soak.{json,svg}.
const { fork } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const { performance } = require('node:perf_hooks');
const { createLoad } = require('./lib/soak-load');
const { memoryTrend, table, outcomeTable, timelineSvg, mb, MB } = require('./lib/soak-report');

// ---- arguments ----
function parseDuration(name, v) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(String(v));
  if (!m) throw new RangeError(`--${name} must be a duration like 90, 60s, 10m or 500ms, got ${JSON.stringify(v)}`);
  const n = Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] || 's'];
  if (!(n > 0) || !Number.isFinite(n)) throw new RangeError(`--${name} must be positive, got ${v}`);
  return n;
}
function parsePositive(name, v) {
  const n = Number(v);
  if (!(n > 0) || !Number.isFinite(n)) throw new RangeError(`--${name} must be a positive number, got ${JSON.stringify(v)}`);
  return n;
}
/** The default client counts per kind of load, or overrides given as 'kind=n,kind=n'. */
const CLIENTS = Object.freeze({ normal: 6, surge: 24, disconnect: 3, pipeline: 2, slowloris: 12, slowbody: 2, slowread: 2, flood: 8, malformed: 1 });
function parseClients(v) {
  const out = { ...CLIENTS };
  for (const part of String(v).split(',')) {
    const m = /^([a-z]+)=(\d+)$/.exec(part.trim());
    if (!m || !(m[1] in CLIENTS)) throw new RangeError(`--clients takes kind=n,... with kinds ${Object.keys(CLIENTS).join(', ')}, got ${JSON.stringify(part)}`);
    out[m[1]] = Number(m[2]);
  }
  return out;
}
// RSS bound: the server sits at ~130 MB here and the V8 heap's sawtooth moves RSS by ~10 MB between
// samples; a leak of even 100 bytes per request (~3,000 requests/s) would add ~90 MB in five minutes.
function parseArgs(argv) {
  const o = { durationMs: 600_000, sampleMs: undefined, rssBoundMb: 16, floodRate: 3500, maxConcurrent: 24, seed: 1, drainTimeoutMs: 30_000, out: true, clients: { ...CLIENTS } };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new RangeError(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--duration') o.durationMs = parseDuration('duration', val());
    else if (a === '--sample') o.sampleMs = parseDuration('sample', val());
    else if (a === '--rss-bound-mb') o.rssBoundMb = parsePositive('rss-bound-mb', val());
    else if (a === '--flood-rate') o.floodRate = parsePositive('flood-rate', val());
    else if (a === '--max-concurrent') o.maxConcurrent = Math.round(parsePositive('max-concurrent', val()));
    else if (a === '--seed') o.seed = Math.round(parsePositive('seed', val()));
    else if (a === '--drain-timeout') o.drainTimeoutMs = parseDuration('drain-timeout', val());
    else if (a === '--clients') o.clients = parseClients(val());
    else if (a === '--no-out') o.out = false;
    else throw new RangeError(`unknown argument ${a}`);
  }
  if (o.sampleMs === undefined) o.sampleMs = o.durationMs <= 120_000 ? 2000 : 5000;
  return o;
}

// ---- the generator's own health: it must not be the thing that fails ----
const ownErrors = [];
process.on('warning', (w) => ownErrors.push(`warning: ${w.name}: ${w.message}`));
process.on('uncaughtException', (err) => ownErrors.push(`uncaught: ${err && err.stack}`));
process.on('unhandledRejection', (err) => ownErrors.push(`unhandled rejection: ${err && err.stack}`));

// ---- the server child and its IPC ----
function startServer(config) {
  const child = fork(path.join(__dirname, 'lib', 'soak-server.js'), [], {
    execArgv: ['--expose-gc'], // only for the one measurement after the drain
    env: { ...process.env, TG_SOAK_SERVER: JSON.stringify(config) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let seq = 0;
  const pending = new Map();
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  child.on('message', (msg) => {
    const p = msg && pending.get(msg.id);
    if (p) {
      pending.delete(msg.id);
      p(msg.result);
    }
  });
  const ready = new Promise((resolve, reject) => {
    child.once('message', (msg) => (msg && msg.ready ? resolve(msg) : reject(new Error('server sent no ready message'))));
    child.once('exit', (code) => reject(new Error(`server exited before it was ready (code ${code})`)));
  });
  /** A command's reply, or null when none came within timeoutMs. */
  function ask(cmd, extra = {}, timeoutMs = 10_000) {
    if (!child.connected) return Promise.resolve(null);
    const id = ++seq;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        resolve(null);
      }, timeoutMs);
      pending.set(id, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
      child.send({ id, cmd, ...extra });
    });
  }
  return { child, ready, ask, exited };
}

const meanCpu = (rows) => rows.slice(1).reduce((a, s) => a + s.cpu, 0) / Math.max(1, rows.length - 1);

function statusesDelta(now, before) {
  const d = {};
  for (const [k, v] of Object.entries(now)) d[k] = v - ((before && before[k]) || 0);
  return d;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const durationS = opts.durationMs / 1000;
  const surgePeriodMs = Math.min(60_000, Math.max(20_000, opts.durationMs / 4));
  const surge = { periodMs: surgePeriodMs, lengthMs: Math.round(surgePeriodMs / 4) };
  const clients = opts.clients;
  const cpus = os.cpus();
  console.log(`soak: ${durationS} s of mixed load, sample every ${opts.sampleMs / 1000} s, seed ${opts.seed}; node ${process.version}, ${cpus.length} CPUs (${cpus[0] ? cpus[0].model.trim() : '?'}), ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`);
  console.log(`clients: ${Object.entries(clients).map(([k, v]) => `${k} ${v}`).join(', ')}; key flood ${opts.floodRate} req/s; surges of ${surge.lengthMs / 1000} s every ${surge.periodMs / 1000} s`);

  const server = startServer({ maxConcurrent: opts.maxConcurrent });
  const info = await server.ready;
  let serverExit = null;
  server.exited.then((e) => (serverExit = e));

  const load = createLoad({ port: info.port, durationMs: opts.durationMs, seed: opts.seed, floodRate: opts.floodRate, surge, clients });
  const samples = [];
  const t0 = performance.now();
  const tNow = () => (performance.now() - t0) / 1000;
  let missedSamples = 0;
  let prevStatuses = null;
  let prevCpuUs = null;
  let prevT = 0;

  async function takeSample(phase, extra) {
    const s = await server.ask('sample', extra);
    const t = tNow();
    if (s === null) {
      missedSamples++;
      return null;
    }
    const d = statusesDelta(s.statuses, prevStatuses);
    const dt = Math.max(1e-3, t - prevT);
    const cpuUs = s.cpu.user + s.cpu.system;
    const cpu = prevCpuUs === null ? 0 : (cpuUs - prevCpuUs) / 1e6 / dt; // cores busy since the last sample
    prevStatuses = s.statuses;
    prevCpuUs = cpuUs;
    prevT = t;
    const row = {
      t, phase, surge: phase === 'load' && load.inSurge(),
      rss: s.rss, heapUsed: s.heapUsed, heapTotal: s.heapTotal, external: s.external, arrayBuffers: s.arrayBuffers,
      connections: s.connections, resources: s.resources,
      inFlight: s.gate.inFlight, queued: s.gate.queued,
      cpu, lagMs: s.gatekeeper.lagMs, pressure: s.gatekeeper.pressure,
      apiKeys: s.gatekeeper.keys.api, partnerKeys: s.gatekeeper.keys.partner,
      rate: { '2xx': sumMatching(d, (k) => k >= 200 && k < 300) / dt, 429: (d[429] || 0) / dt, 503: (d[503] || 0) / dt, 408: (d[408] || 0) / dt },
      clientSockets: load.openSockets, keysSent: load.keysSent,
    };
    samples.push(row);
    return { row, raw: s };
  }
  const sumMatching = (d, pred) => Object.entries(d).reduce((a, [k, v]) => a + (pred(Number(k)) ? v : 0), 0);

  // Start from a calm server: the work calibration and startup leave a lag reading that the shed
  // controller holds on to for a moment.
  for (let i = 0; i < 40; i++) {
    const s = await server.ask('sample');
    if (s && s.gatekeeper.pressure === 0 && s.gatekeeper.lagMs < 5) break;
    await sleep(250);
  }
  const first = await takeSample('start');
  const genCpu0 = process.cpuUsage();
  const startRaw = first.raw;

  // ---- the load, sampled meanwhile ----
  let loadDone = false;
  const running = load.run().then(() => (loadDone = true));
  const printEvery = Math.max(1, Math.round(Math.max(10_000, opts.durationMs / 20) / opts.sampleMs));
  let n = 0;
  while (!loadDone && tNow() < durationS) {
    await Promise.race([sleep(Math.min(opts.sampleMs, Math.max(1, (durationS - tNow()) * 1000))), running]);
    if (tNow() > durationS + 0.5) break;
    const got = await takeSample('load');
    if (got && ++n % printEvery === 0) {
      const r = got.row;
      console.log(`  t=${r.t.toFixed(0).padStart(4)}s rss ${mb(r.rss)} MB heap ${mb(r.heapUsed)} MB cpu ${(100 * r.cpu).toFixed(0)}%  inFlight ${r.inFlight} queued ${r.queued}  conns ${r.connections}  keys ${r.partnerKeys}+${r.apiKeys}  lag ${r.lagMs.toFixed(1)} ms  2xx ${r.rate['2xx'].toFixed(0)}/s 429 ${r.rate[429].toFixed(0)}/s 503 ${r.rate[503].toFixed(0)}/s 408 ${r.rate[408].toFixed(1)}/s${r.surge ? '  (surge)' : ''}`);
    }
  }
  // The deadline passed: loops end after their current operation; those still running after a short
  // grace are cut (clients vanishing is part of the test).
  await Promise.race([running, sleep(3000)]);
  load.stopAll();
  await running;
  const loadEndT = tNow();
  const genCpu = process.cpuUsage(genCpu0);
  const genCpuShare = (genCpu.user + genCpu.system) / 1e6 / loadEndT; // cores the generator kept busy

  // ---- drain: the gate's slots and queue, and every server connection, must come back to zero ----
  let drained = null;
  const drainStart = performance.now();
  while (performance.now() - drainStart < opts.drainTimeoutMs) {
    const got = await takeSample('drain');
    if (got && got.row.inFlight === 0 && got.row.queued === 0 && got.row.connections === 0) {
      drained = got;
      break;
    }
    await sleep(250);
  }
  const drainMs = performance.now() - drainStart;
  const last = drained || (await takeSample('drain'));
  const after = await server.ask('sample', { gc: true }); // the one forced GC: what is really retained
  const end = last ? last.raw : null;

  // ---- the server must close and exit by itself ----
  const closed = await server.ask('close', {}, 15_000);
  const exit = await Promise.race([server.exited, sleep(10_000).then(() => null)]);
  if (exit === null) server.child.kill('SIGKILL');

  // ---- figures ----
  const loadSamples = samples.filter((s) => s.phase === 'start' || s.phase === 'load');
  const trend = memoryTrend(loadSamples, durationS);
  const peak = samples.reduce((a, s) => Math.max(a, s.rss), 0);
  const { text: outcomeText, total } = outcomeTable(load.counts);
  const errs = end ? end.errors : { warnings: 0, uncaught: 0, unhandled: 0, handler: 0, list: [] };
  const gen = load.unexpected;

  const failures = [];
  if (!end) failures.push('the server answered no sample after the load');
  else {
    if (end.gate.inFlight !== 0 || end.gate.queued !== 0) failures.push(`the gate did not drain: inFlight ${end.gate.inFlight}, queued ${end.gate.queued} after ${(drainMs / 1000).toFixed(1)} s`);
    if (end.connections !== 0) failures.push(`${end.connections} server connection(s) still open after every client left`);
    const nErr = errs.warnings + errs.uncaught + errs.unhandled + errs.handler;
    if (nErr > 0) failures.push(`server errors: ${errs.warnings} warning(s), ${errs.uncaught} uncaught exception(s), ${errs.unhandled} unhandled rejection(s), ${errs.handler} unexpected handler error(s)`);
  }
  if (trend.samples < 3) failures.push(`too few samples in the second half (${trend.samples}) to judge memory`);
  else if (trend.rssGrowthMb > opts.rssBoundMb) failures.push(`RSS grew ${trend.rssGrowthMb.toFixed(1)} MB over the second half (bound ${opts.rssBoundMb} MB)`);
  if (missedSamples > 0) failures.push(`${missedSamples} sample(s) got no answer within 10 s (a stalled server)`);
  if (gen.count > 0) failures.push(`the generator saw ${gen.count} unexpected client error(s): ${gen.list.join('; ')}`);
  if (total.refused) failures.push(`${total.refused} connection(s) refused: the server stopped listening`);
  if (ownErrors.length) failures.push(`the generator itself reported: ${ownErrors.join(' | ')}`);
  if (!closed) failures.push('the server did not answer the close command');
  if (exit === null) failures.push(`the server did not exit by itself after closing (still alive: ${closed ? closed.resources.join(', ') : '?'})`);
  else if (exit.code !== 0 || exit.signal) failures.push(`the server exited with code ${exit.code}${exit.signal ? ` signal ${exit.signal}` : ''}`);
  if (serverExit && samples.length === 0) failures.push('the server died');

  // ---- report ----
  console.log('\nMemory of the server process (MB)');
  console.log(table([
    ['', 'start', 'peak', 'end of load', 'after drain', 'after GC'],
    ['RSS', mb(startRaw.rss), mb(peak), mb(loadSamples[loadSamples.length - 1].rss), end ? mb(end.rss) : '?', after && after.rssAfterGc ? mb(after.rssAfterGc) : '?'],
    ['heap used', mb(startRaw.heapUsed), mb(samples.reduce((a, s) => Math.max(a, s.heapUsed), 0)), mb(loadSamples[loadSamples.length - 1].heapUsed), end ? mb(end.heapUsed) : '?', after && after.heapUsedAfterGc ? mb(after.heapUsedAfterGc) : '?'],
  ]));
  console.log(`active handles and requests in the server: start ${startRaw.resources}, end of load ${loadSamples[loadSamples.length - 1].resources}, after drain ${end ? end.resources : '?'}`);
  console.log(`second half (${trend.spanS.toFixed(0)} s, ${trend.samples} samples): RSS slope ${trend.rssSlopeMbPerMin.toFixed(2)} MB/min, fitted growth ${trend.rssGrowthMb.toFixed(1)} MB (bound ${opts.rssBoundMb} MB); heap slope ${trend.heapSlopeMbPerMin.toFixed(2)} MB/min`);

  if (end) {
    const g = end.gate;
    console.log(`\nConcurrency gate (limit ${opts.maxConcurrent}, after the drain of ${(drainMs / 1000).toFixed(1)} s)`);
    console.log(table([
      ['inFlight', 'queued', 'admitted', 'from queue', 'released', 'rejected', 'timeout + codel', 'displaced', 'abandoned', 'peak inFlight', 'peak queued'],
      [g.inFlight, g.queued, g.admitted, g.admittedFromQueue, g.released, g.rejected, g.timeout + g.codel, g.displaced, g.abandoned, g.peakInFlight, g.peakQueued],
    ]));
    const k = end.gatekeeper;
    console.log(`\nGatekeeper (shed episodes ${k.episodes}; keys held now per tier: ${Object.entries(k.keys).map(([t, v]) => `${t} ${v}`).join(', ')}; distinct flood keys sent ${load.keysSent})`);
    console.log(table([['tier', 'admitted', 'shed (503)', 'of which turn budget', 'tier full (503)', 'rate limited (429)'],
      ...Object.entries(k.tiers).map(([t, v]) => [t, v.admitted, v.shed, v.turnShed, v.tierFull, v.rateLimited])]));
    const st = Object.entries(end.statuses).sort(([a], [b]) => a - b);
    console.log(`\nServer's answers: ${st.map(([s, c]) => `${s} ${c}`).join(', ')}; ${end.closedUnfinished} responses cut by their connection; ${end.expectedFailures} deliberate 500s; ${end.clientErrors} client errors through Express; ${end.connectionsTotal} connections in all`);
  }
  console.log('\nOutcomes seen by the clients (reset: closed or reset by the server without an answer; aborted: the client left on purpose; cut: open when the run ended)');
  console.log(outcomeText);
  // What the mix is there to provoke; a path that never happened was not tested by this run.
  const provoked = {
    '429 (per-key quota)': total['429'], '503 (shed or queue full)': total['503'], '408 (queue or request timeout)': total['408'],
    'server resets': total.reset, 'queued requests abandoned': end && end.gate.abandoned, 'queue displacements': end && end.gate.displaced,
    'malformed 400/431': (load.counts.malformed && (load.counts.malformed['400'] || 0) + (load.counts.malformed['431'] || 0)),
  };
  const missing = Object.entries(provoked).filter(([, v]) => !v).map(([k]) => k);
  if (missing.length) console.log(`\nnot provoked in this run (not tested): ${missing.join(', ')}`);
  console.log(`generator (this process) CPU over the load: ${(100 * genCpuShare).toFixed(0)}% of a core; server CPU: ${(100 * meanCpu(loadSamples)).toFixed(0)}% of a core (mean of the samples); load average at the end ${os.loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  console.log(`\nErrors: server ${errs.warnings} warnings, ${errs.uncaught} uncaught, ${errs.unhandled} unhandled rejections, ${errs.handler} handler errors; generator ${gen.count + ownErrors.length}`);
  for (const e of errs.list) console.log(`  [${e.kind}] ${e.name}${e.code ? ` ${e.code}` : ''}: ${e.message}${e.stack ? `\n    ${e.stack.split('\n').slice(1, 4).join('\n    ')}` : ''}`);

  if (opts.out) {
    const dir = path.join(__dirname, 'out');
    fs.mkdirSync(dir, { recursive: true });
    const summary = { opts, machine: { node: process.version, cpus: cpus.length, model: cpus[0] && cpus[0].model.trim(), memGiB: os.totalmem() / 2 ** 30 }, trend, peakRss: peak, start: startRaw, end, afterGc: after, counts: load.counts, keysSent: load.keysSent, loadEndT, drainMs, generatorCpu: genCpuShare, loadAvg: os.loadavg(), exit, failures };
    fs.writeFileSync(path.join(dir, 'soak.json'), JSON.stringify({ summary, samples }, null, 1));
    const pts = (f) => loadSamples.concat(samples.filter((s) => s.phase === 'drain')).map((s) => [s.t, f(s)]);
    fs.writeFileSync(path.join(dir, 'soak.svg'), timelineSvg([
      { title: 'server memory', unit: 'MB', marks: [durationS / 2, durationS], series: [{ name: 'RSS', points: pts((s) => s.rss / MB) }, { name: 'heap used', points: pts((s) => s.heapUsed / MB) }] },
      { title: 'answers per second (server)', unit: 'req/s', series: ['2xx', '429', '503', '408'].map((k) => ({ name: k, points: pts((s) => s.rate[k] || 0) })) },
      { title: 'concurrency gate and connections', unit: 'count', series: [{ name: 'inFlight', points: pts((s) => s.inFlight) }, { name: 'queued', points: pts((s) => s.queued) }, { name: 'connections / 10', points: pts((s) => s.connections / 10) }] },
      { title: 'event-loop lag (gatekeeper)', unit: 'ms', series: [{ name: 'lag', points: pts((s) => s.lagMs) }] },
    ], { title: `soak: ${durationS} s, seed ${opts.seed} (dashed: half-time, end of load)` }));
    console.log(`\nwrote ${path.relative(process.cwd(), path.join(dir, 'soak.json'))} and soak.svg`);
  }
  if (failures.length) {
    console.log(`\nFAIL\n${failures.map((f) => `  - ${f}`).join('\n')}`);
    process.exitCode = 1;
  } else {
    console.log('\nPASS: the gate drained to 0, no connection left open, RSS flat over the second half, no errors');
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
