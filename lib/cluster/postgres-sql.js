'use strict';
// The SQL of the PostgreSQL store (./postgres-store.js): one table of (limit, key) states and two
// plpgsql functions, the lease store contract (lib/quota/store.js) run inside the database the way
// ./script.js runs it inside Redis, field for field. A batch is one call of one function, so one
// round trip and one transaction: each row is upserted and locked in the batch's order (the store
// sorts every batch the same way, so two batches never deadlock), brought to the database's clock
// (clock_timestamp() after its lock: a lock wait must not age a grant), granted from and written
// back before the commit.
//
// A row's columns: tokens, at_ms (bucket), win, used (fixed window), records ({ "<lease>": [tokens,
// until ms] }, sliding window), seq (lease ids), holders ({ holder: when its latest lease expires }),
// forget_at (when a fresh state equals it: prune() deletes rows past it; Infinity: never, a bucket
// that does not refill). A second table holds the shared bans (./postgres-bans.js). Arguments: the batch as JSON, one array per request:
//   grant:  [limit, key, alg, a, b, size, ttlMs, holder] -> one [granted, ttlMs, remaining, holders, lease, retryAfterMs] each
//   return: [limit, key, alg, a, b, lease, tokens, reason, holder, idleMs | null]
// with alg 'b' | 'f' | 's' and a, b its numbers (./script.js limitArgs); and lock_ms, the longest a
// row lock is waited for (lock_timeout, set for this transaction only).

/** Marks the functions of this version (a comment on each): another version is replaced on first use. */
const VERSION = 'tiergate lease store 2';

/** `name` as a quoted identifier (callers allow only [a-z0-9_]: the quotes are for reserved words). */
const ident = (name) => `"${name}"`;

// Any fixed 64-bit number: serialises the adding of overrides (their cap).
const OVERRIDE_LOCK = '7469657267617468';

/** The names of a store's objects in `schema` with `prefix`. */
function names(schema, prefix) {
  const q = (n) => `${ident(schema)}.${ident(`${prefix}_${n}`)}`;
  return {
    schema: ident(schema), table: q('lease_keys'), forgetIndex: ident(`${prefix}_lease_keys_forget`),
    grant: q('lease_grant'), give: q('lease_return'), admin: q('lease_admin'), bans: q('bans'), channel: `${prefix}_bans`,
  };
}

// Shared by the functions: the row `s` locked, `now` read, the key's override in place of the
// limit's numbers, expired holders and records dropped, the bucket refilled, the window turned (into
// tokens, w, used).
const ADVANCE = `
    IF s.ov_a IS NOT NULL THEN a := s.ov_a; b := s.ov_b; END IF;
    now := extract(epoch from clock_timestamp()) * 1000;
    holders := coalesce((SELECT jsonb_object_agg(h.key, h.value) FROM jsonb_each(s.holders) h WHERE h.value::float8 > now), '{}');
    recs := coalesce((SELECT jsonb_object_agg(x.key, x.value) FROM jsonb_each(s.records) x
      WHERE (x.value->>1)::float8 > now AND (x.value->>0)::float8 > 0), '{}');
    IF alg = 'b' THEN
      tokens := coalesce(s.tokens, b);
      IF s.at_ms IS NOT NULL AND now > s.at_ms THEN tokens := least(b, tokens + (now - s.at_ms) * a / 1000); END IF;
    ELSIF alg = 'f' THEN
      w := floor(now / b);
      used := CASE WHEN s.win = w THEN s.used ELSE 0 END;
    ELSE
      used := coalesce((SELECT sum((x.value->>0)::float8) FROM jsonb_each(recs) x), 0);
    END IF;`;

// When the row is worth nothing more (Redis: the key's PEXPIRE), into forget; never while it has an override.
const FORGET = `
    forget := now + coalesce((SELECT max(h.value::float8) - now FROM jsonb_each(holders) h), 0);
    IF s.ov_a IS NOT NULL THEN
      forget := 'Infinity'::float8;
    ELSIF alg = 'b' THEN
      forget := CASE WHEN a = 0 THEN 'Infinity'::float8 ELSE greatest(forget, now + ceil((b - tokens) / a * 1000)) END;
    ELSIF alg = 'f' THEN
      forget := greatest(forget, (w + 1) * b);
    ELSE
      forget := greatest(forget, coalesce((SELECT max((x.value->>1)::float8) FROM jsonb_each(recs) x), now));
    END IF;`;

