'use strict';
// RFC 9457 problem documents: the one builder of every refusal the library answers (the
// gatekeeper's, the defense's, the cluster's, the concurrency gate's). A body is built once per kind
// (and tier) and a rejection is `{ status, headers, body }`, what the adapters write.
const { MAX_RETRY_AFTER_SEC } = require('../options');

const PROBLEM_TYPE = 'application/problem+json';

/** A problem document built once: its JSON text and byte length (as the content-length field). */
function problemBody(doc) {
  const text = JSON.stringify(doc);
  return { text, length: String(Buffer.byteLength(text)) };
}

/**
 * A rejection with the body `b` (problemBody's), never cached; `retryAfter` (whole seconds, a
 * string or number) when given. Callers add their own fields (rate-limit ones) to `headers`.
 */
function problemResponse(status, b, retryAfter) {
  const headers = { 'content-type': PROBLEM_TYPE, 'content-length': b.length, 'cache-control': 'no-store' };
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter);
  return { status, headers, body: b.text };
}

/** Retry-After for a wait of `ms`: whole seconds, at least 1 (0 invites an immediate retry), at most a day. */
function retryAfterSeconds(ms) {
  if (!(ms > 0)) return 1;
  return Math.min(MAX_RETRY_AFTER_SEC, Math.max(1, Math.ceil(ms / 1000)));
}

module.exports = { PROBLEM_TYPE, problemBody, problemResponse, retryAfterSeconds };
