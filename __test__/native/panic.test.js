'use strict';
// No Rust panic may abort Node: at every N-API boundary a panic becomes a JS error with the code
// ERR_TIERGATE_PANIC and the panic's message, and the process keeps working. Proved on the release
// binary itself (its profile must unwind) through test seams that panic on purpose
// (src/node/panic_probe.rs, `lagPanicOnNextTick`), in a child process, so that an abort shows as the
// child's death by a signal rather than killing the test runner.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const PANIC = 'ERR_TIERGATE_PANIC';

function checkProbes(r, where) {
  assert.deepEqual(r.napi0, { value: 1 }, where);
  assert.deepEqual(r.raw0, { value: 1 }, where);
  for (const [key, entry] of [['napi1', 'panicProbe'], ['raw1', 'panicProbe (raw)']]) {
    assert.equal(r[key].name, 'Error', `${where} ${key}`);
    assert.equal(r[key].code, PANIC, `${where} ${key}`);
    assert.match(r[key].message, new RegExp(`internal error \\(Rust panic\\) in ${entry.replace(/[()]/g, '\\$&')}: deliberate panic \\(test seam\\) \\(at src/node/panic_probe\\.rs:\\d+\\)`), `${where} ${key}`);
  }
  // A panic after an exception was thrown replaces it: the panic is what the caller must hear of.
  for (const key of ['napi2', 'raw2']) {
    assert.equal(r[key].code, PANIC, `${where} ${key}`);
    assert.match(r[key].message, /deliberate panic after a pending exception/, `${where} ${key}`);
  }
  // Ordinary errors are untouched.
  assert.equal(r.napi3.code, 'GenericFailure', where);
  assert.equal(r.raw3.name, 'RangeError', where);
  assert.equal(r.caught, 100, `${where}: every panic of a run of 100 was caught`);
  assert.deepEqual(r.ledger, [true, true, true, false], where);
  assert.deepEqual(r.afterwards, [1, 1], where);
}

test('panics in #[napi] functions, raw callbacks and the libuv tick become JS errors; the process carries on', () => {
  const child = path.join(__dirname, '..', 'fixtures', 'panic-child.js');
  const r = spawnSync(process.execPath, [child], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, RUST_BACKTRACE: '0' } });
  assert.equal(r.error, undefined, `child did not finish within 30 s: ${r.stderr}`);
  assert.equal(r.signal, null, `child died by ${r.signal} (a panic unwound into C?): ${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  checkProbes(out.main, 'main thread');
  checkProbes(out.worker, 'worker');
  assert.equal(out.worker.exitCode, 0);
  assert.equal(out.main.ledgerAtEnd, true);
  // The tick that panicked stopped the sampler for good; its health reads as idle.
  const { before, stoppedAt, later, lagMs } = out.tick;
  assert.ok(before >= 3, `the sampler ticked before (${before})`);
  assert.equal(later, stoppedAt, 'no tick after the panic');
  assert.equal(lagMs, 0);
  // The operator's record: Rust's panic report on stderr, and what became of the sampler.
  assert.match(r.stderr, /panicked at src\/node\/panic_probe\.rs/);
  assert.match(r.stderr, /deliberate panic in the sampler's tick/);
  assert.match(r.stderr, /event-loop sampler panicked \(above\) and has stopped/);
});

// The behaviour above holds only where the guard is: every entry point in src/node must have it.
test('every native entry point is guarded against panics', () => {
  const dir = path.join(__dirname, '..', '..', 'src', 'node');
  const unguarded = [];
  let napiFns = 0;
  let cFns = 0;
  // src/node/<thing>/*.rs too: each binding is a folder of files (options, handle, hot, ...).
  for (const file of fs.readdirSync(dir, { recursive: true }).filter((f) => f.endsWith('.rs'))) {
    const lines = fs.readFileSync(path.join(dir, file), 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      const attr = /^\s*#\[napi(\((.*)\))?\]\s*$/.exec(lines[i]);
      if (attr && /^\s*pub fn /.test(lines[i + 1] ?? '')) {
        napiFns++;
        let open = i + 1;
        while (!lines[open].trimEnd().endsWith('{')) open++;
        const ok = /\bcatch_unwind\b/.test(attr[2] ?? '') && /^\s*let _panic = raw::throw_on_panic\(&env, "[^"]+"\);$/.test(lines[open + 1]);
        if (!ok) unguarded.push(`${file}:${i + 1} ${lines[i + 1].trim()}`);
      }
      // Every function C calls (N-API callbacks and finalizers, libuv callbacks, cleanup hooks).
      if (/extern "C" fn \w+(<\w+>)?\(.*\{\s*$/.test(lines[i]) && !lines[i].includes('$name')) {
        cFns++;
        if (!/\bno_unwind\(|\bguard\(/.test(lines[i + 1])) unguarded.push(`${file}:${i + 1} ${lines[i].trim()}`);
      }
    }
  }
  assert.deepEqual(unguarded, []);
  assert.ok(napiFns >= 30 && cFns >= 6, `found ${napiFns} #[napi] functions and ${cFns} C callbacks`);
});
