'use strict';
// The docs' option tables, generated from the option schemas (lib/schema): each table sits between
// `<!-- options:NAME -->` and `<!-- /options:NAME -->` in its page. `node scripts/options-docs.js`
// rewrites them; `--check` exits 1 when a committed page differs (__test__/api/options-schema.test.js
// holds them equal too).
const fs = require('node:fs');
const path = require('node:path');
const { GATEKEEPER, SHED, CONCURRENCY, SHADOW } = require('../lib/schema/gatekeeper');
const { CONCURRENCY_GATE, QUEUE_TIER, ADAPTIVE_LIMIT, CODEL } = require('../lib/schema/concurrency-gate');
const { LAG_MONITOR } = require('../lib/schema/lag');
const { LEDGER, LEDGER_TIER, LEDGER_PER_KEY } = require('../lib/schema/ledger');
const { NAMED_LIMIT } = require('../lib/schema/defense');
const { CLUSTER, QUOTA_LIMIT } = require('../lib/schema/cluster');
const { METRICS, OTEL, STATUS_ROUTE } = require('../lib/schema/metrics');
const { DASHBOARD } = require('../lib/schema/dashboard');
const { SERVICE_CLIENT } = require('../lib/schema/client');
const { SERVE } = require('../lib/schema/service');
const { kebab, envName } = require('../lib/service/config');

const ROOT = path.join(__dirname, '..');
const HEADER = ['option', 'default', 'accepted'];

/**
 * Each table: its page, the schemas whose rows it holds (with a name prefix, and the names to show
 * when not all), its header; `meaning`: a fourth column for the doc, after the range.
 */
const TABLES = {
  gatekeeper: { file: 'docs/gatekeeper.md', parts: [[GATEKEEPER, '']] },
  'gatekeeper.shed': { file: 'docs/gatekeeper.md', parts: [[SHED, '']] },
  'gatekeeper.concurrency': { file: 'docs/gatekeeper.md', parts: [[CONCURRENCY, '']], header: ['`concurrency` option', 'default', 'accepted'] },
  'gatekeeper.shadow': { file: 'docs/gatekeeper.md', parts: [[SHADOW, '']], header: ['`shadow` option', 'default', 'accepted'] },
  'concurrency-gate': { file: 'docs/concurrency-gate.md', parts: [[CONCURRENCY_GATE, ''], [QUEUE_TIER, 'tiers[i].', ['maxQueue', 'queueTimeoutMs']]] },
  'concurrency-gate.limit': { file: 'docs/concurrency-gate.md', parts: [[ADAPTIVE_LIMIT, '']] },
  'concurrency-gate.codel': { file: 'docs/concurrency-gate.md', parts: [[CODEL, '']] },
  ledger: {
    file: 'docs/ledger.md',
    parts: [[LEDGER, '', ['tiers']], [LEDGER_TIER, 'tiers[i].'], [LEDGER, '', ['perKey']], [LEDGER_PER_KEY, 'perKey.', ['maxKeys', 'idleTtlMs']]],
    header: ['option', 'required / default', 'meaning'],
  },
  'named-limit': { file: 'docs/defense.md', parts: [[NAMED_LIMIT, '']] },
  'lag-monitor': { file: 'docs/lag.md', parts: [[LAG_MONITOR, '']], header: ['option', 'default', 'range', 'meaning'], meaning: true },
  cluster: { file: 'docs/cluster.md', parts: [[CLUSTER, '']] },
  'cluster.limit': { file: 'docs/cluster.md', parts: [[QUOTA_LIMIT, '']], header: ['field', 'default', 'accepted'] },
  metrics: { file: 'docs/metrics.md', parts: [[METRICS, '']] },
  otel: { file: 'docs/metrics.md', parts: [[OTEL, '']] },
  'status-route': { file: 'docs/metrics.md', parts: [[STATUS_ROUTE, '']] },
  dashboard: { file: 'docs/dashboard.md', parts: [[DASHBOARD, '']] },
  'service-client': { file: 'docs/service.md', parts: [[SERVICE_CLIENT, '']] },
  serve: { file: 'docs/service.md', parts: [[SERVE, '']], header: ['flag', 'environment', 'default', 'what'], serve: true },
};

const SUPERSCRIPT = '⁰¹²³⁴⁵⁶⁷⁸⁹';
/** A bound as the docs write it: 2³²−1, 10¹², else the digits. */
function bound(n) {
  if (n === 2 ** 32 - 1) return '2³²−1';
  if (n === Number.MAX_SAFE_INTEGER) return '2⁵³−1';
  const e = Math.log10(n);
  if (n >= 1e9 && Number.isInteger(e)) return `10${[...String(e)].map((d) => SUPERSCRIPT[d]).join('')}`;
  return String(n);
}

