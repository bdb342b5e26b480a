// api.js: the one way to the API. Same origin, JSON, the key from
// sessionStorage as a Bearer token (never in a URL, a cookie, localStorage
// or the browser's console). Errors become ApiError with the API's
// `message`, `reason` and, for `validation_failed`, `errors`.

const KEY_NAME = 'slot-booking-key';

export function getKey() {
  try {
    return sessionStorage.getItem(KEY_NAME);
  } catch {
    return null;
  }
}

// Bumped whenever the key in use changes or goes: a caller that awaited an
// answer compares it to drop results that belong to the previous key.
let generation = 0;

/** The key's generation now; compare after every await. */
export function keyGeneration() {
  return generation;
}

export function setKey(key) {
  if (key !== getKey()) generation += 1;
  sessionStorage.setItem(KEY_NAME, key);
}

export function clearKey() {
  generation += 1;
  try {
    sessionStorage.removeItem(KEY_NAME);
  } catch {
    // Storage refused: nothing was kept either.
  }
}

export class ApiError extends Error {
  constructor(status, message, reason, errors = null, retryAfter = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.reason = reason;
    this.errors = errors;
    this.retryAfter = retryAfter;
  }
}

let unauthorized = null;

/** Called with the ApiError of any 401 (the key stopped working). */
export function onUnauthorized(fn) {
  unauthorized = fn;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// After a 429 every request waits out its Retry-After: the rate is the key's, not one request's.
let pausedUntil = 0;

/** Ids above 2^53 would lose digits as numbers: keep their text instead. */
function reviver(key, value, context) {
  if (
    typeof value === 'number' &&
    !Number.isSafeInteger(value) &&
    /id$/.test(key) &&
    context &&
    typeof context.source === 'string'
  ) {
    return context.source;
  }
  return value;
}

/** The `Link` target of relation `rel` (`next`, `last`) → a same-origin path with its query, or null. */
export function link(headers, rel) {
  const value = headers.get('Link');
  if (!value) return null;
  const wanted = new RegExp(`;\\s*rel\\s*=\\s*"?${rel}"?\\s*(;|$)`, 'i');
  for (const part of value.split(/,(?=\s*<)/)) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part);
    if (!match || !wanted.test(match[2])) continue;
    try {
      const url = new URL(match[1], location.href);
      if (url.origin !== location.origin) return null;
      return url.pathname + url.search;
    } catch {
      return null;
    }
  }
  return null;
}

function retryAfterSeconds(headers) {
  const value = Number.parseInt(headers.get('Retry-After') || '', 10);
  return Number.isFinite(value) && value > 0 ? value : null;
}

function errorFrom(status, data, retryAfter) {
  if (data && typeof data.message === 'string') {
    const errors = data.errors && typeof data.errors === 'object' ? data.errors : null;
    return new ApiError(status, data.message, data.reason || 'unknown', errors, retryAfter);
  }
  return new ApiError(status, `The API answered HTTP ${status} without an explanation.`, 'unknown', null, retryAfter);
}

/** The path without its query, for messages. */
function shortPath(path) {
  return path.split('?')[0];
}

/**
 * One request. `body` is an object (sent as JSON) or a string (sent as is).
 * GETs are retried on 429 and 503 (after `Retry-After`), `retries` times.
 * Resolves to {status, data, headers, next} (data null on a 304); rejects with an ApiError.
 */
export async function request(method, path, { body, headers = {}, retries } = {}) {
  const attempts = retries ?? (method === 'GET' ? 5 : 0);
  const key = getKey();
  if (!key) throw new ApiError(0, 'No API key in use: paste one above and press “Use key”.', 'no_key');
  const sent = { Accept: 'application/json', Authorization: `Bearer ${key}`, ...headers };
  let payload;
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    sent['Content-Type'] = 'application/json';
  }
  for (let attempt = 0; ; attempt += 1) {
    let response;
    let text;
    const wait = pausedUntil - Date.now();
    if (wait > 0) await sleep(wait);
    try {
      response = await fetch(path, {
        method,
        headers: sent,
        body: payload,
        credentials: 'omit',
        cache: 'no-store',
        redirect: 'error',
      });
      text = await response.text();
    } catch {
      throw new ApiError(
        0,
        `Network error: the API could not be reached (${method} ${shortPath(path)}). Check the connection or the server, then try again.`,
        'network',
      );
    }
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text, reviver);
      } catch {
        data = null;
      }
    }
    // 304 answers only a GET sent with If-None-Match (week.poll): no body, nothing changed.
    if (response.ok || response.status === 304) {
      return {
        status: response.status,
        data,
        headers: response.headers,
        next: link(response.headers, 'next'),
        last: link(response.headers, 'last'),
      };
    }
    const retryAfter = retryAfterSeconds(response.headers);
    if (response.status === 429) pausedUntil = Math.max(pausedUntil, Date.now() + Math.min(retryAfter ?? 1, 30) * 1000);
    if ((response.status === 429 || response.status === 503) && attempt < attempts) {
      await sleep(Math.min(retryAfter ?? 1, 30) * 1000);
      continue;
    }
    const error = errorFrom(response.status, data, retryAfter);
    if (response.status === 401 && unauthorized) unauthorized(error);
    throw error;
  }
}

/** A fresh UUID for `Idempotency-Key` (randomUUID needs a secure context). */
export function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** At most `size` tasks at once: run(fn) resolves with fn()'s result. */
export function limiter(size) {
  let active = 0;
  const waiting = [];
  const next = () => {
    if (active >= size || waiting.length === 0) return;
    active += 1;
    const { fn, resolve, reject } = waiting.shift();
    Promise.resolve()
      .then(fn)
      .then(resolve, reject)
      .finally(() => {
        active -= 1;
        next();
      });
  };
  return (fn) =>
    new Promise((resolve, reject) => {
      waiting.push({ fn, resolve, reject });
      next();
    });
}

/** An id as it goes into a path or a JSON body: decimal digits only. */
export function idText(id) {
  const text = String(id);
  if (!/^[1-9][0-9]*$/.test(text)) throw new ApiError(0, `“${text}” is not an id.`, 'client_side');
  return text;
}
