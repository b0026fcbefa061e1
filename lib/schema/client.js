'use strict';
// The decision service client's options (`client(url, options)`, docs/service.md#from-node-the-client-and-middleware).
const { schema } = require('./index');

const SERVICE_CLIENT = schema([
  { name: 'timeoutMs', type: 'number', default: 1000, min: 1, max: 60_000, doc: 'the longest a check waits for its answer' },
  { name: 'failOpen', type: 'boolean', default: true, accepted: 'boolean', doc: 'the decision when the service gives no usable answer' },
  { name: 'apiKey', type: 'string', default: null, docDefault: 'none', accepted: 'a non-empty string, or `null`', doc: 'sent as `Authorization: Bearer`' },
  { name: 'maxSockets', type: 'integer', default: 64, min: 1, max: 10_000, doc: 'kept-alive connections at most' },
]);

module.exports = { SERVICE_CLIENT };
