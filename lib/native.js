'use strict';
// Loads the native addon: a binary built from source in this checkout first, else the prebuilt
// per-platform package (npm/<triple>).
const path = require('node:path');
const { platformTriple } = require('./platform');
const { CODES } = require('./errors');

function load() {
  const triple = platformTriple();
  const local = path.join(__dirname, '..', `tiergate.${triple}.node`);
  const errors = [];
  for (const candidate of [local, `tiergate-${triple}`]) {
    try {
      return require(candidate);
    } catch (err) {
      errors.push(`${candidate}: ${err.message}`);
    }
  }
  const err = new Error(`tiergate: no native binary for ${triple}. Build it with \`npm run build\` (needs Rust).\n${errors.join('\n')}`);
  err.code = CODES.NATIVE_UNAVAILABLE;
  throw err;
}

module.exports = load();
