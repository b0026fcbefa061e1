'use strict';
// bench:downstream's figures, targets, tables and SVG timelines (benchmark/downstream.js runs the loads).
const fs = require('node:fs');
const path = require('node:path');
const { percentile } = require('./openloop');
const { recoveryMs, successShares, POPULATIONS } = require('./retry-load');
const { seriesPanelSvg } = require('./series-svg');
const { stackSvgs } = require('./controller-svg');

const REFUSALS = ['503', '429', '408'];
const COLORS = { critical: '#c0392b', standard: '#2e86c1', background: '#7f8c8d' };

const refusals = (rej) => REFUSALS.reduce((n, k) => n + (rej[k] || 0), 0);

/** p99 of the successes of `tier` due at or after `fromMs` (openLoop with samples: true). */
function p99From(tier, fromMs) {
  const s = tier.samples;
  const lat = [];
  for (let i = 0; i < s.dueMs.length; i++) if (s.dueMs[i] >= fromMs) lat.push(s.latencyMs[i]);
  return percentile(lat.sort((a, b) => a - b), 99);
}

const nullIfNaN = (v) => (Number.isNaN(v) ? null : v);

/** One run's figures (downstream.js runOne's result). */
function runFigures(raw, { cap, ideal, tiers }) {
  const step = raw.step.load;
  const after = raw.step.after;
  const crit = step.tiers.critical;
  const unloadedP99 = raw.unloaded.latency.p99; // every tier: the same request to an idle server
  const storm = raw.storm.load;
  const stepEnd = raw.storm.stepEndMs;
  return {
    unloadedP99,
    critSuccess: crit.successPct,
    critP99: crit.p99,
    ratio: crit.p99 / unloadedP99,
    // Without the step's first half second: how much of the p99 is the onset's.
    critP99From500: p99From(crit, 500),
    idealP99: ideal.p99,
    goodputPct: (100 * step.goodputPerSec) / cap,
    standardPct: step.tiers.standard.successPct,
    backgroundPct: step.tiers.background.successPct,
    shed08: raw.light.refused,
    // The step is short (a long one would not fit the command's time): an unprotected server still
    // answers most of it within the 2 s timeout, and its collapse shows in the 0.8x phase after it.
    afterGoodputPct: (100 * after.goodputPerSec) / after.rate,
    shedAfter1s: tiers.reduce((n, t) => n + refusals(after.tiers[t].steady.rejections), 0),
    // null when no critical request due then was answered at all: never recovered.
    critAfterRatio: nullIfNaN(p99From(after.tiers.critical, 2000) / unloadedP99),
    stormRecoveryMs: recoveryMs(storm, stepEnd),
    stormRecoveryAtOnceMs: recoveryMs(storm, stepEnd, { population: 'at-once' }),
    stormRecoveryRetryAfterMs: recoveryMs(storm, stepEnd, { population: 'retry-after' }),
    stormSharesPct: successShares(storm, stepEnd).map((s) => Math.round(100 * s.share)),
    stormAttemptsPerLogical: POPULATIONS.reduce((n, p) => n + storm.totals[p].attempts, 0) / Math.max(1, POPULATIONS.reduce((n, p) => n + storm.totals[p].logical, 0)),
    serverLagP99: raw.step.server.lag.p99,
  };
}

