'use strict';
// The OpenAPI 3.1 document of the service, served at /api/v1/openapi.json. Bounds come from
// validation.js, so the document and the checks cannot disagree.
const { LIMITS, CLIENT_KEY } = require('./validation');
const { RANGES } = require('./stores/rows');
const { ALGORITHMS, RATE_FIELDS } = require('./algorithms');

const RATE_ALGORITHMS = Object.keys(ALGORITHMS).filter((a) => ALGORITHMS[a].fields === RATE_FIELDS);
const WINDOW_ALGORITHMS = Object.keys(ALGORITHMS).filter((a) => ALGORITHMS[a].fields !== RATE_FIELDS);
const { version } = require('../../package.json');

const ref = (name) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema, description) => ({ description, content: { 'application/json': { schema } } });
const int = (name) => ({ type: 'integer', minimum: LIMITS[name].min, maximum: LIMITS[name].max });

function errors(...codes) {
  const out = {};
  for (const c of codes) out[c] = { $ref: `#/components/responses/E${c}` };
  return out;
}

const keyParam = { name: 'clientKey', in: 'path', required: true, schema: ref('ClientKey') };
const admin = [{ adminToken: [] }];

function openapi() {
  return {
    openapi: '3.1.0',
    info: { title: 'tiergate decision service', version, description: 'Rate-limit decisions (token bucket, sliding window) for any caller, exact under concurrency, with an authenticated admin API.' },
    components: {
      securitySchemes: {
        adminToken: { type: 'http', scheme: 'bearer', description: 'TIERGATE_ADMIN_TOKEN' },
        apiKey: { type: 'http', scheme: 'bearer', description: 'one of TIERGATE_API_KEYS, when configured' },
      },
      schemas: {
        ClientKey: { type: 'string', pattern: CLIENT_KEY.source },
        RatePolicy: { type: 'object', additionalProperties: false, required: ['clientKey', 'algorithm', 'requestsPerSecond', 'burstSize'], properties: { clientKey: ref('ClientKey'), algorithm: { enum: RATE_ALGORITHMS }, requestsPerSecond: { type: 'number', exclusiveMinimum: LIMITS.requestsPerSecond.exclusiveMin, maximum: LIMITS.requestsPerSecond.max, description: `burstSize / requestsPerSecond must be at most ${LIMITS.refillSeconds.max}` }, burstSize: int('burstSize') } },
        WindowPolicy: { type: 'object', additionalProperties: false, required: ['clientKey', 'algorithm', 'maxRequests', 'windowSeconds'], properties: { clientKey: ref('ClientKey'), algorithm: { enum: WINDOW_ALGORITHMS }, maxRequests: int('maxRequests'), windowSeconds: int('windowSeconds') } },
        Policy: { oneOf: [ref('RatePolicy'), ref('WindowPolicy')] },
        Client: { allOf: [ref('Policy'), { type: 'object', properties: { createdAt: { type: 'string', format: 'date-time' }, updatedAt: { type: 'string', format: 'date-time' } } }] },
        CheckRequest: { type: 'object', additionalProperties: false, required: ['clientKey'], properties: { clientKey: ref('ClientKey'), cost: { ...int('cost'), default: 1 } } },
        Decision: { type: 'object', required: ['allowed', 'clientKey', 'algorithm', 'limit', 'remaining', 'resetAt'], properties: { allowed: { type: 'boolean' }, clientKey: ref('ClientKey'), algorithm: { enum: Object.keys(ALGORITHMS) }, limit: { type: 'integer' }, remaining: { type: 'integer' }, resetAt: { type: 'string', format: 'date-time' }, message: { type: 'string' }, retryAfter: { type: 'integer' } } },
        Activity: { type: 'object', properties: { clientKey: ref('ClientKey'), allowed: { type: 'boolean' }, cost: { type: 'integer' }, timestamp: { type: 'string', format: 'date-time' }, responseTimeMs: { type: 'number' } } },
        Ban: { type: 'object', properties: { clientKey: ref('ClientKey'), reason: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' }, expiresAt: { type: ['string', 'null'], format: 'date-time' } } },
        BanRequest: { type: 'object', additionalProperties: false, required: ['clientKey'], properties: { clientKey: ref('ClientKey'), durationSeconds: { ...int('durationSeconds'), description: 'absent: until lifted' }, reason: { type: 'string', maxLength: LIMITS.reason.maxLength } } },
        Error: { type: 'object', required: ['error', 'message', 'requestId'], properties: { error: { type: 'string' }, message: { type: 'string' }, requestId: { type: 'string' } } },
      },
      responses: Object.fromEntries([
        [400, 'VALIDATION_ERROR or MALFORMED_JSON'], [401, 'UNAUTHORIZED'], [403, 'BANNED'], [404, 'CLIENT_NOT_FOUND, BAN_NOT_FOUND or NOT_FOUND'],
        [409, 'DUPLICATE_CLIENT_KEY'], [413, 'PAYLOAD_TOO_LARGE'], [415, 'UNSUPPORTED_MEDIA_TYPE'], [503, 'STORE_UNAVAILABLE'],
      ].map(([status, d]) => [`E${status}`, json(ref('Error'), d)])),
    },
    paths: {
      '/api/v1/rate-limit/check': { post: { summary: 'May this client do this now?', security: [{}, { apiKey: [] }], requestBody: { required: true, content: { 'application/json': { schema: ref('CheckRequest') } } }, responses: { 200: json(ref('Decision'), 'allowed'), 429: json(ref('Decision'), 'denied (Retry-After)'), ...errors(400, 401, 403, 404, 413, 415, 503) } } },
      '/api/v1/admin/overview': { get: { security: admin, responses: { 200: json({ type: 'object', properties: { totalClients: { type: 'integer' }, totalAllowed: { type: 'integer' }, totalDenied: { type: 'integer' }, recentActivity: { type: 'array', items: ref('Activity') } } }, 'totals and the 20 latest decisions'), ...errors(401) } } },
      '/api/v1/admin/analytics': { get: { security: admin, parameters: [{ name: 'range', in: 'query', schema: { enum: Object.keys(RANGES), default: '1h' } }], responses: { 200: json({ type: 'object', properties: { range: { type: 'string' }, dataSource: { type: 'string' }, points: { type: 'array', items: { type: 'object', properties: { timestamp: { type: 'string', format: 'date-time' }, incoming: { type: 'integer' }, allowed: { type: 'integer' }, denied: { type: 'integer' }, averageResponseTimeMs: { type: 'number' } } } } } }, 'a series from the aggregated buckets'), ...errors(400, 401) } } },
      '/api/v1/admin/clients': {
        get: { security: admin, responses: { 200: json({ type: 'object', properties: { clients: { type: 'array', items: ref('Client') } } }, 'every client with totalRequests and lastActivityAt'), ...errors(401) } },
        post: { security: admin, requestBody: { required: true, content: { 'application/json': { schema: ref('Policy') } } }, responses: { 201: json({ type: 'object', properties: { client: ref('Client') } }, 'created'), ...errors(400, 401, 409, 413, 415) } },
      },
      '/api/v1/admin/clients/{clientKey}': {
        parameters: [keyParam],
        get: { security: admin, responses: { 200: json({ type: 'object', properties: { client: ref('Client') } }, 'the client'), ...errors(401, 404) } },
        put: { security: admin, description: 'Replaces the policy and resets its state.', requestBody: { required: true, content: { 'application/json': { schema: ref('Policy') } } }, responses: { 200: json({ type: 'object', properties: { client: ref('Client') } }, 'replaced'), ...errors(400, 401, 404, 413, 415) } },
        delete: { security: admin, responses: { 204: { description: 'removed, with its state and history' }, ...errors(401, 404) } },
      },
      '/api/v1/admin/clients/{clientKey}/activity': { parameters: [keyParam], get: { security: admin, responses: { 200: json({ type: 'object', properties: { currentState: { type: 'object' }, summary: { type: 'object', properties: { totalRequests: { type: 'integer' }, allowedRequests: { type: 'integer' }, deniedRequests: { type: 'integer' } } }, recentActivity: { type: 'array', items: ref('Activity') } } }, 'state and history'), ...errors(401, 404) } } },
      '/api/v1/admin/clients/{clientKey}/refund': { parameters: [keyParam], post: { security: admin, requestBody: { required: false, content: { 'application/json': { schema: { type: 'object', properties: { units: { type: 'integer', minimum: LIMITS.units.min, maximum: LIMITS.units.max, default: 1 } }, additionalProperties: false } } } }, responses: { 200: json({ type: 'object', properties: { clientKey: { type: 'string' }, refunded: { type: 'integer' }, currentState: { type: 'object' } } }, 'units given back (never beyond the limit) and the state after'), ...errors(400, 401, 404, 413, 415) } } },
      '/api/v1/admin/bans': {
        get: { security: admin, responses: { 200: json({ type: 'object', properties: { bans: { type: 'array', items: ref('Ban') } } }, 'active bans'), ...errors(401) } },
        post: { security: admin, requestBody: { required: true, content: { 'application/json': { schema: ref('BanRequest') } } }, responses: { 201: json({ type: 'object', properties: { ban: ref('Ban') } }, 'banned (replaces an earlier ban of the key)'), ...errors(400, 401, 413, 415) } },
      },
      '/api/v1/admin/bans/{clientKey}': { parameters: [keyParam], delete: { security: admin, responses: { 204: { description: 'lifted' }, ...errors(401, 404) } } },
      '/health/live': { get: { responses: { 200: { description: 'the process answers' } } } },
      '/health/ready': { get: { responses: { 200: { description: 'the store answers (with its latency)' }, 503: { description: 'the store does not answer, or the service is draining' } } } },
      '/health': { get: { description: 'alias of /health/ready', responses: { 200: { description: 'ready' }, 503: { description: 'not ready' } } } },
      '/metrics': { get: { responses: { 200: { description: 'Prometheus text format', content: { 'text/plain': {} } } } } },
      '/api/v1/openapi.json': { get: { responses: { 200: { description: 'this document' } } } },
    },
  };
}

module.exports = { openapi };
