// Types of the decision service client (lib/client).
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface ServiceClientOptions {
  /** No check waits longer than this (ms, default 1000). */
  timeoutMs?: number;
  /** Without a usable answer from the service: admit (true, default) or refuse (false). */
  failOpen?: boolean;
  /** Sent as `Authorization: Bearer <apiKey>` when the service requires caller keys. */
  apiKey?: string | null;
  /** Kept-alive connections to the service at most (default 64). */
  maxSockets?: number;
}

export interface ServiceDecision {
  allowed: boolean;
  /** The service's status (200, 429, 403), or the failing one; 0 without an answer. */
  status: number;
  limit?: number;
  remaining?: number;
  resetAt?: string;
  retryAfter?: number;
  banned?: boolean;
  /** Set when the decision came from failOpen, not from the service. */
  failedOpen?: boolean;
  /** The rate-limit headers the service sent (lower-case names). */
  headers: Record<string, string>;
  /** Why the service gave no usable answer (code ERR_TIERGATE_SERVICE_UNAVAILABLE), else null. */
  error: (Error & { code: string; detail?: unknown }) | null;
}

export interface ServiceMiddlewareOptions<Req> {
  /** The clientKey to check for a request. */
  key: (req: Req) => string;
  /** The check's cost (default 1). */
  cost?: number | ((req: Req) => number);
}

export declare class ServiceClient {
  constructor(url: string | URL, options?: ServiceClientOptions);
  /** Resolves (never rejects) to the decision. */
  check(clientKey: string, options?: { cost?: number }): Promise<ServiceDecision>;
  /** Express/connect middleware: next() when allowed, else 429 / 403 / 503 JSON. */
  middleware<Req extends IncomingMessage = IncomingMessage>(options: ServiceMiddlewareOptions<Req>): (req: Req, res: ServerResponse, next: (err?: unknown) => void) => void;
  /** A Fastify onRequest hook. */
  fastifyHook(options: ServiceMiddlewareOptions<any>): (request: any, reply: any) => Promise<unknown>;
  /** Closes the kept-alive connections. */
  close(): void;
}

/** A client of the decision service (`tiergate serve`) at `url`. */
export declare function client(url: string | URL, options?: ServiceClientOptions): ServiceClient;
export declare const CLIENT_DEFAULTS: Readonly<{ timeoutMs: number; failOpen: boolean; apiKey: null; maxSockets: number }>;
