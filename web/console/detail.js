// detail.js: the slot detail panel (#slot-detail). Anyone: hold seats,
// join or leave the waiting line. Admins: change the capacity and the
// per-client share, delete the slot (a second button confirms).

import { request, uuid, idText, keyGeneration } from './api.js';
import { $, showError, showMessage, numberField, formatDate, formatSeconds, timeRange, fieldProblems } from './ui.js';
import * as week from './week.js';
import * as holds from './holds.js';

let current = null; // the open slot's id (text)
let pendingHold = null; // {slot, quantity, key}: reused after a lost answer
let pendingEntry = null;
// What fillAdmin last wrote into the admin inputs, as numbers (share: null
// is no limit), for the open slot; null until its ledger is known. Save
// sends only a field whose input differs from it: a field left alone is
// never sent, so it cannot undo another admin's change or a limit the
// inputs did not show.
let written = null;

export function init() {
  $('slot-detail-close').addEventListener('click', () => close(true));
  $('hold-form').addEventListener('submit', (event) => {
    event.preventDefault();
    hold();
  });
  $('waitlist-form').addEventListener('submit', (event) => {
    event.preventDefault();
    joinLine();
  });
  $('slot-edit').addEventListener('submit', (event) => {
    event.preventDefault();
    save();
  });
  $('slot-delete').addEventListener('click', () => askDelete(true));
  $('slot-delete-keep').addEventListener('click', () => askDelete(false));
  $('slot-delete-confirm').addEventListener('click', () => remove());
  week.onSelect((id) => open(id));
  week.onChange((id, slot, kind) => {
    if (id !== current) return;
    if (kind === 'removed') {
      showMessage(`Slot ${id} was deleted or moved out of the shown week.`, 'ok');
      close(false);
    } else if (slot) {
      draw(slot);
      fillAdmin(slot);
    }
  });
}

/** Opens the panel for a slot of the shown week. */
export function open(id) {
  const slot = week.get(id);
  if (!slot) return;
  current = String(id);
  week.setSelected(current);
  askDelete(false);
  draw(slot);
  written = null;
  $('slot-capacity').value = '';
  $('slot-share').value = '';
  fillAdmin(slot);
  if (!ledgerKnown(slot)) week.refresh([current]); // usually already on its way
  const panel = $('slot-detail');
  panel.hidden = false;
  $('slot-detail-heading').focus();
}

/** Closes the panel; `returnFocus` puts focus back on the slot's button. */
export function close(returnFocus = false) {
  const was = current;
  current = null;
  week.setSelected(null);
  $('slot-detail').hidden = true;
  askDelete(false);
  if (returnFocus && was !== null) week.focusSlot(was);
}

function draw(slot) {
  $('slot-detail-heading').textContent = `Slot ${slot.id}: ${formatDate(slot.starts_at)}, ${timeRange(slot)}`;
  $('slot-detail-text').textContent = week.describe(slot);
  const share = slot.max_seats_per_client;
  let text = 'Reading this slot’s figures and per-client limit…'; // an availability row has no share
  if (ledgerKnown(slot)) {
    text =
      share === null
        ? 'No per-client limit on this slot.'
        : `Each client may have at most ${share} seat${share === 1 ? '' : 's'} here (held and confirmed together).`;
  }
  $('slot-detail-share').textContent = text;
}

/** Whether a slot is its full resource (GET /slots/{id}), not an availability row without the share. */
function ledgerKnown(slot) {
  return typeof slot.confirmed === 'number' && 'max_seats_per_client' in slot;
}

const inputText = (value) => (value === null || value === undefined ? '' : String(value));

/**
 * The admin inputs, from the slot as it is: disabled until its ledger is
 * known; then each input still holding what was last written is refilled
 * (one typed in is left as typed), and what was written is remembered.
 */
function fillAdmin(slot, force = false) {
  const ready = ledgerKnown(slot);
  for (const id of ['slot-capacity', 'slot-share', 'slot-save']) $(id).disabled = !ready;
  if (!ready) return;
  const fresh = force || written === null || written.slot !== String(slot.id);
  if (fresh) written = { slot: String(slot.id), capacity: null, share: null };
  const fields = [
    ['slot-capacity', 'capacity', slot.capacity],
    ['slot-share', 'share', slot.max_seats_per_client ?? null],
  ];
  for (const [id, name, value] of fields) {
    const input = $(id);
    if (!fresh && (input.validity.badInput || input.value !== inputText(written[name]))) continue;
    input.value = inputText(value);
    written[name] = value;
  }
}

/** A refusal that will not change on a retry (not a lost answer, a 429 or a 5xx). */
function definite(error) {
  return error.status >= 400 && error.status < 500 && error.status !== 429;
}

function quantityOf(input, name) {
  const quantity = numberField(input);
  if (quantity === null || Number.isNaN(quantity)) {
    showMessage(`${name}: enter how many seats, a whole number from 1 to 50.`, 'error');
    input.focus();
    return null;
  }
  return quantity;
}

