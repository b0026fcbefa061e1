'use strict';
// The route normaliser (lib/http/routing.js) on random hostile targets, seeded and bounded: it
// never throws, its output is a path, and each dialect keeps the promises the route rules rely on.
// (The Rust parsers have coverage-guided fuzz targets in fuzz/; this is the JS side's equivalent.)
const test = require('node:test');
const assert = require('node:assert/strict');
const { routedPath, DIALECTS, fastifyDialect, MAX_PATH_LEN } = require('../../lib/http/routing');

const RUNS = 20_000;
const PIECES = ['/', '/', '/', '\\', '.', '..', '%', '%2e', '%2E', '%2f', '%2F', '%5c', '%25', '%3f', '%23', '%7', '%zz', '?', '#',
  ';', ':', '@', 'a', 'R', 'reports', 'payments', '0', '~', '-', '_', ' ', '%20', '%00', '%ff', 'é'];
const PREFIXES = ['', '', '', 'http://x', 'HTTPS://host:8080', 'http://x?', 'http://x#', 'http://u@h', 'ftp://a', 'x:', '*'];

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

function target(r) {
  let t = PREFIXES[Math.floor(r() * PREFIXES.length)];
  const n = Math.floor(r() * (r() < 0.02 ? 2000 : 24));
  for (let i = 0; i < n; i++) t += PIECES[Math.floor(r() * PIECES.length)];
  return t;
}

const hasDotSegment = (p) => p.split('/').some((s) => s === '.' || s === '..');

test(`routedPath on ${RUNS} random targets per dialect: a path or null, never a throw; each dialect's promises hold`, () => {
  const dialects = { ...DIALECTS, fastifyLoose: fastifyDialect({ caseSensitive: false, ignoreDuplicateSlashes: true }) };
  for (const [name, dialect] of Object.entries(dialects)) {
    const r = rng(0x9e3779b9 ^ name.length);
    for (let i = 0; i < RUNS; i++) {
      const t = target(r);
      const p = routedPath(t, dialect);
      if (p === null) {
        assert.ok(t === '' || !t.startsWith('/'), `${name}: ${JSON.stringify(t)} starts with '/' but gave no path`);
        continue;
      }
      assert.equal(typeof p, 'string');
      assert.ok(p.startsWith('/'), `${name}: ${JSON.stringify(t)} -> ${JSON.stringify(p)}`);
      assert.ok(p.length <= MAX_PATH_LEN, `${name}: ${p.length} characters`);
      if (dialect.decode !== 'component') {
        // Express and Fastify never see a query or fragment delimiter in the routed path.
        assert.ok(!/[?#]/.test(p), `${name}: ${JSON.stringify(t)} -> ${JSON.stringify(p)}`);
      }
      if (dialect.dotSegments) assert.ok(!hasDotSegment(p), `${name}: ${JSON.stringify(t)} -> ${JSON.stringify(p)} keeps a dot segment`);
      if (dialect.collapseSlashes) assert.ok(!p.includes('//'), `${name}: ${JSON.stringify(p)}`);
      // A plain path (unreserved characters and '/', no dot segment) is routed as it is, by every dialect.
      const plain = /^\/[A-Za-z0-9_~-]*(\/[A-Za-z0-9_~-]+)*$/;
      if (plain.test(t) && !(dialect.collapseSlashes && t.includes('//'))) assert.equal(p, t, `${name}: ${JSON.stringify(t)}`);
    }
  }
});
