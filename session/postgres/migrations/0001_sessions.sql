-- 0001: sessions, their logs and their inbox journals (session.Store).
-- Ids compare byte-wise (COLLATE "C"), so IDs lists them in the order bbolt does.

CREATE TABLE troupe_sessions (
    id               text COLLATE "C" PRIMARY KEY,
    parent_session   text    NOT NULL,
    parent_kind      text    NOT NULL DEFAULT '',
    origin           text    NOT NULL,
    delegation_depth bigint  NOT NULL,
    seed_length      bigint  NOT NULL,
    cwd              text    NOT NULL,
    created_at       bigint  NOT NULL, -- Unix milliseconds
    version          integer NOT NULL, -- session.HeaderVersion
    epoch            bigint  NOT NULL CHECK (epoch >= 0), -- the fencing token
    log_seq          bigint  NOT NULL CHECK (log_seq >= 0),   -- the last log entry's seq
    inbox_seq        bigint  NOT NULL CHECK (inbox_seq >= 0)  -- the last inbox message's seq
);

CREATE TABLE troupe_log (
    session_id text COLLATE "C" NOT NULL REFERENCES troupe_sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    kind       text   NOT NULL,
    entry      json   NOT NULL, -- session.Entry as JSON (its seq is the column's)
    PRIMARY KEY (session_id, seq)
);

-- Head: the first descriptor after the fork seed, one index probe.
CREATE INDEX troupe_log_descriptors ON troupe_log (session_id, seq)
    WHERE kind = 'subagent/descriptor';

CREATE TABLE troupe_inbox (
    session_id text COLLATE "C" NOT NULL REFERENCES troupe_sessions (id) ON DELETE CASCADE,
    seq        bigint NOT NULL,
    message    json   NOT NULL, -- session.InboxMessage as JSON (its seq is the column's)
    PRIMARY KEY (session_id, seq)
);
