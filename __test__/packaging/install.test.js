'use strict';
// The published package as a user gets it: `npm pack` of tiergate and of this platform's prebuilt
// package (npm/<triple> with the binary this checkout built), installed from the tarballs into an empty
// project offline, with cargo off PATH, then used: a real request through gatekeeper() from CommonJS
// and from ESM, every subpath of "exports" (CommonJS, ESM and types), and `tsc` over a typed usage
// against the installed types.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { platformTriple, fromRustTarget, binaryName, prebuiltPackage } = require('../../lib/platform');

const root = path.join(__dirname, '..', '..');
const manifest = require('../../package.json');
const triple = platformTriple();
const platformDir = path.join(root, 'npm', triple);
const tsc = path.join(root, 'node_modules', '.bin', process.platform === 'win32' ? 'tsc.cmd' : 'tsc');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const STEP_MS = 30_000; // one npm/node/tsc child; each is bounded

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tiergate-pack-'));
test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// PATH without Rust: an install that tried to build from source would fail.
const pathKey = Object.keys(process.env).find((k) => k.toUpperCase() === 'PATH') || 'PATH'; // 'Path' on Windows
const noCargoPath = (process.env[pathKey] || '').split(path.delimiter).filter((dir) =>
  !['cargo', 'cargo.exe', 'rustc', 'rustc.exe'].some((tool) => fs.existsSync(path.join(dir, tool)))).join(path.delimiter);
// The child npm must not inherit the npm_* settings of an `npm test` around this run.
const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
const env = { ...baseEnv, [pathKey]: noCargoPath, npm_config_update_notifier: 'false', npm_config_cache: path.join(tmp, 'npm-cache') };

function run(cmd, args, cwd, extraEnv = {}) {
  const res = spawnSync(cmd, args, { cwd, env: { ...env, ...extraEnv }, encoding: 'utf8', timeout: STEP_MS, shell: process.platform === 'win32' });
  assert.equal(res.error, undefined, `${cmd} ${args.join(' ')}: ${res.error}`);
  return res;
}

function ok(cmd, args, cwd, extraEnv) {
  const res = run(cmd, args, cwd, extraEnv);
  assert.equal(res.status, 0, `${cmd} ${args.join(' ')} exited ${res.status}:\n${res.stdout}${res.stderr}`);
  return res;
}

function pack(dir) {
  const [info] = JSON.parse(ok(npm, ['pack', '--json', '--pack-destination', tmp], dir).stdout);
  return { tarball: path.join(tmp, info.filename), files: info.files.map((f) => f.path).sort() };
}

function walk(dir, out = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    out.push(full);
    if (entry.isDirectory()) walk(full, out);
  }
  return out;
}

const declared = fs.existsSync(path.join(platformDir, 'package.json'));
const built = fs.existsSync(path.join(root, binaryName(triple)));
const skip = !declared ? `no prebuilt package is declared for ${triple}`
  : !built ? `${binaryName(triple)} is not built (npm install builds it)` : false;

let main;
let platform;
test.before(() => {
  if (skip) return;
  main = pack(root);
  // The platform package as the release stages it (scripts/artifacts.js): manifest, binary, license.
  const artifacts = path.join(tmp, 'artifacts');
  const npmDir = path.join(tmp, 'npm');
  fs.mkdirSync(artifacts);
  fs.mkdirSync(path.join(npmDir, triple), { recursive: true });
  fs.copyFileSync(path.join(root, binaryName(triple)), path.join(artifacts, binaryName(triple)));
  fs.copyFileSync(path.join(platformDir, 'package.json'), path.join(npmDir, triple, 'package.json'));
  const staging = [path.join(root, 'scripts', 'artifacts.js'), artifacts, npmDir];
  const incomplete = run(process.execPath, staging, root);
  if (manifest.napi.targets.length > 1) {
    assert.equal(incomplete.status, 1, 'a release missing binaries was staged');
    assert.match(incomplete.stderr, /no binary for /);
  }
  ok(process.execPath, [...staging, '--allow-missing'], root);
  const stage = path.join(npmDir, triple);
  platform = pack(stage);
});

