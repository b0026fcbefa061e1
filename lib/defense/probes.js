'use strict';
// Probe strikes: responses with a probe status (404/400/405 by default) counted against their client
// at 'finish', and malformed requests node's parser refuses (a server's 'clientError').

const PROBE_DEFENSE = Symbol('tiergate.defense');
const PROBE_IP = Symbol('tiergate.defense.ip');

/** Counts a probe status at the response's end (one shared listener: no closure per request). */
function onFinish() {
  const d = this[PROBE_DEFENSE];
  if (d.probeStatuses.has(this.statusCode)) d.reportProbe(this[PROBE_IP]);
}

/** Watches `res` for a probe status, to be counted against `ip` by `defense`. */
function watchResponse(res, defense, ip) {
  res[PROBE_DEFENSE] = defense;
  res[PROBE_IP] = ip;
  res.on('finish', onFinish);
}

/**
 * A 'clientError' listener on `server` that counts malformed requests as probes against the peer
 * (through `defense`) and answers them as node does by default; returns a function removing it.
 * With trustProxy, the peer is a trusted proxy: nobody is charged.
 */
function watchServer(server, defense, trustProxy) {
  const onClientError = (err, socket) => {
    const ip = socket.remoteAddress;
    // A strike here would ban the proxy, and with it every client behind it (its health checks too).
    if (typeof ip === 'string' && defense.probeStatuses !== null && trustProxy === 0) defense.reportProbe(ip);
    if (socket.writable && !socket.destroyed) {
      const status = err && err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`);
    }
    socket.destroy();
  };
  server.on('clientError', onClientError);
  return () => server.off('clientError', onClientError);
}

module.exports = { watchResponse, watchServer };
