// Types of `tiergate/service` (lib/exports/service.js).
export { createService, SqliteLeaseStore, PostgresLeaseStore } from '../service';
export type { ServiceOptions, DecisionService } from '../service';
export { client, ServiceClient } from '../client';
export type { ServiceClientOptions, ServiceDecision, ServiceMiddlewareOptions } from '../client';