// A consumer project: installs the given tarballs, then everything is run from inside it.
function project(name, tarballs, { installArgs = [], pkg = {} } = {}) {
  const dir = path.join(tmp, name);
  fs.mkdirSync(path.join(dir, 'tmp'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, private: true, ...pkg }));
  const temp = path.join(dir, 'tmp');
  const res = run(npm, ['install', '--offline', '--no-audit', '--no-fund', ...installArgs, ...tarballs], dir, { TMPDIR: temp, TEMP: temp, TMP: temp });
  return { dir, res, installed: path.join(dir, 'node_modules', 'tiergate') };
}

// One request through gatekeeper() on a node:http server; prints the status, body and loaded binary.
// The tier is protected: a loaded machine's event-loop lag in a process just started must not shed it.
const SERVE = `
const gate = gatekeeper({ tiers: [{ name: 'standard', protected: true, limit: 10, windowMs: 1000 }] });
const server = http.createServer((req, res) => gate(req, res, (err) => {
  res.statusCode = err ? 500 : 200;
  res.end(err ? String(err) : 'admitted');
}));
server.listen(0, '127.0.0.1', () => {
  http.get({ host: '127.0.0.1', port: server.address().port, path: '/' }, (res) => {
    let body = '';
    res.setEncoding('utf8').on('data', (c) => { body += c; }).on('end', () => {
      const binary = Object.keys(require.cache).find((f) => f.endsWith('.node'));
      console.log(JSON.stringify({ status: res.statusCode, body, binary }));
      server.close(() => process.exit(0));
    });
  }).on('error', (err) => { console.error(err); process.exit(1); });
});
setTimeout(() => { console.error('timed out'); process.exit(1); }, 10000).unref();
`;
const CJS = `'use strict';\nconst http = require('node:http');\nconst { gatekeeper } = require('tiergate');\n${SERVE}`;
const ESM = `import http from 'node:http';\nimport { createRequire } from 'node:module';\nimport { gatekeeper } from 'tiergate';\nconst require = createRequire(import.meta.url);\n${SERVE}`;
// Every subpath of package.json "exports" (but package.json) loads from the installed copy, and its
// names are the ones __test__/api/exports.test.js pins in the checkout.
const SUBPATHS = Object.keys(manifest.exports).filter((s) => s !== './package.json').map((s) => (s === '.' ? 'tiergate' : `tiergate/${s.slice(2)}`));
const expectedNames = Object.fromEntries(SUBPATHS.map((s) => [s, Object.keys(require(s)).sort()]));
const NAMES_CJS = `'use strict';\nconsole.log(JSON.stringify(Object.fromEntries(${JSON.stringify(SUBPATHS)}.map((s) => [s, Object.keys(require(s)).sort()]))));\n`;
const NAMES_ESM = `const names = {};\nfor (const s of ${JSON.stringify(SUBPATHS)}) names[s] = Object.keys(await import(s)).filter((k) => k !== 'default').sort();\nconsole.log(JSON.stringify(names));\n`;

const TYPED = `import * as http from 'node:http';
import { gatekeeper, Ledger } from 'tiergate';
import type { GatekeeperOptions } from 'tiergate';
import { RedisStore } from 'tiergate/cluster';
import { Quota, type LeaseStore } from 'tiergate/quota';
import { createService, client } from 'tiergate/service';

const options: GatekeeperOptions = { tiers: [{ name: 'standard', limit: 10, windowMs: 1000 }] };
const gate = gatekeeper(options);
http.createServer((req, res) => gate(req, res, () => res.end('admitted')));
new Ledger({ tiers: [{ name: 'standard', limit: 1, windowMs: 1000 }] });
// @ts-expect-error limit is a number: proves the installed types were found (not any)
gatekeeper({ tiers: [{ name: 'standard', limit: '10', windowMs: 1000 }] });
const store: LeaseStore = new RedisStore({ redis: 'redis://127.0.0.1:6379' });
new Quota({ limits: [{ name: 'api', algorithm: 'token-bucket', limit: 1, windowMs: 1000 }] });
void [store, createService, client];
// @ts-expect-error RedisStore is not at the root
import { RedisStore as NotAtRoot } from 'tiergate';
void NotAtRoot;
`;