// use_variable: in \`SET used = used\` the right side is the variable (the left is always a column).
const DECLARE = `
#variable_conflict use_variable
DECLARE
  r json; s record; now float8; alg text; a float8; b float8; holder text;
  tokens float8; w float8; used float8; recs jsonb; holders jsonb; forget float8;`;

function schemaSql(n) {
  return `CREATE SCHEMA IF NOT EXISTS ${n.schema};
CREATE TABLE IF NOT EXISTS ${n.table} (
  limit_name text NOT NULL, key text NOT NULL,
  tokens float8, at_ms float8, win float8, used float8,
  records jsonb NOT NULL DEFAULT '{}', seq bigint NOT NULL DEFAULT 0, holders jsonb NOT NULL DEFAULT '{}',
  forget_at float8 NOT NULL DEFAULT 0,
  PRIMARY KEY (limit_name, key));
CREATE INDEX IF NOT EXISTS ${n.forgetIndex} ON ${n.table} (forget_at);
-- Version 2: a key's override (ov_a, ov_b: the numbers it counts with; ov_limit: as given) and the
-- last lease id a reset cleared (reset_floor: a return at or below it credits nothing).
ALTER TABLE ${n.table} ADD COLUMN IF NOT EXISTS ov_a float8, ADD COLUMN IF NOT EXISTS ov_b float8,
  ADD COLUMN IF NOT EXISTS ov_limit float8, ADD COLUMN IF NOT EXISTS reset_floor float8;
-- The shared bans and lists (lib/cluster/bans.js's hash: field -> sealed entry).
CREATE TABLE IF NOT EXISTS ${n.bans} (field text PRIMARY KEY, entry text NOT NULL);

CREATE OR REPLACE FUNCTION ${n.grant}(batch json, lock_ms int) RETURNS json LANGUAGE plpgsql AS $fn$
${DECLARE}
  size float8; ttl float8; granted float8; remaining float8; lease bigint; retry float8; seq bigint; cnt int;
  out json[] := '{}';
BEGIN
  PERFORM set_config('lock_timeout', lock_ms || 'ms', true);
  FOR r IN SELECT value FROM json_array_elements(batch) LOOP
    alg := r->>2; a := (r->>3)::float8; b := (r->>4)::float8;
    size := (r->>5)::float8; ttl := (r->>6)::float8; holder := r->>7;
    -- The upsert locks the row, new or not, until the commit.
    INSERT INTO ${n.table} AS t (limit_name, key) VALUES (r->>0, r->>1)
      ON CONFLICT (limit_name, key) DO UPDATE SET seq = t.seq RETURNING t.* INTO s;
    ${ADVANCE}
    seq := s.seq; lease := 0; retry := 0;
    IF alg = 'b' THEN
      granted := least(size, floor(tokens));
      tokens := tokens - granted;
      remaining := floor(tokens);
      seq := seq + 1; lease := seq;
      IF remaining = 0 THEN
        -- A bucket that never refills may still get tokens back: ask again after a lease's life.
        retry := CASE WHEN a > 0 THEN ceil((1 - tokens) / a * 1000) ELSE ttl END;
      END IF;
    ELSIF alg = 'f' THEN
      granted := least(size, floor(a) - used);
      used := used + granted;
      remaining := floor(a) - used;
      ttl := least(ttl, (w + 1) * b - now);
      lease := w;
      IF remaining = 0 THEN retry := ceil((w + 1) * b - now); END IF;
    ELSE
      granted := least(size, floor(a) - used);
      remaining := floor(a) - used - granted;
      IF granted > 0 THEN
        seq := seq + 1; lease := seq;
        recs := recs || jsonb_build_object(lease::text, jsonb_build_array(granted, now + ttl + b));
      END IF;
      IF remaining = 0 THEN
        retry := ceil(least(ttl + b, coalesce((SELECT min((x.value->>1)::float8) - now FROM jsonb_each(recs) x), ttl + b)));
      END IF;
    END IF;
    cnt := (SELECT count(*) FROM jsonb_each(holders)) + CASE WHEN holders ? holder THEN 0 ELSE 1 END;
    IF granted > 0 AND (NOT holders ? holder OR (holders->>holder)::float8 < now + ttl) THEN
      holders := holders || jsonb_build_object(holder, now + ttl);
    END IF;
    ${FORGET}
    UPDATE ${n.table} SET tokens = CASE WHEN alg = 'b' THEN tokens END, at_ms = now, win = w, used = used,
      records = recs, seq = seq, holders = holders, forget_at = forget
      WHERE limit_name = r->>0 AND key = r->>1;
    out := out || json_build_array(granted, trunc(ttl), remaining, cnt, lease, retry);
  END LOOP;
  RETURN array_to_json(out);
END $fn$;
COMMENT ON FUNCTION ${n.grant}(json, int) IS '${VERSION}';

CREATE OR REPLACE FUNCTION ${n.give}(batch json, lock_ms int) RETURNS void LANGUAGE plpgsql AS $fn$
${DECLARE}
  lease bigint; n float8; idle float8; rec jsonb; credited float8; until float8;
BEGIN
  PERFORM set_config('lock_timeout', lock_ms || 'ms', true);
  FOR r IN SELECT value FROM json_array_elements(batch) LOOP
    alg := r->>2; a := (r->>3)::float8; b := (r->>4)::float8;
    lease := (r->>5)::bigint; n := (r->>6)::float8; holder := r->>8; idle := (r->>9)::float8;
    SELECT * INTO s FROM ${n.table} WHERE limit_name = r->>0 AND key = r->>1 FOR UPDATE;
    -- No row: a fresh state, to which a return adds nothing (a full bucket, an empty window).
    CONTINUE WHEN NOT FOUND;
    -- A lease from before a reset: the reset gave its tokens back already.
    IF s.reset_floor IS NOT NULL AND lease <= s.reset_floor THEN n := 0; END IF;
    ${ADVANCE}
    IF alg = 'b' THEN
      tokens := tokens + greatest(0, least(n, b - tokens));
    ELSIF alg = 'f' THEN
      IF lease = w THEN used := used - least(n, used); END IF;
    ELSE
      rec := recs->(lease::text);
      IF rec IS NOT NULL THEN
        credited := least(n, (rec->>0)::float8);
        until := (rec->>1)::float8;
        -- Spent from: its spends leave the window one window after the last of them.
        IF idle IS NOT NULL AND now - idle + b < until THEN until := now - idle + b; END IF;
        IF (rec->>0)::float8 - credited > 0 THEN
          recs := recs || jsonb_build_object(lease::text, jsonb_build_array((rec->>0)::float8 - credited, until));
        ELSE
          recs := recs - lease::text;
        END IF;
      END IF;
    END IF;
    IF r->>7 = 'released' THEN holders := holders - holder; END IF;
    ${FORGET}
    UPDATE ${n.table} SET tokens = CASE WHEN alg = 'b' THEN tokens END, at_ms = now, win = w, used = used,
      records = recs, holders = holders, forget_at = forget
      WHERE limit_name = r->>0 AND key = r->>1;
  END LOOP;
END $fn$;
COMMENT ON FUNCTION ${n.give}(json, int) IS '${VERSION}';

-- An operator's call on one key (./script.js's peek, reset, refund, override, unoverride, same
-- answers). call: [limit, key, alg, a, b, arg...]; cap: the most overrides in force (override only).
CREATE OR REPLACE FUNCTION ${n.admin}(op text, call json, lock_ms int, cap int) RETURNS json LANGUAGE plpgsql AS $fn$
${DECLARE}
  lim float8; n float8; credited float8; reset_ms float8; had boolean; rec record; c float8;
BEGIN
  PERFORM set_config('lock_timeout', lock_ms || 'ms', true);
  r := call;
  alg := r->>2; a := (r->>3)::float8; b := (r->>4)::float8;
  IF op = 'peek' THEN
    SELECT * INTO s FROM ${n.table} WHERE limit_name = r->>0 AND key = r->>1;
  ELSE
    IF op = 'override' THEN
      -- One override added at a time: the count below is then the count in force.
      PERFORM pg_advisory_xact_lock(${OVERRIDE_LOCK});
      IF (SELECT count(*) FROM ${n.table} WHERE ov_a IS NOT NULL AND NOT (limit_name = r->>0 AND key = r->>1)) >= cap THEN
        RETURN json_build_array(0);
      END IF;
    END IF;
    INSERT INTO ${n.table} AS t (limit_name, key) VALUES (r->>0, r->>1)
      ON CONFLICT (limit_name, key) DO UPDATE SET seq = t.seq RETURNING t.* INTO s;
  END IF;
  ${ADVANCE}
  lim := CASE WHEN alg = 'b' THEN b ELSE floor(a) END;
  IF op = 'peek' THEN
    reset_ms := 0;
    IF alg = 'b' THEN
      IF a > 0 THEN reset_ms := ceil((b - tokens) / a * 1000); END IF;
      RETURN json_build_array(lim, greatest(0, floor(tokens)), reset_ms, CASE WHEN s.ov_a IS NULL THEN 0 ELSE 1 END);
    ELSIF alg = 'f' AND used > 0 THEN
      reset_ms := ceil((w + 1) * b - now);
    ELSIF alg = 's' THEN
      reset_ms := coalesce((SELECT ceil(min((x.value->>1)::float8) - now) FROM jsonb_each(recs) x), 0);
    END IF;
    RETURN json_build_array(lim, greatest(0, lim - used), reset_ms, CASE WHEN s.ov_a IS NULL THEN 0 ELSE 1 END);
  ELSIF op = 'override' THEN
    UPDATE ${n.table} SET ov_a = (r->>5)::float8, ov_b = (r->>6)::float8, ov_limit = (r->>7)::float8, forget_at = 'Infinity'
      WHERE limit_name = r->>0 AND key = r->>1;
    RETURN json_build_array(1);
  ELSIF op = 'unoverride' THEN
    IF s.ov_a IS NULL THEN RETURN json_build_array(0); END IF;
    a := (r->>3)::float8; b := (r->>4)::float8;
    IF alg = 'b' THEN tokens := least(tokens, b); END IF;
    s.ov_a := NULL;
    ${FORGET}
    UPDATE ${n.table} SET ov_a = NULL, ov_b = NULL, ov_limit = NULL, tokens = CASE WHEN alg = 'b' THEN tokens END,
      at_ms = now, win = w, used = used, records = recs, holders = holders, forget_at = forget
      WHERE limit_name = r->>0 AND key = r->>1;
    RETURN json_build_array(1);
  ELSIF op = 'reset' THEN
    had := (alg = 'b' AND tokens < b) OR (alg <> 'b' AND used > 0);
    UPDATE ${n.table} SET tokens = NULL, at_ms = NULL, win = NULL, used = NULL, records = '{}',
      reset_floor = CASE WHEN alg = 'f' THEN w ELSE s.seq END, holders = holders,
      forget_at = CASE WHEN s.ov_a IS NOT NULL THEN 'Infinity'::float8
        ELSE now + coalesce((SELECT max(h.value::float8) - now FROM jsonb_each(holders) h), 0) END
      WHERE limit_name = r->>0 AND key = r->>1;
    RETURN json_build_array(CASE WHEN had THEN 1 ELSE 0 END);
  END IF;
  -- refund
  n := (r->>5)::float8; credited := 0;
  IF alg = 'b' THEN
    credited := greatest(0, least(n, b - tokens));
    tokens := tokens + credited;
  ELSIF alg = 'f' THEN
    credited := least(n, used);
    used := used - credited;
  ELSE
    -- From the records that end last: what was counted most recently goes back first.
    FOR rec IN SELECT x.key AS id, (x.value->>0)::float8 AS tokens, (x.value->>1)::float8 AS until
        FROM jsonb_each(recs) x ORDER BY (x.value->>1)::float8 DESC LOOP
      EXIT WHEN credited >= n;
      c := least(n - credited, rec.tokens);
      credited := credited + c;
      IF rec.tokens - c > 0 THEN recs := recs || jsonb_build_object(rec.id, jsonb_build_array(rec.tokens - c, rec.until));
      ELSE recs := recs - rec.id; END IF;
    END LOOP;
  END IF;
  ${FORGET}
  UPDATE ${n.table} SET tokens = CASE WHEN alg = 'b' THEN tokens END, at_ms = now, win = w, used = used,
    records = recs, holders = holders, forget_at = forget
    WHERE limit_name = r->>0 AND key = r->>1;
  RETURN json_build_array(floor(credited));
END $fn$;
COMMENT ON FUNCTION ${n.admin}(text, json, int, int) IS '${VERSION}';`;
}

/** One row, `ready`: whether this version's objects exist (then a role without CREATE can use them as they are). */
function readySql(n) {
  const fn = (f) => `obj_description(to_regprocedure('${f}(json, int)'), 'pg_proc') = '${VERSION}'`;
  const admin = `obj_description(to_regprocedure('${n.admin}(text, json, int, int)'), 'pg_proc') = '${VERSION}'`;
  return `SELECT coalesce(${fn(n.grant)} AND ${fn(n.give)} AND ${admin} AND to_regclass('${n.bans}') IS NOT NULL AND to_regclass('${n.table}') IS NOT NULL, false) AS ready`;
}

module.exports = { names, schemaSql, readySql };
