'use strict';
// The web app's static files (./public), read once and served from memory with an ETag, strict
// security headers and a Content-Security-Policy that allows only this origin's scripts and styles.
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');

const ROOT = path.join(__dirname, 'public');
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.svg': 'image/svg+xml' };
/** URL path (under the mount point) -> file under ./public. */
const FILES = {
  '/': 'index.html',
  '/app.js': 'app.js',
  '/app.css': 'app.css',
  '/charts.js': 'charts.js',
  '/service.js': 'service.js',
  '/favicon.svg': 'favicon.svg',
  '/vendor/uPlot.iife.min.js': 'vendor/uPlot.iife.min.js',
  '/vendor/uPlot.min.css': 'vendor/uPlot.min.css',
};
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const SECURITY_HEADERS = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};

let cache = null;
function load() {
  if (cache !== null) return cache;
  cache = new Map();
  for (const [urlPath, file] of Object.entries(FILES)) {
    const body = fs.readFileSync(path.join(ROOT, file));
    const etag = `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    cache.set(urlPath, { body, etag, type: TYPES[path.extname(file)] });
  }
  return cache;
}

/** Answers a GET/HEAD of one of the app's files; false when `p` is not one. */
function serveFile(req, res, p) {
  const f = load().get(p);
  if (f === undefined) return false;
  const headers = { ...SECURITY_HEADERS, 'content-type': f.type, etag: f.etag, 'cache-control': 'no-cache' };
  if (req.headers['if-none-match'] === f.etag) {
    res.writeHead(304, headers);
    res.end();
    return true;
  }
  headers['content-length'] = f.body.length;
  res.writeHead(200, headers);
  res.end(req.method === 'HEAD' ? undefined : f.body);
  return true;
}

module.exports = { serveFile, FILES, SECURITY_HEADERS, ROOT };
