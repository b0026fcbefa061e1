// Public types. Each component's types live beside it in lib/<component>/index.d.ts; this file only gathers them.
export * from './lib/ledger';
export * from './lib/lag';
export * from './lib/gatekeeper';
export * from './lib/defense';
export * from './lib/queue';
