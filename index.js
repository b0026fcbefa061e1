'use strict';
// Public API. Each component lives in lib/; this file only gathers them.
module.exports = {
  ...require('./lib/ledger'),
  ...require('./lib/lag'),
  ...require('./lib/gatekeeper'),
  ...require('./lib/queue'),
  ...require('./lib/quota'),
  ...require('./lib/cluster'),
};
