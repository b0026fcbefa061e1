'use strict';
// Platform naming, the napi-rs convention: a target is known by its triple (linux-x64-gnu, darwin-arm64,
// win32-x64-msvc); the binary is tiergate.<triple>.node and its prebuilt npm package tiergate-<triple>
// (npm/<triple>/, an optionalDependency of tiergate that npm installs only where os/cpu/libc match).
const path = require('node:path');

const BINARY = 'tiergate';
const ARCH = { x86_64: 'x64', aarch64: 'arm64', i686: 'ia32' };
const SYSTEM = { linux: 'linux', darwin: 'darwin', windows: 'win32' };

/** The triple of the running process. */
function platformTriple() {
  const { platform, arch } = process;
  if (platform === 'linux') {
    const report = process.report && process.report.getReport();
    const glibc = report && report.header && report.header.glibcVersionRuntime;
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
  }
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

/**
 * A Rust target (x86_64-unknown-linux-gnu, aarch64-apple-darwin, x86_64-pc-windows-msvc) as node
 * names it: { triple, platform, arch, abi }. Only the forms tiergate can publish; others throw.
 */
function fromRustTarget(target) {
  const parts = String(target).split('-');
  const arch = ARCH[parts[0]];
  const platform = SYSTEM[parts[2]];
  const abi = parts[3];
  const known = arch && platform && (platform === 'darwin' ? abi === undefined
    : platform === 'win32' ? abi === 'msvc' : abi === 'gnu' || abi === 'musl');
  if (!known) throw new RangeError(`tiergate: unsupported Rust target ${JSON.stringify(target)}`);
  const triple = abi === undefined ? `${platform}-${arch}` : `${platform}-${arch}-${abi}`;
  return { triple, platform, arch, abi: abi ?? null };
}

/** The binary's file name for a triple. */
function binaryName(triple) {
  return `${BINARY}.${triple}.node`;
}

/** The prebuilt package's name for a triple. */
function prebuiltPackage(triple) {
  return `${BINARY}-${triple}`;
}

/**
 * Loads the prebuilt package for `triple`, resolved from this package. Its version must equal
 * tiergate's: the JS layer and the binary are one release (the raw hot-path calls have no schema).
 */
function requirePrebuilt(triple = platformTriple()) {
  const name = prebuiltPackage(triple);
  const { version } = require(path.join(__dirname, '..', 'package.json'));
  const found = require(`${name}/package.json`).version;
  if (found !== version) throw new Error(`${name} is version ${found}, tiergate is ${version}`);
  return require(name);
}

module.exports = { platformTriple, fromRustTarget, binaryName, prebuiltPackage, requirePrebuilt };
