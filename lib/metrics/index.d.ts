/// <reference types="node" />
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Gatekeeper, GateControls, GatekeeperStats } from '../gatekeeper';
import type { ConcurrencyGate, ConcurrencyGateControls, ConcurrencyGateStats } from '../queue';
import type { LagMonitor, LagStats } from '../lag';
import type { Ledger, TierSnapshot } from '../ledger';
import type { LeaseDriver } from '../quota';

/** What metrics(), statusRoute() and dashboard() observe, in any form the package hands them out. */
export interface ObservedComponents {
  /** gatekeeper()'s middleware, gatekeeper.http's handler, or fastify.tiergate. */
  gatekeeper?: GateControls | Gatekeeper;
  /** concurrencyGate()'s middleware, its .http handler, or fastify.concurrencyGate. */
  queue?: ConcurrencyGateControls | ConcurrencyGate;
  lag?: LagMonitor;
  /** Default: the gatekeeper's ledger. */
  ledger?: Ledger;
}

/** The part of a prom-client Registry tiergate uses (any prom-client >= 15 Registry has it). */
export interface PromRegistry {
  registerMetric(metric: any): void;
  removeSingleMetric(name: string): void;
  getSingleMetric(name: string): any;
  metrics(): Promise<string>;
  readonly contentType: string;
}

export interface MetricsOptions extends ObservedComponents {
  /** Cluster mode's lease driver: its decisions, store health and traffic. Default: the cluster's. */
  leases?: LeaseDriver;
  /** Cluster mode: its ban channel's families, and its lease driver's. Default: the gatekeeper's. */
  cluster?: import('../cluster').Cluster;
  /** Default: prom-client's default registry (prom-client must then be installed). */
  registry?: PromRegistry;
  /** Bounds of tiergate_queue_wait_seconds, seconds, ascending. Default WAIT_BUCKETS. */
  waitBuckets?: number[];
}

export interface TiergateMetrics {
  readonly registry: PromRegistry;
  /** The family names registered. */
  readonly names: readonly string[];
  /** Answers GET /metrics with the registry's exposition (node:http and Express). */
  handler(req: IncomingMessage, res: ServerResponse): void;
  unregister(): void;
}

/** Registers tiergate's Prometheus families on the registry; values are read at scrape time. */
export declare function metrics(options: MetricsOptions): TiergateMetrics;
/** The part of an OpenTelemetry Meter otel() uses (any @opentelemetry/api >= 1.3 Meter has it). */
export interface OtelMeter {
  createObservableCounter(name: string, options?: { description?: string; unit?: string }): any;
  createObservableGauge(name: string, options?: { description?: string; unit?: string }): any;
  createHistogram(name: string, options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } }): any;
  addBatchObservableCallback(callback: (result: any) => void, observables: any[]): void;
  removeBatchObservableCallback(callback: (result: any) => void, observables: any[]): void;
}

export interface OtelOptions extends ObservedComponents {
  leases?: LeaseDriver;
  cluster?: import('../cluster').Cluster;
  /** Default: the global MeterProvider's meter 'tiergate' (@opentelemetry/api must then be installed). */
  meter?: OtelMeter;
  /** A `tiergate.refused` event (tier, outcome, cause) on the active span per refused request. Default: true with a gatekeeper. */
  spans?: boolean;
  /** Bounds of tiergate_queue_wait_seconds, seconds, ascending. Default WAIT_BUCKETS. */
  waitBuckets?: number[];
}

export interface TiergateOtel {
  readonly meter: OtelMeter;
  /** The instrument names: metrics()'s family names. */
  readonly names: readonly string[];
  /** Stops the observable callbacks, the wait histogram's recording and this binding's span events. */
  unregister(): void;
}

/** metrics()'s families through OpenTelemetry: observable instruments read at collection, the wait histogram, span events. */
export declare function otel(options: OtelOptions): TiergateOtel;

/** Default bounds of tiergate_queue_wait_seconds, seconds. */
export declare const WAIT_BUCKETS: readonly number[];

export interface StatusRouteOptions extends ObservedComponents {
  /** Default '/status'; the stats are at '<path>/stats'. */
  path?: string;
  /** How long after a protected tier last lost a request to overload the health stays 503, ms. Default 10000. */
  recentMs?: number;
  /** Also 503 while the lag is above this, ms. Default: no lag limit (the stall watchdog still counts). */
  maxLagMs?: number;
  /** Serve '<path>/stats'. Default true. */
  stats?: boolean;
}

export interface HealthReport {
  status: 'ok' | 'unavailable';
  reasons: Array<'event-loop-stalled' | 'event-loop-lag' | 'protected-tier-shed'>;
  stalled: boolean;
  lagMs: number | null;
  elu?: number;
  pressure?: number;
  inFlight?: number;
  queued?: number;
}

export interface StatsReport {
  gatekeeper?: GatekeeperStats;
  queue?: ConcurrencyGateStats;
  lag?: LagStats;
  ledger?: TierSnapshot[];
}

export type StatusRoute = ((req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void) & {
  /** node:http: answers the status paths and returns true, else returns false. */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  /** The health report now (and records it, as a request to the route would). */
  check(): HealthReport;
  /** Fastify: `fastify.register(route.plugin)`; the routes skip tiergate's guards. */
  plugin: (fastify: any, options: unknown, done: (err?: Error) => void) => void;
};

/** Health for load balancers (200 / 503) and JSON stats, like @fastify/under-pressure's status route. */
export declare function statusRoute(options: StatusRouteOptions): StatusRoute;
