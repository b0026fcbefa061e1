'use strict';
// Public API. Each component lives in lib/; this file only gathers them.
module.exports = {
  ...require('./lib/ledger'),
  ...require('./lib/lag'),
  ...require('./lib/gatekeeper'),
  ...require('./lib/queue'),
  ...require('./lib/metrics'),
  ...require('./lib/dashboard'),
  ...require('./lib/quota'),
  ...require('./lib/client'),
  ...require('./lib/service'),
  ...require('./lib/cluster'),
};
