// week.js: the week view. The slots of one local week (Monday to Sunday),
// each a <button> in its day's column with a three-part bar (confirmed,
// held, bookable) and the same figures as text and data-* attributes.
// Figures come from GET /slots/{id}, at most 6 requests in flight. For a
// booker, poll() re-reads the availability pages (If-None-Match) to catch
// other clients' changes, which a booker's feed does not carry.

import { request, limiter, idText } from './api.js';
import { $, el, showError, addDays, mondayOf, formatDate, formatDay, localRfc3339, timeRange, zoneName } from './ui.js';

const state = {
  start: null, // local Monday 00:00
  end: null, // the next Monday 00:00
  slots: new Map(), // id (text) → slot: availability or full resource
  nodes: new Map(), // id → {item, button, text, bar: {confirmed, held, free}}
  columns: [], // 7 × {list, empty}
  generation: 0,
  loaded: false, // the week's availability pages are all in (the count can be shown)
  selected: null,
  firstPage: null, // the week's first availability page (path and query)
  pages: new Map(), // availability page path → {etag, next}, from the last read of each
};
const listeners = new Set();
const selectListeners = new Set();
const ledgerLimit = limiter(6);
const queued = new Set();

/**
 * fn(id, slot | null, kind): kind is "added", "updated", "moved" (other
 * times), "removed" (deleted or out of the week) or "cleared" (the view
 * emptied to load a week).
 */
export function onChange(fn) {
  listeners.add(fn);
}

/** fn(id) when a slot's button is activated. */
export function onSelect(fn) {
  selectListeners.add(fn);
}

function notify(id, slot, kind) {
  for (const fn of listeners) fn(id, slot, kind);
}

export function get(id) {
  return state.slots.get(String(id));
}

export function has(id) {
  return state.slots.has(String(id));
}

/** Whether the shown week's slots are all in (its last load did not fail). */
export function isLoaded() {
  return state.loaded;
}

/** The shown week's slots, by start time. */
export function list() {
  return [...state.slots.values()].sort(compareSlots);
}

function compareSlots(a, b) {
  const byStart = Date.parse(a.starts_at) - Date.parse(b.starts_at);
  if (byStart !== 0) return byStart;
  return String(a.id).length - String(b.id).length || (String(a.id) < String(b.id) ? -1 : 1);
}

function inWeek(startsAt) {
  const t = Date.parse(startsAt);
  return state.start !== null && t >= state.start.getTime() && t < state.end.getTime();
}

function dayIndex(startsAt) {
  const t = Date.parse(startsAt);
  for (let i = 0; i < 7; i += 1) if (t < addDays(state.start, i + 1).getTime()) return i;
  return 6;
}

export function setSelected(id) {
  if (state.selected !== null) state.nodes.get(state.selected)?.button.classList.remove('selected');
  state.selected = id === null ? null : String(id);
  if (state.selected !== null) state.nodes.get(state.selected)?.button.classList.add('selected');
}

/** Focus a slot's button (after its panel closes). */
export function focusSlot(id) {
  state.nodes.get(String(id))?.button.focus();
}

/** The empty grid of the shown week, its label and time zone. */
function drawFrame() {
  state.columns = [];
  const today = new Date().toDateString();
  const days = [];
  for (let i = 0; i < 7; i += 1) {
    const date = addDays(state.start, i);
    const isToday = date.toDateString() === today;
    const heading = el('h3', { id: `day-${i}`, text: isToday ? `${formatDay(date)} (today)` : formatDay(date) });
    const listNode = el('ol', { class: 'day-slots', 'aria-labelledby': `day-${i}` });
    const empty = el('p', { class: 'empty', text: 'No slots' });
    state.columns.push({ list: listNode, empty });
    days.push(el('div', { class: isToday ? 'day today' : 'day' }, [heading, empty, listNode]));
  }
  $('week-grid').replaceChildren(...days);
  $('week-label').textContent = `${formatDate(state.start)} – ${formatDate(addDays(state.start, 6))}`;
  $('week-zone').textContent = zoneName(state.start);
}

function makeNode(id) {
  const segment = (kind) => el('span', { class: `segment ${kind}` });
  const bar = { confirmed: segment('confirmed'), held: segment('held'), free: segment('free') };
  const text = el('span', { class: 'slot-text' });
  const barNode = el('span', { class: 'bar', 'aria-hidden': 'true' }, [bar.confirmed, bar.held, bar.free]);
  const button = el('button', { type: 'button', class: 'slot', data: { slotId: id } }, [text, barNode]);
  button.addEventListener('click', () => {
    for (const fn of selectListeners) fn(id);
  });
  const node = { item: el('li', {}, [button]), button, text, barNode, bar, column: -1 };
  state.nodes.set(id, node);
  return node;
}

