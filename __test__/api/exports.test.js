'use strict';
// The public API is exactly these names (docs/api.md): the root and each subpath of package.json
// "exports", loaded by the package's own name as a user loads them. A new export, or a moved one, is a
// deliberate change to this list, docs/api.md and CHANGELOG.md. __test__/types/exports.ts pins the
// same names in the published types.
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const manifest = require('../../package.json');

const API = {
  tiergate: [
    'BAN_CHANNEL', 'DECISION_CHANNEL', 'Gatekeeper', 'LEDGER_RESULT', 'LagMonitor', 'Ledger', 'cluster', 'concurrencyGate',
    'concurrencyGatePlugin', 'dashboard', 'gatekeeper', 'metrics', 'mintTierToken', 'otel', 'statusRoute', 'tiergatePlugin',
  ],
  'tiergate/cluster': ['BanChannel', 'Cluster', 'PostgresStore', 'RedisStore', 'cluster'],
  'tiergate/quota': ['LeaseDriver', 'MemoryStore', 'QUOTA_CODE', 'QUOTA_RETURN_REASONS', 'Quota'],
  'tiergate/service': ['PostgresLeaseStore', 'ServiceClient', 'SqliteLeaseStore', 'client', 'createService'],
};

for (const [specifier, names] of Object.entries(API)) {
  test(`require('${specifier}') exports exactly its names, none undefined`, () => {
    const mod = require(specifier);
    assert.deepEqual(Object.keys(mod).sort(), names);
    for (const name of names) assert.notEqual(mod[name], undefined, name);
  });

  test(`import '${specifier}' (ESM) sees the same names`, async () => {
    const mod = await import(specifier);
    assert.deepEqual(Object.keys(mod).filter((k) => k !== 'default').sort(), names);
  });
}

test('the root stays small', () => {
  assert.ok(API.tiergate.length <= 20, `${API.tiergate.length} root exports`);
});

test('package.json "exports" has exactly these subpaths, each with its types first', () => {
  const subpaths = Object.keys(API).map((s) => (s === 'tiergate' ? '.' : `./${s.slice('tiergate/'.length)}`));
  assert.deepEqual(Object.keys(manifest.exports).sort(), [...subpaths, './package.json'].sort());
  for (const subpath of subpaths) {
    const entry = manifest.exports[subpath];
    assert.deepEqual(Object.keys(entry), ['types', 'default'], `${subpath}: "types" must come first to be used`);
    assert.equal(entry.types.replace(/\.d\.ts$/, ''), entry.default.replace(/\.js$/, ''), `${subpath}: types beside the code`);
  }
  assert.equal(manifest.exports['.'].default, `./${manifest.main}`);
  assert.equal(manifest.exports['.'].types, `./${manifest.types}`);
});

test('the same object whichever way a name is reached', () => {
  assert.equal(require('tiergate').cluster, require('tiergate/cluster').cluster);
  assert.equal(require('tiergate'), require(path.join(__dirname, '..', '..')));
});

test('internals are not reachable by a deep path', () => {
  for (const deep of ['tiergate/lib/ledger', 'tiergate/lib/quota/engine', 'tiergate/index.js', 'tiergate/internal']) {
    assert.throws(() => require(deep), { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' }, deep);
  }
});
