'use strict';
// The published types match real usage: `tsc --noEmit --strict` over every typed usage file in
// __test__/types/ (each component adds its own), against index.d.ts.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const root = path.join(__dirname, '..');
const dir = path.join(__dirname, 'types');
const tsc = path.join(root, 'node_modules', '.bin', process.platform === 'win32' ? 'tsc.cmd' : 'tsc');

test('typed usage files compile with tsc --noEmit --strict', { timeout: 120_000 }, (t) => {
  if (!fs.existsSync(tsc)) {
    t.skip('typescript is not installed (npm install installs it as a devDependency)');
    return;
  }
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.ts')).map((f) => path.join(dir, f));
  assert.ok(files.length > 0, 'no typed usage files');
  const res = spawnSync(tsc, [
    '--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
    '--types', 'node', '--skipLibCheck', 'false', ...files,
  ], { cwd: root, encoding: 'utf8', timeout: 110_000 });
  assert.equal(res.error, undefined, String(res.error));
  assert.equal(res.status, 0, `tsc failed:\n${res.stdout}${res.stderr}`);
});
