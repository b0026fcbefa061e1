// Types of the decision service (lib/service): `tiergate serve` as a library, and the SQL lease stores.
import type { Server } from 'node:http';
import type { LeaseStore, StoreGrant, StoreRequest, StoreReturn } from '../quota';

/** Every option also has a flag (--kebab-case) and an environment variable (TIERGATE_SNAKE_CASE). */
export interface ServiceOptions {
  host?: string;
  /** 0 picks a free port (also PORT). */
  port?: number | string;
  /** The embedded store's folder (default ./tiergate-data). */
  data?: string;
  /** postgres://… makes PostgreSQL the store (also DATABASE_URL). */
  database?: string;
  /** Required (here, TIERGATE_ADMIN_TOKEN or adminTokenFile); at least 16 characters and 64 bits by length × log2(distinct characters). */
  adminToken?: string;
  adminTokenFile?: string;
  /** When set, the check endpoint requires one of these as a bearer token. */
  apiKeys?: string[] | string;
  apiKeysFile?: string;
  corsOrigins?: string[] | string;
  /** Default true: a body without Content-Type is refused with 415 (false accepts it as JSON). */
  requireJsonContentType?: boolean | 'true' | 'false';
  logLevel?: 'silent' | 'error' | 'warn' | 'info' | 'debug';
  requestTimeoutMs?: number;
  headersTimeoutMs?: number;
  keepAliveTimeoutMs?: number;
  /** Open connections at most (default 10000); past it a new one is closed as it arrives. */
  maxConnections?: number;
  drainTimeoutMs?: number;
  bodyLimitBytes?: number;
  activityFlushMs?: number;
  activityMaxAgeHours?: number;
  activityMaxRows?: number;
  activityMaxBuffered?: number;
  pruneIntervalMs?: number;
  poolSize?: number;
  /** A check's longest wait for the store; then 503 STORE_UNAVAILABLE (default 750). */
  storeTimeoutMs?: number;
  /** PostgreSQL lock_timeout of the store's connections (default 250; under half of storeTimeoutMs). */
  pgLockTimeoutMs?: number;
  /** PostgreSQL idle_in_transaction_session_timeout of the store's connections (default 2000). */
  pgIdleInTransactionTimeoutMs?: number;
  /** PostgreSQL statement_timeout of the store's connections, and an admin query's bound (default 5000). */
  pgStatementTimeoutMs?: number;
}

export interface DecisionService {
  readonly options: Readonly<Required<ServiceOptions>>;
  readonly server: Server;
  /** http://host:port once started. */
  readonly url: string | null;
  start(): Promise<{ host: string; port: number }>;
  /** Drains in-flight requests, flushes the activity, closes the store. */
  close(): Promise<void>;
}

/** The decision service, not yet listening. Throws ERR_TIERGATE_ADMIN_TOKEN_REQUIRED without a token. */
export declare function createService(options?: ServiceOptions, env?: Record<string, string | undefined>): DecisionService;
export declare const SERVICE_OPTIONS: readonly string[];

/** lib/quota's lease store contract on SQLite (better-sqlite3). */
export declare class SqliteLeaseStore implements LeaseStore {
  constructor(options: { file?: string; db?: unknown; now?: () => number });
  lease(batch: StoreRequest[]): Promise<StoreGrant[]>;
  release(batch: StoreReturn[]): Promise<void>;
  prune(): Promise<number>;
  close(): Promise<void>;
}

/** lib/quota's lease store contract on PostgreSQL (pg). */
export declare class PostgresLeaseStore implements LeaseStore {
  constructor(options: { connectionString?: string; pool?: unknown; poolSize?: number });
  open(): Promise<void>;
  lease(batch: StoreRequest[]): Promise<StoreGrant[]>;
  release(batch: StoreReturn[]): Promise<void>;
  prune(): Promise<number>;
  close(): Promise<void>;
}
