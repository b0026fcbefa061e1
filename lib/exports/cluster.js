'use strict';
// `require('tiergate/cluster')`: cluster mode over Redis. `cluster` is also at the root.
const { cluster, Cluster, RedisStore, BanChannel } = require('../cluster');

module.exports = { cluster, Cluster, RedisStore, BanChannel };
