'use strict';
// The decision service (`tiergate serve`): exported for programmatic use and for bin/tiergate.js.
const { createService } = require('./server');
const { OPTIONS } = require('./config');

module.exports = { createService, SERVICE_OPTIONS: Object.keys(OPTIONS) };
