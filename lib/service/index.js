'use strict';
// The decision service (`tiergate serve`), exported for programmatic use and for bin/tiergate.js;
// and the SQL lease stores of lib/quota's store contract. None loads better-sqlite3 or pg until used.
const { createService } = require('./server');
const { OPTIONS } = require('./config');
const { SqliteLeaseStore } = require('./stores/lease-sqlite');
const { PostgresLeaseStore } = require('./stores/lease-postgres');

module.exports = { createService, SERVICE_OPTIONS: Object.keys(OPTIONS), SqliteLeaseStore, PostgresLeaseStore };
