// Typed usage of the Fastify plugins as the README shows them, checked by `tsc --noEmit` (see
// __test__/api/types.test.js): register() accepts them and the decorations they add are typed.
import Fastify from 'fastify';
import { tiergatePlugin, concurrencyGatePlugin } from 'tiergate';
import type { GatekeeperStats, ConcurrencyGateStats } from 'tiergate';

const fastify = Fastify();
fastify.register(tiergatePlugin, {
  tiers: [
    { name: 'critical', protected: true, limit: 2000, windowMs: 1000 },
    { name: 'standard', limit: 1000, windowMs: 1000 },
    { name: 'background', limit: 500, windowMs: 1000 },
  ],
  routes: [{ method: 'POST', path: '/checkout', tier: 'critical' }, { path: '/reports/', tier: 'background' }],
  tierSecret: process.env.TIER_SECRET,
});
fastify.register(concurrencyGatePlugin, { maxConcurrent: 16, maxQueue: 200 });
fastify.get('/stats', async () => fastify.tiergate.stats());
fastify.post('/checkout', { config: { tiergate: { tier: 'critical' }, concurrencyGate: { tier: 'critical' } } }, async () => 'ok');
fastify.get('/health', { config: { tiergate: false, concurrencyGate: false } }, async () => 'up');
const gk: GatekeeperStats = fastify.tiergate.stats();
const q: ConcurrencyGateStats = fastify.concurrencyGate.stats();
void [gk, q];
