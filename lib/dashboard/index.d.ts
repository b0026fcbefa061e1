/// <reference types="node" />
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ObservedComponents } from '../metrics';

export interface DashboardOptions extends ObservedComponents {
  /** Required: the admin credential (>= 16 bytes), sent by the page as `Authorization: Bearer`. */
  token: string | Buffer;
  /** node:http: the path the dashboard lives under (e.g. '/tiergate'); not with an Express mount. */
  prefix?: string;
  /** Sampling interval, ms (100..1000). Default 1000. */
  intervalMs?: number;
  /** Seconds of samples kept in memory (10..3600). Default 300. */
  historySec?: number;
  /** Live streams open at once (1..1000). Default 16. */
  maxStreams?: number;
  /** The decision service's pages, reading its API under apiBase (default '/api/v1'). */
  service?: false | { apiBase?: string };
}

export type Dashboard = ((req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void) & {
  /** node:http: answers the dashboard's requests and returns true, else returns false. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** Fastify: `fastify.register(d.plugin, { prefix: '/tiergate' })`. */
  plugin: (fastify: any, options: unknown, done: (err?: Error) => void) => void;
  /** Stops sampling and ends the open streams. */
  close(): void;
};

/** The web dashboard (Express middleware; .handle for node:http; .plugin for Fastify). Refuses to exist without a token. */
export declare function dashboard(options: DashboardOptions): Dashboard;
