'use strict';
// The stores cluster mode runs on, for suites that run the same tests on each: a real redis-server
// or a real PostgreSQL of the test's own (./redis.js, ../service/helpers.js), behind one shape:
// `{ option, freeze(), thaw(), banEntries(), stop() }`, where `option` is what cluster() takes
// ({ redis: url } or { postgres: url }), freeze/thaw SIGSTOP/SIGCONT the whole server (a hung host),
// and banEntries() reads the shared ban entries of the default prefix outside the library.
const { spawnSync } = require('node:child_process');
const { needRedis, redisServer } = require('./redis');
const { startPostgres, pgMissing } = require('../service/helpers');

const STORES = [
  {
    name: 'Redis',
    /** Whether the test can run (else it is skipped, or fails in CI). */
    need: (t) => needRedis(t),
    async start() {
      const s = await redisServer();
      const banEntries = async () => spawnSync('redis-cli', ['-p', String(s.port), '--raw', 'HVALS', 'tiergate:{bans}'], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
      return { server: s, option: { redis: s.url }, freeze: () => s.proc.kill('SIGSTOP'), thaw: () => s.proc.kill('SIGCONT'), banEntries, stop: () => s.stop() };
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
      const banEntries = async () => {
        const { Client } = require('pg');
        const c = new Client({ connectionString: s.url });
        await c.connect();
        try {
          return (await c.query('SELECT entry FROM tiergate_bans')).rows.map((r) => r.entry);
        } finally {
          await c.end();
        }
      };
      return { server: s, option: { postgres: s.url }, freeze: () => s.signal('SIGSTOP'), thaw: () => s.signal('SIGCONT'), banEntries, stop: () => s.stop() };
    },
  },
];

module.exports = { STORES };
