// holds.js: "My holds", the holds and waiting entries made in this tab.
// Their ids live in sessionStorage; each is read with GET /holds/{id} or
// GET /waitlist/{id} and kept current from the feed's events.

import { request, limiter, idText, keyGeneration } from './api.js';
import { $, el, showError, showMessage, formatSeconds, slotLabel } from './ui.js';
import * as week from './week.js';

const STORE = 'slot-booking-holds';
const items = new Map(); // "hold:12" / "entry:3" → {kind, id, data, node}
const readLimit = limiter(6);
let movesPending = false;

function save() {
  const ids = [...items.values()].map(({ kind, id }) => ({ kind, id }));
  try {
    sessionStorage.setItem(STORE, JSON.stringify(ids));
  } catch {
    // Storage refused: the list lasts as long as the page.
  }
}

const keyOf = (kind, id) => `${kind}:${id}`;

/**
 * After an await: whether an answer still belongs on the list. Not once
 * the key changed or went (its rows were emptied), nor for an item taken
 * off: drawing it would bring a stale row back.
 */
const current = (mine, item) => mine === keyGeneration() && items.get(keyOf(item.kind, item.id)) === item;

/** Reads the stored ids and each one's state. */
export function load() {
  let stored = [];
  try {
    stored = JSON.parse(sessionStorage.getItem(STORE) || '[]');
  } catch {
    stored = [];
  }
  for (const { kind, id } of Array.isArray(stored) ? stored : []) {
    if ((kind === 'hold' || kind === 'entry') && /^[1-9][0-9]*$/.test(String(id))) track(kind, String(id), null);
  }
  render();
  return Promise.all([...items.values()].map((item) => reread(item)));
}

/** Forgets everything (the key was forgotten). */
export function clear() {
  items.clear();
  try {
    sessionStorage.removeItem(STORE);
  } catch {
    // Nothing kept.
  }
  $('my-holds-list').replaceChildren();
  render();
}

function track(kind, id, data) {
  const key = keyOf(kind, id);
  let item = items.get(key);
  if (!item) {
    item = { kind, id, data: null, node: null };
    items.set(key, item);
    save();
  }
  if (data) item.data = data;
  return item;
}

/** A hold made here (its answer); `mine`: the key generation its request was sent under. */
export function addHold(hold, mine) {
  if (mine !== keyGeneration()) return; // another key's hold: not this list's
  draw(track('hold', String(hold.id), hold));
  render();
}

/** A waiting entry made here (its answer); `mine` as for addHold. */
export function addEntry(entry, mine) {
  if (mine !== keyGeneration()) return;
  draw(track('entry', String(entry.id), entry));
  offered(entry);
  render();
}

/** The feed's hold.* data: kept if it is one of ours. */
export function onHold(hold) {
  const item = items.get(keyOf('hold', String(hold.id)));
  if (!item) return;
  if (!item.data || !item.data.updated_at || hold.updated_at >= item.data.updated_at) item.data = hold;
  draw(item);
}

/** The feed's waitlist.* data: kept if ours; an offer brings its hold. */
export function onEntry(entry) {
  const item = items.get(keyOf('entry', String(entry.id)));
  if (!item) return;
  if (!item.data || !item.data.updated_at || entry.updated_at >= item.data.updated_at) item.data = entry;
  draw(item);
  offered(entry);
}

function offered(entry) {
  if (entry.hold_id === null || entry.hold_id === undefined) return;
  const id = String(entry.hold_id);
  if (items.has(keyOf('hold', id))) return;
  const item = track('hold', id, null);
  render();
  reread(item);
}

async function reread(item) {
  const mine = keyGeneration();
  await readLimit(async () => {
    if (!current(mine, item)) return;
    try {
      const path = item.kind === 'hold' ? `/holds/${idText(item.id)}` : `/waitlist/${idText(item.id)}`;
      const { data } = await request('GET', path);
      if (!current(mine, item)) return; // and offered() would track the old key's hold
      item.data = data;
      draw(item);
      if (item.kind === 'entry') offered(data);
    } catch (error) {
      if (!current(mine, item)) return;
      if (error.status === 404) {
        forget(item);
        showMessage(`${item.kind === 'hold' ? 'Hold' : 'Waiting entry'} ${item.id} is not this key's (or no longer exists): taken off My holds.`, 'error');
      } else if (error.status !== 401) {
        showError(error, `Reading ${item.kind === 'hold' ? 'hold' : 'waiting entry'} ${item.id}:`);
      }
    }
  });
}

