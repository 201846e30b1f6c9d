-- 0003: the restore index (Store.Resume reads what a session's next turn needs
-- at a cost independent of its log's length). Each inbox message carries its id
-- and its status — 0 accepted, 1 its turn started, 2 resolved (its turn ended or
-- was aborted, or it was discarded) — raised by every Append that names it; the
-- session row counts its model history and points at its latest provider state.
-- Existing sessions are indexed from their logs here.

ALTER TABLE troupe_inbox
    ADD COLUMN msg_id text COLLATE "C",
    ADD COLUMN status smallint NOT NULL DEFAULT 0 CHECK (status BETWEEN 0 AND 2);

UPDATE troupe_inbox SET msg_id = message->>'id';

UPDATE troupe_inbox i SET status = x.status
FROM (
    SELECT session_id, entry->>'inboxId' AS msg_id,
        max(CASE WHEN kind = 'turn/start' THEN 1 ELSE 2 END) AS status
    FROM troupe_log
    WHERE kind IN ('turn/start', 'turn/end', 'turn/aborted-by-crash', 'inbox/discarded')
    GROUP BY 1, 2
) x
WHERE i.session_id = x.session_id AND i.msg_id = x.msg_id;

ALTER TABLE troupe_inbox ALTER COLUMN msg_id SET NOT NULL;

-- Append: the messages an entry names; Resume: the messages still open.
CREATE INDEX troupe_inbox_ids ON troupe_inbox (session_id, msg_id);
CREATE INDEX troupe_inbox_open ON troupe_inbox (session_id, seq) WHERE status < 2;

ALTER TABLE troupe_sessions
    ADD COLUMN messages  bigint NOT NULL DEFAULT 0 CHECK (messages >= 0),  -- EntryMessage entries
    ADD COLUMN state_seq bigint NOT NULL DEFAULT 0 CHECK (state_seq >= 0); -- the latest provider/state's seq; 0: none

UPDATE troupe_sessions s SET
    messages = (SELECT count(*) FROM troupe_log l WHERE l.session_id = s.id AND l.kind = 'message'),
    state_seq = coalesce((SELECT max(seq) FROM troupe_log l WHERE l.session_id = s.id AND l.kind = 'provider/state'), 0);
