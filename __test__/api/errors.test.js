'use strict';
// Every error the package throws carries a stable code (docs/errors.md), whatever component throws it.
const test = require('node:test');
const assert = require('node:assert/strict');
const t = require('../..');

const tier = (o = {}) => ({ name: 'a', limit: 1, windowMs: 1000, ...o });

const CASES = [
  ['Ledger: a bad value', () => new t.Ledger({ tiers: [tier({ limit: 1.5 })] }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /tiers\[0\]\.limit/],
  ['Ledger: a burst past the largest count', () => new t.Ledger({ tiers: [tier({ burst: 2 ** 53 })] }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /tiers\[0\]\.burst must be an integer from 1 to 4294967295 \(got 9007199254740992\)/],
  ['Ledger: a huge window, printed as JS prints it', () => new t.Ledger({ tiers: [tier({ windowMs: 1e308 })] }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /windowMs must be a finite number > 0 \(at least 1e-6, one nanosecond\) and at most 1000000000000 \(got 1e\+308\)/],
  ['Ledger: a bad type', () => new t.Ledger({ tiers: [tier({ limit: '1' })] }), TypeError, 'ERR_TIERGATE_INVALID_OPTION', /tiers\[0\]\.limit must be a number/],
  ['Ledger: an unknown option', () => new t.Ledger({ tiers: [tier()], tier: 1 }), TypeError, 'ERR_TIERGATE_UNKNOWN_OPTION', /unknown option "tier" \(known: tiers, perKey\)/],
  ['Ledger.shared: a bad name', () => t.Ledger.shared('', { tiers: [tier()] }), TypeError, 'ERR_TIERGATE_INVALID_OPTION', /name must be a non-empty string/],
  ['Ledger.shared: a name with another config', () => {
    t.Ledger.shared('errors.test shared', { tiers: [tier()] });
    t.Ledger.shared('errors.test shared', { tiers: [tier({ limit: 2 })] });
  }, Error, 'ERR_TIERGATE_INVALID_OPTION', /^Ledger\.shared\("errors\.test shared"\): a ledger of that name exists with a different config$/],
  ['Ledger.shared: an unknown name without a config', () => t.Ledger.shared('errors.test never created'), Error, 'ERR_TIERGATE_INVALID_OPTION', /no ledger of that name exists yet; pass its config/],
  ['Ledger.tierId: an unknown tier', () => new t.Ledger({ tiers: [tier()] }).tierId('b'), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /^unknown tier "b" \(tiers: a\)$/],
  ['Ledger.tierId: not a string', () => new t.Ledger({ tiers: [tier()] }).tierId(1), TypeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /tierId: name must be a string, got number/],
  ['Ledger.setRefillScale: out of 0..1', () => new t.Ledger({ tiers: [tier()] }).setRefillScale('a', 2), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /setRefillScale: scale must be between 0 and 1 \(got 2\)/],
  ['Ledger.setRefillScale: NaN', () => new t.Ledger({ tiers: [tier()] }).setRefillScale('a', NaN), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /got NaN/],
  ['Ledger.setRefillScale: not a number', () => new t.Ledger({ tiers: [tier()] }).setRefillScale('a', '1'), TypeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /scale must be a number, got string/],
  ['Ledger.refillScale: a tier id out of range', () => new t.Ledger({ tiers: [tier()] }).refillScale(3), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /tier 3 is not a tier id of this ledger/],
  ['Ledger.reset: a key that is not a string', () => new t.Ledger({ tiers: [tier()] }).reset('a', 5), TypeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /reset: key must be a string or undefined, got number/],
  ['Ledger.reset: a tier that is neither name nor id', () => new t.Ledger({ tiers: [tier()] }).reset({}), TypeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /tier must be a tier name \(string\) or id \(number\), got object/],
  ['Ledger.readResult: not a Float64Array', () => t.Ledger.readResult([1, 2, 3, 4, 5, 6]), TypeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /readResult needs a Float64Array of at least 6 elements/],
  ['LagMonitor.observe: an id of another type', () => t.LagMonitor.observe('1'), TypeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /^LagMonitor\.observe: id must be a number from monitor\.share\(\), got string$/],
  ['LagMonitor.observe: a number no share() gives', () => t.LagMonitor.observe(1.5), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /^LagMonitor\.observe: id must be an integer from monitor\.share\(\) \(1\.\.4294967295\), got 1\.5$/],
  ['LagMonitor.observe: no live monitor shares the id (native)', () => t.LagMonitor.observe(0xfffffff0), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /^LagMonitor\.observe: no live LagMonitor shared as 4294967280$/],
  ['gatekeeper: a bad shed value', () => t.gatekeeper({ shed: { targetLagMs: -1 } }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /options\.shed\.targetLagMs/],
  ['gatekeeper: a bucket config error', () => t.gatekeeper({ tiers: [tier({ limit: -1 })] }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /options\.tiers\[0\]\.limit/],
  ['gatekeeper: a native config error', () => t.gatekeeper({ tiers: [tier({ name: 'a' }), tier({ name: 'a' })] }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /options\.tiers\[1\]\.name "a" is a duplicate/],
  ['gatekeeper: an unknown option', () => t.gatekeeper({ tierheader: 'x' }), TypeError, 'ERR_TIERGATE_UNKNOWN_OPTION', /unknown option "tierheader" \(known: tiers,/],
  ['gatekeeper: an unknown shed option', () => t.gatekeeper({ shed: { target: 1 } }), TypeError, 'ERR_TIERGATE_UNKNOWN_OPTION', /options\.shed has an unknown option "target"/],
  ['gatekeeper.http: an unknown option', () => t.gatekeeper.http({ x: 1 }, () => {}), TypeError, 'ERR_TIERGATE_UNKNOWN_OPTION', /unknown option "x"/],
  ['concurrencyGate: a bad value', () => t.concurrencyGate({ maxConcurrent: 0 }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /maxConcurrent must be >= 1/],
  ['concurrencyGate: an unknown option', () => t.concurrencyGate({ maxConcurrent: 1, queue: 1 }), TypeError, 'ERR_TIERGATE_UNKNOWN_OPTION', /unknown option "queue" \(known: maxConcurrent,/],
  ['LagMonitor: a bad value', () => new t.LagMonitor({ resolutionMs: -1 }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /resolutionMs/],
  ['LagMonitor: an unknown option', () => new t.LagMonitor({ window: 1 }), TypeError, 'ERR_TIERGATE_UNKNOWN_OPTION', /unknown option "window" \(known: resolutionMs, windowMs, ewmaMs, stallMs\)/],
  ['mintTierToken: a short secret', () => t.mintTierToken('short', 'a', { ttlSec: 1 }), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /secret must be at least 16 bytes/],
  ['Ledger.tryConsume: a negative cost (native)', () => new t.Ledger({ tiers: [tier()] }).tryConsume('a', undefined, -1), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /cost must be a finite number >= 0/],
  ['Ledger.tryConsume: a key that is not a string (native)', () => new t.Ledger({ tiers: [tier()] }).tryConsume('a', 5), TypeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /key must be a string or undefined/],
  ['gatekeeper: a bad limit number (native)', () => t.gatekeeper({ shed: false, limits: [{ name: 'l', limit: NaN, windowMs: 1 }] }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /options\.limits\[0\]\.limit must be an integer from 1 to 4294967295 \(got NaN\)/],
  ['gatekeeper: a bad deny entry (native)', () => t.gatekeeper({ shed: false, deny: ['10.0.0.1/8'] }), RangeError, 'ERR_TIERGATE_INVALID_OPTION', /options\.deny\[0\]/],
  ['gatekeeper: an unknown limit option', () => t.gatekeeper({ shed: false, limits: [{ name: 'l', limit: 1, windowMs: 1, per: 1 }] }), TypeError, 'ERR_TIERGATE_UNKNOWN_OPTION', /limits\[0\] has an unknown option "per"/],
  ['defense.bans.ban: a bad target', () => t.gatekeeper({ shed: false, deny: [] }).defense.bans.ban('x'), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /bans\.ban/],
  ['defense.bans.ban: a full table of permanent bans', () => {
    const d = t.gatekeeper({ shed: false, bans: { maxBans: 1 } }).defense;
    d.bans.ban('192.0.2.1');
    d.bans.ban('192.0.2.2');
  }, RangeError, 'ERR_TIERGATE_BAN_TABLE_FULL', /full of permanent bans/],
  ['injectHealth: NaN', () => t.gatekeeper({ shed: false }).injectHealth({ lagMs: NaN }), RangeError, 'ERR_TIERGATE_INVALID_ARGUMENT', /injectHealth: lagMs/],
];

for (const [what, fn, Err, code, message] of CASES) {
  test(`${what}: ${Err.name} with code ${code}`, () => {
    assert.throws(fn, (err) => err instanceof Err && err.code === code && message.test(err.message));
  });
}

test('the Fastify plugins report an option error with its code through register()', async () => {
  const fastify = require('fastify')({ logger: false });
  fastify.register(t.tiergatePlugin, { nope: 1 });
  await assert.rejects(fastify.ready(), (err) => err.code === 'ERR_TIERGATE_UNKNOWN_OPTION');
});
