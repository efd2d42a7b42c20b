-- 0017: jobs.cancel_reason, the reason a running job's cancel gave
-- (CancelRequest.reason: "cancelled: gpubench run --timeout 30 s ran out");
-- NULL: none given, the default ("cancelled by request"), and for jobs
-- cancelled before 0017. Written with cancel_requested; a coordinator
-- restarted before the job ended read only cancel_requested, and the job
-- ended "cancelled by request" whatever its cancel said. Column appended;
-- no view changes.
ALTER TABLE jobs ADD COLUMN cancel_reason TEXT;
