// main.js: the console's start. The key (pasted once, kept in
// sessionStorage), the role it has (GET /clients?limit=1: 200 admin, 403
// booker, 401 not a key), the tabs, and starting or stopping the rest.

import { request, getKey, setKey, clearKey, onUnauthorized } from './api.js';
import { $, showError, showMessage } from './ui.js';
import * as week from './week.js';
import * as feed from './feed.js';
import * as holds from './holds.js';
import * as detail from './detail.js';
import * as admin from './admin.js';
import * as clients from './clients.js';
import * as webhooks from './webhooks.js';

let session = 0; // bumped whenever the key changes or goes
let role = null;

/** The API's key format (CreatedClient.key in openapi.yaml): anything else is not a key. */
const KEY_FORMAT = /^[A-Za-z0-9_-]{24,128}$/;

// How each role's week is kept current (#week-live).
const LIVE_TEXT = {
  none: 'Changes show within seconds, from the API’s change feed.',
  admin: 'Changes show within seconds, from the API’s change feed (an admin’s feed carries every change).',
  booker:
    'Your own holds and changes to slots show within seconds, from the API’s change feed. ' +
    'A booker’s feed does not carry other clients’ holds: this week’s free seats are re-read every 5 seconds, ' +
    'and a slot whose free seats or capacity changed is read again.',
};

function init() {
  $('key-form').addEventListener('submit', (event) => {
    event.preventDefault();
    useKey();
  });
  $('key-forget').addEventListener('click', () => {
    forget();
    showMessage('Key forgotten: nothing of it is kept in this tab.', 'ok');
  });
  $('tab-week').addEventListener('click', () => showTab('week'));
  $('tab-clients').addEventListener('click', () => showTab('clients'));
  $('tab-webhooks').addEventListener('click', () => showTab('webhooks'));
  $('week-prev').addEventListener('click', () => navigate(() => week.shift(-1)));
  $('week-next').addEventListener('click', () => navigate(() => week.shift(1)));
  $('week-today').addEventListener('click', () => navigate(() => week.show(new Date())));
  onUnauthorized((error) => {
    if (!getKey() || role === null) return; // while the key is being checked, start() answers
    forget();
    showError(error, 'The key no longer works and was forgotten:');
  });
  detail.init();
  admin.init();
  clients.init();
  webhooks.init();
  if (getKey()) start();
}

function navigate(go) {
  if (role === null) return;
  detail.close(false);
  go();
}

async function useKey() {
  const input = $('key');
  const typed = input.value.trim();
  if (typed === '') {
    if (getKey()) {
      start(); // the kept key again (e.g. after a network failure)
      return;
    }
    showMessage('Paste an API key first.', 'error');
    input.focus();
    return;
  }
  if (!KEY_FORMAT.test(typed)) {
    const why = /^[A-Za-z0-9_-]*$/.test(typed) ? `this one has ${typed.length}` : 'this one has other characters';
    showMessage(`An API key is 24 to 128 characters of A–Z, a–z, 0–9, “_” and “-”; ${why}.`, 'error');
    input.focus();
    return;
  }
  input.value = '';
  const previous = getKey();
  if (previous) {
    stopAll();
    if (previous !== typed) holds.clear(); // another client's holds are not this key's
  }
  setKey(typed);
  await start();
}

/** Detects the role of the kept key, then starts the views. */
async function start() {
  const mine = ++session;
  feed.stop();
  role = null;
  $('role').textContent = '';
  $('key-state').textContent = 'Checking the key…';
  let detected;
  try {
    await request('GET', '/clients?limit=1');
    detected = 'admin';
  } catch (error) {
    if (mine !== session) return;
    if (error.status === 403) {
      detected = 'booker';
    } else if (error.status === 401) {
      forget();
      showError(error);
      return;
    } else {
      $('key-state').textContent = 'The key could not be checked; press “Use key” to try again.';
      showError(error, 'Checking the key:');
      return;
    }
  }
  if (mine !== session) return;
  role = detected;
  $('role').textContent = role;
  $('key-state').textContent = 'A key is in use (kept in this tab only).';
  for (const node of document.querySelectorAll('.admin-only')) node.hidden = role !== 'admin';
  $('tab-clients').hidden = role !== 'admin';
  $('tab-webhooks').hidden = false;
  $('intro').hidden = true;
  showTab('week');
  showMessage(`Key accepted: ${role}.`, 'ok');
  $('week-live').textContent = LIVE_TEXT[role];
  // The feed's head first, then the week and My holds together, then the
  // feed from that head: an event between the head and the loads' reads
  // is applied after them, not lost.
  week.setWeek(new Date());
  feed.start(() => Promise.all([week.load(), holds.load()]), { watch: role === 'booker' });
}

function stopAll() {
  session += 1;
  feed.stop();
  detail.close(false);
  week.clear();
  clients.clear();
  webhooks.clear();
}

/** Forgets the key and everything shown with it. */
function forget() {
  stopAll();
  clearKey();
  holds.clear();
  role = null;
  $('role').textContent = '';
  $('key-state').textContent = 'No key in use.';
  $('week-live').textContent = LIVE_TEXT.none;
  $('key').value = '';
  $('tab-clients').hidden = true;
  $('tab-webhooks').hidden = true;
  for (const node of document.querySelectorAll('.admin-only')) node.hidden = true;
  $('week-page').hidden = true;
  $('clients').hidden = true;
  $('webhooks').hidden = true;
  $('intro').hidden = false;
  setPressed('week');
}

function setPressed(tab) {
  for (const name of ['week', 'clients', 'webhooks']) $(`tab-${name}`).setAttribute('aria-pressed', String(tab === name));
}

function showTab(wanted) {
  if (role === null) return;
  const tab = wanted === 'clients' && role !== 'admin' ? 'week' : wanted;
  $('week-page').hidden = tab !== 'week';
  $('clients').hidden = tab !== 'clients';
  $('webhooks').hidden = tab !== 'webhooks';
  setPressed(tab);
  if (tab === 'clients') clients.reload();
  if (tab === 'webhooks') webhooks.reload();
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
else init();
