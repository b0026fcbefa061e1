'use strict';
// bench:defense part 3's output: the table of one repetition (every configuration, per class), the
// target figures of one repetition, and the targets over repetitions (median [range]).
const { CLASSES } = require('./crawl-traffic');

const f0 = (v) => (v == null || Number.isNaN(v) ? '—' : Math.round(v).toString());
const f1 = (v) => (v == null || Number.isNaN(v) ? '—' : v.toFixed(1));
const f2 = (v) => (v == null || Number.isNaN(v) ? '—' : v.toFixed(2));
const pad = (s, n) => String(s).padEnd(n);
const lpad = (s, n) => String(s).padStart(n);
const cpuPct = (v) => (v == null ? '—' : `${f0(100 * v)}%`);
const statusText = (st) => Object.entries(st).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k}:${v}`).join(' ') || '-';

function median(xs) {
  const s = xs.filter((x) => x != null && !Number.isNaN(x)).sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[n >> 1] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/** The table of one repetition's results. */
function printCrawlTable(results, out = console.log) {
  out(`${pad('configuration', 50)} ${pad('class', 24)} ${lpad('sent', 6)} ${lpad('served', 8)} ${lpad('p50 ms', 7)} ${lpad('p99 ms', 7)} ${lpad('served/s 0-10 s', 16)} ${lpad('from 10 s', 10)}  refusals`);
  for (const r of results) {
    const F = r.figures;
    const line = (first, name, w, onset, steady, st) =>
      out(`${pad(first ? r.cfg.title : '', 50)} ${pad(name, 24)} ${lpad(w.sent, 6)} ${lpad(f1(w.servedPct) + '%', 8)} ${lpad(f1(w.p50), 7)} ${lpad(f1(w.p99), 7)} ${lpad(f1(onset.perSec), 16)} ${lpad(f1(steady.perSec), 10)}  ${statusText(st)}`);
    line(true, CLASSES[0], F.legit.crawl, F.legit.onset, F.legit.steady, F.legit.statuses);
    if (r.cfg.crawler) {
      const both = (a, b) => ({ sent: a.sent + b.sent, servedPct: (100 * (a.ok + b.ok)) / Math.max(1, a.sent + b.sent), p50: NaN, p99: NaN });
      line(false, CLASSES[1], both(F.rotating.onset, F.rotating.steady), F.rotating.onset, F.rotating.steady, F.rotating.statuses);
      line(false, CLASSES[2], both(F.subnet.onset, F.subnet.steady), F.subnet.onset, F.subnet.steady, F.subnet.statuses);
    }
    out(`${pad('', 50)} legitimate from 10 s after the crawl start: ${f1(F.legit.steady.servedPct)}% served, p99 ${f1(F.legit.steady.p99)} ms; server CPU (of one core) before the crawl ${cpuPct(F.cpu.before)}, during it ${cpuPct(F.cpu.crawl)}, from 10 s on ${cpuPct(F.cpu.steady)}; lag p99 ${f1(r.lag.p99)} ms; generator lag p99 ${f1(F.genLag.p99)} ms`);
  }
  out('(legitimate: requests scheduled from the crawl start to the end; served = 2xx; p50/p99 of the served, from the send;');
  out(' served/s: 2xx answers to requests scheduled in the first 10 s of the crawl, and from then to the end)');
}

/** The target figures of one repetition for configuration `afterId` (null where one is missing). */
function crawlFigures(results, afterId = 'after') {
  const by = (id) => results.find((r) => r.cfg.id === id);
  const [base, before, after] = ['baseline', 'before', afterId].map(by);
  if (!before || !after) return null;
  const crawler = (r, w) => r.figures.rotating[w].perSec + r.figures.subnet[w].perSec;
  const A = after.figures;
  const B = base ? base.figures : null;
  return {
    crawlerPct: (100 * crawler(after, 'steady')) / crawler(before, 'steady'),
    crawlerAfter: crawler(after, 'steady'),
    crawlerBefore: crawler(before, 'steady'),
    crawlerOnsetPct: (100 * crawler(after, 'onset')) / crawler(before, 'onset'),
    legitServed: A.legit.crawl.servedPct,
    legitServedSteady: A.legit.steady.servedPct,
    legitServedOnset: A.legit.onset.servedPct,
    legitServedBefore: before.figures.legit.crawl.servedPct,
    legitServedBeforeSteady: before.figures.legit.steady.servedPct,
    p99: A.legit.crawl.p99,
    p99Base: B ? B.legit.crawl.p99 : NaN,
    p99Ratio: B ? A.legit.crawl.p99 / B.legit.crawl.p99 : NaN,
    p99Steady: A.legit.steady.p99,
    p99BaseSteady: B ? B.legit.steady.p99 : NaN,
    p99RatioSteady: B ? A.legit.steady.p99 / B.legit.steady.p99 : NaN,
    cpuAfter: A.cpu.steady,
    cpuBefore: before.figures.cpu.steady,
    cpuBase: B ? B.cpu.steady : null,
  };
}

/** The targets over repetitions: PASS when the median meets it; "k of n" repetitions met it. */
function printCrawlTargets(reps, out = console.log) {
  const list = reps.filter(Boolean);
  if (list.length === 0) {
    out('  ----  not evaluated (before or after could not run)');
    return [];
  }
  const mr = (k, f = f1) => {
    const xs = list.map((x) => x[k]);
    const ok = xs.filter((x) => x != null && !Number.isNaN(x));
    return ok.length <= 1 ? f(ok[0]) : `${f(median(xs))} [${f(Math.min(...ok))}–${f(Math.max(...ok))}]`;
  };
  const met = (pred) => `${list.filter(pred).length} of ${list.length}`;
  const rows = [
    { name: 'crawler served/s from 10 s after its start <= 1% of before', pass: median(list.map((x) => x.crawlerPct)) <= 1, value: `${mr('crawlerPct', f2)}% (${mr('crawlerAfter')} vs ${mr('crawlerBefore')} req/s; met in ${met((x) => x.crawlerPct <= 1)}; first 10 s: ${mr('crawlerOnsetPct')}%)` },
    // Legitimate users, in the crawler target's window (from 10 s after the crawl start: the time the
    // issue gives the defense to act) and over the whole crawl (its first 10 s included), both judged.
    { name: 'legitimate served >= 99.9% (from 10 s after the crawl start)', pass: median(list.map((x) => x.legitServedSteady)) >= 99.9, value: `${mr('legitServedSteady', f2)}% (met in ${met((x) => x.legitServedSteady >= 99.9)}; before: ${mr('legitServedBeforeSteady')}%)` },
    { name: 'legitimate served >= 99.9% (the whole crawl, onset included)', pass: median(list.map((x) => x.legitServed)) >= 99.9, value: `${mr('legitServed', f2)}% (met in ${met((x) => x.legitServed >= 99.9)}; first 10 s: ${mr('legitServedOnset', f2)}%; before: ${mr('legitServedBefore')}%)` },
    { name: 'legitimate p99 <= 1.2x no crawler (from 10 s after the start)', pass: median(list.map((x) => x.p99RatioSteady)) <= 1.2, value: `${mr('p99RatioSteady', f2)}x (${mr('p99Steady')} vs ${mr('p99BaseSteady')} ms; met in ${met((x) => x.p99RatioSteady <= 1.2)})` },
    { name: 'legitimate p99 <= 1.2x no crawler (the whole crawl)', pass: median(list.map((x) => x.p99Ratio)) <= 1.2, value: `${mr('p99Ratio', f2)}x (${mr('p99')} vs ${mr('p99Base')} ms; met in ${met((x) => x.p99Ratio <= 1.2)})` },
    { name: 'server CPU falls (from 10 s after the crawl start)', pass: median(list.map((x) => x.cpuAfter)) < median(list.map((x) => x.cpuBefore)), value: `${mr('cpuAfter', (v) => cpuPct(v))} of a core vs ${mr('cpuBefore', (v) => cpuPct(v))} before; without the crawler ${mr('cpuBase', (v) => cpuPct(v))}` },
  ];
  for (const r of rows) out(`  ${r.pass ? 'PASS' : 'MISS'}  ${pad(r.name, 64)} ${r.value}`);
  return rows;
}

module.exports = { printCrawlTable, crawlFigures, printCrawlTargets };
