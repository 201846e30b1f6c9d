-- 0002: an activation's lease (Store.Claim, Renew, Release). The lease is
-- liveness, not safety: the epoch fences every write whatever the lease says;
-- the lease keeps a node from taking a session another node is running, until
-- that node stops renewing it. Times are the database's clock (now()), so the
-- nodes' clocks never matter.

ALTER TABLE troupe_sessions
    ADD COLUMN lease_holder  text,
    ADD COLUMN lease_expires timestamptz;
