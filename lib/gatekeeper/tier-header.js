'use strict';
// The tier header, read the same way by every guard: the option checks (tier names, the header's
// name, tierSecret) and, for guards that do not decide natively, the native rule itself
// (src/core/gate/tier.rs: exact names, signed tokens, the lowest tier for anything unreadable), and
// the minting of signed tokens.
const native = require('../native');
const { typeName, finite } = require('../options');
const { CODES, withCode } = require('../errors');

/** Tier names appear in headers, tokens and problem bodies. */
const TIER_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const TIER_NAME_RULE = '1-64 characters of A-Z a-z 0-9 _ -';
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** The tier header's name unless options.tierHeader says otherwise (every guard's). */
const DEFAULT_TIER_HEADER = 'x-user-tier';

function checkTierName(name, at) {
  if (typeof name !== 'string') throw new TypeError(`${at} must be a string, got ${typeName(name)}`);
  if (!TIER_NAME.test(name)) throw new RangeError(`${at} must be ${TIER_NAME_RULE} (it appears in headers and tokens), got ${JSON.stringify(name)}`);
  return name;
}

/** `tierHeader`: a header name (lower-cased, as node keys req.headers) or false (null: no header). */
function tierHeaderOption(v, at) {
  if (v === undefined) return DEFAULT_TIER_HEADER;
  if (v === false) return null;
  if (typeof v !== 'string' || !HEADER_NAME.test(v)) throw new TypeError(`${at} must be a header name or false, got ${typeName(v)} ${JSON.stringify(v)}`);
  return v.toLowerCase();
}

function secretBuffer(s, at) {
  const buf = typeof s === 'string' ? Buffer.from(s, 'utf8') : Buffer.isBuffer(s) || s instanceof Uint8Array ? Buffer.from(s) : null;
  if (buf === null) throw new TypeError(`${at} must be a string or a Buffer, got ${typeName(s)}`);
  if (buf.length < 16) throw new RangeError(`${at} must be at least 16 bytes (32 random bytes recommended), got ${buf.length}`);
  return buf;
}

/** `tierSecret`: one secret or an array (the first mints, every one verifies); undefined if not given. */
function tierSecretOption(v, at) {
  if (v === undefined) return undefined;
  const list = Array.isArray(v) ? v : [v];
  if (list.length === 0) throw new RangeError(`${at} must hold at least one secret`);
  return list.map((s, i) => secretBuffer(s, Array.isArray(v) ? `${at}[${i}]` : at));
}

/** The native rule for one guard's tiers: `tierOf(value)` -> the tier id (native: id * 16 + source). */
class TierHeader {
  constructor(names, defaultTier, trustTierHeader, secrets) {
    const bound = {};
    new native.TierHeaderHandle(names, defaultTier, trustTierHeader, secrets).bind(bound);
    this.resolveRaw = bound.resolve;
  }

  /** The tier id for a header value (a string: several values joined with ', '). */
  tierOf(value) {
    return this.resolveRaw(value) >> 4;
  }
}

/**
 * Mints a signed tier token for the tier header: `t1.<tier>.<expires>.<mac>`, HMAC-SHA256 with
 * `secret`, valid until `expiresAt` (Unix seconds) or for `ttlSec` seconds from now.
 */
function mintTierToken(secret, tier, when) {
  try {
    return mint(secret, tier, when);
  } catch (err) {
    throw withCode(err, CODES.INVALID_ARGUMENT);
  }
}

function mint(secret, tier, { ttlSec, expiresAt } = {}) {
  const key = secretBuffer(secret, 'mintTierToken: secret');
  if (typeof tier !== 'string') throw new TypeError(`mintTierToken: tier must be a tier name, got ${typeName(tier)}`);
  if (!TIER_NAME.test(tier)) throw new RangeError(`mintTierToken: tier must be ${TIER_NAME_RULE}, got ${JSON.stringify(tier)}`);
  if ((ttlSec === undefined) === (expiresAt === undefined)) throw new TypeError('mintTierToken: give exactly one of { ttlSec, expiresAt }');
  const exp = expiresAt !== undefined
    ? finite(expiresAt, 'mintTierToken: expiresAt', { max: 999_999_999_999, integer: true })
    : Math.floor(Date.now() / 1000) + finite(ttlSec, 'mintTierToken: ttlSec', { min: 1, max: 10 * 365 * 86400, integer: true });
  return native.mintTierToken(key, tier, exp);
}

module.exports = { DEFAULT_TIER_HEADER, mintTierToken, TierHeader, TIER_NAME, TIER_NAME_RULE, checkTierName, tierHeaderOption, tierSecretOption, secretBuffer };
