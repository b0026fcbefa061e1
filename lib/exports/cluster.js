'use strict';
// `require('tiergate/cluster')`: cluster mode over Redis or PostgreSQL. `cluster` is also at the root.
const { cluster, Cluster, RedisStore, PostgresStore, BanChannel } = require('../cluster');

module.exports = { cluster, Cluster, RedisStore, PostgresStore, BanChannel };
