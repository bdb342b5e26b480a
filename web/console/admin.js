// admin.js: the batch form (#batch). Local dates and times become RFC 3339
// UTC instants here; over 500 slots is refused before asking; otherwise
// ONE POST /slots with the array.

import { request, keyGeneration } from './api.js';
import { $, showMessage, showCreateFailure, numberField, formatDate, formatTime } from './ui.js';
import * as week from './week.js';

const MAX_BATCH = 500;

export function init() {
  const form = $('batch');
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    create();
  });
  form.addEventListener('input', preview);
  form.addEventListener('change', preview);
  const today = new Date();
  const pad = (n) => String(n).padStart(2, '0');
  if (!$('batch-date').value) {
    $('batch-date').value = `${today.getFullYear()}-${pad(today.getMonth() + 1)}-${pad(today.getDate())}`;
  }
  preview();
}

/** "09:00, 14:30" → [[9, 0], [14, 30]], or an error naming the bad part. */
function parseTimes(text) {
  const parts = text.split(',').map((part) => part.trim()).filter(Boolean);
  if (parts.length === 0) return { error: 'Enter at least one start time, e.g. 09:00, 14:30.' };
  const seen = new Set();
  const times = [];
  for (const part of parts) {
    const match = /^([01]?[0-9]|2[0-3]):([0-5][0-9])$/.exec(part);
    if (!match) return { error: `“${part}” is not a time: write HH:MM (24-hour), e.g. 09:00 or 14:30.` };
    const key = `${Number(match[1])}:${match[2]}`;
    if (seen.has(key)) continue;
    seen.add(key);
    times.push([Number(match[1]), Number(match[2])]);
  }
  return { times };
}

/** A whole number from an input, or null when empty, or NaN (unreadable or not whole). */
function whole(id) {
  return numberField($(id));
}

/** The slots the form describes: {slots} or {error}. */
function compute() {
  const date = /^(\d{4})-(\d{2})-(\d{2})$/.exec($('batch-date').value);
  if (!date) return { error: 'Choose the first date.' };
  const days = whole('batch-days') ?? 1;
  if (!Number.isInteger(days) || days < 1 || days > 31) return { error: 'The number of days must be a whole number from 1 to 31.' };
  const { times, error } = parseTimes($('batch-times').value);
  if (error) return { error };
  const length = whole('batch-length');
  if (length === null || !Number.isInteger(length) || length < 1) return { error: 'The length must be a whole number of minutes, at least 1.' };
  const weekdays = [...document.querySelectorAll('#batch input[name="batch-weekday"]:checked')].map((box) => Number(box.value));
  const capacity = whole('batch-capacity');
  if (Number.isNaN(capacity)) return { error: 'Capacity (seats): enter a whole number, e.g. 10.' };
  const share = whole('batch-share');
  if (Number.isNaN(share)) return { error: 'Seats per client: enter a whole number, or leave it empty for no limit.' };
  const [, year, month, day] = date.map(Number);
  const slots = [];
  for (let offset = 0; offset < days; offset += 1) {
    const dayDate = new Date(year, month - 1, day + offset);
    if (weekdays.length && !weekdays.includes((dayDate.getDay() + 6) % 7)) continue;
    for (const [hours, minutes] of times) {
      const start = new Date(year, month - 1, day + offset, hours, minutes);
      const end = new Date(start.getTime() + length * 60000);
      // An empty capacity is left out (the API says it is required); an empty share is no limit.
      const slot = { starts_at: start.toISOString(), ends_at: end.toISOString() };
      if (capacity !== null) slot.capacity = capacity;
      if (share !== null) slot.max_seats_per_client = share;
      slots.push(slot);
    }
  }
  if (slots.length === 0) return { error: 'These settings make no slot: check the weekdays against the days covered.' };
  if (slots.length > MAX_BATCH) {
    return {
      error: `That is ${slots.length} slots; one batch creates at most ${MAX_BATCH}. Use fewer days, weekdays or start times.`,
      count: slots.length,
    };
  }
  return { slots };
}

function preview() {
  const note = $('batch-preview');
  const { slots, error } = compute();
  if (error) {
    note.textContent = error;
    return;
  }
  const when = (slot) => `${formatDate(slot.starts_at)} ${formatTime(slot.starts_at)}`;
  note.textContent =
    slots.length === 1
      ? `1 slot, ${when(slots[0])} (your local time).`
      : `${slots.length} slots: the first ${when(slots[0])}, the last ${when(slots[slots.length - 1])} (your local time).`;
}

async function create() {
  const { slots, error } = compute();
  if (error) {
    showMessage(error, 'error');
    return;
  }
  const button = $('batch-create');
  button.disabled = true;
  const mine = keyGeneration();
  try {
    const { data } = await request('POST', '/slots', { body: slots });
    if (mine !== keyGeneration()) return; // the key changed or went meanwhile
    const created = Array.isArray(data) ? data : [data];
    for (const slot of created) week.applySlot(slot);
    showMessage(created.length === 1 ? 'Created 1 slot' : `Created ${created.length} slots`, 'ok');
  } catch (failure) {
    if (mine !== keyGeneration() || failure.status === 401) return;
    // POST /slots has no idempotency key: after a 5xx or a lost answer only the week can tell.
    showCreateFailure(
      failure,
      'No slot was created:',
      'The outcome is unknown: the slots may or may not have been created. Look at the week (new slots show there within seconds) before trying again: a second try could create them twice.',
    );
  } finally {
    button.disabled = false;
  }
}
