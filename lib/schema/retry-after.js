'use strict';
// `retryAfter: { minSec?, maxSec? }`, as every guard takes it (lib/options.js retryAfterOptions).
const { schema } = require('./index');

/** Retry-After is at most a day: a client told to come back in 1e21 s has been told nothing useful. */
const MAX_RETRY_AFTER_SEC = 86400;

const RETRY_AFTER = schema([
  { name: 'minSec', type: 'integer', default: 1, max: MAX_RETRY_AFTER_SEC, doc: 'the shortest Retry-After sent, whole seconds' },
  { name: 'maxSec', type: 'integer', default: 3, max: MAX_RETRY_AFTER_SEC, docDefault: 'the larger of `minSec` and `3`', accepted: '≥ `minSec`', doc: 'the longest Retry-After sent, whole seconds' },
]);

module.exports = { RETRY_AFTER, MAX_RETRY_AFTER_SEC };
