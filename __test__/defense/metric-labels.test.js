'use strict';
// The metrics' label values that name the gate's verdicts and shed causes are the native lists
// (gateConstants()), not copies: a scrape of a real gatekeeper's metrics carries exactly them, every
// verdict has its stats() field, and no lib/metrics file holds a hand-written copy of either list.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const prom = require('prom-client');
const tiergate = require('../..');
const native = require('../../lib/native');
const { parsePrometheusText } = require('../helpers/prom-text');

test('tiergate_shed_cause and tiergate_decisions_total label exactly the native causes and verdicts', async () => {
  const { causes, verdictNames } = native.gateConstants();
  const gk = tiergate.gatekeeper({ tiers: [{ name: 'paid', limit: 10, windowMs: 1000 }] });
  const registry = new prom.Registry();
  const m = tiergate.metrics({ gatekeeper: gk, registry });
  try {
    const fams = parsePrometheusText(await registry.metrics());
    const labels = (name, label) => [...new Set(fams.get(name).samples.map((s) => s.labels[label]))];
    assert.deepEqual(labels('tiergate_shed_cause', 'cause'), causes);
    assert.deepEqual(labels('tiergate_decisions_total', 'verdict'), verdictNames);
    const values = fams.get('tiergate_decisions_total').samples.map((s) => s.value);
    assert.ok(values.every((v) => v === 0), `every verdict reads its stats() field: ${values}`);
    assert.match(fams.get('tiergate_shed_cause').help, new RegExp(`\\(${causes.join(', ')}\\)`));
  } finally {
    m.unregister();
  }
});

test('lib/metrics holds no copy of the native cause or verdict lists', () => {
  const { causes, verdictNames } = native.gateConstants();
  const dir = path.join(__dirname, '..', '..', 'lib', 'metrics');
  for (const list of [causes, verdictNames]) {
    const copy = new RegExp(list.map((n) => `['"]${n}['"]`).join(',\\s*'));
    for (const f of fs.readdirSync(dir).filter((n) => n.endsWith('.js'))) {
      assert.doesNotMatch(fs.readFileSync(path.join(dir, f), 'utf8'), copy, `${f} lists ${list.join(', ')} by hand`);
    }
  }
});
