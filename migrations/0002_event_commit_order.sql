-- 0002: let watch streams read events in commit order. Event ids are handed out at insert, so a
-- transaction that commits late can show an id below one a watcher already passed. Recording
-- the writing transaction's id lets a reader take exactly the events of transactions that
-- finished since its last read (those below pg_snapshot_xmin of its snapshot).
ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX events_by_sweep_xid ON events (sweep_id, xid);
