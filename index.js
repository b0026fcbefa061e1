'use strict';
// Public API. Each component lives in lib/; this file only gathers them.
module.exports = {
  ...require('./lib/queue'),
};
