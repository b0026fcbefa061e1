'use strict';
// Stages a release's binaries into their platform packages: every tiergate.<triple>.node found under
// <artifacts-dir> goes to <npm-dir>/<triple>/ (default npm/), with the LICENSE, ready for `npm publish`.
// A release publishes every target in package.json's napi.targets or none: a binary for an undeclared
// target, two binaries for one target or a declared target without one exits 1 (--allow-missing lets
// a local run stage just the binaries it has).
//
//   node scripts/artifacts.js <artifacts-dir> [<npm-dir>] [--allow-missing]
const fs = require('node:fs');
const path = require('node:path');
const { fromRustTarget, binaryName } = require('../lib/platform');

const root = path.join(__dirname, '..');
const args = process.argv.slice(2).filter((a) => a !== '--allow-missing');
const allowMissing = process.argv.includes('--allow-missing');
const [artifacts, npmDir = path.join(root, 'npm')] = args;
if (!artifacts) fail('usage: node scripts/artifacts.js <artifacts-dir> [<npm-dir>] [--allow-missing]');

const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const declared = manifest.napi.targets.map((t) => fromRustTarget(t).triple);
const BINARY = /^tiergate\.(.+)\.node$/;

const found = new Map();
const problems = [];
(function walk(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full);
    const match = entry.isFile() && BINARY.exec(entry.name);
    if (!match) continue;
    const triple = match[1];
    if (!declared.includes(triple)) problems.push(`${full}: ${triple} is not in napi.targets`);
    else if (found.has(triple)) problems.push(`two binaries for ${triple}: ${found.get(triple)}, ${full}`);
    else found.set(triple, full);
  }
})(artifacts);

const missing = declared.filter((t) => !found.has(t));
if (missing.length > 0 && !allowMissing) problems.push(`no binary for ${missing.join(', ')}`);
if (problems.length > 0) fail(problems.join('\n'));

for (const [triple, file] of found) {
  const dir = path.join(npmDir, triple);
  if (!fs.existsSync(path.join(dir, 'package.json'))) fail(`${dir} has no package.json (run node scripts/npm-dirs.js)`);
  fs.copyFileSync(file, path.join(dir, binaryName(triple)));
  fs.copyFileSync(path.join(root, 'LICENSE'), path.join(dir, 'LICENSE'));
  console.log(`artifacts: ${path.relative(process.cwd(), file)} -> ${path.relative(process.cwd(), dir)}`);
}
if (missing.length > 0) console.log(`artifacts: not staged (no binary): ${missing.join(', ')}`);

function fail(message) {
  console.error(`artifacts: ${message}`);
  process.exit(1);
}