const known = (n) => typeof n === 'number' && Number.isFinite(n);

/** The words drawn for a slot: "09:00–10:00 · 3 confirmed · … · 2 waiting". */
export function describe(slot) {
  const parts = [timeRange(slot)];
  if (known(slot.confirmed)) {
    parts.push(`${slot.confirmed} confirmed`, `${slot.held} held`, `${slot.remaining} free of ${slot.capacity}`);
    parts.push(`${slot.waiting ?? 0} waiting`);
    if (slot.max_seats_per_client !== null && slot.max_seats_per_client !== undefined) {
      parts.push(`at most ${slot.max_seats_per_client} per client`);
    }
  } else {
    parts.push(`${slot.remaining} free of ${slot.capacity}`, 'loading figures…');
  }
  return parts.join(' · ');
}

function draw(id) {
  const slot = state.slots.get(id);
  const node = state.nodes.get(id) || makeNode(id);
  const { button } = node;
  const attrs = { confirmed: slot.confirmed, held: slot.held, remaining: slot.remaining, capacity: slot.capacity, waiting: slot.waiting };
  for (const [name, value] of Object.entries(attrs)) {
    if (known(value)) button.setAttribute(`data-${name}`, String(value));
    else button.removeAttribute(`data-${name}`);
  }
  button.dataset.startsAt = slot.starts_at;
  button.dataset.endsAt = slot.ends_at;
  node.text.textContent = describe(slot);
  node.barNode.hidden = !known(slot.confirmed);
  if (known(slot.confirmed)) {
    const total = Math.max(slot.capacity, slot.confirmed + slot.held + slot.remaining, 1);
    node.bar.confirmed.style.width = `${(100 * slot.confirmed) / total}%`;
    node.bar.held.style.width = `${(100 * slot.held) / total}%`;
    node.bar.free.style.width = `${(100 * slot.remaining) / total}%`;
  }
  button.classList.toggle('full', known(slot.remaining) && slot.remaining === 0);
  button.classList.toggle('selected', state.selected === id);
  place(id, node);
}

/** Puts a slot's item in its day's column, in start order, moving as little as possible. */
function place(id, node) {
  const column = dayIndex(state.slots.get(id).starts_at);
  if (node.column !== column && node.column >= 0) refreshEmpty(node.column, node.item);
  node.column = column;
  const { list: listNode } = state.columns[column];
  const wanted = [...state.slots.values()]
    .filter((slot) => dayIndex(slot.starts_at) === column)
    .sort(compareSlots)
    .map((slot) => (state.nodes.get(String(slot.id)) || {}).item)
    .filter(Boolean);
  wanted.forEach((item, index) => {
    if (listNode.children[index] !== item) listNode.insertBefore(item, listNode.children[index] || null);
  });
  refreshEmpty(column);
}

function refreshEmpty(column, leaving = null) {
  const { list: listNode, empty } = state.columns[column];
  if (leaving && leaving.parentNode === listNode) leaving.remove();
  empty.hidden = listNode.children.length > 0;
}

function remove(id, kind = 'removed') {
  const node = state.nodes.get(id);
  state.slots.delete(id);
  state.nodes.delete(id);
  if (node) {
    node.item.remove();
    if (node.column >= 0) refreshEmpty(node.column);
  }
  if (kind === 'removed' && state.loaded) countNote();
  notify(id, null, kind);
}

/** A slot resource (event data or an answer): inserted, updated, moved or dropped. */
export function applySlot(slot) {
  const id = String(slot.id);
  const current = state.slots.get(id);
  if (!inWeek(slot.starts_at)) {
    if (current) remove(id);
    return;
  }
  if (current && current.updated_at && slot.updated_at && slot.updated_at < current.updated_at) return;
  const kind = !current ? 'added' : current.starts_at !== slot.starts_at || current.ends_at !== slot.ends_at ? 'moved' : 'updated';
  state.slots.set(id, { ...slot, id });
  draw(id);
  if (kind === 'added' && state.loaded) countNote();
  notify(id, state.slots.get(id), kind);
}

/** A slot known to be gone (slot.deleted, a 404 or a DELETE's answer). */
export function removeSlot(id) {
  if (state.slots.has(String(id))) remove(String(id));
}

/** Re-reads slots' figures (GET /slots/{id}), at most 6 at a time. */
export function refresh(ids) {
  return Promise.all([...new Set(ids.map(String))].filter((id) => state.slots.has(id)).map(fetchLedger));
}