const f0 = (v) => v.toFixed(0);
const f1 = (v) => v.toFixed(1);
const f2 = (v) => (Number.isNaN(v) ? 'none ok' : v.toFixed(2));
const msOrNever = (v) => (v == null ? 'never' : f0(v));
// [key, label, format]: the figures of the per-run and median tables.
const FIGURES = [
  ['critSuccess', 'critical answered %', f1],
  ['critP99', 'critical p99 ms', f0],
  ['unloadedP99', 'unloaded p99 ms', f1],
  ['ratio', 'critical p99 / unloaded', f2],
  ['critP99From500', 'critical p99 from 0.5 s ms', f0],
  ['idealP99', 'ideal scheduler crit p99 ms', f0],
  ['goodputPct', 'goodput % of capacity', f0],
  ['standardPct', 'standard answered %', f0],
  ['backgroundPct', 'background answered %', f0],
  ['shed08', 'refused at 0.8x (before)', f0],
  ['afterGoodputPct', 'goodput at 0.8x after, % offered', f0],
  ['shedAfter1s', 'refused at 0.8x after, > 1 s', f0],
  ['critAfterRatio', 'crit p99 after, > 2 s / unloaded', f2],
  ['stormRecoveryMs', 'storm: recovery ms (all)', msOrNever],
  ['stormRecoveryAtOnceMs', 'storm: recovery, retry at once', msOrNever],
  ['stormRecoveryRetryAfterMs', 'storm: recovery, Retry-After', msOrNever],
  ['stormAttemptsPerLogical', 'storm: attempts per request', f2],
  ['serverLagP99', 'server loop lag p99 ms (step)', f1],
];

const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);

/** "median [min–max]" of one figure over runs; a run where it never happened counts as "never". */
function cell(runs, key, fmt) {
  const show = (v) => (v === Infinity ? 'never' : fmt(v));
  const xs = runs.map((r) => (r.figures[key] === null ? Infinity : r.figures[key])).filter((v) => typeof v === 'number' && !Number.isNaN(v));
  if (!xs.length) return '—';
  if (xs.every((v) => v === Infinity)) return 'never';
  return `${show(med(runs, key))} [${show(Math.min(...xs))}–${show(Math.max(...xs))}]`;
}

