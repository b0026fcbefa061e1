'use strict';
// The service's options (declared once in lib/schema/service.js): their flag (--kebab-case) and
// environment (TIERGATE_SNAKE_CASE) names, and their checks. Flags win over the environment.
const fs = require('node:fs');
const { CODES, codedError } = require('../errors');
const { SERVE: OPTIONS, LOG_LEVELS } = require('../schema/service');

const MIN_TOKEN_LENGTH = 16;
// The admin token's estimated entropy (tokenBits) must reach this: a random 64-bit secret.
const MIN_TOKEN_BITS = 64;

const kebab = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const envName = (name) => `TIERGATE_${name.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;

function bad(Ctor, message) {
  return codedError(Ctor, CODES.INVALID_OPTION, message);
}

function parseValue(name, raw, from) {
  const spec = OPTIONS[name];
  const at = `${from} ${name}`;
  if (spec.type === 'integer') {
    const n = typeof raw === 'number' ? raw : /^-?\d+$/.test(String(raw).trim()) ? Number(raw) : NaN;
    if (typeof raw !== 'number' && typeof raw !== 'string') throw bad(TypeError, `${at} must be a number, got ${typeof raw}`);
    if (!Number.isInteger(n) || n < spec.min || n > spec.max) throw bad(RangeError, `${at} must be an integer from ${spec.min} to ${spec.max}, got ${spec.secret ? '<hidden>' : JSON.stringify(raw)}`);
    return n;
  }
  if (spec.type === 'object') {
    const list = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : null;
    if (!list || list.some((s) => typeof s !== 'string')) throw bad(TypeError, `${at} must be a comma-separated string or an array of strings`);
    return list.map((s) => s.trim()).filter(Boolean);
  }
  if (spec.type === 'boolean') {
    if (raw === true || raw === 'true') return true;
    if (raw === false || raw === 'false') return false;
    throw bad(TypeError, `${at} must be true or false, got ${JSON.stringify(raw)}`);
  }
  if (spec.values !== undefined) {
    if (!spec.values.includes(raw)) throw bad(RangeError, `${at} must be one of ${spec.values.join(', ')}, got ${JSON.stringify(raw)}`);
    return raw;
  }
  if (typeof raw !== 'string' || raw === '') throw bad(TypeError, `${at} must be a non-empty string`);
  return raw;
}

/** `--name value` / `--name=value` flags of `tiergate serve` into { name: raw }. */
function parseFlags(argv) {
  const byFlag = new Map(Object.keys(OPTIONS).map((n) => [kebab(n), n]));
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const m = /^--([a-z-]+)(?:=(.*))?$/s.exec(arg);
    if (!m || !byFlag.has(m[1])) throw codedError(TypeError, CODES.UNKNOWN_OPTION, `unknown argument ${JSON.stringify(arg)} (flags: ${[...byFlag.keys()].map((f) => `--${f}`).join(', ')})`);
    let value = m[2];
    if (value === undefined) {
      if (i + 1 >= argv.length) throw bad(TypeError, `--${m[1]} needs a value`);
      value = argv[++i];
    }
    out[byFlag.get(m[1])] = value;
  }
  return out;
}

/**
 * A token's estimated entropy in bits: its length times log2 of the number of distinct characters in
 * it, which is what a random string of that length over those characters would hold. It overrates a
 * word or a pattern (nothing short of a dictionary sees those) but sees a repeat: 'aaaa…' holds 0.
 */
function tokenBits(token) {
  return token.length * Math.log2(new Set(token).size);
}

function readSecretFile(file, what) {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw bad(Error, `${what}: cannot read ${file} (${err.code || err.message})`);
  }
}

/**
 * The resolved options: explicit ones (flags, or createService's object) over the environment over
 * the defaults. Secrets from files are read here; the admin token is required.
 */
function resolve(explicit = {}, env = process.env) {
  const known = new Set(Object.keys(OPTIONS));
  for (const k of Object.keys(explicit)) {
    if (!known.has(k)) throw codedError(TypeError, CODES.UNKNOWN_OPTION, `unknown option "${k}" (known: ${[...known].join(', ')})`);
  }
  const out = {};
  for (const [name, spec] of Object.entries(OPTIONS)) {
    if (explicit[name] !== undefined && explicit[name] !== null) {
      out[name] = parseValue(name, explicit[name], 'option');
      continue;
    }
    const envKey = (spec.env || [envName(name)]).find((k) => env[k] !== undefined && env[k] !== '');
    out[name] = envKey ? parseValue(name, env[envKey], `environment variable ${envKey} for`) : spec.default;
  }
  if (out.adminToken === null && out.adminTokenFile !== null) out.adminToken = readSecretFile(out.adminTokenFile, 'adminTokenFile').trim();
  if (out.apiKeysFile !== null) out.apiKeys = out.apiKeys.concat(readSecretFile(out.apiKeysFile, 'apiKeysFile').split(/\r?\n/).map((s) => s.trim()).filter(Boolean));
  if (!out.adminToken) {
    throw codedError(Error, CODES.ADMIN_TOKEN_REQUIRED, 'the admin API needs a token: set TIERGATE_ADMIN_TOKEN (or TIERGATE_ADMIN_TOKEN_FILE, --admin-token-file); it will not run open');
  }
  if (out.adminToken.length < MIN_TOKEN_LENGTH) {
    throw codedError(Error, CODES.ADMIN_TOKEN_REQUIRED, `the admin token must be at least ${MIN_TOKEN_LENGTH} characters`);
  }
  if (tokenBits(out.adminToken) < MIN_TOKEN_BITS) {
    throw codedError(Error, CODES.ADMIN_TOKEN_REQUIRED, `adminToken (TIERGATE_ADMIN_TOKEN, --admin-token, --admin-token-file) is too easy to guess: ${out.adminToken.length} characters of ${new Set(out.adminToken).size} distinct ones hold at most ${Math.floor(tokenBits(out.adminToken))} bits, and at least ${MIN_TOKEN_BITS} are needed (length × log2(distinct characters)); use a random one, e.g. openssl rand -hex 24`);
  }
  if (out.headersTimeoutMs > out.requestTimeoutMs) {
    throw bad(RangeError, `headersTimeoutMs (${out.headersTimeoutMs}) must be at most requestTimeoutMs (${out.requestTimeoutMs}): the headers are part of the request`);
  }
  for (const k of out.apiKeys) if (k.length < MIN_TOKEN_LENGTH) throw bad(RangeError, `every API key must be at least ${MIN_TOKEN_LENGTH} characters`);
  if (2 * out.pgLockTimeoutMs >= out.storeTimeoutMs) {
    throw bad(RangeError, `pgLockTimeoutMs (${out.pgLockTimeoutMs}) must be less than half of storeTimeoutMs (${out.storeTimeoutMs}): a batch that meets a locked row waits for it twice before its answer is due`);
  }
  return Object.freeze(out);
}

module.exports = { OPTIONS, LOG_LEVELS, MIN_TOKEN_LENGTH, MIN_TOKEN_BITS, tokenBits, parseFlags, resolve, kebab, envName };
