'use strict';
// Debian's Chromium driven by playwright-core (never a downloaded browser): headless, a fresh
// profile in a temp folder, every console error and page error collected, screenshots saved under
// test-output/ and checked to be non-empty.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const CHROMIUM = '/usr/bin/chromium';
const OUT = path.join(__dirname, '..', '..', 'test-output', 'dashboard');
const skip = fs.existsSync(CHROMIUM) ? false : `${CHROMIUM} is not installed (.ci/run installs Debian's chromium)`;

async function launch(t) {
  const { chromium } = require('playwright-core');
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tiergate-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    viewport: { width: 1280, height: 900 },
  });
  t.after(async () => {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  });
  const errors = [];
  const page = context.pages()[0] || await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  return { context, page, errors };
}

/** Saves a full-page screenshot as test-output/dashboard/<name>.png; returns its size (> 0 asserted by callers). */
async function screenshot(page, name) {
  fs.mkdirSync(OUT, { recursive: true });
  const file = path.join(OUT, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return fs.statSync(file).size;
}

module.exports = { launch, screenshot, skip, OUT };
