'use strict';
// The challenge step-up's request side: where a client's pass is read from (a header or a cookie),
// and the answer a challenged request gets (the app's challenge.respond, or the default 403 problem).
const native = require('../native');
const { isObject } = require('../options');

const { maxPassLength: MAX_PASS_LENGTH } = native.defenseConstants();

/** The value of cookie `name` in a Cookie header, or undefined. Bounded: one scan. */
function cookieValue(header, name) {
  if (typeof header !== 'string') return undefined;
  let i = 0;
  while (i < header.length) {
    while (header.charCodeAt(i) === 32) i++;
    const end = header.indexOf(';', i);
    const stop = end < 0 ? header.length : end;
    if (header.startsWith(name, i) && header.charCodeAt(i + name.length) === 61 /* = */) return header.slice(i + name.length + 1, stop).trim();
    i = stop + 1;
  }
  return undefined;
}

/** The pass request `req` carries for challenge `c` (undefined: none; '': one too long to be a pass). */
function passOf(c, req) {
  let v;
  if (c.header !== null) {
    const h = req.headers[c.header];
    if (typeof h === 'string') v = h;
  }
  if (v === undefined && c.cookie !== null) v = cookieValue(req.headers.cookie, c.cookie);
  // An over-long value is not a pass (and is not read whole natively).
  return v !== undefined && v.length > 0 && v.length <= MAX_PASS_LENGTH + 1 ? v : v === undefined ? undefined : '';
}

/** The answer to a challenged request: challenge `c`'s respond when it gives a valid one, else the responder's. */
function challengeResponse(c, info, req, responder, warn) {
  if (c.respond !== null) {
    let custom;
    try {
      custom = c.respond(info, req); // info first, as every hook
    } catch (err) {
      warn('challenge.respond', err);
    }
    if (isObject(custom) && Number.isInteger(custom.status) && custom.status >= 100 && custom.status <= 599) {
      const headers = { 'cache-control': 'no-store', ...(custom.headers || {}) };
      let body = custom.body === undefined || custom.body === null ? '' : custom.body;
      if (typeof body !== 'string' && !(body instanceof Uint8Array)) {
        body = JSON.stringify(body);
        if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
      }
      return { status: custom.status, headers, body };
    }
    if (custom !== undefined) warn('challenge.respond', new TypeError('must return { status: 100..599, headers?, body? } or undefined'));
  }
  return responder.challenged();
}

module.exports = { cookieValue, passOf, challengeResponse };
