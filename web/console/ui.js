// ui.js: DOM helpers (no innerHTML anywhere: API data is untrusted), the
// one status region #message, and how times are written.

export const $ = (id) => document.getElementById(id);

/**
 * An element: props `text`, `class`, `data` (dataset), `on<event>`
 * (listeners), booleans `hidden`, `disabled`, `readOnly`, `checked`,
 * anything else as an attribute (never `style`).
 */
export function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (name === 'text') node.textContent = String(value);
    else if (name === 'class') node.className = value;
    else if (name === 'data') Object.assign(node.dataset, value);
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else if (['hidden', 'disabled', 'readOnly', 'checked', 'selected'].includes(name)) node[name] = Boolean(value);
    else if (name !== 'style') node.setAttribute(name, String(value));
  }
  for (const child of [].concat(children)) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

/** The per-field problems of a `validation_failed`, as "field: message". */
export function fieldProblems(errors) {
  if (!errors || typeof errors !== 'object') return [];
  const lines = [];
  for (const [field, messages] of Object.entries(errors)) {
    for (const message of [].concat(messages)) lines.push(`${field}: ${message}`);
  }
  return lines;
}

/** Writes the status region; kind is "ok" or "error". */
export function showMessage(text, kind = 'ok', details = []) {
  const box = $('message');
  if (!box) return;
  box.dataset.kind = kind;
  const parts = [el('p', { text })];
  if (details.length) parts.push(el('ul', {}, details.map((line) => el('li', { text: line }))));
  box.replaceChildren(...parts);
}

/** An ApiError (or any error) in the status region, with its fields. */
export function showError(error, prefix = '') {
  const text = error && error.message ? error.message : String(error);
  showMessage(prefix ? `${prefix} ${text}` : text, 'error', fieldProblems(error && error.errors));
}

const timeFormat = new Intl.DateTimeFormat('en-GB', { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
const secondsFormat = new Intl.DateTimeFormat('en-GB', {
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
  hourCycle: 'h23',
});
const dayFormat = new Intl.DateTimeFormat('en-GB', { weekday: 'short', day: 'numeric', month: 'short' });
const dateFormat = new Intl.DateTimeFormat('en-GB', {
  weekday: 'short',
  day: 'numeric',
  month: 'short',
  year: 'numeric',
});

export const formatTime = (when) => timeFormat.format(new Date(when));
export const formatSeconds = (when) => secondsFormat.format(new Date(when));
export const formatDay = (when) => dayFormat.format(new Date(when));
export const formatDate = (when) => dateFormat.format(new Date(when));

/** "09:00–10:00" in local time. */
export function timeRange(slot) {
  return `${formatTime(slot.starts_at)}–${formatTime(slot.ends_at)}`;
}

/** "Mon 7 Dec 09:00–10:00" in local time. */
export function slotLabel(slot) {
  return `${formatDay(slot.starts_at)} ${timeRange(slot)}`;
}

/** The browser's time zone, e.g. "Europe/Paris (UTC+01:00)". */
export function zoneName(date = new Date()) {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';
  return `${zone} (UTC${offsetText(date)})`;
}

/** "+01:00" for a local date's offset from UTC. */
export function offsetText(date) {
  const minutes = -date.getTimezoneOffset();
  const sign = minutes < 0 ? '-' : '+';
  const abs = Math.abs(minutes);
  return `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

/** A local date as RFC 3339 with its offset: 2026-12-07T00:00:00+01:00. */
export function localRfc3339(date) {
  const pad = (n) => String(n).padStart(2, '0');
  return (
    `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}` +
    `T${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}${offsetText(date)}`
  );
}

export function addDays(date, days) {
  const next = new Date(date);
  next.setDate(next.getDate() + days); // local midnight stays midnight across a DST change
  return next;
}

/** Local 00:00 of the Monday of a date's week. */
export function mondayOf(date) {
  const day = new Date(date.getFullYear(), date.getMonth(), date.getDate());
  return addDays(day, -((day.getDay() + 6) % 7));
}

/**
 * A whole number typed in an input: null when empty, NaN when not a whole
 * number. A number input holding text it cannot read (e.g. "1e") reads as ''
 * like an empty one; only validity.badInput tells them apart.
 */
export function numberField(input) {
  if (input.validity && input.validity.badInput) return Number.NaN;
  const raw = input.value.trim();
  if (raw === '') return null;
  const value = Number(raw);
  return Number.isInteger(value) ? value : Number.NaN;
}

/**
 * The failure of a create that has no idempotency key (POST /slots, POST
 * /clients). A 4xx is a refusal: nothing was made. A 5xx or a lost answer
 * may have made it, and a blind retry could make it twice.
 */
export function showCreateFailure(error, refused, unknown) {
  // Status 0 other than a network error: refused here before sending (e.g. no key).
  const neverSent = error.name === 'ApiError' && !error.status && error.reason !== 'network';
  if ((error.status >= 400 && error.status < 500) || neverSent) {
    showError(error, refused);
    return;
  }
  // A network error's own text says "try again": the opposite of what is safe here.
  const said = error.status
    ? `The API answered HTTP ${error.status}: ${error.message}`
    : 'No answer came (a network error): the request may or may not have reached the API.';
  showMessage(`${unknown} ${said}`, 'error', fieldProblems(error.errors));
}
