'use strict';
// Signed ban changes (`cluster({ banKey })`): every message on the ban channel and every entry of the
// ban hash is `s1.<mac>.<json>`, where mac is the base64url HMAC-SHA256 of `<where>\n<json>` under the
// first key and `where` names the place the text is meant for (the channel; the hash and its field),
// so that a signed text copied to another channel, prefix or field does not verify. Any of the keys
// verifies (rotation: add the new key second everywhere, then first, then drop the old one). Without
// keys, texts are plain JSON and nothing is checked: whoever can write to Redis can change the bans.
const { createHmac, timingSafeEqual } = require('node:crypto');

const TAG = 's1.';

function mac(key, where, json) {
  return createHmac('sha256', key).update(`${where}\n${json}`).digest('base64url');
}

class BanSigner {
  #keys;

  /** `keys`: Buffers of at least 16 bytes (checked by the option), the first signs; none: no signing. */
  constructor(keys = []) {
    this.#keys = keys;
  }

  get signs() {
    return this.#keys.length > 0;
  }

  /** The text to store or publish at `where`. */
  seal(where, json) {
    return this.signs ? `${TAG}${mac(this.#keys[0], where, json)}.${json}` : json;
  }

  /** The JSON inside a text found at `where`, or null when it is not validly signed (without keys: the text). */
  open(where, text) {
    if (!this.signs) return text;
    if (typeof text !== 'string' || !text.startsWith(TAG)) return null;
    const dot = text.indexOf('.', TAG.length);
    if (dot < 0) return null;
    const given = Buffer.from(text.slice(TAG.length, dot));
    const json = text.slice(dot + 1);
    for (const key of this.#keys) {
      const want = Buffer.from(mac(key, where, json));
      if (want.length === given.length && timingSafeEqual(want, given)) return json;
    }
    return null;
  }
}

module.exports = { BanSigner };
