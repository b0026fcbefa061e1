'use strict';
// dashboard()'s options (docs/dashboard.md): the components it shows (as statusRoute's) and its
// sampling, which bounds its memory (historySec × 1000 / intervalMs samples).
const { schema } = require('./index');
const { OBSERVED } = require('./metrics');

const DASHBOARD = schema([
  { name: 'token', type: 'any', docDefault: '**required**', accepted: 'a string or Buffer of at least 16 bytes (use 32 random bytes, from the environment or a secret store)', doc: 'the admin credential. Without it `dashboard()` throws: it is never open' },
  ...OBSERVED.map((e) => ({ ...e, doc: 'what to show; at least one' })),
  { name: 'prefix', type: 'string', docDefault: 'none', accepted: 'a path like `/tiergate`, no trailing slash', doc: 'node:http only: the path it lives under; under it every path is the dashboard\'s' },
  { name: 'intervalMs', type: 'integer', default: 1000, min: 100, max: 1000, doc: 'sampling interval' },
  { name: 'historySec', type: 'integer', default: 300, min: 10, max: 3600, doc: 'seconds of samples kept in memory' },
  { name: 'maxStreams', type: 'integer', default: 16, min: 1, max: 1000, doc: 'live streams open at once (more get 503 `TOO_MANY_STREAMS`)' },
  { name: 'service', type: 'object', docDefault: 'none', orFalse: true, accepted: "`{ apiBase = '/api/v1' }` or `false`", doc: "the decision service's pages (the service sets this itself)" },
]);

module.exports = { DASHBOARD };
