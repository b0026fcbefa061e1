'use strict';
// The service's HTTP plumbing: JSON bodies in (bounded) and out, the error shape
// { error: CODE, message, requestId }, and request ids.
const { randomUUID } = require('node:crypto');

/** An error a caller may see: a status, a safe code and a message (never a store's or a stack's text). */
class HttpError extends Error {
  constructor(status, code, message, extra) {
    super(message);
    this.status = status;
    this.code = code;
    this.extra = extra;
  }
}

// A caller's own id is kept when it is short and plain (it goes into logs and headers).
const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function requestId(req) {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && SAFE_ID.test(given) ? given : randomUUID();
}

/** Sends `body` as JSON; `headers` (a fresh object of the caller's) gets the framing headers added. */
function sendJson(res, status, body, headers) {
  const text = JSON.stringify(body);
  // One writeHead with every header: cheaper on the check's path than a setHeader each (and, when
  // nothing was set before, node takes the object as it is).
  const all = headers || {};
  if (res.idInHead) all['X-Request-ID'] = res.requestId;
  all['Content-Type'] = 'application/json; charset=utf-8';
  all['Content-Length'] = Buffer.byteLength(text);
  res.writeHead(status, all);
  res.end(text);
}

function sendError(res, err) {
  const body = { error: err.code, message: err.message, ...err.extra, requestId: res.requestId };
  if (err.status === 413 || err.closeConnection) res.setHeader('Connection', 'close');
  sendJson(res, err.status, body, err.headers);
}

/**
 * Reads a JSON body of at most `limit` bytes. Past the limit it stops reading and answers 413 (the
 * connection closes after the answer, so the rest of the upload is not read).
 */
function readJson(req, limit) {
  return new Promise((resolve, reject) => {
    const type = req.headers['content-type'];
    if (type !== undefined && !/^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(type)) {
      req.resume();
      reject(new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'the body must be JSON (Content-Type: application/json)'));
      return;
    }
    const declared = Number(req.headers['content-length']);
    if (declared > limit) {
      reject(new HttpError(413, 'PAYLOAD_TOO_LARGE', `the body must be at most ${limit} bytes`));
      return;
    }
    const chunks = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        done = true;
        req.pause();
        reject(new HttpError(413, 'PAYLOAD_TOO_LARGE', `the body must be at most ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      const text = (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString('utf8');
      if (text.trim() === '') { reject(new HttpError(400, 'VALIDATION_ERROR', 'the body must be a JSON object, got nothing')); return; }
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(new HttpError(400, 'MALFORMED_JSON', 'the body is not valid JSON'));
      }
    });
    req.on('error', (err) => { if (!done) { done = true; reject(err); } });
  });
}

module.exports = { HttpError, requestId, sendJson, sendError, readJson };
