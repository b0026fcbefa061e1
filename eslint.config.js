'use strict';
// `npm run lint`: ESLint's recommended rules over the JavaScript (CommonJS, node 20) of the package,
// its tests, benchmarks, examples and scripts; the dashboard's browser code with browser globals.
const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  { ignores: ['node_modules/', 'target/', 'fuzz/', 'npm/', 'benchmark/out/', 'lib/dashboard/public/vendor/', '**/*.d.ts'] },
  js.configs.recommended,
  {
    files: ['**/*.js'],
    languageOptions: { ecmaVersion: 2023, sourceType: 'commonjs', globals: { ...globals.node } },
    rules: {
      // `_`-prefixed names are deliberately unused (a callback's signature, a destructured rest).
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    files: ['lib/dashboard/public/**/*.js'],
    languageOptions: { sourceType: 'script', globals: { ...globals.browser } },
  },
  {
    // No line over 160 characters (issue 37), as rustfmt's max_width holds the Rust. lib/schema, cluster,
    // metrics, dashboard, client and service are to follow (their long lines are not wrapped yet).
    files: ['lib/*.js', 'lib/{adapters,defense,exports,gatekeeper,http,lag,ledger,queue,quota}/**/*.js'],
    rules: { 'max-len': ['error', { code: 160 }] },
  },
  {
    // Their page.evaluate callbacks run in the browser.
    files: ['__test__/dashboard/**/*.js'],
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
  },
];