const shown = (v) => (typeof v === 'string' ? `\`'${v}'\`` : `\`${v}\``);

/** The default column of entry `e`. */
function defaultCell(e) {
  if (e.docDefault !== undefined) return e.docDefault;
  return e.default === undefined ? '—' : shown(e.default);
}

/** The start of entry `e`'s row in table `t` (its first cells): what a page must hold for it. */
function rowStart(t, prefix, e) {
  if (!t.serve) return `| \`${prefix}${e.name}\` | ${defaultCell(e)} |`;
  // `tiergate serve`: the flag, the environment variables, the default as a command line writes it.
  const env = (e.env || [envName(e.name)]).map((n) => `\`${n}\``).join(', ');
  const def = e.docDefault !== undefined ? e.docDefault : e.default === null ? '' : `\`${e.default}\``;
  return `${`| \`--${kebab(e.name)}\` | ${env} | ${def}`.trimEnd()} |`;
}

/** The accepted column: the values or the range, then the entry's own words, then its doc. */
function acceptedCell(e) {
  const text = rangeCell(e);
  if (e.doc === undefined) return text;
  return text === '' ? e.doc : `${text}: ${e.doc}`;
}

/** The values or the range, then the entry's own words. */
function rangeCell(e) {
  const parts = [];
  if (e.values !== undefined) {
    const v = e.values.map(shown);
    parts.push(v.length > 1 ? `${v.slice(0, -1).join(', ')} or ${v[v.length - 1]}` : v[0]);
  } else if (e.type === 'number' || e.type === 'integer') {
    const min = e.min === undefined ? 0 : e.min;
    const low = e.exclusiveMin ? `> ${bound(min)}` : `≥ ${bound(min)}`;
    let range;
    if (e.max === undefined) range = low;
    else range = e.exclusiveMin ? `${low} and ≤ ${bound(e.max)}` : `${bound(min)}..${bound(e.max)}`;
    parts.push(`${e.type === 'integer' ? 'integer' : 'finite'} ${range}`);
    if (e.orFalse) parts.push(e.falseMeans === undefined ? 'or `false`' : `or \`false\` (${e.falseMeans})`);
  }
  // An aside in parentheses follows the range without a comma.
  if (e.accepted !== undefined && e.accepted.startsWith('(') && parts.length > 0) parts[parts.length - 1] += ` ${e.accepted}`;
  else if (e.accepted !== undefined) parts.push(e.accepted);
  return parts.join(', ');
}

function renderTable(name) {
  const t = TABLES[name];
  const header = t.header || HEADER;
  const rows = [`| ${header.join(' | ')} |`, `|${'---|'.repeat(header.length)}`];
  for (const [s, prefix, only] of t.parts) {
    for (const e of Object.values(s)) {
      if (only !== undefined && !only.includes(e.name)) continue;
      const cells = t.meaning ? [rangeCell(e).replace(/^integer /, ''), e.doc || ''] : [acceptedCell(e)];
      rows.push(`${rowStart(t, prefix, e)} ${cells.join(' | ')} |`);
    }
  }
  return rows.join('\n');
}

/** `text` (a page) with every generated table it marks rewritten. */
function renderPage(text) {
  return text.replace(/(<!-- options:([\w.-]+) -->\n)[\s\S]*?(\n<!-- \/options:\2 -->)/g, (all, open, name, close) => {
    if (!(name in TABLES)) throw new Error(`options-docs: unknown table ${name}`);
    return `${open}${renderTable(name)}${close}`;
  });
}

/** The pages that hold generated tables, relative to the repository. */
const PAGES = [...new Set(Object.values(TABLES).map((t) => t.file))];

if (require.main === module) {
  let stale = 0;
  for (const rel of PAGES) {
    const file = path.join(ROOT, rel);
    const before = fs.readFileSync(file, 'utf8');
    const after = renderPage(before);
    if (after === before) continue;
    if (process.argv.includes('--check')) {
      console.error(`${rel}: its option tables differ from lib/schema (run node scripts/options-docs.js)`);
      stale++;
    } else {
      fs.writeFileSync(file, after);
      console.log(`${rel}: option tables written`);
    }
  }
  process.exitCode = stale > 0 ? 1 : 0;
}

module.exports = { TABLES, PAGES, renderTable, renderPage, acceptedCell, defaultCell, rowStart };
