'use strict';
// The bounded smoke of `npm run chaos` (benchmark/chaos.js --smoke, issue 35): every scenario of the
// chaos run with its faults made for real (a stalled loop, CPU-burning neighbours, Redis SIGSTOPped
// and SIGKILLed mid-load, bans while Redis is away, a hung service instance, a hung PostgreSQL), each
// judged against its documented bound. 25–30 s; the run's PostgreSQL part is skipped where
// PostgreSQL is not installed, as the service suites are.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { needRedis } = require('../helpers/redis');

const CHAOS = path.join(__dirname, '..', '..', 'benchmark', 'chaos.js');
const BOUND_MS = 90_000;

test('npm run chaos -- --smoke: every scenario holds its documented bound', { timeout: BOUND_MS + 10_000 }, async (t) => {
  if (!needRedis(t)) return;
  const child = spawn(process.execPath, [CHAOS, '--smoke'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d) => { out += d; });
  child.stderr.setEncoding('utf8').on('data', (d) => { out += d; });
  const killer = setTimeout(() => child.kill('SIGKILL'), BOUND_MS);
  const [code, signal] = await new Promise((resolve) => child.once('exit', (c, s) => resolve([c, s])));
  clearTimeout(killer);
  assert.equal(signal, null, `the smoke did not finish within ${BOUND_MS} ms:\n${out}`);
  assert.equal(code, 0, out);
  assert.match(out, /\| 7 Redis SIGKILLed.*\| holds \|/, 'the cluster scenarios ran');
  assert.match(out, / 0 FAIL;/);
  t.diagnostic(out.split('\n').find((l) => / FAIL;/.test(l)));
});
