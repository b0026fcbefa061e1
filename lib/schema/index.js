'use strict';
// Every option of a component declared once: its name, type, default, range and a one-line doc.
// The constructors read their defaults and ranges from here, and the docs' option tables are
// generated from here (scripts/options-docs.js); __test__/api/options-schema.test.js holds the schema,
// the validation, the .d.ts files and the docs equal.
//
// An entry: { name, type, default?, min?, max?, integer?, exclusiveMin?, orFalse?, values?,
//   docDefault?, accepted?, doc? }
//   type: 'integer' | 'number' (a finite one) | 'boolean' | 'string' | 'function' | 'object' | 'any';
//   min/max/integer/exclusiveMin: a number's range (min defaults to 0);
//   orFalse: `false` is accepted too (turns the option off; falseMeans: what it means, for the docs);
//   values: the only values accepted;
//   docDefault / accepted: the docs table's wording where the value alone does not say it
//   (`accepted` follows the generated range); doc: what the option does, one line.

/** name -> entry, keeping the declaration order. */
function schema(entries) {
  const byName = new Map();
  for (const e of entries) {
    if (byName.has(e.name)) throw new Error(`schema: option ${e.name} declared twice`);
    byName.set(e.name, Object.freeze({ ...e }));
  }
  return Object.freeze(Object.fromEntries(byName));
}

/** The Set of option names of a schema (for onlyKnown). */
function optionNames(s) {
  return new Set(Object.keys(s));
}

/** The range of a number entry as lib/options.js's finite() takes it. */
function rangeOf(e) {
  return { min: e.min === undefined ? 0 : e.min, max: e.max === undefined ? Infinity : e.max, integer: e.type === 'integer', exclusiveMin: e.exclusiveMin === true };
}

/** The same range as checkNumber() takes it (the concurrency gate's message style). */
function checkNumberRange(e) {
  const r = rangeOf(e);
  return { min: r.min, max: r.max, integer: r.integer, minExclusive: r.exclusiveMin };
}

/** { name: default } for the entries that have one. */
function defaultsOf(s) {
  return Object.fromEntries(Object.values(s).filter((e) => e.default !== undefined).map((e) => [e.name, e.default]));
}

module.exports = { schema, optionNames, rangeOf, checkNumberRange, defaultsOf };
