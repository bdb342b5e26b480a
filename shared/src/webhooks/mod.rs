//! Webhooks (SPEC §20): the delivery engine.

pub mod claim;
pub mod dispatch;
pub mod record;
pub mod send;
pub mod settings;
pub mod subject;
