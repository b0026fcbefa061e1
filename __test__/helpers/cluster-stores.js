'use strict';
// The stores cluster mode runs on, for suites that run the same tests on each: a real redis-server
// or a real PostgreSQL of the test's own (./redis.js, ../service/helpers.js), behind one shape:
// `{ option, freeze(), thaw(), stop() }`, where `option` is what cluster() takes ({ redis: url } or
// { postgres: url }) and freeze/thaw SIGSTOP/SIGCONT the whole server (a hung host).
const { needRedis, redisServer } = require('./redis');
const { startPostgres, pgMissing } = require('../service/helpers');

const STORES = [
  {
    name: 'Redis',
    /** Whether the test can run (else it is skipped, or fails in CI). */
    need: (t) => needRedis(t),
    async start() {
      const s = await redisServer();
      return { server: s, option: { redis: s.url }, freeze: () => s.proc.kill('SIGSTOP'), thaw: () => s.proc.kill('SIGCONT'), stop: () => s.stop() };
    },
  },
  {
    name: 'PostgreSQL',
    need(t) {
      const missing = pgMissing();
      if (!missing) return true;
      if (process.env.CI) throw new Error(missing);
      t.skip(missing);
      return false;
    },
    async start() {
      const s = await startPostgres();
      return { server: s, option: { postgres: s.url }, freeze: () => s.signal('SIGSTOP'), thaw: () => s.signal('SIGCONT'), stop: () => s.stop() };
    },
  },
];

module.exports = { STORES };