function forget(item) {
  items.delete(keyOf(item.kind, item.id));
  item.node?.remove();
  save();
  render();
}

function slotText(slotId) {
  const slot = week.get(slotId);
  return slot ? `slot ${slotId} (${slotLabel(slot)})` : `slot ${slotId}`;
}

function holdSummary(hold) {
  const seats = `${hold.quantity} seat${hold.quantity === 1 ? '' : 's'}`;
  let state = hold.status;
  let when = `expires at ${formatSeconds(hold.expires_at)}`;
  if (hold.status === 'held' && (!hold.active || Date.parse(hold.expires_at) <= Date.now())) {
    state = 'held (expired)';
    when = `expired at ${formatSeconds(hold.expires_at)}`;
  } else if (hold.status === 'confirmed') {
    when = hold.confirmed_at ? `confirmed at ${formatSeconds(hold.confirmed_at)}` : '';
  } else if (hold.status === 'cancelled') {
    when = hold.cancelled_at ? `cancelled at ${formatSeconds(hold.cancelled_at)}` : '';
  }
  return [`Hold ${hold.id}`, state, slotText(hold.slot_id), seats, when].filter(Boolean).join(' · ');
}

function entrySummary(entry) {
  const seats = `${entry.quantity} seat${entry.quantity === 1 ? '' : 's'}`;
  let state = entry.status;
  if (entry.status === 'waiting' && entry.position) state = `waiting, position ${entry.position}`;
  if (entry.hold_id !== null && entry.hold_id !== undefined) state += ` (offered hold ${entry.hold_id})`;
  return `Waiting entry ${entry.id} · ${state} · ${slotText(entry.slot_id)} · ${seats}`;
}

/** Builds an item's row once, then only updates it (focus stays where it is). */
function draw(item) {
  if (!item.node) item.node = item.kind === 'hold' ? holdRow(item) : entryRow(item);
  const { node, data } = item;
  if (!node.isConnected) $('my-holds-list').append(node);
  node.dataset.status = data ? data.status : 'unknown';
  if (item.kind === 'hold') {
    node.dataset.active = data ? String(Boolean(data.active)) : 'unknown';
    if (data) node.dataset.expiresAt = data.expires_at;
    node.summary.textContent = data ? holdSummary(data) : `Hold ${item.id} · reading…`;
    const open = data && (data.status === 'held' || data.status === 'confirmed');
    node.confirm.disabled = !data || data.status !== 'held';
    node.cancel.disabled = !open;
    node.cancel.textContent = data && data.status === 'confirmed' ? 'Cancel booking' : 'Cancel hold';
    fillTargets(node.select, data ? String(data.slot_id) : null);
    node.move.disabled = node.select.options.length === 0;
    node.moveGroup.hidden = !open;
    node.forgetButton.hidden = Boolean(open);
  } else {
    node.summary.textContent = data ? entrySummary(data) : `Waiting entry ${item.id} · reading…`;
    node.leave.disabled = !data || data.status !== 'waiting';
    node.forgetButton.hidden = !data || data.status === 'waiting' || data.status === 'offered';
  }
}

