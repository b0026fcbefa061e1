'use strict';
// Builds the native addon from source with cargo and places it where lib/native.js looks first.
// Runs as the package's `install` script. In a git checkout it always builds (the sources may have
// changed); an installed copy builds only when no prebuilt platform package (npm/<triple>) loads.
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { platformTriple } = require('../lib/platform');

const root = path.join(__dirname, '..');
const inCheckout = fs.existsSync(path.join(root, '.git'));
if (!inCheckout && hasPrebuilt()) process.exit(0);

function hasPrebuilt() {
  try {
    require(`tiergate-${platformTriple()}`);
    return true;
  } catch {
    return false;
  }
}

const profile = process.argv.includes('--debug') ? 'debug' : 'release';
const args = ['build', '--lib'];
if (profile === 'release') args.push('--release');
const build = spawnSync('cargo', args, { cwd: root, stdio: 'inherit' });
if (build.error) {
  console.error(`tiergate: could not run cargo (${build.error.message}). Install Rust (https://rustup.rs) to build from source.`);
  process.exit(1);
}
if (build.status !== 0) process.exit(build.status ?? 1);

const targetDir = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
const libName = { darwin: 'libtiergate.dylib', win32: 'tiergate.dll' }[process.platform] || 'libtiergate.so';
const out = path.join(root, `tiergate.${platformTriple()}.node`);
// Copy through a temporary name and rename: a running process that has the old addon mapped keeps it.
fs.copyFileSync(path.join(targetDir, profile, libName), `${out}.tmp`);
fs.renameSync(`${out}.tmp`, out);
console.log(`tiergate: built ${path.relative(root, out)} (${profile})`);
