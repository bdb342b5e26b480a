// feed.js: live updates from the change feed (GET /events), never by
// reloading everything. Start: find the feed's head, then load the week and
// My holds, then poll the current `next` link about once a second. A 410
// `cursor_expired` (or a 422 cursor) starts again: head, then both loads.
// A booker's feed carries only its own holds' events and slot events, so
// for a booker week.poll() also runs every ~5 s. Held seats of holds seen
// in events are re-read when they expire (the sweeper writes hold.expired
// up to about a minute later).

import { request, sleep } from './api.js';
import { showError, showMessage } from './ui.js';
import * as week from './week.js';
import * as holds from './holds.js';

const PAGE = 500;
const PAUSE_MS = 1000;
const WATCH_MS = 5000;
const EXPIRY_MARGIN_MS = 1000; // the database's clock decides; read a little after
const MAX_TIMER_MS = 2 ** 31 - 1;
let generation = 0;
const expiring = new Map(); // hold id → {slot, at}: held seats expiring at `at` (ms)
const timers = new Map(); // slot id → {timer, at}: one timer per slot, for its soonest expiry

export function stop() {
  generation += 1;
  for (const { timer } of timers.values()) clearTimeout(timer);
  timers.clear();
  expiring.clear();
}

/**
 * Starts following the feed; `reload` loads the week and My holds once the
 * head is known; `watch` (a booker) also polls the week's availability.
 */
export function start(reload, { watch = false } = {}) {
  stop();
  const mine = generation;
  run(mine, reload);
  if (watch) watchWeek(mine);
}

/** A booker's figures for other clients' holds: the week's availability, re-read every ~5 s. */
async function watchWeek(mine) {
  for (;;) {
    await sleep(WATCH_MS);
    if (mine !== generation) return;
    try {
      await week.poll();
    } catch (error) {
      // Quiet: an outage is reported by the feed's own loop; the next pass tries again.
      if (mine !== generation || error.status === 401) return;
    }
  }
}

/** Remembers when a hold's held seats expire; its slot is re-read just after. */
function noteExpiry(hold) {
  const holdId = String(hold.id);
  expiring.delete(holdId); // extended or moved: the old moment no longer applies
  const slotId = String(hold.slot_id);
  const at = Date.parse(hold.expires_at);
  // Not only the shown week's slots: one shown later needs its timer too (refresh skips others).
  if (hold.status !== 'held' || !(at > Date.now())) return;
  expiring.set(holdId, { slot: slotId, at });
  const set = timers.get(slotId);
  if (!set || at < set.at) schedule(slotId, at); // an earlier one replaces the slot's timer
}

function schedule(slotId, at) {
  const set = timers.get(slotId);
  if (set) clearTimeout(set.timer);
  const mine = generation;
  const delay = Math.min(Math.max(at - Date.now(), 0) + EXPIRY_MARGIN_MS, MAX_TIMER_MS);
  timers.set(slotId, { at, timer: setTimeout(() => expire(mine, slotId), delay) });
}

/** A slot's soonest expiry has passed: re-read it, then wait for its next one. */
function expire(mine, slotId) {
  if (mine !== generation) return;
  timers.delete(slotId);
  const now = Date.now();
  let soonest = Infinity;
  for (const [holdId, { slot, at }] of expiring) {
    if (slot !== slotId) continue;
    if (at <= now) expiring.delete(holdId);
    else soonest = Math.min(soonest, at);
  }
  if (soonest !== Infinity) schedule(slotId, soonest);
  week.refresh([slotId]);
}

/** The feed's head: one request, its `last` link (never a walk through the feed's history). */
async function findHead(mine) {
  const { last } = await request('GET', `/events?limit=${PAGE}`);
  if (mine !== generation) return null;
  if (!last) throw new Error('The change feed answered without a last link.');
  return last;
}

async function run(mine, reload) {
  let cursor = null;
  let failures = 0;
  let broken = false;
  while (mine === generation) {
    try {
      if (cursor === null) {
        cursor = await findHead(mine);
        if (mine !== generation) return;
        await reload();
        if (mine !== generation) return;
        await sleep(PAUSE_MS);
        continue;
      }
      const { data, next } = await request('GET', cursor, { retries: 0 });
      if (mine !== generation) return;
      if (broken) {
        broken = false;
        showMessage('Live updates resumed.', 'ok');
        if (!week.isLoaded()) week.load(); // it failed during the outage
      }
      failures = 0;
      if (next) cursor = next;
      const events = Array.isArray(data) ? data : [];
      if (events.length) await apply(events);
      if (mine !== generation) return;
      if (events.length < PAGE) await sleep(PAUSE_MS);
    } catch (error) {
      if (mine !== generation) return;
      if (error.status === 401) return; // the key is gone: main stops everything
      if (error.status === 410 || error.status === 422) {
        showMessage(
          `${error.message} Live updates start again from the feed's head; the week and My holds are reloaded.`,
          error.status === 410 ? 'ok' : 'error',
        );
        cursor = null;
        await sleep(PAUSE_MS);
        continue;
      }
      if (error.status === 429) {
        await sleep((error.retryAfter ?? 1) * 1000);
        continue;
      }
      failures += 1;
      broken = true;
      showError(error, 'Live updates paused:');
      await sleep(Math.min(1000 * 2 ** failures, 15000));
    }
  }
}

/** One page of events: slots updated from their data, held figures re-read once per slot. */
async function apply(events) {
  const reread = new Set();
  for (const event of events) {
    const data = event && event.data;
    if (!data || typeof event.type !== 'string') continue;
    if (event.type === 'slot.created' || event.type === 'slot.updated') {
      week.applySlot(data);
      reread.delete(String(data.id));
    } else if (event.type === 'slot.deleted') {
      week.removeSlot(data.id);
      reread.delete(String(data.id));
    } else if (event.type.startsWith('hold.')) {
      if (week.has(data.slot_id)) reread.add(String(data.slot_id));
      if (event.type === 'hold.moved' && event.from_slot_id !== undefined && week.has(event.from_slot_id)) {
        reread.add(String(event.from_slot_id));
      }
      if (event.type === 'hold.created' || event.type === 'hold.extended' || event.type === 'hold.moved') {
        noteExpiry(data);
      } else {
        expiring.delete(String(data.id)); // confirmed, cancelled or expired: nothing left to expire
      }
      holds.onHold(data);
    } else if (event.type.startsWith('waitlist.')) {
      if (week.has(data.slot_id)) reread.add(String(data.slot_id));
      holds.onEntry(data);
    }
  }
  await week.refresh([...reread]);
}
