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
    // Their page.evaluate callbacks run in the browser.
    files: ['__test__/dashboard/**/*.js'],
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
  },
];
