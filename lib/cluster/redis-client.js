'use strict';
// The Redis connection: the user's own ioredis client (standalone or Cluster), or one made from a URL.
// ioredis is an optional peer dependency, loaded only here and only when a URL is given.
const { requireOptional } = require('../optional');
const { typeName } = require('../options');

function loadIoredis() {
  return requireOptional('ioredis', 'cluster mode over a Redis URL', 'or pass your own client as redis');
}

/** An ioredis-like client: has `call`, `publish` and `duplicate` (Redis and Cluster both do). */
function isClient(v) {
  return v !== null && typeof v === 'object' && typeof v.call === 'function' && typeof v.duplicate === 'function';
}

/**
 * `{ client, owned, isCluster }` from the `redis` option: a client is used as it is (its owner
 * closes it); a URL makes a client that fails fast when Redis is away (one retry, then queued commands fail),
 * so that the lease driver's timeout is never spent in a queue.
 */
function redisClient(redis, at) {
  if (typeof redis === 'string') {
    const { Redis } = loadIoredis();
    const client = new Redis(redis, { maxRetriesPerRequest: 1, retryStrategy: (n) => Math.min(50 * n, 100) });
    // Errors surface through the commands that fail; an unhandled 'error' event would end the process.
    client.on('error', () => {});
    return { client, owned: true, isCluster: false };
  }
  if (!isClient(redis)) throw new TypeError(`${at} must be an ioredis client (Redis or Cluster) or a redis:// URL, got ${typeName(redis)}`);
  return { client: redis, owned: false, isCluster: redis.isCluster === true };
}

module.exports = { redisClient, loadIoredis };