async function fetchLedger(id) {
  if (queued.has(id)) return; // a read not yet started will see this change too
  queued.add(id);
  const generation = state.generation;
  await ledgerLimit(async () => {
    queued.delete(id);
    if (generation !== state.generation || !state.slots.has(id)) return;
    try {
      const { data } = await request('GET', `/slots/${idText(id)}`);
      if (generation === state.generation && data) applySlot(data);
    } catch (error) {
      if (generation !== state.generation) return;
      if (error.status === 404) removeSlot(id);
      else if (error.status !== 401) showError(error, `Slot ${id}:`);
    }
  });
}

/** Shows the (empty) frame of the week containing `date`; load() fills it. */
export function setWeek(date) {
  state.generation += 1;
  state.loaded = false;
  state.pages.clear();
  for (const id of [...state.slots.keys()]) remove(id, 'cleared');
  state.start = mondayOf(date);
  state.end = addDays(state.start, 7);
  drawFrame();
  $('week-note').textContent = 'Finding the change feed’s head…';
}

/** Shows the week containing `date` and loads it. */
export function show(date) {
  setWeek(date);
  return load();
}

export function shift(weeks) {
  return show(addDays(state.start || new Date(), 7 * weeks));
}

/** Empties the view (the key is gone). */
export function clear() {
  state.generation += 1;
  state.loaded = false;
  state.pages.clear();
  for (const id of [...state.slots.keys()]) remove(id, 'cleared');
  $('week-note').textContent = '';
}

/** Loads the shown week: availability pages, then every slot's figures. */
export async function load() {
  const generation = ++state.generation;
  state.loaded = false;
  state.pages.clear();
  for (const id of [...state.slots.keys()]) remove(id, 'cleared');
  drawFrame();
  const note = $('week-note');
  note.textContent = 'Loading slots…';
  const query = `from=${encodeURIComponent(localRfc3339(state.start))}&to=${encodeURIComponent(localRfc3339(state.end))}&limit=1000`;
  let path = `/slots/availability?${query}`;
  state.firstPage = path;
  try {
    while (path) {
      const { data, next, headers } = await request('GET', path);
      if (generation !== state.generation) return;
      state.pages.set(path, { etag: headers.get('ETag'), next });
      for (const item of Array.isArray(data) ? data : []) addRow(item);
      path = next;
    }
    state.loaded = true;
    countNote();
    await refresh([...state.slots.keys()]);
  } catch (error) {
    if (generation !== state.generation) return;
    note.textContent = 'The week could not be loaded.';
    if (error.status !== 401) showError(error, 'Loading the week:');
  }
}

/** An availability row of a slot not shown yet (its figures come from refresh()); true if added. */
function addRow(item) {
  const id = String(item.slot_id);
  if (state.slots.has(id) || !inWeek(item.starts_at)) return false;
  const { slot_id: _, ...rest } = item;
  state.slots.set(id, { id, ...rest });
  draw(id);
  notify(id, state.slots.get(id), 'added');
  return true;
}

/**
 * One pass for a booker: each availability page of the shown week again,
 * with the ETag of its last read (a 304 has no body: nothing changed
 * there), then the ledger of each slot whose free seats or capacity differ
 * from what is shown. Nothing else is redrawn. Rejects with the ApiError.
 */
export async function poll() {
  if (!state.loaded) return; // load() is running (or failed: the feed reloads on recovery)
  const generation = state.generation;
  const changed = [];
  let path = state.firstPage;
  while (path) {
    const kept = state.pages.get(path);
    const headers = kept && kept.etag ? { 'If-None-Match': kept.etag } : {};
    let answer;
    try {
      answer = await request('GET', path, { headers, retries: 0 });
    } catch (error) {
      // A cursor refused (422): start the next pass from the first page, without kept ETags.
      if (error.status === 422 && generation === state.generation) state.pages.clear();
      throw error;
    }
    if (generation !== state.generation) return;
    // A 304 carries the Link too; the kept one stands in if it does not.
    const next = answer.status === 304 ? answer.next ?? (kept ? kept.next : null) : answer.next;
    state.pages.set(path, { etag: answer.headers.get('ETag') || (kept ? kept.etag : null), next });
    if (answer.status !== 304) {
      for (const item of Array.isArray(answer.data) ? answer.data : []) {
        const shown = state.slots.get(String(item.slot_id));
        if (!shown) {
          if (addRow(item)) changed.push(String(item.slot_id));
        } else if (shown.remaining !== item.remaining || shown.capacity !== item.capacity) {
          changed.push(String(item.slot_id));
        }
      }
    }
    path = next;
  }
  if (changed.length) {
    countNote();
    await refresh(changed);
  }
}

function countNote() {
  $('week-note').textContent = `${state.slots.size} slot${state.slots.size === 1 ? '' : 's'} this week.`;
}
