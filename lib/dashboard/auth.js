'use strict';
// The admin credential: `Authorization: Bearer <token>`, compared in constant time (SHA-256 of both,
// so neither the length nor a prefix leaks through timing). There is no default and no way to turn
// it off: a dashboard without a token refuses to be built.
const crypto = require('node:crypto');

const MIN_TOKEN_BYTES = 16;

function digest(v) {
  return crypto.createHash('sha256').update(v).digest();
}

/** The token option as bytes; throws naming `at` when absent or too short to be a secret. */
function tokenOption(token, at) {
  if (token === undefined || token === null || token === '') {
    throw new TypeError(`${at} is required: the dashboard shows operational data and is never open (give a random secret of at least ${MIN_TOKEN_BYTES} bytes, e.g. from an environment variable)`);
  }
  if (typeof token !== 'string' && !Buffer.isBuffer(token)) throw new TypeError(`${at} must be a string or a Buffer, got ${typeof token}`);
  const bytes = Buffer.from(token);
  if (bytes.length < MIN_TOKEN_BYTES) throw new RangeError(`${at} must be at least ${MIN_TOKEN_BYTES} bytes (32 random bytes recommended), got ${bytes.length}`);
  return digest(bytes);
}

/** Whether the request carries the token (`expected`: tokenOption's digest). */
function authorized(req, expected) {
  const h = req.headers.authorization;
  if (typeof h !== 'string' || !/^Bearer /i.test(h)) return false;
  return crypto.timingSafeEqual(digest(Buffer.from(h.slice(7).trim())), expected);
}

module.exports = { tokenOption, authorized, MIN_TOKEN_BYTES };