/** The median of a figure over runs, a run where it never happened (null) counting as Infinity. */
function med(runs, key) {
  const xs = runs.map((r) => (r.figures[key] === null ? Infinity : r.figures[key])).filter((v) => typeof v === 'number' && !Number.isNaN(v)).sort((a, b) => a - b);
  const n = xs.length;
  if (n === 0) return NaN;
  return n % 2 ? xs[n >> 1] : xs[n / 2 - 1] === Infinity ? Infinity : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

/** The issue's targets for one configuration's runs on one route: [{ name, pass, value }]. */
function evaluateTargets(runs, bulkheadRuns) {
  const t = [];
  const minCrit = Math.min(...runs.map((r) => r.figures.critSuccess));
  t.push({ name: 'critical >= 99.5% answered, every run', pass: minCrit >= 99.5, value: `min ${f1(minCrit)}%` });
  const ratio = med(runs, 'ratio');
  t.push({ name: 'critical p99 <= 1.5x unloaded (median)', pass: ratio <= 1.5, value: `${f2(ratio)}x` });
  if (bulkheadRuns?.length) {
    const vs = med(runs, 'critP99') / med(bulkheadRuns, 'critP99');
    t.push({ name: "critical p99 <= 1.2x the bulkhead's", pass: vs <= 1.2, value: `${f2(vs)}x` });
  }
  const gp = med(runs, 'goodputPct');
  t.push({ name: 'goodput >= 95% of capacity (median)', pass: gp >= 95, value: `${f0(gp)}%` });
  // Served before: standard clearly ahead (5 points: more than two tiers' noise), or nothing left to serve.
  const order = med(runs, 'standardPct') - med(runs, 'backgroundPct');
  t.push({ name: 'standard served before background', pass: order >= 5 || med(runs, 'backgroundPct') >= 99.5, value: `${f0(med(runs, 'standardPct'))}% vs ${f0(med(runs, 'backgroundPct'))}%` });
  const shed = med(runs, 'shedAfter1s');
  t.push({ name: 'recovery: 0 refused after its 1st s', pass: shed === 0, value: f0(shed) });
  const after = med(runs, 'critAfterRatio');
  t.push({ name: 'recovery: crit p99 <= 1.2x unloaded by 2 s', pass: after <= 1.2, value: after === Infinity ? 'never' : `${f2(after)}x` });
  for (const [key, label] of [['stormRecoveryAtOnceMs', 'retry at once'], ['stormRecoveryRetryAfterMs', 'Retry-After']]) {
    const v = med(runs, key);
    t.push({ name: `storm (${label}): goodput back <= 2 s`, pass: v <= 2000, value: v === Infinity ? 'never' : `${f0(v)} ms` });
  }
  return t;
}

function groupBy(results, route) {
  const by = new Map();
  for (const r of results) {
    if (r.route !== route) continue;
    if (!by.has(r.cfg.id)) by.set(r.cfg.id, []);
    by.get(r.cfg.id).push(r);
  }
  return by;
}

function printReport(results, { routes, probes, ideals, load }, out = console.log) {
  for (const route of routes) {
    const by = groupBy(results, route);
    if (!by.size) continue;
    const pr = probes[route];
    out(`\n=== route ${route}: capacity ${Math.round(pr.reqPerSec)} req/s, step ${load}x = ${Math.round(load * pr.reqPerSec)} req/s; ideal scheduler critical p99 ${f0(ideals[route].p99)} ms ===`);
    out('Per run:');
    out(`  ${pad('configuration', 16)} ${pad('run', 4)}${FIGURES.map(([k]) => lpad(k.replace(/^storm/, 's.').slice(0, 13), 14)).join('')}`);
    for (const runs of by.values()) {
      for (const r of runs) out(`  ${pad(r.cfg.id, 16)} ${pad(r.run, 4)}${FIGURES.map(([k, , fmt]) => lpad(r.figures[k] === undefined ? '—' : r.figures[k] === null ? 'never' : fmt(r.figures[k]), 14)).join('')}`);
    }
    for (const runs of by.values()) out(`  storm success % of requests per 0.5 s after the step, run 1 of ${runs[0].cfg.id}: ${runs[0].figures.stormSharesPct.join(' ')}`);
    const cols = [...by.values()];
    out('\nMedian [min–max] over the runs:');
    out(`  ${pad('figure', 34)} ${cols.map((runs) => pad(`${runs[0].cfg.id} (n=${runs.length})`, 22)).join(' ')}`);
    for (const [key, label, fmt] of FIGURES) out(`  ${pad(label, 34)} ${cols.map((runs) => pad(cell(runs, key, fmt), 22)).join(' ')}`);
    const bulkheadRuns = by.get('bulkhead');
    out('\nTargets (issue 36; each configuration measured against the same bar):');
    const table = cols.map((runs) => ({ id: runs[0].cfg.id, targets: evaluateTargets(runs, runs[0].cfg.id === 'bulkhead' ? null : bulkheadRuns) }));
    const names = table.find((c) => c.id === 'gatekeeper')?.targets.map((t) => t.name) || table[0].targets.map((t) => t.name);
    out(`  ${pad('target', 42)} ${table.map((c) => pad(c.id, 20)).join(' ')}`);
    for (const name of names) {
      out(`  ${pad(name, 42)} ${table.map((c) => {
        const t = c.targets.find((x) => x.name === name);
        return pad(t ? `${t.pass ? 'PASS' : 'MISS'} ${t.value}` : '—', 20);
      }).join(' ')}`);
    }
  }
}

/** Step + after on one clock, per 100 ms: goodput per tier, refusals/s, critical max latency, server samples. */
function stepRows(raw, tiers) {
  const { load: step, after, server, startAt } = raw.step;
  const offset = Math.round(step.durationMs / step.bucketMs);
  const rows = new Map();
  const row = (b) => {
    if (!rows.has(b)) rows.set(b, { t: (b * step.bucketMs) / 1000, critLatency: 0, ...Object.fromEntries(tiers.map((t) => [t, 0])) });
    return rows.get(b);
  };
  for (const [tl, off] of [[step.timeline, 0], [after.timeline, offset]]) {
    tl.forEach((r, b) => {
      const o = row(b + off);
      for (const t of tiers) o[t] += r.goodput[t];
      o.critLatency = Math.max(o.critLatency, r.maxLatencyMs.critical || 0);
    });
  }
  const samples = server.downstream || [];
  for (let i = 1; i < samples.length; i++) {
    const s = samples[i];
    const b = Math.floor((s.t - startAt) / step.bucketMs);
    if (b < 0) continue;
    const o = row(b);
    o.refusedPerSec = (o.refusedPerSec || 0) + ((s.refused - samples[i - 1].refused) * 1000) / step.bucketMs;
    o.inFlight = s.inFlight;
    o.downstream = s.downstream;
    o.waiting = s.waiting;
    o.limit = s.limit;
  }
  return [...rows.values()].sort((a, b) => a.t - b.t).map((o) => ({ ...o, critLatency: o.critLatency || null }));
}

function writeSvgs(results, outDir, { routes, tiers, load }) {
  fs.mkdirSync(outDir, { recursive: true });
  for (const route of routes) {
    const parts = [];
    for (const r of results.filter((x) => x.route === route)) {
      const name = `${route} · ${r.cfg.title} · run ${r.run}`;
      const stepS = r.raw.step.load.durationMs / 1000;
      const rows = stepRows(r.raw, tiers);
      const marks = [{ t: 0, label: `${load}x` }, { t: stepS, label: '0.8x' }];
      parts.push(seriesPanelSvg({
        title: `${name}: goodput and refusals`,
        note: tiers.map((t) => `${t} ${f1(r.raw.step.load.tiers[t].successPct)}%`).join(' · '),
        rows,
        marks,
        leftLabel: 'req/s',
        rightLabel: 'critical max latency ms',
        series: [
          ...tiers.map((t) => ({ key: t, label: t, color: COLORS[t], axis: 'left' })),
          { key: 'refusedPerSec', label: 'refused/s', color: '#111', axis: 'left', dash: '2 2' },
          { key: 'critLatency', label: 'crit latency', color: '#e67e22', axis: 'right', dash: '5 3' },
        ],
      }));
      parts.push(seriesPanelSvg({
        title: `${name}: in flight`,
        rows,
        marks,
        leftLabel: 'requests',
        series: [
          { key: 'inFlight', label: 'in the server', color: '#8e44ad', axis: 'left' },
          { key: 'downstream', label: 'downstream calls', color: '#16a085', axis: 'left' },
          { key: 'waiting', label: 'pg pool waiting', color: '#7f8c8d', axis: 'left', dash: '4 2' },
          { key: 'limit', label: 'learned limit', color: '#c0392b', axis: 'left', dash: '6 3' },
        ],
      }, { height: 150 }));
      const storm = r.raw.storm.load;
      const shares = new Map(successShares(storm, 0).map((s) => [s.t, s.share]));
      parts.push(seriesPanelSvg({
        title: `${name}: retry storm`,
        note: `recovery ${msOrNever(r.figures.stormRecoveryMs)} ms after the step`,
        rows: storm.timeline.map((x) => ({
          t: x.t,
          offered: (POPULATIONS.reduce((n, p) => n + x.due[p], 0) * 1000) / storm.bucketMs,
          attempts: (x.attempts * 1000) / storm.bucketMs,
          goodput: x.goodput,
          share: shares.has(x.t) ? 100 * shares.get(x.t) : null,
        })),
        marks: [{ t: storm.phases[0].ms / 1000, label: `${load}x` }, { t: r.raw.storm.stepEndMs / 1000, label: '0.8x' }],
        leftLabel: 'req/s',
        rightLabel: '% of arrivals that succeed',
        rightMax: 100,
        series: [
          { key: 'offered', label: 'offered', color: '#7f8c8d', axis: 'left', dash: '4 2' },
          { key: 'attempts', label: 'attempts', color: '#d68910', axis: 'left' },
          { key: 'goodput', label: 'goodput', color: '#27ae60', axis: 'left' },
          { key: 'share', label: 'success share', color: '#c0392b', axis: 'right', dash: '5 3' },
        ],
      }));
    }
    if (parts.length) fs.writeFileSync(path.join(outDir, `downstream-${route}.svg`), stackSvgs(parts));
  }
}

module.exports = { runFigures, evaluateTargets, printReport, writeSvgs, stepRows, FIGURES };
