// webhooks.js: the Webhooks page (SPEC §20, §23.7). The caller's
// subscriptions (an admin's key: every client's), paged by GET /webhooks;
// creating one and rotating its secret, each secret shown once, as a new
// client's key is; enabling, disabling and deleting one. Every value from
// the API is written as text.

import { request, idText, keyGeneration } from './api.js';
import { $, el, showError, showMessage, showCreateFailure, formatDate, formatTime } from './ui.js';

// The recent deliveries of a subscription: the path that lists them, or
// null while the API has no such route. With a path, each row gets a
// "Deliveries" button and the panel #webhook-deliveries lists them
// (drawDeliveries); without, neither is shown.
const DELIVERIES_PATH = (id) => `/webhooks/${idText(id)}/deliveries?limit=20`;

let next = null; // the list's next page, or null
let generation = 0;

export function init() {
  $('webhook-form').addEventListener('submit', (event) => {
    event.preventDefault();
    create();
  });
  $('webhook-copy').addEventListener('click', copy);
  $('webhook-more').addEventListener('click', () => loadPage(next, false));
  $('webhook-deliveries-close').addEventListener('click', closeDeliveries);
}

/** The first page again (on opening the tab, after a create). */
export function reload() {
  return loadPage('/webhooks', true);
}

/** Forgets all of it (the key was forgotten or changed). */
export function clear() {
  generation += 1;
  next = null;
  $('webhook-list').tBodies[0].replaceChildren();
  $('webhook-more').hidden = true;
  hideSecret();
  closeDeliveries();
}

async function loadPage(path, fresh) {
  if (!path) return;
  const mine = fresh ? ++generation : generation;
  const more = $('webhook-more');
  more.disabled = true;
  try {
    const { data, next: after } = await request('GET', path);
    if (mine !== generation) return; // emptied (key changed or gone) or reloaded meanwhile
    const body = $('webhook-list').tBodies[0];
    if (fresh) body.replaceChildren();
    for (const hook of Array.isArray(data) ? data : []) drawRow(hook);
    next = after;
    more.hidden = !next;
    $('webhook-empty').hidden = body.rows.length > 0;
  } catch (error) {
    if (mine === generation && error.status !== 401) showError(error, 'Listing the webhooks:');
  } finally {
    more.disabled = false;
  }
}

const typesText = (types) => (Array.isArray(types) ? types.join(', ') : 'every type');

function statusText(hook) {
  if (hook.status !== 'disabled') return 'enabled';
  const why = { failing: 'failing', gone: 'the endpoint answered 410 Gone', by_client: 'by its client' };
  return `disabled (${why[hook.disabled_reason] ?? String(hook.disabled_reason)})`;
}

/** Adds a subscription's row, or redraws it in place. */
function drawRow(hook) {
  const id = String(hook.id);
  const body = $('webhook-list').tBodies[0];
  const old = body.querySelector(`tr[data-webhook-id="${CSS.escape(id)}"]`);
  const enabled = hook.status === 'enabled';
  const name = `webhook ${id}`;
  const buttons = [
    el('button', {
      type: 'button',
      class: 'webhook-toggle',
      text: enabled ? 'Disable' : 'Enable',
      'aria-label': `${enabled ? 'Disable' : 'Enable'} ${name}`,
      onclick: () => setStatus(hook, enabled ? 'disabled' : 'enabled'),
    }),
    el('button', {
      type: 'button',
      class: 'webhook-ping',
      text: 'Ping',
      'aria-label': `Ping ${name}`,
      onclick: () => ping(hook),
    }),
    el('button', {
      type: 'button',
      class: 'webhook-rotate',
      text: 'Rotate secret',
      'aria-label': `Rotate secret of ${name}`,
      onclick: () => rotate(hook),
    }),
    el('button', {
      type: 'button',
      class: 'webhook-delete danger',
      text: 'Delete',
      'aria-label': `Delete ${name}`,
      onclick: () => remove(hook),
    }),
  ];
  if (DELIVERIES_PATH) {
    buttons.unshift(
      el('button', {
        type: 'button',
        class: 'webhook-deliveries',
        text: 'Deliveries',
        'aria-label': `Deliveries of ${name}`,
        onclick: () => openDeliveries(hook),
      }),
    );
  }
  const row = el('tr', { data: { webhookId: id, status: hook.status } }, [
    el('td', { text: id }),
    el('td', { text: String(hook.client_id) }),
    el('td', { class: 'webhook-url', text: hook.url }),
    el('td', { text: typesText(hook.event_types) }),
    el('td', { text: hook.description }),
    el('td', { class: 'webhook-status', text: statusText(hook) }),
    el('td', { class: 'actions' }, buttons),
  ]);
  if (old) old.replaceWith(row);
  else body.append(row);
  $('webhook-empty').hidden = true;
}

