'use strict';
// Open-loop logical requests whose clients retry: the load of a metastable failure. Logical requests
// arrive on a fixed schedule (piecewise constant rates, `phases`), each sends up to 1 + maxRetries
// attempts, one at a time, each abandoned after `attemptTimeoutMs`. A failed attempt (non-2xx, an
// error, no answer in time) is retried by its population's rule: 'at-once' sends the next attempt
// immediately; 'retry-after' waits the answer's Retry-After seconds when it carries one (else it too
// retries at once). A client gives up when its next attempt would leave more than `giveUpMs` after
// its arrival. Attempts the server never answered keep running there: that is the storm.
//
//   const r = await retryLoad({ port, path: '/pg', phases: [{ rate: 150, ms: 500 }, { rate: 570, ms: 2000 }, ...],
//                               mix, populations: ['at-once', 'retry-after'] });
//   r.timeline -> [{ t, due: { pop: n }, ok: { pop: n }, attempts: n, goodput: req/s (by completion) }]
//   successShares(r, fromMs) -> per bucket from fromMs, the share of the logical requests due in it that succeeded
const { deadlineRequests, tierPicker, nowAbs } = require('./openloop');

const POPULATIONS = ['at-once', 'retry-after'];

function retryLoad({ host = '127.0.0.1', port, path: reqPath = '/', phases, mix, tierHeader = 'x-user-tier', populations = POPULATIONS, attemptTimeoutMs = 1000, maxRetries = 3, giveUpMs = 4000, maxOutstanding = 4096, bucketMs = 500, seed = 11, agent, startAt }) {
  for (const p of populations) if (!POPULATIONS.includes(p)) throw new RangeError(`population must be one of ${POPULATIONS.join(', ')}, got ${p}`);
  for (const ph of phases) {
    if (!(ph.rate > 0) || !Number.isFinite(ph.rate) || !(ph.ms > 0) || !Number.isFinite(ph.ms)) throw new RangeError('each phase needs a positive finite rate and ms');
  }
  // Every logical request's due time (ms after the start), phase by phase.
  const due = [];
  let phaseStart = 0;
  for (const ph of phases) {
    const n = Math.floor((ph.rate * ph.ms) / 1000);
    for (let i = 0; i < n; i++) due.push(phaseStart + (i * 1000) / ph.rate);
    phaseStart += ph.ms;
  }
  const totalMs = phaseStart;
  const nBuckets = Math.ceil((totalMs + giveUpMs + attemptTimeoutMs + 1000) / bucketMs) + 1;
  const nextTier = tierPicker(mix, seed);
  const requests = deadlineRequests(attemptTimeoutMs);
  const start = startAt ?? nowAbs() + 5;
  const bucketOf = (t) => Math.min(nBuckets - 1, Math.max(0, Math.floor(t / bucketMs)));
  const perPop = () => Object.fromEntries(populations.map((p) => [p, new Uint32Array(nBuckets)]));
  const bDue = perPop();
  const bOk = perPop(); // by due time
  const bAttempts = new Uint32Array(nBuckets);
  const bDone = new Uint32Array(nBuckets); // successes by completion time
  const totals = Object.fromEntries(populations.map((p) => [p, { logical: 0, ok: 0, attempts: 0, gaveUp: 0 }]));
  let outstanding = 0;
  let open = due.length; // logical requests not yet ended
  let resolveDone;
  const done = new Promise((r) => (resolveDone = r));
  const timers = new Set();

  function end(req, ok) {
    if (ok) {
      bOk[req.pop][bucketOf(req.due)]++;
      bDone[bucketOf(nowAbs() - start)]++;
      totals[req.pop].ok++;
    }
    if (--open === 0) resolveDone();
  }

  function attempt(req) {
    const now = nowAbs();
    if (outstanding >= maxOutstanding) return end(req, false);
    req.attempts++;
    totals[req.pop].attempts++;
    bAttempts[bucketOf(now - start)]++;
    outstanding++;
    requests.send({ host, port, path: reqPath, agent, headers: req.headers }, now + attemptTimeoutMs, (status, headers) => {
      outstanding--;
      if (status >= 200 && status < 300) return end(req, true);
      if (req.attempts > maxRetries) return end(req, false);
      const ra = req.pop === 'retry-after' && headers ? Number(headers['retry-after']) : NaN;
      const delayMs = Number.isFinite(ra) && ra > 0 ? ra * 1000 : 0;
      if (nowAbs() + delayMs - (start + req.due) > giveUpMs) {
        totals[req.pop].gaveUp++;
        return end(req, false);
      }
      if (delayMs === 0) return attempt(req);
      const timer = setTimeout(() => {
        timers.delete(timer);
        attempt(req);
      }, delayMs);
      timers.add(timer);
    });
  }

  return new Promise((resolve) => {
    let issued = 0;
    function tick() {
      const now = nowAbs() - start;
      while (issued < due.length && due[issued] <= now) {
        const pop = populations[issued % populations.length];
        const tier = mix[nextTier()].tier;
        const req = { due: due[issued], pop, attempts: 0, headers: tierHeader ? { [tierHeader]: tier } : {} };
        bDue[pop][bucketOf(req.due)]++;
        totals[pop].logical++;
        issued++;
        attempt(req);
      }
      if (issued < due.length) setTimeout(tick, 1);
      else resolve();
    }
    setTimeout(tick, Math.max(0, start - nowAbs()));
  })
    .then(() => {
      if (open === 0) resolveDone();
      // Bounded: every client gives up by giveUpMs after its arrival, plus one attempt's timeout.
      const cap = setTimeout(() => resolveDone(), giveUpMs + attemptTimeoutMs + 500);
      return done.then(() => clearTimeout(cap));
    })
    .then(() => {
      for (const t of timers) clearTimeout(t);
      requests.stop();
      const timeline = [];
      for (let b = 0; b < nBuckets; b++) {
        const row = { t: (b * bucketMs) / 1000, due: {}, ok: {}, attempts: bAttempts[b], goodput: (bDone[b] * 1000) / bucketMs };
        for (const p of populations) {
          row.due[p] = bDue[p][b];
          row.ok[p] = bOk[p][b];
        }
        timeline.push(row);
      }
      while (timeline.length > 1 && timeline[timeline.length - 1].attempts === 0 && timeline[timeline.length - 1].goodput === 0) timeline.pop();
      return { start, totalMs, bucketMs, phases, populations, totals, timeline };
    });
}

/**
 * Per bucket of logical arrivals from `fromMs` to the end of the schedule: the share (0..1) of the
 * requests due in it that eventually succeeded, for `population` (default: all of them).
 */
function successShares(r, fromMs, population) {
  const pops = population ? [population] : r.populations;
  const out = [];
  for (const row of r.timeline) {
    const t = row.t * 1000;
    if (t < fromMs || t >= r.totalMs) continue;
    const dueN = pops.reduce((n, p) => n + row.due[p], 0);
    const okN = pops.reduce((n, p) => n + row.ok[p], 0);
    out.push({ t: (t - fromMs) / 1000, due: dueN, share: dueN ? okN / dueN : NaN });
  }
  return out;
}

/**
 * How long after `fromMs` until the success share of every later bucket stays >= `share`: ms, or
 * null when the last bucket is still below (never recovered).
 */
function recoveryMs(r, fromMs, { share = 0.95, population } = {}) {
  const shares = successShares(r, fromMs, population);
  let from = null;
  for (const s of shares) {
    if (!(s.share >= share)) from = null;
    else if (from === null) from = s.t;
  }
  return from === null ? null : from * 1000;
}

module.exports = { retryLoad, successShares, recoveryMs, POPULATIONS };
