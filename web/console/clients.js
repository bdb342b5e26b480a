// clients.js: the Clients page (admins). A paged list (GET /clients,
// "More" follows the Link), creating a client (its key shown once, with
// Copy), revoking one and changing its limits.

import { request, idText, keyGeneration } from './api.js';
import { $, el, showError, showMessage, showCreateFailure, numberField, formatDate, formatTime } from './ui.js';

let next = null; // the list's next page, or null
let editing = null; // the client whose limits are being changed
let generation = 0;

export function init() {
  $('client-form').addEventListener('submit', (event) => {
    event.preventDefault();
    create();
  });
  $('client-copy').addEventListener('click', copy);
  $('client-more').addEventListener('click', () => loadPage(next, false));
  $('client-limits').addEventListener('submit', (event) => {
    event.preventDefault();
    saveLimits();
  });
  $('client-limits-cancel').addEventListener('click', closeLimits);
}

/** The first page again (on opening the tab, after a create). */
export function reload() {
  return loadPage('/clients', true);
}

/** Forgets all of it (the key was forgotten). */
export function clear() {
  generation += 1;
  next = null;
  $('client-list').tBodies[0].replaceChildren();
  $('client-more').hidden = true;
  $('client-new-key').value = '';
  $('client-new-name').textContent = '';
  $('client-key-box').hidden = true;
  closeLimits();
}

async function loadPage(path, fresh) {
  if (!path) return;
  const mine = fresh ? ++generation : generation;
  const more = $('client-more');
  more.disabled = true;
  try {
    const { data, next: after } = await request('GET', path);
    if (mine !== generation) return; // emptied (key changed or gone) or reloaded meanwhile
    const body = $('client-list').tBodies[0];
    if (fresh) body.replaceChildren();
    for (const client of Array.isArray(data) ? data : []) drawRow(client);
    next = after;
    more.hidden = !next;
  } catch (error) {
    if (mine === generation && error.status !== 401) showError(error, 'Listing the clients:');
  } finally {
    more.disabled = false;
  }
}

const limitText = (value, unlimited) => (value === null ? 'default' : value === 0 ? unlimited : String(value));

/** Adds a client's row, or redraws it in place. */
function drawRow(client) {
  const id = String(client.id);
  const body = $('client-list').tBodies[0];
  const old = body.querySelector(`tr[data-client-id="${CSS.escape(id)}"]`);
  const revoked = client.revoked_at !== null && client.revoked_at !== undefined;
  const created = client.created_at ? `${formatDate(client.created_at)} ${formatTime(client.created_at)}` : '';
  const status = revoked ? `revoked ${formatDate(client.revoked_at)} ${formatTime(client.revoked_at)}` : 'active';
  const row = el('tr', { data: { clientId: id, role: client.role, revoked: String(revoked) } }, [
    el('td', { text: id }),
    el('td', { text: client.name }),
    el('td', { text: client.role }),
    el('td', { class: 'client-rate', text: limitText(client.rate_limit_per_second, 'unlimited') }),
    el('td', { class: 'client-held', text: limitText(client.max_held_seats, 'unlimited') }),
    el('td', { text: created }),
    el('td', { class: 'client-status', text: status }),
    el('td', { class: 'actions' }, [
      el('button', {
        type: 'button',
        class: 'client-limits',
        text: 'Change limits',
        'aria-label': `Change limits of ${client.name}`,
        disabled: revoked,
        onclick: () => openLimits(client),
      }),
      el('button', {
        type: 'button',
        class: 'client-revoke danger',
        text: 'Revoke',
        'aria-label': `Revoke ${client.name}`,
        disabled: revoked,
        onclick: () => revoke(client),
      }),
    ]),
  ]);
  if (old) old.replaceWith(row);
  else body.append(row);
}

const LIMIT_NAMES = {
  'client-rate': 'Requests per second',
  'client-held': 'Most seats in active holds',
  'client-limits-rate': 'Requests per second',
  'client-limits-held': 'Most seats in active holds',
};

/**
 * The limit inputs: {values} (empty is null, the configured default) or,
 * when one is unreadable or not whole, null after saying which.
 */
