-- Webhooks (SPEC §20): when a subscription last had a delivery. "A
-- subscription with a failed delivery and no delivery for
-- WEBHOOK_DISABLE_AFTER is disabled (failing)": the worker decides it when
-- a delivery fails for good, under the subscription's row lock, which it
-- holds anyway to record an attempt (shared/src/webhooks/record.rs). Kept
-- here, one column of the locked row, so that the decision reads one row
-- rather than the subscription's deliveries, however many it has had.
-- NULL: none yet (then its `created_at` counts).
ALTER TABLE webhook_subscriptions
    ADD COLUMN last_delivered_at DATETIME(6) NULL AFTER scanned_through;
