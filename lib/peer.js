'use strict';
// Optional peer dependencies (prom-client, ...) are loaded only by the feature that needs them, so the
// package loads without them; a missing one is reported with what to install.
const { CODES, codedError } = require('./errors');

/** require(name), or ERR_TIERGATE_MISSING_PEER naming `feature` and the install command. */
function requirePeer(name, feature) {
  try {
    return require(name);
  } catch (err) {
    // Only the package itself missing: an error inside an installed copy must surface as it is.
    if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes(`'${name}'`)) {
      throw codedError(Error, CODES.MISSING_PEER, `tiergate: ${feature} needs the optional peer dependency "${name}": npm install ${name}`);
    }
    throw err;
  }
}

module.exports = { requirePeer };
