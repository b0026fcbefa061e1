-- The states a decision batch changed, appended as one row per batch (a JSON array
-- [clientKey, stateObject, clientKey, stateObject, ...]) and folded into clients.state in the background:
-- one sequential write per batch instead of a random page per client (stores/sqlite-decisions.js).
-- AUTOINCREMENT: ids never repeat after the log is emptied, so a process can tell what it folded.
CREATE TABLE state_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  states TEXT NOT NULL
);
