'use strict';
// One loader for every optional dependency (ioredis, prom-client, pg, better-sqlite3, ...): the
// package loads without them, and the feature that needs one fails with ERR_TIERGATE_MISSING_DEPENDENCY
// and one message shape: `tiergate: <feature> needs the package "<name>": npm install <name>[ (<hint>)]`.
const { CODES, codedError } = require('./errors');

/** require(name), or the MISSING_DEPENDENCY error naming `feature` and what to install. */
function requireOptional(name, feature, hint) {
  try {
    return require(name);
  } catch (err) {
    // Only the package itself missing: a missing module inside an installed package is its own error.
    if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes(`'${name}'`)) {
      throw codedError(Error, CODES.MISSING_DEPENDENCY, `tiergate: ${feature} needs the package "${name}": npm install ${name}${hint ? ` (${hint})` : ''}`);
    }
    throw err;
  }
}

module.exports = { requireOptional };
