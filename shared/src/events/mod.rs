//! The change feed (SPEC §12): every change of a hold or a slot writes one
//! event in its own transaction (`record`), the sequencer gives committed
//! events their place in the feed (`sequence`), clients page through it
//! (`feed`, `cursor`), retention ends it (`retention`) and the publisher
//! sends it to EventBridge (`publish`, in `batch`es), right after a change
//! (`trigger`) and on a schedule. docs/DESIGN.md, "The change feed",
//! has the proof that a reader following `next` never skips an event.

mod batch;
mod cursor;
mod feed;
mod publish;
mod record;
mod retention;
mod sequence;
mod trigger;

pub use batch::{BATCH_BYTES, BATCH_ENTRIES, SOURCE};
pub use cursor::{CursorError, EventCursor};
pub use feed::{EVENT_BY_ID, Event, Feed, Page};
pub(crate) use feed::{event_by_id, page_in};
pub use publish::{
    PUBLISH_ADVANCE, PUBLISH_BACKLOG, PUBLISH_LOCK, PUBLISH_SCAN, PUBLISH_UNLOCK,
    PUBLISHED_THROUGH, PublishReport, publish,
};
pub use record::{EVENT_INSERT, EVENTS_COMMIT, EventType, NewEvent, commit_with, hold_event};
pub(crate) use record::{
    entry_event, expired_event, moved_event, record_events, record_expired, record_slots,
};
pub use retention::{PurgeReport, Unsent, purge};
pub use sequence::{SEQUENCE_BATCH, sequence};
pub use trigger::{PublishTrigger, ROUTES_WRITING_EVENTS, TRIGGER_INTERVAL};
