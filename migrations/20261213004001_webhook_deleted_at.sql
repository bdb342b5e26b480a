-- Webhooks: `DELETE /webhooks/{id}` in bounded steps (SPEC §20;
-- shared/src/webhooks/remove.rs). The subscription's deliveries (millions
-- for an admin's, kept as long as their events) are purged in batches
-- that each commit on their own; the foreign key's cascade would delete
-- them all in the row's one DELETE. Set by the delete's first step: from
-- then on the subscription exists for no route but a retried DELETE,
-- which finds it done and answers as the first would have. NULL: not
-- deleted.
ALTER TABLE webhook_subscriptions
    ADD COLUMN deleted_at DATETIME(6) NULL AFTER updated_at;
