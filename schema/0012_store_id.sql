-- 0012: the store's identity, made once when the store is made (or reaches
-- this version). Its coordinator tells agents (Welcome.store_id), and an
-- agent marks each result with the store of the job it ran
-- (Result.store_id): a result left unacknowledged in an agent's spool is
-- sent only to a coordinator of that store. Job ids start at 1 in every
-- store: a leftover result of another store's job 1 was taken as this
-- store's job 1.
CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO store_meta (key, value) VALUES ('store_id', lower(hex(randomblob(8))));