function limitValues(ids) {
  const values = [];
  for (const id of ids) {
    const value = numberField($(id));
    if (Number.isNaN(value)) {
      showMessage(`${LIMIT_NAMES[id]}: enter a whole number (0: unlimited), or leave it empty for the default.`, 'error');
      $(id).focus();
      return null;
    }
    values.push(value);
  }
  return values;
}

async function create() {
  const body = { name: $('client-name').value, role: $('client-role').value };
  const limits = limitValues(['client-rate', 'client-held']);
  if (!limits) return;
  const [rate, held] = limits;
  if (rate !== null) body.rate_limit_per_second = rate;
  if (held !== null) body.max_held_seats = held;
  const button = $('client-create');
  button.disabled = true;
  const mine = keyGeneration();
  try {
    const { data } = await request('POST', '/clients', { body });
    // A key made under a key since forgotten or changed is not shown to whoever holds the tab now.
    if (mine !== keyGeneration()) return;
    $('client-new-name').textContent = data.name;
    $('client-new-key').value = data.key;
    $('client-key-box').hidden = false;
    for (const id of ['client-name', 'client-rate', 'client-held']) $(id).value = '';
    $('client-role').value = 'booker';
    showMessage(`Created client ${data.name} (${data.role}). Copy its key now: it will not be shown again.`, 'ok');
    $('client-new-key').focus();
    $('client-new-key').select();
    await reload();
  } catch (error) {
    if (mine !== keyGeneration() || error.status === 401) return;
    // POST /clients has no idempotency key: after a 5xx or a lost answer only the list can tell.
    showCreateFailure(
      error,
      'No client was created:',
      'The outcome is unknown: the client may or may not have been created. Look at the clients list (press “Clients” again) before trying again: a second try could create it twice. If it is there, its key was never shown: revoke it and create another.',
    );
  } finally {
    button.disabled = false;
  }
}

async function copy() {
  const input = $('client-new-key');
  if (!input.value) return;
  try {
    await navigator.clipboard.writeText(input.value);
    showMessage('The key is on the clipboard.', 'ok');
  } catch {
    input.focus();
    input.select();
    showMessage('The browser refused the clipboard: the key is selected, copy it with Ctrl+C (⌘C).', 'error');
  }
}

async function revoke(client) {
  const mine = keyGeneration();
  try {
    const { data } = await request('DELETE', `/clients/${idText(client.id)}`);
    if (mine !== keyGeneration()) return; // the list was emptied: no stale row
    drawRow(data);
    if (editing && String(editing.id) === String(data.id)) closeLimits();
    showMessage(`Revoked client ${data.name}: its key stops working within 30 s.`, 'ok');
  } catch (error) {
    if (mine === keyGeneration() && error.status !== 401) showError(error);
  }
}

function openLimits(client) {
  editing = client;
  $('client-limits-name').textContent = client.name;
  $('client-limits-rate').value = client.rate_limit_per_second ?? '';
  $('client-limits-held').value = client.max_held_seats ?? '';
  $('client-limits').hidden = false;
  $('client-limits-rate').focus();
}

function closeLimits() {
  const was = editing;
  editing = null;
  $('client-limits').hidden = true;
  if (was) document.querySelector(`tr[data-client-id="${CSS.escape(String(was.id))}"] .client-limits`)?.focus();
}

async function saveLimits() {
  if (!editing) return;
  const target = editing;
  const limits = limitValues(['client-limits-rate', 'client-limits-held']);
  if (!limits) return;
  const body = { rate_limit_per_second: limits[0], max_held_seats: limits[1] };
  const mine = keyGeneration();
  try {
    const { data } = await request('PATCH', `/clients/${idText(target.id)}`, { body });
    if (mine !== keyGeneration()) return; // the list was emptied: no stale row
    drawRow(data);
    if (editing === target) closeLimits();
    showMessage(
      `Limits of ${data.name}: ${limitText(data.rate_limit_per_second, 'unlimited')} requests/s, ` +
        `${limitText(data.max_held_seats, 'unlimited')} held seats (applied within 30 s).`,
      'ok',
    );
  } catch (error) {
    if (mine === keyGeneration() && error.status !== 401) showError(error, 'Not saved:');
  }
}
