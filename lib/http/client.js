'use strict';
// What a node request says about its client: its address (the socket's peer, or a trusted proxy's
// X-Forwarded-For), and whether node cut its header set. Shallow and bounded: header values are read
// once, never split beyond a small cap, never parsed with anything slower than indexOf.
const { typeName } = require('../options');

/** At most this many X-Forwarded-For entries are looked at; at most this many characters read. */
const MAX_FORWARDED_HOPS = 32;
const MAX_FORWARDED_LEN = 2048;

/**
 * The trust-proxy setting: false (the socket's peer is the client), true (the left-most
 * X-Forwarded-For entry: every proxy in front is trusted), or a number n of trusted proxy hops (the
 * client is the n-th address counting from the socket's peer; Express's meaning of a number).
 */
function checkTrustProxy(v, at) {
  if (v === undefined || v === false) return 0;
  if (v === true) return Infinity;
  if (typeof v === 'number') {
    if (!Number.isInteger(v) || v < 0 || v > MAX_FORWARDED_HOPS) {
      throw new RangeError(`${at} must be true, false or an integer 0..${MAX_FORWARDED_HOPS} (trusted proxy hops), got ${v}`);
    }
    return v;
  }
  throw new TypeError(`${at} must be true, false or a number of trusted proxy hops, got ${typeName(v)}`);
}

// Node keeps the first `server.maxHeadersCount` headers and drops the rest; left unset, its parser
// keeps 2,000 raw entries, i.e. 1,000 headers (measured on node 20).
const NODE_DEFAULT_HEADER_ENTRIES = 2000;

/**
 * Did node drop headers? A header a gateway appended after a client's padding (its X-User-Tier, its
 * X-Forwarded-For) is then silently lost, so such a request's headers are not trusted: no tier from a
 * header, no address from a forwarded one. rawHeaders keeps growing past the cut, so it tells.
 */
function headersTruncated(req) {
  const raw = req.rawHeaders;
  if (raw === undefined) return false;
  const server = req.socket ? req.socket.server : undefined;
  const max = server && Number.isInteger(server.maxHeadersCount) && server.maxHeadersCount > 0 ? 2 * server.maxHeadersCount : NODE_DEFAULT_HEADER_ENTRIES;
  return raw.length > max;
}

/**
 * The client address as a string (normalised later in Rust). Never undefined: a peer that cannot be
 * read (the client closed its socket while earlier middleware ran, and node forgets the address) is
 * the empty string, which shares the one invalid-IP key: no key at all would skip every per-key quota.
 */
function clientIp(req, hops, truncated = false) {
  const socket = req.socket;
  const address = socket ? socket.remoteAddress : undefined;
  const peer = typeof address === 'string' ? address : '';
  if (hops === 0) return peer;
  if (truncated) return ''; // the trusted proxy's X-Forwarded-For may be among the lost headers
  let xff = req.headers['x-forwarded-for'];
  if (typeof xff !== 'string' || xff.length === 0) return peer;
  if (xff.length > MAX_FORWARDED_LEN) xff = xff.slice(xff.length - MAX_FORWARDED_LEN);
  if (hops === Infinity) {
    // Left-most entry: everything in front of us is trusted to have appended honestly.
    const comma = xff.indexOf(',');
    return (comma < 0 ? xff : xff.slice(0, comma)).trim();
  }
  // Walk from the right: the peer is hop 0, the last XFF entry hop 1, and so on.
  let end = xff.length;
  let addr = peer;
  for (let hop = 1; hop <= hops && end > 0; hop++) {
    const comma = lastComma(xff, end);
    addr = xff.slice(comma + 1, end).trim();
    end = comma < 0 ? 0 : comma;
  }
  return addr;
}

// The last ',' before `end`, or -1. A loop over char codes, because String.prototype.lastIndexOf is
// a call into V8's C++ runtime (about 60 ns per request here, measured in bench:defense's part 1a);
// bounded by MAX_FORWARDED_LEN.
function lastComma(s, end) {
  for (let i = end - 1; i >= 0; i--) if (s.charCodeAt(i) === 44) return i;
  return -1;
}


module.exports = { checkTrustProxy, clientIp, headersTruncated };
