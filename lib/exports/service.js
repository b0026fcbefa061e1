'use strict';
// `require('tiergate/service')`: the decision service (`tiergate serve`) and its SQL lease stores,
// and the client an app uses to ask it.
const { createService, SqliteLeaseStore, PostgresLeaseStore } = require('../service');
const { client, ServiceClient } = require('../client');

module.exports = { createService, SqliteLeaseStore, PostgresLeaseStore, client, ServiceClient };
