'use strict';
// Writes the platform packages' manifests (npm/<triple>/package.json) and tiergate's
// optionalDependencies from package.json: its version and the Rust targets in napi.targets, declared
// once there. Runs on `npm version` (the "version" script), so a release bumps every package together.
// --check writes nothing and exits 1 when a file differs from what it would write (tests, release CI).
const fs = require('node:fs');
const path = require('node:path');
const { fromRustTarget, binaryName, prebuiltPackage } = require('../lib/platform');

const root = path.join(__dirname, '..');
const check = process.argv.includes('--check');
const manifestPath = path.join(root, 'package.json');
const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
const LIBC = { gnu: 'glibc', musl: 'musl' };

function platformManifest(target) {
  const { triple, platform, arch, abi } = fromRustTarget(target);
  const pkg = {
    name: prebuiltPackage(triple),
    version: manifest.version,
    description: `tiergate's native addon, prebuilt for ${triple} (installed by tiergate as an optional dependency)`,
    main: binaryName(triple),
    files: [binaryName(triple)],
    os: [platform],
    cpu: [arch],
  };
  if (LIBC[abi]) pkg.libc = [LIBC[abi]];
  pkg.license = manifest.license;
  pkg.engines = manifest.engines;
  return { dir: path.join(root, 'npm', triple), pkg };
}

const stale = [];
function write(file, value) {
  const text = `${JSON.stringify(value, null, 2)}\n`;
  const now = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : undefined;
  if (now === text) return;
  stale.push(path.relative(root, file));
  if (check) return;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

const optional = {};
for (const target of manifest.napi.targets) {
  const { dir, pkg } = platformManifest(target);
  write(path.join(dir, 'package.json'), pkg);
  optional[pkg.name] = manifest.version; // exact: the binary and the JS layer are one release
}
// Other optional dependencies (the service's SQLite driver) are kept as they are, after the prebuilts.
const prebuilt = new Set(manifest.napi.targets.map((t) => prebuiltPackage(fromRustTarget(t).triple)));
for (const [name, range] of Object.entries(manifest.optionalDependencies || {})) {
  if (!prebuilt.has(name) && !name.startsWith(`${manifest.name}-`)) optional[name] = range;
}
write(manifestPath, { ...manifest, optionalDependencies: optional });
// A folder for a target no longer declared would never be published: say so rather than guess.
const declared = new Set(manifest.napi.targets.map((t) => fromRustTarget(t).triple));
const undeclared = fs.readdirSync(path.join(root, 'npm')).filter((dir) => !declared.has(dir));
if (undeclared.length > 0) {
  console.error(`npm-dirs: npm/${undeclared.join(', npm/')} not in package.json's napi.targets: remove or declare`);
  process.exitCode = 1;
}

if (check && stale.length > 0) {
  console.error(`npm-dirs: out of date (run \`node scripts/npm-dirs.js\`): ${stale.join(', ')}`);
  process.exitCode = 1;
}
if (!check && stale.length > 0) console.log(`npm-dirs: wrote ${stale.join(', ')}`);
