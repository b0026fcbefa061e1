'use strict';
// The service's HTTP plumbing: JSON bodies in (bounded, declared as JSON) and out, the error shape
// { error: CODE, message, requestId }, and request ids.
const { randomUUID } = require('node:crypto');
const { PROBLEM_TYPE } = require('../http/problem');

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

const JSON_TYPE = 'application/json; charset=utf-8';
// The decision service's wire contract names the charset (the gatekeeper's refusals do not).
const PROBLEM_JSON = `${PROBLEM_TYPE}; charset=utf-8`;

/** Sends `body` as JSON; `headers` (a fresh object of the caller's) gets the framing headers added. */
function sendJson(res, status, body, headers, type = JSON_TYPE) {
  const text = JSON.stringify(body);
  // One writeHead with every header: cheaper on the check's path than a setHeader each (and, when
  // nothing was set before, node takes the object as it is).
  const all = headers || {};
  if (res.idInHead) all['X-Request-ID'] = res.requestId;
  all['Content-Type'] = type;
  all['Content-Length'] = Buffer.byteLength(text);
  res.writeHead(status, all);
  res.end(text);
}

function sendError(res, err) {
  const body = { error: err.code, message: err.message, ...err.extra, requestId: res.requestId };
  if (err.status === 413 || err.closeConnection) res.setHeader('Connection', 'close');
  sendJson(res, err.status, body, err.headers, err.problem ? PROBLEM_JSON : JSON_TYPE);
}

/**
 * An HttpError answered as an RFC 9457 problem document: its `type`, `title`, `status` and `detail`,
 * beside the service's own `error`, `message` and `requestId` (so a caller reading either shape works).
 */
function problemError(status, code, title, message) {
  const err = new HttpError(status, code, message, { type: `urn:tiergate:problem:${code.toLowerCase().replace(/_/g, '-')}`, title, status, detail: message });
  err.problem = true;
  return err;
}

const JSON_MEDIA = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * Reads a JSON body of at most `limit` bytes. Past the limit it stops reading and answers 413 (the
 * connection closes after the answer, so the rest of the upload is not read). A body declared as
 * anything but JSON is a 415, and so is one declared as nothing unless `requireType` is false: the
 * types a browser sends across origins without asking first (a form's, text/plain, none) are refused.
 */
function readJson(req, limit, requireType = true) {
  return new Promise((resolve, reject) => {
    const type = req.headers['content-type'];
    if (type === undefined ? requireType : !JSON_MEDIA.test(type)) {
      req.resume();
      reject(problemError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Unsupported Media Type', `the body must be JSON, sent with Content-Type: application/json (got ${type === undefined ? 'none' : 'another type'})`));
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