/** The event types typed: null (every type) when empty. */
function typesValue() {
  const raw = $('webhook-types').value.trim();
  if (raw === '') return null;
  return raw
    .split(/[\s,]+/)
    .map((type) => type.trim())
    .filter((type) => type !== '');
}

async function create() {
  const body = { url: $('webhook-url').value.trim(), description: $('webhook-description').value };
  const types = typesValue();
  if (types) body.event_types = types;
  const button = $('webhook-create');
  button.disabled = true;
  const mine = keyGeneration();
  try {
    const { data } = await request('POST', '/webhooks', { body });
    if (mine !== keyGeneration()) return; // a secret made under another key is not shown
    showSecret(data, `Created webhook ${data.id}.`);
    for (const id of ['webhook-url', 'webhook-types', 'webhook-description']) $(id).value = '';
    await reload();
  } catch (error) {
    if (mine !== keyGeneration() || error.status === 401) return;
    // POST /webhooks has no idempotency key: after a 5xx or a lost answer only the list can tell.
    showCreateFailure(
      error,
      'No webhook was created:',
      'The outcome is unknown: the webhook may or may not have been created. Look at the list (press “Webhooks” again) before trying again. If it is there, its secret was never shown: rotate it.',
    );
  } finally {
    button.disabled = false;
  }
}

/** The secret of `hook`, once, in the box with Copy; `done` says what happened. */
function showSecret(hook, done) {
  $('webhook-secret-name').textContent = String(hook.id);
  $('webhook-secret').value = hook.secret;
  $('webhook-secret-box').hidden = false;
  showMessage(`${done} Copy its secret now: it will not be shown again.`, 'ok');
  $('webhook-secret').focus();
  $('webhook-secret').select();
}

function hideSecret() {
  $('webhook-secret').value = '';
  $('webhook-secret-name').textContent = '';
  $('webhook-secret-box').hidden = true;
}

async function copy() {
  const input = $('webhook-secret');
  if (!input.value) return;
  try {
    await navigator.clipboard.writeText(input.value);
    showMessage('The secret is on the clipboard.', 'ok');
  } catch {
    input.focus();
    input.select();
    showMessage('The browser refused the clipboard: the secret is selected, copy it with Ctrl+C (⌘C).', 'error');
  }
}

async function setStatus(hook, status) {
  const mine = keyGeneration();
  try {
    const { data } = await request('PATCH', `/webhooks/${idText(hook.id)}`, { body: { status } });
    if (mine !== keyGeneration()) return;
    drawRow(data);
    showMessage(`Webhook ${data.id} is ${statusText(data)}.`, 'ok');
  } catch (error) {
    if (mine === keyGeneration() && error.status !== 401) showError(error, 'Not changed:');
  }
}

