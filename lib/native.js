'use strict';
// Loads the native addon: a binary built from source in this package (a git checkout, or an install
// where no prebuilt loaded; scripts/build.js) first, else the prebuilt platform package tiergate-<triple>.
const path = require('node:path');
const { platformTriple, binaryName, prebuiltPackage, requirePrebuilt } = require('./platform');
const { CODES } = require('./errors');

function load() {
  const triple = platformTriple();
  const local = path.join(__dirname, '..', binaryName(triple));
  const errors = [];
  for (const [source, loader] of [[local, () => require(local)], [prebuiltPackage(triple), () => requirePrebuilt(triple)]]) {
    try {
      return loader();
    } catch (err) {
      errors.push(`${source}: ${err.message}`);
    }
  }
  const err = new Error(
    `tiergate: no native binary for ${triple} loads. Reinstall tiergate with Rust's cargo on PATH to build it from source ` +
      `(https://rustup.rs), or run \`npm run build\` in a checkout.\n${errors.join('\n')}`,
  );
  err.code = CODES.NATIVE_UNAVAILABLE;
  throw err;
}

module.exports = load();
