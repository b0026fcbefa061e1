#!/usr/bin/env node
'use strict';
// `tiergate serve [--flag value ...]`: the decision service. Prints one line
// "tiergate: listening on http://HOST:PORT" on stdout when it listens; SIGTERM/SIGINT drain and exit 0.
const { createService } = require('../lib/service');
const { parseFlags, OPTIONS, kebab, envName } = require('../lib/service/config');

function usage() {
  const flags = Object.entries(OPTIONS).map(([name, spec]) => `  --${kebab(name)}  (${(spec.env || [envName(name)]).join(', ')})${spec.default !== null && !Array.isArray(spec.default) ? ` default ${spec.default}` : ''}`);
  return `usage: tiergate serve [flags]\n${flags.join('\n')}\n`;
}

async function serve(argv) {
  let service;
  try {
    service = createService(parseFlags(argv));
    await service.start();
  } catch (err) {
    process.stderr.write(`tiergate: ${err.code ? `${err.code}: ` : ''}${err.message}\n`);
    if (service) await service.close().catch(() => {});
    process.exit(1);
  }
  process.stdout.write(`tiergate: listening on ${service.url}\n`);
  let stopping = false;
  const stop = (signal) => {
    if (stopping) return;
    stopping = true;
    service.close().then(() => process.exit(0), (err) => {
      process.stderr.write(`tiergate: shutdown after ${signal} failed: ${err.message}\n`);
      process.exit(1);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

const [command, ...rest] = process.argv.slice(2);
if (command === 'serve') serve(rest);
else if (command === undefined || command === 'help' || command === '--help' || command === '-h') process.stdout.write(usage());
else {
  process.stderr.write(`tiergate: unknown command ${JSON.stringify(command)}\n${usage()}`);
  process.exit(2);
}