/** POST /webhooks/{id}/ping: the receiver's answer, as a message. */
async function ping(hook) {
  const mine = keyGeneration();
  try {
    const { data } = await request('POST', `/webhooks/${idText(hook.id)}/ping`);
    if (mine !== keyGeneration()) return;
    const answer = data.status_code === null || data.status_code === undefined
      ? `no answer (${String(data.error ?? 'unknown')})`
      : `HTTP ${String(data.status_code)}`;
    const ok = typeof data.status_code === 'number' && data.status_code >= 200 && data.status_code < 300;
    showMessage(`Pinged webhook ${String(hook.id)}: ${answer} in ${String(data.latency_ms ?? '?')} ms.`, ok ? 'ok' : 'error');
  } catch (error) {
    if (mine === keyGeneration() && error.status !== 401) showError(error, 'Not pinged:');
  }
}

async function rotate(hook) {
  const mine = keyGeneration();
  try {
    const { data } = await request('POST', `/webhooks/${idText(hook.id)}/secret`);
    if (mine !== keyGeneration()) return;
    drawRow(data);
    showSecret(data, `Rotated the secret of webhook ${data.id}: the old one keeps signing beside it for 24 hours.`);
  } catch (error) {
    if (mine === keyGeneration() && error.status !== 401) showError(error, 'Not rotated:');
  }
}

async function remove(hook) {
  const mine = keyGeneration();
  try {
    // A 503 says its deliveries are still being deleted: trying again goes on, and answers 200 when done.
    const { data } = await request('DELETE', `/webhooks/${idText(hook.id)}`, { retries: 10 });
    if (mine !== keyGeneration()) return;
    $('webhook-list').tBodies[0].querySelector(`tr[data-webhook-id="${CSS.escape(String(data.id))}"]`)?.remove();
    $('webhook-empty').hidden = $('webhook-list').tBodies[0].rows.length > 0;
    if ($('webhook-secret-name').textContent === String(data.id)) hideSecret();
    if ($('webhook-deliveries').dataset.webhookId === String(data.id)) closeDeliveries();
    showMessage(`Deleted webhook ${data.id} and its deliveries.`, 'ok');
  } catch (error) {
    if (mine === keyGeneration() && error.status !== 401) showError(error, 'Not deleted:');
  }
}

async function openDeliveries(hook) {
  if (!DELIVERIES_PATH) return;
  const panel = $('webhook-deliveries');
  panel.dataset.webhookId = String(hook.id);
  $('webhook-deliveries-name').textContent = String(hook.id);
  $('webhook-delivery-list').tBodies[0].replaceChildren();
  panel.hidden = false;
  $('webhook-deliveries-heading').focus();
  const mine = generation;
  try {
    const { data } = await request('GET', DELIVERIES_PATH(hook.id));
    if (mine !== generation || panel.dataset.webhookId !== String(hook.id)) return;
    drawDeliveries(Array.isArray(data) ? data : []);
  } catch (error) {
    if (mine === generation && error.status !== 401) showError(error, 'Listing the deliveries:');
  }
}

/** One row per delivery, newest first as the API gives them. */
function drawDeliveries(deliveries) {
  const when = (at) => (at ? `${formatDate(at)} ${formatTime(at)}` : '');
  $('webhook-delivery-list').tBodies[0].replaceChildren(
    ...deliveries.map((d) =>
      el('tr', { data: { status: String(d.status) } }, [
        el('td', { text: String(d.event_id ?? '') }),
        el('td', { text: String(d.event_type ?? '') }),
        el('td', { text: String(d.status ?? '') }),
        el('td', { text: String(d.attempts ?? '') }),
        el('td', { text: answerText(d) }),
        el('td', { text: when(d.last_attempt_at) }),
      ]),
    ),
  );
}

/** The last attempt's status, or why there was none. */
function answerText(d) {
  if (d.last_status_code !== null && d.last_status_code !== undefined) return String(d.last_status_code);
  return d.last_error ? String(d.last_error) : '';
}

function closeDeliveries() {
  const panel = $('webhook-deliveries');
  panel.hidden = true;
  delete panel.dataset.webhookId;
  $('webhook-delivery-list').tBodies[0].replaceChildren();
}