function servesARequest(dir, file) {
  const res = ok(process.execPath, [file], dir);
  const out = JSON.parse(res.stdout.trim().split('\n').pop());
  assert.equal(out.status, 200, res.stdout);
  assert.equal(out.body, 'admitted');
  // The prebuilt package's binary, not one built into tiergate.
  assert.equal(out.binary, fs.realpathSync(path.join(dir, 'node_modules', prebuiltPackage(triple), binaryName(triple))));
}

// scripts/build.js makes its temporary target directory in os.tmpdir(): the project's tmp/ here.
function buildDirs(dir) {
  return fs.readdirSync(path.join(dir, 'tmp')).filter((f) => f.startsWith('tiergate-build-'));
}

function noBuildTree(installed) {
  const found = walk(installed).map((f) => path.relative(installed, f));
  const tree = found.filter((f) => /(^|[\\/])(target|\.fingerprint|incremental|deps)([\\/]|$)|\.(rlib|rmeta|o|d|node)$/.test(f));
  assert.deepEqual(tree, [], 'a build tree or binary inside node_modules/tiergate');
}

test('the main tarball ships the runtime and the build-from-source inputs only', { skip }, () => {
  // The dashboard's web app: every file it serves, and the vendored chart library's licence.
  const { FILES } = require('../../lib/dashboard/files');
  const dashboard = [...Object.values(FILES).map((f) => `lib/dashboard/public/${f}`), 'lib/dashboard/public/vendor/uPlot.LICENSE'];
  for (const f of ['package.json', 'index.js', 'index.d.ts', 'lib/native.js', 'lib/platform.js', 'src/lib.rs', 'Cargo.toml', 'Cargo.lock', 'build.rs', 'scripts/build.js', 'LICENSE', 'README.md', 'CHANGELOG.md', 'docs/README.md', 'bin/tiergate.js', 'lib/service/migrations/sqlite/001_init.sql', 'docs/dashboard.md', 'docs/metrics.md', ...dashboard]) {
    assert.ok(main.files.includes(f), `${f} is not in the tarball`);
  }
  const stray = main.files.filter((f) => !/^(index\.js|index\.d\.ts|bin\/tiergate\.js|lib\/.+|src\/.+\.rs|build\.rs|Cargo\.(toml|lock)|scripts\/build\.js|LICENSE|README\.md|CHANGELOG\.md|docs\/[A-Za-z-]+\.md|package\.json)$/.test(f));
  assert.deepEqual(stray, []);
});

test('the platform tarball holds its binary, its manifest and the license', { skip }, () => {
  assert.deepEqual(platform.files, ['LICENSE', binaryName(triple), 'package.json'].sort());
});

test('the platform manifests and optionalDependencies match package.json (scripts/npm-dirs.js --check)', () => {
  ok(process.execPath, [path.join(root, 'scripts', 'npm-dirs.js'), '--check'], root);
  for (const target of manifest.napi.targets) {
    const { name } = require(path.join(root, 'npm', fromRustTarget(target).triple, 'package.json'));
    assert.equal(manifest.optionalDependencies[name], manifest.version, name);
  }
});

