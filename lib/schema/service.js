'use strict';
// The decision service's options (`tiergate serve`, createService; docs/service.md#options). Each is a
// flag (--kebab-case), an environment variable (TIERGATE_SNAKE_CASE, or the names in `env`) and a key
// of createService's object; lib/service/config.js parses and checks them from here, and the docs'
// table is generated from here. `secret`: its value is never shown in a message. A list (type
// 'object') is comma-separated in a flag or the environment.
const { schema } = require('./index');

const LOG_LEVELS = Object.freeze(['silent', 'error', 'warn', 'info', 'debug']);
const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const TEN_MINUTES_MS = 10 * MINUTE_MS;

const SERVE = schema([
  { name: 'host', type: 'string', default: '127.0.0.1', doc: 'address to listen on (`0.0.0.0` in a container)' },
  { name: 'port', type: 'integer', min: 0, max: 65535, default: 3000, env: ['TIERGATE_PORT', 'PORT'], doc: '`0` picks a free port (the listening line says which)' },
  { name: 'data', type: 'string', default: 'tiergate-data', doc: "the embedded store's folder" },
  { name: 'database', type: 'string', default: null, env: ['TIERGATE_DATABASE', 'DATABASE_URL'], doc: '`postgres://…`: PostgreSQL is the store' },
  { name: 'adminToken', type: 'string', default: null, secret: true, docDefault: '**required**', doc: "the admin API's bearer token: ≥ 16 characters and ≥ 64 bits by length × log2(distinct characters) ([Security](#security))" },
  { name: 'adminTokenFile', type: 'string', default: null, doc: 'read the token from a file (a mounted secret)' },
  { name: 'apiKeys', type: 'object', default: [], secret: true, docDefault: 'none: open', doc: 'comma-separated keys; when set, the check requires one' },
  { name: 'apiKeysFile', type: 'string', default: null, doc: 'one key per line' },
  { name: 'corsOrigins', type: 'object', default: [], docDefault: 'none', doc: 'comma-separated origins (or `*`) allowed to call from a browser' },
  // A body without Content-Type is refused (415): a page of any origin can send one without a CORS
  // preflight (a no-cors fetch of a Blob, sendBeacon). false accepts it as JSON.
  { name: 'requireJsonContentType', type: 'boolean', default: true, doc: '`false` accepts a body sent without `Content-Type` as JSON (any web page can then spend quotas: [Security](#security))' },
  { name: 'logLevel', type: 'string', default: 'info', values: LOG_LEVELS, doc: '`info` and `debug` add access logs' },
  { name: 'requestTimeoutMs', type: 'integer', min: 1000, max: TEN_MINUTES_MS, default: 30_000, doc: 'a whole request, headers and body' },
  { name: 'headersTimeoutMs', type: 'integer', min: 1000, max: TEN_MINUTES_MS, default: 10_000, doc: 'the request headers (at most the request timeout)' },
  { name: 'keepAliveTimeoutMs', type: 'integer', min: 0, max: TEN_MINUTES_MS, default: 5_000, doc: 'an idle kept-alive connection' },
  // node's server.maxConnections.
  { name: 'maxConnections', type: 'integer', min: 1, max: 1_000_000, default: 10_000, doc: 'open connections at most; past it a new one is closed as it arrives' },
  { name: 'drainTimeoutMs', type: 'integer', min: 0, max: TEN_MINUTES_MS, default: 10_000, doc: 'SIGTERM: the longest wait for in-flight requests' },
  { name: 'bodyLimitBytes', type: 'integer', min: 256, max: 1_048_576, default: 16_384, doc: 'larger bodies get 413' },
  { name: 'activityFlushMs', type: 'integer', min: 5, max: 10_000, default: 50, doc: 'activity records are written behind at this interval' },
  { name: 'activityMaxAgeHours', type: 'integer', min: 1, max: 24 * 366, default: 24, doc: 'activity rows older than this are deleted' },
  { name: 'activityMaxRows', type: 'integer', min: 100, max: 100_000_000, default: 100_000, doc: 'at most this many activity rows are kept' },
  { name: 'activityMaxBuffered', type: 'integer', min: 1000, max: 10_000_000, default: 100_000, doc: 'records waiting for a slow store at most (the oldest are dropped, counted in `/metrics`)' },
  { name: 'pruneIntervalMs', type: 'integer', min: 100, max: HOUR_MS, default: 10_000, doc: 'how often retention runs' },
  { name: 'poolSize', type: 'integer', min: 1, max: 1000, default: 10, doc: 'PostgreSQL connections per instance' },
  // A check is answered within storeTimeoutMs, below the client's default timeoutMs (1000) so that a
  // caller gets the service's 503 rather than its own timeout, and far above a healthy batch (a few
  // ms at the load test's p99).
  { name: 'storeTimeoutMs', type: 'integer', min: 50, max: MINUTE_MS, default: 750, doc: "a check's longest wait for the store, then 503 ([Bounded waits](#bounded-waits))" },
  // A batch that meets a locked row waits this long, then its other clients are decided and the
  // locked one waits once more, so twice this must fit within storeTimeoutMs (lib/service/config.js).
  { name: 'pgLockTimeoutMs', type: 'integer', min: 10, max: MINUTE_MS, default: 250, accepted: '< `storeTimeoutMs` / 2', doc: 'PostgreSQL `lock_timeout`: a wait for a row locked elsewhere' },
  // A batch's transaction is idle for one turn of its event loop.
  { name: 'pgIdleInTransactionTimeoutMs', type: 'integer', min: 100, max: HOUR_MS, default: 2000, doc: "PostgreSQL `idle_in_transaction_session_timeout`: the server ends a stopped instance's transaction and frees its locks" },
  { name: 'pgStatementTimeoutMs', type: 'integer', min: 100, max: HOUR_MS, default: 5000, doc: "PostgreSQL `statement_timeout`, and an admin query's longest wait" },
]);

module.exports = { SERVE, LOG_LEVELS };
