'use strict';
// Loads a package the service needs only for one feature (the SQLite driver, pg): without it the
// package still loads, and the feature fails with an error that says what to install.
const { CODES, codedError } = require('../errors');

function requireOptional(name, feature) {
  try {
    return require(name);
  } catch (err) {
    if (err && err.code === 'MODULE_NOT_FOUND' && String(err.message).includes(`'${name}'`)) {
      throw codedError(Error, CODES.MISSING_DEPENDENCY, `${feature} needs the package "${name}": npm install ${name}`);
    }
    throw err;
  }
}

module.exports = { requireOptional };
