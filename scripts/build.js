'use strict';
// Builds the native addon from source with cargo and places it at the package root as
// tiergate.<triple>.node, where lib/native.js looks first. The package's `install` script and `npm run build`.
//
// - In a git checkout it always builds, into ./target (kept: rebuilds are incremental).
// - In an installed copy it does nothing when the prebuilt platform package loads (npm installed it
//   as an optionalDependency). Otherwise it builds with the locked dependencies into a temporary
//   target directory and deletes it, so node_modules keeps only the binary, no build tree.
//
// Flags: --debug (dev profile); --target <rust triple> (cross builds for a release; CI);
// --features <list> (cargo features, e.g. bench-seams for `npm run bench`: never in a release).
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { platformTriple, fromRustTarget, binaryName, prebuiltPackage, requirePrebuilt } = require('../lib/platform');

const root = path.join(__dirname, '..');
const argv = process.argv.slice(2);
const debug = argv.includes('--debug');
const targetAt = argv.indexOf('--target');
const rustTarget = targetAt === -1 ? undefined : argv[targetAt + 1];
if (targetAt !== -1 && !rustTarget) fail('--target needs a Rust target triple');
const featuresAt = argv.indexOf('--features');
const features = featuresAt === -1 ? undefined : argv[featuresAt + 1];
if (featuresAt !== -1 && !features) fail('--features needs a comma-separated list of cargo features');
const triple = rustTarget ? fromRustTarget(rustTarget).triple : platformTriple();
const inCheckout = fs.existsSync(path.join(root, '.git'));

let prebuiltError;
if (!inCheckout && !rustTarget) {
  try {
    requirePrebuilt(triple);
    process.exit(0);
  } catch (err) {
    prebuiltError = err;
  }
}

// A target directory the user chose is theirs to keep; the one an install makes is deleted after.
const ownTarget = !inCheckout && !process.env.CARGO_TARGET_DIR;
const targetDir = process.env.CARGO_TARGET_DIR
  || (ownTarget ? fs.mkdtempSync(path.join(os.tmpdir(), 'tiergate-build-')) : path.join(root, 'target'));

const args = ['build', '--lib'];
if (!debug) args.push('--release');
if (rustTarget) args.push('--target', rustTarget);
if (features) args.push('--features', features);
if (!inCheckout) args.push('--locked'); // the napi crates are pinned together (DESIGN.md)
const env = { ...process.env, CARGO_TARGET_DIR: targetDir };
// musl targets link libc statically by default, and a static-CRT target cannot be a cdylib.
if (triple.endsWith('-musl')) env.RUSTFLAGS = `${env.RUSTFLAGS || ''} -C target-feature=-crt-static`.trim();

if (prebuiltError) console.error(`tiergate: no prebuilt binary loads (${prebuiltError.message.split('\n')[0]}); building from source`);
const cargo = spawn('cargo', args, { cwd: root, env, stdio: 'inherit' });
// An interrupted install stops cargo and still removes the temporary target directory.
const forward = (signal) => cargo.kill(signal);
process.on('SIGINT', forward).on('SIGTERM', forward);

cargo.on('error', (err) => {
  cleanup();
  fail(
    `could not run cargo (${err.message}). ${prebuiltError ? `No prebuilt package (${prebuiltPackage(triple)}) loads for this platform, so tiergate must be built from source: install Rust (https://rustup.rs) and reinstall.` : 'Install Rust (https://rustup.rs) to build from source.'}`,
  );
});

cargo.on('exit', (code) => {
  try {
    if (code !== 0) process.exitCode = code ?? 1; // null: cargo was ended by a signal
    else place();
  } finally {
    cleanup();
  }
});

function place() {
  const { platform } = rustTarget ? fromRustTarget(rustTarget) : process;
  const libName = { darwin: 'libtiergate.dylib', win32: 'tiergate.dll' }[platform] || 'libtiergate.so';
  const built = path.join(targetDir, rustTarget || '', debug ? 'debug' : 'release', libName);
  const out = path.join(root, binaryName(triple));
  // Copy through a temporary name and rename: a running process that has the old addon mapped keeps it.
  fs.copyFileSync(built, `${out}.tmp`);
  fs.renameSync(`${out}.tmp`, out);
  console.log(`tiergate: built ${path.relative(root, out)} (${debug ? 'debug' : 'release'}${features ? `, features ${features}` : ''})`);
}

function cleanup() {
  if (ownTarget) fs.rmSync(targetDir, { recursive: true, force: true });
}

function fail(message) {
  console.error(`tiergate: ${message}`);
  process.exit(1);
}
