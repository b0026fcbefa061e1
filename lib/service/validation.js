'use strict';
// Request bodies of the contract, checked field by field: a wrong one is a 400 VALIDATION_ERROR that
// names the field, and nothing is coerced (no "5" for 5, no 2.5 for an integer, no NaN or 1e300).
const { ALGORITHMS, isRate } = require('./algorithms');
const { HttpError } = require('./http');

const CLIENT_KEY = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
// Bounds, declared once (the OpenAPI document reads them too). A rate is any number above 0 (1 per
// hour is 1/3600; stored as a double, so nothing is rounded), within one bound of its bucket's below.
const LIMITS = Object.freeze({
  requestsPerSecond: { exclusiveMin: 0, max: 1_000_000 },
  burstSize: { min: 1, max: 1_000_000 },
  maxRequests: { min: 1, max: 100_000 },
  windowSeconds: { min: 1, max: 86_400 },
  cost: { min: 1, max: 1_000_000 },
  units: { min: 1, max: 1_000_000 },
  durationSeconds: { min: 1, max: 366 * 86_400 },
  reason: { maxLength: 200 },
  // burstSize / requestsPerSecond: the time a bucket takes to fill from empty. Every time a rate
  // policy reports (resetAt, Retry-After) is within it, so it keeps them dates that can be written:
  // 10^12 s (about 31,700 years) admits a burst of 1,000,000 at one per 10^6 s.
  refillSeconds: { max: 1e12 },
});
const FIELDS = Object.fromEntries(Object.entries(ALGORITHMS).map(([name, a]) => [name, a.fields]));

function invalid(message) {
  return new HttpError(400, 'VALIDATION_ERROR', message);
}

function typeOf(v) {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
}

function object(body, what) {
  if (typeOf(body) !== 'object') throw invalid(`${what} must be a JSON object, got ${typeOf(body)}`);
  return body;
}

function onlyFields(body, allowed) {
  for (const k of Object.keys(body)) {
    if (!allowed.includes(k)) throw invalid(`unknown field "${k}" (allowed: ${allowed.join(', ')})`);
  }
}

function clientKey(v, field = 'clientKey') {
  if (typeof v !== 'string') throw invalid(`${field} must be a string, got ${typeOf(v)}`);
  if (!CLIENT_KEY.test(v)) throw invalid(`${field} must match ${CLIENT_KEY.source}`);
  return v;
}

function number(body, field, { integer }) {
  const v = body[field];
  const { min, exclusiveMin, max } = LIMITS[field];
  if (v === undefined) throw invalid(`${field} is required`);
  if (typeof v !== 'number') throw invalid(`${field} must be a number, got ${typeOf(v)}`);
  if (integer && !Number.isInteger(v)) throw invalid(`${field} must be an integer, got ${v}`);
  const what = integer ? 'an integer' : 'a number';
  if (exclusiveMin !== undefined) {
    if (!(v > exclusiveMin && v <= max)) throw invalid(`${field} must be ${what} above ${exclusiveMin} and at most ${max}, got ${v}`);
  } else if (!(v >= min && v <= max)) throw invalid(`${field} must be ${what} from ${min} to ${max}, got ${v}`);
  return v;
}

/** A rate and a burst, each in its bounds, whose bucket fills within LIMITS.refillSeconds. */
function rate(body) {
  const requestsPerSecond = number(body, 'requestsPerSecond', { integer: false });
  const burstSize = number(body, 'burstSize', { integer: true });
  if (!(burstSize / requestsPerSecond <= LIMITS.refillSeconds.max)) {
    throw invalid(`burstSize / requestsPerSecond (the time to refill the bucket) must be at most ${LIMITS.refillSeconds.max} seconds, got ${burstSize / requestsPerSecond}`);
  }
  return { requestsPerSecond, burstSize };
}

/** A policy body: for POST (with clientKey) or PUT (the key comes from the path). */
function policy(body, keyFromPath) {
  object(body, 'the body');
  const key = keyFromPath === undefined ? clientKey(body.clientKey) : keyFromPath;
  if (keyFromPath !== undefined && body.clientKey !== undefined && body.clientKey !== keyFromPath) {
    throw invalid('clientKey in the body must match the path (a client is renamed by DELETE and POST)');
  }
  const { algorithm } = body;
  if (algorithm === undefined) throw invalid(`algorithm is required (one of: ${Object.keys(FIELDS).join(', ')})`);
  if (!Object.hasOwn(FIELDS, algorithm)) throw invalid(`algorithm must be one of: ${Object.keys(FIELDS).join(', ')}, got ${JSON.stringify(algorithm)}`);
  onlyFields(body, ['clientKey', 'algorithm', ...FIELDS[algorithm]]);
  if (isRate({ algorithm })) {
    return { clientKey: key, algorithm, ...rate(body) };
  }
  return { clientKey: key, algorithm, maxRequests: number(body, 'maxRequests', { integer: true }), windowSeconds: number(body, 'windowSeconds', { integer: true }) };
}

/** A check body: { clientKey, cost? }. */
function check(body) {
  object(body, 'the body');
  onlyFields(body, ['clientKey', 'cost']);
  const key = clientKey(body.clientKey);
  const cost = body.cost === undefined ? 1 : number(body, 'cost', { integer: true });
  return { clientKey: key, cost };
}

/** A refund body: { units? } (default 1). */
function refund(body) {
  object(body, 'the body');
  onlyFields(body, ['units']);
  return { units: body.units === undefined ? 1 : number(body, 'units', { integer: true }) };
}

/** A ban body: { clientKey, durationSeconds?, reason? }; no duration is a ban until lifted. */
function ban(body) {
  object(body, 'the body');
  onlyFields(body, ['clientKey', 'durationSeconds', 'reason']);
  const key = clientKey(body.clientKey);
  const durationSeconds = body.durationSeconds === undefined ? null : number(body, 'durationSeconds', { integer: true });
  let reason = '';
  if (body.reason !== undefined) {
    if (typeof body.reason !== 'string') throw invalid(`reason must be a string, got ${typeOf(body.reason)}`);
    if (body.reason.length > LIMITS.reason.maxLength) throw invalid(`reason must be at most ${LIMITS.reason.maxLength} characters`);
    reason = body.reason;
  }
  return { clientKey: key, durationSeconds, reason };
}

module.exports = { CLIENT_KEY, LIMITS, FIELDS, clientKey, policy, check, refund, ban };
