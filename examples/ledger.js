'use strict';
// The Ledger in two seconds: three tiers, per-user quotas in the middle tier, rate-limit details for
// headers without allocating, and the refill-scale lever that load shedding pulls.
//   node examples/ledger.js
const { setTimeout: sleep } = require('node:timers/promises');
const { Ledger, LEDGER_RESULT: R } = require('..');

async function run({ log = console.log } = {}) {
  const ledger = new Ledger({
    tiers: [
      { name: 'critical', limit: 200, windowMs: 1000, protected: true },
      { name: 'standard', limit: 100, windowMs: 1000, perKey: { limit: 10, windowMs: 5000, maxKeys: 10_000 } },
      { name: 'background', limit: 50, windowMs: 1000 },
    ],
  });
  const standard = ledger.tierId('standard'); // numeric ids are the fastest way to name a tier

  // 1. A burst: 30 requests from each of 5 users on the standard tier. Each user gets its 10-token quota;
  //    the pool (100) has room for all of them.
  const perUser = {};
  for (let i = 0; i < 150; i++) {
    const user = `user-${i % 5}`;
    if (ledger.tryConsume(standard, user)) perUser[user] = (perUser[user] ?? 0) + 1;
  }
  log('burst of 30 per user, quota 10:', perUser);

  // 2. Details for rate-limit headers, written into ledger.result (a Float64Array): no object per call.
  if (!ledger.consume(standard, 'user-0')) {
    const r = ledger.result;
    log(`user-0 refused by the ${['', 'tier', 'key'][r[R.LIMITED_BY]]}: ` +
      `RateLimit-Limit ${r[R.LIMIT]}, Remaining ${Math.floor(r[R.REMAINING])}, ` +
      `Retry-After ${Math.ceil(r[R.RETRY_AFTER_MS] / 1000)} s, Reset ${Math.ceil(r[R.RESET_MS] / 1000)} s`);
  }

  // 3. Overload for one second: the shed controller scales the background tier's refill to 0; the
  //    protected critical tier keeps its refill. 100 attempts per tier every 100 ms.
  ledger.setRefillScale('background', 0);
  let background = 0;
  let critical = 0;
  for (let round = 0; round < 10; round++) {
    for (let i = 0; i < 100; i++) {
      if (ledger.tryConsume('background')) background++;
      if (ledger.tryConsume('critical')) critical++;
    }
    await sleep(100);
  }
  log(`1 s of overload, 1000 attempts per tier: background admitted ${background} (its stored burst, no refill), ` +
    `critical ${critical} (burst 200 + ~200/s refill)`);
  ledger.setRefillScale('background', 1);

  // 4. The state of every tier.
  for (const t of ledger.snapshot()) {
    log(`  ${t.name.padEnd(10)} tokens ${t.tokens.toFixed(1).padStart(6)} / ${t.burst}  refill ${t.limit} per ${t.windowMs} ms x ${t.refillScale}  keys ${t.keys}`);
  }
  return { perUser, background, critical };
}

module.exports = { run };
if (require.main === module) run().catch((err) => { console.error(err); process.exit(1); });