function holdRow(item) {
  const selectId = `move-to-${item.id}`;
  const node = el('li', { class: 'hold', data: { holdId: item.id } });
  node.summary = el('p', { class: 'summary' });
  node.confirm = el('button', { type: 'button', class: 'hold-confirm', text: 'Confirm', onclick: () => act(item, 'confirm') });
  node.cancel = el('button', { type: 'button', class: 'hold-cancel danger', text: 'Cancel hold', onclick: () => act(item, 'cancel') });
  node.select = el('select', { id: selectId, class: 'hold-move-to' });
  node.move = el('button', { type: 'button', class: 'hold-move', text: 'Move', onclick: () => act(item, 'move') });
  node.forgetButton = el('button', { type: 'button', class: 'hold-forget', text: 'Remove from list', onclick: () => forget(item) });
  node.moveGroup = el('span', { class: 'move-group' }, [el('label', { for: selectId, text: 'Move to' }), node.select, node.move]);
  node.append(
    node.summary,
    el('div', { class: 'actions' }, [node.confirm, node.cancel, node.moveGroup, node.forgetButton]),
  );
  return node;
}

function entryRow(item) {
  const node = el('li', { class: 'entry', data: { entryId: item.id } });
  node.summary = el('p', { class: 'summary' });
  node.leave = el('button', { type: 'button', class: 'entry-leave danger', text: 'Leave the line', onclick: () => act(item, 'leave') });
  node.forgetButton = el('button', { type: 'button', class: 'entry-forget', text: 'Remove from list', onclick: () => forget(item) });
  node.append(node.summary, el('div', { class: 'actions' }, [node.leave, node.forgetButton]));
  return node;
}

/** The shown week's other slots, keeping the choice made if it is still there. */
function fillTargets(select, currentSlot) {
  const targets = week.list().filter((slot) => String(slot.id) !== currentSlot);
  const labels = targets.map((slot) => `${slotLabel(slot)} (slot ${slot.id})`);
  const signature = targets.map((slot, i) => `${slot.id}=${labels[i]}`).join('|');
  if (select.targetSignature === signature) return;
  select.targetSignature = signature;
  const chosen = select.value;
  select.replaceChildren(...targets.map((slot, i) => el('option', { value: String(slot.id), text: labels[i] })));
  if (targets.some((slot) => String(slot.id) === chosen)) select.value = chosen;
}

async function act(item, action) {
  const id = idText(item.id);
  const before = item.data ? String(item.data.slot_id) : null;
  const calls = {
    confirm: ['POST', `/holds/${id}/confirm`, undefined, 'Confirmed hold'],
    cancel: ['DELETE', `/holds/${id}`, undefined, 'Cancelled hold'],
    move: ['POST', `/holds/${id}/move`, `{"slot_id":${item.node.select.value}}`, 'Moved hold'],
    leave: ['DELETE', `/waitlist/${id}`, undefined, 'Left the waiting line: entry'],
  };
  const [method, path, body, done] = calls[action];
  if (action === 'move' && !/^[1-9][0-9]*$/.test(item.node.select.value)) {
    showMessage('Choose a slot of the shown week to move the hold to.', 'error');
    return;
  }
  const mine = keyGeneration();
  try {
    const { data } = await request(method, path, { body });
    if (!current(mine, item)) return;
    item.data = data;
    draw(item);
    const where = action === 'move' ? ` to ${slotText(data.slot_id)}` : '';
    showMessage(`${done} ${item.id}${where}.`, 'ok');
    await week.refresh([before, data && String(data.slot_id)].filter(Boolean));
  } catch (error) {
    if (current(mine, item) && error.status !== 401) showError(error);
  }
}

/** Empty note, and move targets redrawn after the week's slots change. */
function render() {
  $('my-holds-empty').hidden = items.size > 0;
}

// A hold passing its expires_at shows as expired at once, and its slot's figures are read again.
setInterval(() => {
  const slots = [];
  for (const item of items.values()) {
    const hold = item.data;
    if (item.kind !== 'hold' || !hold || hold.status !== 'held' || !hold.active) continue;
    if (item.expiredFor === hold.expires_at || Date.parse(hold.expires_at) > Date.now()) continue;
    item.expiredFor = hold.expires_at;
    draw(item);
    slots.push(String(hold.slot_id));
  }
  if (slots.length) week.refresh(slots);
}, 1000);

week.onChange((_, __, kind) => {
  if (kind === 'updated' || movesPending) return;
  movesPending = true;
  setTimeout(() => {
    movesPending = false;
    for (const item of items.values()) if (item.kind === 'hold' && item.node) draw(item);
  }, 0);
});
