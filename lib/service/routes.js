'use strict';
// The contract's endpoints. Each handler gets (ctx, req, res, params) and either sends a response or
// throws an HttpError; the server turns anything else into a 500 with no detail.
const { HttpError, sendJson, readJson } = require('./http');
const validate = require('./validation');
const { limitOf, windowSecondsOf } = require('./algorithms');
const { RANGES } = require('./stores/rows');
const { openapi } = require('./openapi');

const RECENT = 20;
const JSON_TYPE = 'application/json; charset=utf-8';

/** Writes the activity recorded so far before an admin read; a failed write is logged and retried later. */
async function settled(ctx) {
  await ctx.activity.flush().catch(() => {});
}

function notFound(key) {
  return new HttpError(404, 'CLIENT_NOT_FOUND', `no client with clientKey ${JSON.stringify(key)}`);
}

const secondsUp = (ms) => Math.ceil(ms / 1000);

/** The request's JSON body, within the service's bounds on its size and type. */
const bodyOf = (ctx, req) => readJson(req, ctx.options.bodyLimitBytes, ctx.options.requireJsonContentType);

async function check(ctx, req, res) {
  if (ctx.checkAuth) ctx.authenticate(req, ctx.checkAuth);
  const { clientKey, cost } = validate.check(await bodyOf(ctx, req));
  const outcome = await ctx.decisions.check(clientKey, cost);
  const responseMs = Number(process.hrtime.bigint() - req.startedAt) / 1e6;
  if (!outcome.found) {
    ctx.metrics.decision('not_found');
    throw notFound(clientKey);
  }
  if (outcome.banned) {
    ctx.metrics.decision('banned');
    ctx.activity.record({ clientKey, at: outcome.now, allowed: false, cost, responseMs });
    const { reason, expiresAtMs } = outcome.banned;
    const headers = expiresAtMs === null ? {} : { 'Retry-After': String(Math.max(1, secondsUp(expiresAtMs - outcome.now))) };
    sendJson(res, 403, { allowed: false, error: 'BANNED', message: 'Client is banned', clientKey, reason, bannedUntil: expiresAtMs === null ? null : new Date(expiresAtMs).toISOString(), requestId: res.requestId }, headers);
    return;
  }
  const { policy, result, now } = outcome;
  const limit = limitOf(policy);
  // Every algorithm refuses a cost above its limit whenever it comes (and takes nothing for it): not
  // a denial to retry later, a request that cannot pass. The decision spent nothing.
  if (cost > limit) throw new HttpError(400, 'VALIDATION_ERROR', `cost must be at most the client's limit (${limit}), got ${cost}: it could never be allowed`);
  ctx.metrics.decision(result.allowed ? 'allowed' : 'denied');
  ctx.activity.record({ clientKey, at: now, allowed: result.allowed, cost, responseMs });
  const { allowed, remaining } = result;
  // One writeHead with a flat header array, and the body as a string: the values put in it are a
  // client key and a request id that match plain-character patterns, an algorithm name, integers
  // and an ISO date, so it is the JSON that JSON.stringify would write (the tests parse every answer).
  const head = [
    'X-RateLimit-Limit', `${limit}`,
    'X-RateLimit-Remaining', `${remaining}`,
    'X-RateLimit-Reset', `${secondsUp(result.resetAtMs)}`,
    'RateLimit-Policy', `"default";q=${limit};w=${windowSecondsOf(policy)}`,
    'RateLimit', `"default";r=${remaining};t=${Math.max(0, secondsUp(result.resetAtMs - now))}`,
  ];
  let body = `{"allowed":${allowed},"clientKey":"${clientKey}","algorithm":"${policy.algorithm}","limit":${limit},"remaining":${remaining},"resetAt":"${new Date(result.resetAtMs).toISOString()}"`;
  let status = 200;
  if (allowed) body += '}';
  else {
    status = 429;
    const retryAfter = Math.max(1, secondsUp(result.retryAfterMs));
    head.push('Retry-After', `${retryAfter}`);
    body += `,"error":"RATE_LIMIT_EXCEEDED","message":"Rate limit exceeded","retryAfter":${retryAfter},"requestId":"${res.requestId}"}`;
  }
  // The id goes here unless the server set it already (a check that came through the router).
  if (res.idInHead) head.push('X-Request-ID', res.requestId);
  head.push('Content-Type', JSON_TYPE, 'Content-Length', `${Buffer.byteLength(body)}`);
  res.writeHead(status, head);
  res.end(body);
}

async function overview(ctx, req, res) {
  await settled(ctx);
  sendJson(res, 200, await ctx.store.overview(RECENT));
}

async function analytics(ctx, req, res) {
  const range = new URLSearchParams(req.search).get('range') ?? '1h';
  if (!Object.hasOwn(RANGES, range)) throw new HttpError(400, 'VALIDATION_ERROR', `range must be one of ${Object.keys(RANGES).join(', ')}, got ${JSON.stringify(range)}`);
  await settled(ctx);
  sendJson(res, 200, { range, dataSource: 'aggregated', points: await ctx.store.analytics(range) });
}

async function listClients(ctx, req, res) {
  await settled(ctx);
  sendJson(res, 200, { clients: await ctx.store.listClients() });
}

async function createClient(ctx, req, res) {
  const policy = validate.policy(await bodyOf(ctx, req));
  const client = await ctx.store.createClient(policy);
  if (!client) throw new HttpError(409, 'DUPLICATE_CLIENT_KEY', `a client with clientKey ${JSON.stringify(policy.clientKey)} exists`);
  sendJson(res, 201, { client });
}

async function getClient(ctx, req, res, { clientKey }) {
  const client = await ctx.store.getClient(clientKey);
  if (!client) throw notFound(clientKey);
  sendJson(res, 200, { client });
}

