-- 0011: sweeps.request_id, the client's name for the submit that made the
-- sweep (SubmitRequest.request_id; NULL without one). A resend with the same
-- id, its reply having been lost (a network cut, the coordinator restarted
-- after its commit), is answered with this sweep instead of making a second
-- one. Unique where set.
ALTER TABLE sweeps ADD COLUMN request_id TEXT;
CREATE UNIQUE INDEX sweeps_request_id ON sweeps (request_id) WHERE request_id IS NOT NULL;
