'use strict';
// The published types match real usage: `tsc --noEmit --strict` over every typed usage file in
// __test__/types/ (each component adds its own), against index.d.ts.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const root = path.join(__dirname, '..', '..');
const dir = path.join(__dirname, '..', 'types');
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

// The client example of docs/service.md, as a user copies it into a CommonJS file: checked as
// JavaScript (--checkJs --strict) against the package's types. `require('tiergate/service')` is
// pointed at this checkout's subpath; Express ships no types of its own (a one-line shim stands in when @types/express is
// absent). Written next to the typed usage files, so that express and fastify resolve, then removed.
test('the client example in docs/service.md compiles with tsc --strict --checkJs', { timeout: 120_000 }, (t) => {
  if (!fs.existsSync(tsc)) {
    t.skip('typescript is not installed (npm install installs it as a devDependency)');
    return;
  }
  const doc = fs.readFileSync(path.join(root, 'docs', 'service.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## From Node: the client and middleware'));
  const block = /```js\n([\s\S]*?)```/.exec(section);
  assert.ok(block, 'docs/service.md has a js block under "From Node: the client and middleware"');
  assert.match(block[1], /require\('tiergate\/service'\)/);
  const tmp = fs.mkdtempSync(path.join(dir, '.doc-'));
  try {
    const file = path.join(tmp, 'service-client.cjs');
    fs.writeFileSync(file, block[1].replace(/require\('tiergate\/service'\)/g, `require(${JSON.stringify(path.join(root, 'lib', 'exports', 'service.js'))})`));
    const files = [file];
    if (!fs.existsSync(path.join(root, 'node_modules', '@types', 'express'))) {
      fs.writeFileSync(path.join(tmp, 'express.d.ts'), "declare module 'express';\n");
      files.push(path.join(tmp, 'express.d.ts'));
    }
    const res = spawnSync(tsc, [
      '--noEmit', '--strict', '--allowJs', '--checkJs', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
      '--types', 'node', '--skipLibCheck', 'false', ...files,
    ], { cwd: root, encoding: 'utf8', timeout: 110_000 });
    assert.equal(res.error, undefined, String(res.error));
    assert.equal(res.status, 0, `tsc failed on the example:\n${res.stdout}${res.stderr}`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