async function replaceClient(ctx, req, res, { clientKey }) {
  const policy = validate.policy(await bodyOf(ctx, req), clientKey);
  const client = await ctx.store.replaceClient(policy);
  if (!client) throw notFound(clientKey);
  sendJson(res, 200, { client });
}

async function deleteClient(ctx, req, res, { clientKey }) {
  await settled(ctx);
  if (!(await ctx.store.deleteClient(clientKey))) throw notFound(clientKey);
  res.statusCode = 204;
  res.end();
}

async function clientActivity(ctx, req, res, { clientKey }) {
  await settled(ctx);
  const activity = await ctx.store.clientActivity(clientKey, RECENT);
  if (!activity) throw notFound(clientKey);
  sendJson(res, 200, activity);
}

/** Gives units back to a client's count (a request that should not have counted), never beyond its limit. */
async function refundClient(ctx, req, res, { clientKey }) {
  const { units } = validate.refund(await bodyOf(ctx, req));
  const r = await ctx.store.refundClient(clientKey, units);
  if (!r) throw notFound(clientKey);
  sendJson(res, 200, { clientKey, refunded: r.refunded, currentState: r.currentState });
}

async function listBans(ctx, req, res) {
  sendJson(res, 200, { bans: await ctx.store.listBans() });
}

async function createBan(ctx, req, res) {
  const ban = validate.ban(await bodyOf(ctx, req));
  sendJson(res, 201, { ban: await ctx.store.putBan(ban) });
}

async function deleteBan(ctx, req, res, { clientKey }) {
  if (!(await ctx.store.deleteBan(clientKey))) throw new HttpError(404, 'BAN_NOT_FOUND', `no active ban for clientKey ${JSON.stringify(clientKey)}`);
  res.statusCode = 204;
  res.end();
}

async function live(ctx, req, res) {
  sendJson(res, 200, { status: 'ok', uptimeSeconds: Math.round(process.uptime()) });
}

/** Ready when the store answers a ping within the store timeout and the decisions are not failing
 * (their last batch failed whole within the last store timeout): a ping can pass while checks fail. */
async function ready(ctx, req, res) {
  const t0 = process.hrtime.bigint();
  try {
    if (ctx.decisions.failing()) throw new Error('the last decision batch failed: the store did not answer it in time');
    await ctx.store.ping();
  } catch (err) {
    ctx.storeLatencyMs = null;
    ctx.log.warn('store not ready', { error: String(err && err.message) });
    sendJson(res, 503, { status: 'unavailable', store: { type: ctx.store.kind, ok: false } });
    return;
  }
  ctx.storeLatencyMs = Number(process.hrtime.bigint() - t0) / 1e6;
  sendJson(res, ctx.draining ? 503 : 200, { status: ctx.draining ? 'draining' : 'ok', store: { type: ctx.store.kind, ok: true, latencyMs: Math.round(ctx.storeLatencyMs * 1000) / 1000 } });
}

async function metrics(ctx, req, res) {
  const text = ctx.metrics.render({ activity: ctx.activity, storeKind: ctx.store.kind, storeLatencyMs: ctx.storeLatencyMs, inFlight: ctx.inFlight });
  res.setHeader('Content-Type', 'text/plain; version=0.0.4; charset=utf-8');
  res.end(text);
}

async function openapiDocument(ctx, req, res) {
  sendJson(res, 200, openapi());
}

// [method, path pattern, handler, admin?]; `:clientKey` segments are checked against the key pattern.
const ROUTES = [
  ['POST', '/api/v1/rate-limit/check', check, false],
  ['GET', '/api/v1/admin/overview', overview, true],
  ['GET', '/api/v1/admin/analytics', analytics, true],
  ['GET', '/api/v1/admin/clients', listClients, true],
  ['POST', '/api/v1/admin/clients', createClient, true],
  ['GET', '/api/v1/admin/clients/:clientKey', getClient, true],
  ['PUT', '/api/v1/admin/clients/:clientKey', replaceClient, true],
  ['DELETE', '/api/v1/admin/clients/:clientKey', deleteClient, true],
  ['GET', '/api/v1/admin/clients/:clientKey/activity', clientActivity, true],
  ['POST', '/api/v1/admin/clients/:clientKey/refund', refundClient, true],
  ['GET', '/api/v1/admin/bans', listBans, true],
  ['POST', '/api/v1/admin/bans', createBan, true],
  ['DELETE', '/api/v1/admin/bans/:clientKey', deleteBan, true],
  ['GET', '/health/live', live, false],
  ['GET', '/health/ready', ready, false],
  ['GET', '/health', ready, false],
  ['GET', '/metrics', metrics, false],
  ['GET', '/api/v1/openapi.json', openapiDocument, false],
];

const compiled = ROUTES.map(([method, pattern, handler, admin]) => ({ method, pattern, handler, admin, parts: pattern.split('/') }));

/** { route, params } for a path, { allow } when only the method is wrong, or null. */
function match(method, pathname) {
  const parts = pathname.split('/');
  const allow = [];
  for (const r of compiled) {
    if (r.parts.length !== parts.length) continue;
    const params = {};
    let ok = true;
    for (let i = 0; i < parts.length && ok; i++) {
      if (r.parts[i] === ':clientKey') {
        let key;
        try { key = decodeURIComponent(parts[i]); } catch { key = null; }
        if (key === null || !validate.CLIENT_KEY.test(key)) ok = false;
        else params.clientKey = key;
      } else if (r.parts[i] !== parts[i]) ok = false;
    }
    if (!ok) continue;
    if (r.method === method) return { route: r, params };
    allow.push(r.method);
  }
  return allow.length ? { allow } : null;
}

module.exports = { ROUTES, match, check };
