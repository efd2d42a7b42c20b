-- 0009: a node can be 'stopped': its agent said it stops (SIGTERM/SIGINT,
-- Heartbeat.stopping), where 'lost' is an agent that fell silent. Only the
-- CHECK of nodes.state changes. SQLite cannot alter a CHECK; its documented
-- way for a change that leaves every stored row valid (a CHECK loosened) is
-- to edit the table's text in sqlite_master
-- (https://www.sqlite.org/lang_altertable.html#otheralter). The text is
-- 0001's (later migrations only appended columns to it).
PRAGMA writable_schema = ON;
UPDATE sqlite_master
SET sql = replace(sql, 'CHECK (state IN (''connected'', ''disconnected'', ''lost''))',
                  'CHECK (state IN (''connected'', ''disconnected'', ''lost'', ''stopped''))')
WHERE type = 'table' AND name = 'nodes';
-- this connection reads the schema again; a DDL statement bumps the schema
-- cookie so that every other connection does too
PRAGMA writable_schema = RESET;
CREATE TABLE gb_0009_cookie (x);
DROP TABLE gb_0009_cookie;
-- the new CHECK holds: a 'stopped' row is accepted (else the migration fails
-- and is rolled back), and removed again
INSERT INTO nodes (agent_id, name, state, first_seen, last_seen)
VALUES (' gb-0009-check', '', 'stopped', '', '');
DELETE FROM nodes WHERE agent_id = ' gb-0009-check';