async function hold() {
  if (current === null) return;
  const slotId = current;
  const quantity = quantityOf($('hold-quantity'), 'Seats to hold');
  if (quantity === null) return;
  // A retry of the same request after a lost answer keeps its key: no second hold.
  if (!pendingHold || pendingHold.slot !== slotId || pendingHold.quantity !== quantity) {
    pendingHold = { slot: slotId, quantity, key: uuid() };
  }
  const attempt = pendingHold;
  const mine = keyGeneration();
  try {
    const { data, status } = await request('POST', `/slots/${idText(slotId)}/hold`, {
      headers: { 'Idempotency-Key': attempt.key },
      body: { quantity },
    });
    if (pendingHold === attempt) pendingHold = null;
    if (mine !== keyGeneration()) return; // another key's hold: not for this tab's list
    holds.addHold(data, mine);
    const again = status === 200 ? ' (this request had already been answered)' : '';
    showMessage(
      `Held ${data.quantity} seat${data.quantity === 1 ? '' : 's'} on slot ${data.slot_id}: hold ${data.id}, expires at ${formatSeconds(data.expires_at)}${again}. Confirm it under My holds.`,
      'ok',
    );
    await week.refresh([slotId]);
  } catch (error) {
    if (definite(error) && pendingHold === attempt) pendingHold = null;
    if (mine === keyGeneration() && error.status !== 401) showError(error);
  }
}

async function joinLine() {
  if (current === null) return;
  const slotId = current;
  const quantity = quantityOf($('waitlist-quantity'), 'Seats to wait for');
  if (quantity === null) return;
  if (!pendingEntry || pendingEntry.slot !== slotId || pendingEntry.quantity !== quantity) {
    pendingEntry = { slot: slotId, quantity, key: uuid() };
  }
  const attempt = pendingEntry;
  const mine = keyGeneration();
  try {
    const { data } = await request('POST', `/slots/${idText(slotId)}/waitlist`, {
      headers: { 'Idempotency-Key': attempt.key },
      body: { quantity },
    });
    if (pendingEntry === attempt) pendingEntry = null;
    if (mine !== keyGeneration()) return;
    holds.addEntry(data, mine);
    const where = data.position ? `, position ${data.position}` : '';
    showMessage(`Joined the waiting line of slot ${data.slot_id}: entry ${data.id} (${data.status}${where}).`, 'ok');
    await week.refresh([slotId]);
  } catch (error) {
    if (definite(error) && pendingEntry === attempt) pendingEntry = null;
    if (mine === keyGeneration() && error.status !== 401) showError(error);
  }
}

async function save() {
  if (current === null) return;
  const slotId = current;
  if (!week.get(slotId)) {
    showMessage(`Slot ${slotId} is not in the shown week any more.`, 'error');
    return;
  }
  if (written === null || written.slot !== slotId) {
    showMessage('This slot’s figures are still being read: try again in a moment.', 'error');
    return;
  }
  const capacity = numberField($('slot-capacity'));
  const share = numberField($('slot-share'));
  if (Number.isNaN(capacity) || Number.isNaN(share)) {
    const problems = [];
    if (Number.isNaN(capacity)) problems.push('Capacity: enter a whole number.');
    if (Number.isNaN(share)) problems.push('Seats per client: enter a whole number, or leave it empty for no limit.');
    showMessage('Not saved: the form has a value that is not a whole number.', 'error', problems);
    return;
  }
  // Only a field changed from what was written is sent; an empty capacity is
  // left as it is, an emptied share is "no limit" (null).
  const change = {};
  if (capacity !== null && capacity !== written.capacity) change.capacity = capacity;
  if (share !== written.share) change.max_seats_per_client = share;
  if (Object.keys(change).length === 0) {
    showMessage('Nothing to change: the capacity and the share are as they were shown.', 'ok');
    return;
  }
  const mine = keyGeneration();
  try {
    const { data } = await request('PATCH', `/slots/${idText(slotId)}`, { body: change });
    if (mine !== keyGeneration()) return; // the key changed or went: the week was emptied
    week.applySlot(data);
    if (String(data.id) === current) fillAdmin(data, true);
    const limit = data.max_seats_per_client === null ? 'no per-client limit' : `at most ${data.max_seats_per_client} per client`;
    showMessage(`Saved slot ${data.id}: capacity ${data.capacity}, ${limit}.`, 'ok');
  } catch (error) {
    if (mine === keyGeneration() && error.status !== 401) showError(error, fieldProblems(error.errors).length ? 'Not saved:' : '');
  }
}

function askDelete(asking) {
  $('slot-delete').hidden = asking;
  $('slot-delete-ask').hidden = !asking;
  if (asking) $('slot-delete-confirm').focus();
}

async function remove() {
  if (current === null) return;
  const id = current;
  const mine = keyGeneration();
  try {
    await request('DELETE', `/slots/${idText(id)}`);
    if (mine !== keyGeneration()) return;
    if (current === id) close(false);
    week.removeSlot(id);
    showMessage(`Deleted slot ${id}.`, 'ok');
  } catch (error) {
    if (mine !== keyGeneration()) return;
    if (current === id) askDelete(false);
    if (error.status !== 401) showError(error);
  }
}
