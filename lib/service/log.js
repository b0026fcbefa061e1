'use strict';
// Structured logs: one JSON object per line on stdout, filtered by level.
const { LOG_LEVELS } = require('./config');

function createLogger(level, out = process.stdout) {
  const threshold = LOG_LEVELS.indexOf(level);
  const write = (lvl, msg, fields) => {
    if (LOG_LEVELS.indexOf(lvl) > threshold) return;
    out.write(`${JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...fields })}\n`);
  };
  return {
    enabled: (lvl) => LOG_LEVELS.indexOf(lvl) <= threshold,
    error: (msg, f) => write('error', msg, f),
    warn: (msg, f) => write('warn', msg, f),
    info: (msg, f) => write('info', msg, f),
    debug: (msg, f) => write('debug', msg, f),
  };
}

module.exports = { createLogger };
