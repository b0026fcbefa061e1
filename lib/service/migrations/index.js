'use strict';
// The schema's migrations, one SQL file per version and dialect (NNN_name.sql), applied in order;
// each store records the versions applied in schema_migrations and applies the rest under its lock.
const fs = require('node:fs');
const path = require('node:path');

function migrations(dialect) {
  const dir = path.join(__dirname, dialect);
  return fs.readdirSync(dir).filter((f) => /^\d{3}_[\w-]+\.sql$/.test(f)).sort()
    .map((file) => ({ version: Number(file.slice(0, 3)), name: file, sql: fs.readFileSync(path.join(dir, file), 'utf8') }));
}

module.exports = { migrations };
