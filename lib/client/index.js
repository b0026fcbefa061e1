'use strict';
// A Node client of the decision service (`tiergate serve`): keep-alive connections, a timeout on
// every check, and a choice of failing open or closed when the service gives no usable answer
// (network error, timeout, 5xx, an answer outside the contract). Middleware for Express/connect and
// a Fastify onRequest hook are built on it. Zero dependencies (node:http / node:https).
const http = require('node:http');
const https = require('node:https');
const { CODES, codedError, buildingOptions } = require('../errors');
const { isObject, onlyKnown, typeName, schemaOption } = require('../options');
const { SERVICE_CLIENT } = require('../schema/client');
const { defaultsOf, optionNames } = require('../schema');

const DEFAULTS = Object.freeze(defaultsOf(SERVICE_CLIENT));
const KNOWN = optionNames(SERVICE_CLIENT);
const CHECK_PATH = '/api/v1/rate-limit/check';
const PASSED_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit', 'ratelimit-policy', 'retry-after'];

function clientOptions(url, options) {
  if (typeof url !== 'string' && !(url instanceof URL)) throw new TypeError(`client: url must be a string, got ${typeName(url)}`);
  let base;
  try { base = new URL(String(url)); } catch { throw new TypeError(`client: url must be an http(s) URL, got ${JSON.stringify(String(url))}`); }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new TypeError(`client: url must be an http(s) URL, got ${JSON.stringify(String(url))}`);
  if (options === undefined) options = {};
  if (!isObject(options)) throw new TypeError(`client options must be an object, got ${typeName(options)}`);
  onlyKnown(options, KNOWN, 'client options');
  const o = { ...DEFAULTS, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
  for (const e of Object.values(SERVICE_CLIENT)) schemaOption(e, o[e.name], `client options.${e.name}`);
  if (o.apiKey !== null && (typeof o.apiKey !== 'string' || o.apiKey === '')) throw new TypeError(`client options.apiKey must be a non-empty string, got ${typeName(o.apiKey)}`);
  return { base, ...o };
}

class ServiceClient {
  #o;
  #agent;
  #transport;

  constructor(url, options) {
    this.#o = buildingOptions(() => clientOptions(url, options));
    this.#transport = this.#o.base.protocol === 'https:' ? https : http;
    this.#agent = new this.#transport.Agent({ keepAlive: true, maxSockets: this.#o.maxSockets });
  }

  /**
   * Asks the service about one check. Resolves (never rejects) to
   * `{ allowed, status, limit, remaining, resetAt, retryAfter, banned, headers, error }`:
   * `status` 0 and `error` set when the service gave no usable answer, with `allowed` per `failOpen`.
   */
  check(clientKey, { cost } = {}) {
    const body = JSON.stringify(cost === undefined ? { clientKey } : { clientKey, cost });
    return new Promise((resolve) => {
      let settled = false;
      const fail = (message, status = 0, detail) => {
        if (settled) return;
        settled = true;
        const error = codedError(Error, CODES.SERVICE_UNAVAILABLE, message);
        if (detail) error.detail = detail;
        resolve({ allowed: this.#o.failOpen, status, failedOpen: this.#o.failOpen, error, headers: {} });
      };
      const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
      if (this.#o.apiKey) headers.authorization = `Bearer ${this.#o.apiKey}`;
      const req = this.#transport.request({
        protocol: this.#o.base.protocol, hostname: this.#o.base.hostname, port: this.#o.base.port,
        path: this.#o.base.pathname.replace(/\/$/, '') + CHECK_PATH, method: 'POST', headers, agent: this.#agent,
      }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => { text += c; });
        res.on('error', (err) => fail(`the decision service's answer broke off: ${err.message}`));
        res.on('end', () => {
          clearTimeout(timer);
          let parsed = null;
          try { parsed = JSON.parse(text); } catch { /* checked below */ }
          const s = res.statusCode;
          if ((s === 200 || s === 429 || s === 403) && parsed && typeof parsed.allowed === 'boolean') {
            if (settled) return;
            settled = true;
            const passed = {};
            for (const h of PASSED_HEADERS) if (res.headers[h] !== undefined) passed[h] = res.headers[h];
            resolve({
              allowed: s === 200 && parsed.allowed === true,
              status: s,
              limit: parsed.limit,
              remaining: parsed.remaining,
              resetAt: parsed.resetAt,
              retryAfter: res.headers['retry-after'] === undefined ? undefined : Number(res.headers['retry-after']),
              banned: s === 403,
              headers: passed,
              error: null,
            });
            return;
          }
          const code = parsed && typeof parsed.error === 'string' ? parsed.error : null;
          fail(`the decision service answered ${s}${code ? ` ${code}` : ''}`, s, parsed);
        });
      });
      const timer = setTimeout(() => {
        req.destroy();
        fail(`the decision service did not answer within ${this.#o.timeoutMs} ms`);
      }, this.#o.timeoutMs);
      req.on('error', (err) => { clearTimeout(timer); fail(`the decision service is unreachable: ${err.message}`); });
      req.end(body);
    });
  }

  /** Express/connect middleware: checks `key(req)` (and `cost(req)`), then next() or a 429/403/503. */
  middleware(options) {
    const { key, cost } = middlewareOptions(options, 'middleware');
    return (req, res, next) => {
      const k = key(req);
      this.check(k, cost === undefined ? {} : { cost: typeof cost === 'function' ? cost(req) : cost }).then((d) => {
        for (const [h, v] of Object.entries(d.headers)) res.setHeader(h, v);
        if (d.allowed) { next(); return; }
        const r = refusal(d);
        res.statusCode = r.status;
        for (const [h, v] of Object.entries(r.headers)) res.setHeader(h, v);
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.end(JSON.stringify(r.body));
      }, next);
    };
  }

  /** A Fastify onRequest hook: `fastify.addHook('onRequest', client.fastifyHook({ key }))`. */
  fastifyHook(options) {
    const { key, cost } = middlewareOptions(options, 'fastifyHook');
    return async (request, reply) => {
      const d = await this.check(key(request), cost === undefined ? {} : { cost: typeof cost === 'function' ? cost(request) : cost });
      reply.headers(d.headers);
      if (d.allowed) return;
      const r = refusal(d);
      reply.code(r.status).headers(r.headers).send(r.body);
      return reply;
    };
  }

  /** Closes the kept-alive connections. */
  close() {
    this.#agent.destroy();
  }
}

function refusal(d) {
  if (d.status === 429) return { status: 429, headers: {}, body: { error: 'RATE_LIMIT_EXCEEDED', message: 'Rate limit exceeded', retryAfter: d.retryAfter } };
  if (d.status === 403) return { status: 403, headers: {}, body: { error: 'BANNED', message: 'Client is banned' } };
  return { status: 503, headers: { 'retry-after': '1' }, body: { error: 'SERVICE_UNAVAILABLE', message: 'the rate-limit service is unavailable' } };
}

function middlewareOptions(options, at) {
  return buildingOptions(() => {
    if (!isObject(options)) throw new TypeError(`${at} options must be an object { key, cost? }, got ${typeName(options)}`);
    onlyKnown(options, new Set(['key', 'cost']), `${at} options`);
    if (typeof options.key !== 'function') throw new TypeError(`${at} options.key must be a function (req) => clientKey, got ${typeName(options.key)}`);
    const c = options.cost;
    if (c !== undefined && typeof c !== 'function' && !(Number.isInteger(c) && c >= 1)) throw new TypeError(`${at} options.cost must be an integer >= 1 or a function, got ${typeName(c)}`);
    return { key: options.key, cost: c };
  });
}

/** `tiergate.client(url, options)`: a client of the decision service. */
function client(url, options) {
  return new ServiceClient(url, options);
}

module.exports = { clientOptions, client, ServiceClient, CLIENT_DEFAULTS: DEFAULTS };
