'use strict';
// npm run demo — for now the Ledger example; the overload scenario will take its place.
require('./ledger').run().catch((err) => {
  console.error(err);
  process.exit(1);
});