test('the release workflow builds exactly the targets package.json declares', () => {
  const workflow = fs.readFileSync(path.join(root, '.github', 'workflows', 'release.yml'), 'utf8');
  const matrix = [...workflow.matchAll(/^\s*- \{ target: ([\w-]+),/gm)].map((m) => m[1]);
  assert.deepEqual(matrix.sort(), [...manifest.napi.targets].sort());
});

test('installed from the tarballs offline with no cargo: the install script takes the prebuilt; CommonJS, ESM and types work', { skip, timeout: 6 * STEP_MS }, (t) => {
  assert.equal(spawnSync('cargo', ['--version'], { env }).error?.code, 'ENOENT', 'cargo is still on PATH');
  // Approve tiergate's install script (npm's allowScripts, keyed by where it came from) so that it
  // runs, and npm has nothing to warn about.
  const { dir, res, installed } = project('with-scripts', [main.tarball, platform.tarball], {
    pkg: { allowScripts: { [`file:${main.tarball}`]: true } },
  });
  assert.equal(res.status, 0, `npm install failed:\n${res.stdout}${res.stderr}`);
  assert.doesNotMatch(res.stdout + res.stderr, /npm warn/i);
  assert.deepEqual(buildDirs(dir), [], 'the install left a temporary build directory');
  noBuildTree(installed);
  // Nothing but the prebuilt came with it: tiergate has no runtime dependency.
  const packed = JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8'));
  assert.equal(packed.dependencies, undefined, 'tiergate has runtime dependencies');
  assert.equal(packed.optionalDependencies[prebuiltPackage(triple)], manifest.version);
  assert.deepEqual(fs.readdirSync(path.join(dir, 'node_modules')).filter((f) => !f.startsWith('.')).sort(),
    ['tiergate', prebuiltPackage(triple)].sort());

  fs.writeFileSync(path.join(dir, 'serve.cjs'), CJS);
  fs.writeFileSync(path.join(dir, 'serve.mjs'), ESM);
  servesARequest(dir, 'serve.cjs');
  servesARequest(dir, 'serve.mjs');
  fs.writeFileSync(path.join(dir, 'names.cjs'), NAMES_CJS);
  fs.writeFileSync(path.join(dir, 'names.mjs'), NAMES_ESM);
  for (const file of ['names.cjs', 'names.mjs']) assert.deepEqual(JSON.parse(ok(process.execPath, [file], dir).stdout), expectedNames, file);
  assert.match(run(process.execPath, ['-e', "require('tiergate/lib/ledger')"], dir).stderr, /ERR_PACKAGE_PATH_NOT_EXPORTED/);
  // The `tiergate` bin is linked; offline, the optional SQLite driver could not come, and `serve`
  // says what to install instead of failing obscurely.
  const bin = path.join(dir, 'node_modules', '.bin', process.platform === 'win32' ? 'tiergate.cmd' : 'tiergate');
  assert.match(ok(bin, ['--help'], dir).stdout, /usage: tiergate serve/);
  const serve = run(bin, ['serve', '--port', '0', '--data', path.join(dir, 'data')], dir, { TIERGATE_ADMIN_TOKEN: 'a-token-of-enough-length' });
  assert.equal(serve.status, 1, serve.stdout + serve.stderr);
  assert.match(serve.stderr, /ERR_TIERGATE_MISSING_DEPENDENCY: tiergate: the embedded store of `tiergate serve` needs the package "better-sqlite3": npm install better-sqlite3/);
  // The optional OpenTelemetry API is not installed either: otel() names it.
  const otelRun = run(process.execPath, ['-e', "const t = require('tiergate'); try { t.otel({ gatekeeper: t.gatekeeper() }); } catch (e) { console.log(e.code, e.message); process.exit(0); }"], dir);
  assert.match(otelRun.stdout, /ERR_TIERGATE_MISSING_DEPENDENCY tiergate: otel\(\) needs the package "@opentelemetry\/api": npm install @opentelemetry\/api/);

  if (!fs.existsSync(tsc)) {
    t.diagnostic('typescript is not installed: types not checked');
    return;
  }
  fs.writeFileSync(path.join(dir, 'usage.ts'), TYPED);
  fs.writeFileSync(path.join(dir, 'usage.mts'), TYPED);
  ok(tsc, ['--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext',
    '--types', 'node', '--typeRoots', path.join(root, 'node_modules', '@types'), 'usage.ts', 'usage.mts'], dir);
});

test('installed with --ignore-scripts (no cargo): the prebuilt serves a request', { skip, timeout: 3 * STEP_MS }, () => {
  const { dir, res, installed } = project('ignore-scripts', [main.tarball, platform.tarball], { installArgs: ['--ignore-scripts'] });
  assert.equal(res.status, 0, `npm install failed:\n${res.stdout}${res.stderr}`);
  noBuildTree(installed);
  fs.writeFileSync(path.join(dir, 'serve.cjs'), CJS);
  servesARequest(dir, 'serve.cjs');
});

test('with no prebuilt and no cargo the install fails saying what to install, and leaves no build directory', { skip, timeout: 2 * STEP_MS }, () => {
  const { dir, res } = project('no-prebuilt', [main.tarball]);
  assert.notEqual(res.status, 0, 'the install succeeded without a binary');
  assert.match(res.stderr, /no prebuilt binary loads/);
  assert.match(res.stderr, /install Rust \(https:\/\/rustup\.rs\)/);
  assert.deepEqual(buildDirs(dir), [], 'the failed build left its target directory');
});
