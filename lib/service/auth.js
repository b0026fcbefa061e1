'use strict';
// Bearer credentials, compared in constant time: both sides are hashed to 32 bytes first, so neither
// the content nor the length of a guess changes how long the comparison takes.
const { createHash, timingSafeEqual } = require('node:crypto');
const { HttpError } = require('./http');

const digest = (s) => createHash('sha256').update(s, 'utf8').digest();

/** A checker for a set of accepted tokens; `check(req)` throws 401 UNAUTHORIZED without one. */
function bearer(tokens, realm) {
  const accepted = tokens.map(digest);
  return function check(req) {
    const h = req.headers.authorization;
    const m = typeof h === 'string' ? /^Bearer[ ]+(\S+)\s*$/i.exec(h) : null;
    const given = m ? digest(m[1]) : null;
    let ok = false;
    // Every accepted token is compared, whichever matches.
    for (const a of accepted) if (given !== null && timingSafeEqual(a, given)) ok = true;
    if (!ok) {
      const err = new HttpError(401, 'UNAUTHORIZED', m ? 'the credential is not valid' : 'this endpoint needs Authorization: Bearer <token>');
      err.headers = { 'WWW-Authenticate': `Bearer realm="${realm}"` };
      throw err;
    }
  };
}

module.exports = { bearer };
