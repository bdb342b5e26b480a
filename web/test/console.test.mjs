// The console and the reference in a real browser: Debian's Chromium,
// headless, driven by playwright-core, against `make dev` at BASE_URL
// (scripts/browser.sh; tests/bin/browser.rs starts the server and makes the
// two clients whose keys arrive in ADMIN_KEY and BOOKER_KEY). Screenshots
// of each step go to ARTIFACTS. Any failed step ends the run with exit 1.

import { chromium } from "playwright-core";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const base = need("BASE_URL");
const adminKey = need("ADMIN_KEY");
const bookerKey = need("BOOKER_KEY");
const artifacts = need("ARTIFACTS");
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

const LIVE_WITHIN_MS = 3000;
const requests = []; // every request either browser context made: { url, authorized }
const messages = []; // every console message of every page
const answered = []; // every URL that was answered (the policy stops the rest)
const problems = []; // CSP violations and uncaught errors, from every page
// The one refusal the policy is there for: Redoc's menu asks a CDN for
// Redocly's logo, and the reference's policy allows no other origin.
const REFUSED_URL = /^https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini\.svg$/;
const REFUSED_ON_PURPOSE = /Loading the image 'https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini\.svg'/;
const createdKeys = []; // keys the console made, searched for in the logs
let shot = 0;

function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function check(condition, what) {
  if (!condition) throw new Error(what);
  console.log(`  ok: ${what}`);
}

async function screenshot(page, name) {
  shot += 1;
  const file = join(artifacts, `${String(shot).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file, fullPage: false });
}

async function newPage(browser) {
  // One zone for the browser and the test's dates alike.
  const context = await browser.newContext({
    timezoneId: "UTC",
    viewport: { width: 1400, height: 1000 },
  });
  const page = await context.newPage();
  page.on("request", (request) =>
    requests.push({ url: request.url(), authorized: "authorization" in request.headers() }),
  );
  page.on("response", (response) => answered.push(response.url()));
  page.on("pageerror", (error) => problems.push(`uncaught: ${error.message}`));
  page.on("console", (message) => {
    const text = message.text();
    messages.push(text);
    if (message.type() === "error" && /Content.Security.Policy/i.test(text) && !REFUSED_ON_PURPOSE.test(text)) {
      problems.push(`CSP on ${page.url()}: ${text}`);
    }
  });
  return { context, page };
}

async function useKey(page, key, role) {
  await page.goto(`${base}/console`);
  await page.fill("#key", key);
  await page.click("#key-use");
  await page.waitForFunction((role) => document.querySelector("#role")?.textContent.trim() === role, role, {
    timeout: 15000,
  });
  check(true, `the console takes the ${role}'s key and shows the role`);
}

/// The API called by the test itself, as another client would: status and body.
async function api(method, path, key, body, headers = {}) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

/// A feed longer than the console's page of 500 events: 600 one-seat
/// slots a year ahead (out of the weeks the test shows), in two batches.
async function longFeed() {
  const start = new Date();
  start.setUTCFullYear(start.getUTCFullYear() + 1);
  start.setUTCHours(0, 0, 0, 0);
  for (let batch = 0; batch < 2; batch += 1) {
    const slots = Array.from({ length: 300 }, (_, i) => {
      const from = new Date(start.getTime() + (batch * 300 + i) * 3600_000);
      return { starts_at: from.toISOString(), ends_at: new Date(from.getTime() + 3600_000).toISOString(), capacity: 1 };
    });
    const { status } = await api("POST", "/slots", adminKey, slots);
    check(status === 201, `600 slots a year ahead: a feed of more than one page (batch ${batch + 1}: ${status})`);
  }
}

/// A Content-Security-Policy as directive → its sources.
function directives(header = "") {
  return Object.fromEntries(
    header
      .split(";")
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...sources]) => [name, sources.join(" ")]),
  );
}

/// axe-core, evaluated from the test (not injected into the page: the CSP
/// allows no inline script): no serious or critical violation.
async function accessible(page, what) {
  await page.evaluate(axeSource);
  const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  const bad = results.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  for (const v of bad) {
    console.error(`  axe ${v.impact}: ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  }
  check(bad.length === 0, `axe-core: no serious or critical violation on ${what}`);
}

/// The Monday after this week's, as YYYY-MM-DD (UTC): a whole week ahead.
function nextMonday() {
  const day = new Date();
  day.setUTCHours(0, 0, 0, 0);
  const toMonday = (8 - day.getUTCDay()) % 7 || 7;
  day.setUTCDate(day.getUTCDate() + toMonday);
  return day.toISOString().slice(0, 10);
}

/// Every (METHOD, path) of openapi.yaml, read from its layout (two-space
/// path keys, four-space method keys under `paths:`).
function operations(yaml) {
  const found = [];
  let path = null;
  let inPaths = false;
  for (const line of yaml.split("\n")) {
    if (/^paths:\s*$/.test(line)) inPaths = true;
    else if (/^\S/.test(line)) inPaths = false;
    if (!inPaths) continue;
    const p = line.match(/^ {2}(\/\S*):\s*$/);
    if (p) path = p[1];
    const m = line.match(/^ {4}(get|post|put|patch|delete):\s*$/);
    if (m && path) found.push([m[1].toUpperCase(), path, null]);
    const s = line.match(/^ {6}summary:\s*(.+?)\s*$/);
    if (s && found.length) found[found.length - 1][2] = s[1].replace(/^"(.*)"$/, "$1");
  }
  return found;
}

async function main() {
  const browser = await chromium.launch({
    executablePath: need("CHROMIUM"),
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  try {
    await console_(browser);
    await docs(browser);
  } finally {
    await browser.close();
  }
  writeFileSync(join(artifacts, "keys-created.txt"), createdKeys.join("\n") + "\n");
  const keys = [adminKey, bookerKey, ...createdKeys];
  for (const { url } of requests) {
    if (keys.some((key) => url.includes(key))) throw new Error(`a key in a request URL: ${url}`);
  }
  check(requests.length > 0, `no key in any of the ${requests.length} request URLs`);
  for (const text of messages) {
    if (keys.some((key) => text.includes(key))) throw new Error(`a key in a console message: ${text}`);
  }
  check(true, `no key in any of the ${messages.length} console messages`);
  // Only the logo the reference's policy refuses was asked of another
  // origin, with no key; nothing from elsewhere was answered.
  const own = (url) => url.startsWith(`${base}/`) || url.startsWith(`blob:${base}/`);
  const elsewhere = requests.filter(({ url }) => !own(url));
  const unexpected = elsewhere.filter(({ url, authorized }) => authorized || !REFUSED_URL.test(url));
  check(unexpected.length === 0, `no request to another origin but the refused logo (${unexpected.map((r) => r.url)})`);
  const foreign = answered.filter((url) => !own(url));
  check(foreign.length === 0, `every answer came from the server itself (others: ${foreign.join(", ")})`);
  if (problems.length) throw new Error(`the pages reported:\n${problems.join("\n")}`);
  check(true, "no Content-Security-Policy violation and no uncaught error on any page");
}

async function console_(browser) {
  console.log("console:");
  const admin = await newPage(browser);
  const a = admin.page;
  const headers = (await a.goto(`${base}/console`)).headers();
  const policy = directives(headers["content-security-policy"]);
  check(
    policy["default-src"] === "'none'" && policy["script-src"] === "'self'" && policy["connect-src"] === "'self'",
    "the console's CSP: nothing by default, scripts and requests from the server only",
  );
  check(
    policy["frame-ancestors"] === "'none'" && policy["require-trusted-types-for"] === "'script'",
    "... no framing, and no HTML sink (Trusted Types)",
  );
  check(headers["referrer-policy"] === "no-referrer", "... and Referrer-Policy: no-referrer");
  await screenshot(a, "console-no-key");
  // The feed's head in one request, however long its history: the first
  // page's `last` link is the second request, never a walk of `next`s.
  await longFeed();
  const feed = []; // the admin page's /events answers: { url, last, count }
  a.on("response", async (r) => {
    if (!r.url().startsWith(`${base}/events`)) return;
    const link = r.headers()["link"] || "";
    const last = /<([^>]*)>;\s*rel="last"/.exec(link);
    const body = await r.json().catch(() => null);
    feed.push({ url: r.url(), last: last && last[1], count: Array.isArray(body) ? body.length : -1 });
  });
  await useKey(a, adminKey, "admin");
  for (let waited = 0; feed.length < 2 && waited < 100; waited += 1) await a.waitForTimeout(100);
  check(feed.length >= 2, `the console followed the feed (${feed.length} answers)`);
  check(feed[0].count === 500 && feed[0].last, "its first page: 500 events of a longer feed, and a last link");
  check(
    feed[1].url === `${base}${feed[0].last}` && feed[1].count < 500,
    `its second request is the feed's head, from the last link (${feed[1].url.replace(base, "")})`,
  );

  // The admin: a batch of slots, two days from next Monday at 09:00 and
  // 13:00, an hour each, four seats.
  const monday = nextMonday();
  await a.fill("#batch-date", monday);
  await a.fill("#batch-days", "2");
  await a.fill("#batch-times", "09:00, 13:00");
  await a.fill("#batch-length", "60");
  await a.fill("#batch-capacity", "4");
  const created = a.waitForResponse((r) => r.url() === `${base}/slots` && r.request().method() === "POST");
  await a.click("#batch-create");
  const answer = await created;
  check(answer.status() === 201, `POST /slots from the batch form: ${answer.status()}`);
  const slots = await answer.json();
  check(Array.isArray(slots) && slots.length === 4, "one POST of the four slots of the pattern");
  await a.click("#week-next");
  for (const slot of slots) {
    await a.waitForSelector(`[data-slot-id="${slot.id}"]`, { timeout: 10000 });
  }
  check(true, "the admin sees the four slots in next week's view");
  await screenshot(a, "admin-week");
  await accessible(a, "the console (admin, week)");

  // The booker, in a second browser context: holds two seats, confirms.
  const booker = await newPage(browser);
  const b = booker.page;
  await useKey(b, bookerKey, "booker");
  check(!(await b.isVisible("#tab-clients")), "a booker sees no clients tab");
  await b.click("#week-next");
  const slot = slots[0];
  await b.click(`[data-slot-id="${slot.id}"]`);
  await b.fill("#hold-quantity", "2");
  const held = b.waitForResponse((r) => r.url().endsWith(`/slots/${slot.id}/hold`));
  await b.click("#hold");
  check((await held).status() === 201, "the booker's hold is made (201)");
  const hold = await (await held).json();
  await b.waitForSelector(`#my-holds [data-hold-id="${hold.id}"][data-status="held"]`, { timeout: 10000 });
  await screenshot(b, "booker-held");
  await accessible(b, "the console (booker, a hold)");

  // The admin's view follows the feed: count its availability reloads.
  let reloads = 0;
  a.on("request", (r) => {
    if (r.url().includes("/slots/availability")) reloads += 1;
  });
  const confirmed = b.waitForResponse((r) => r.url().endsWith(`/holds/${hold.id}/confirm`));
  await b.click(`#my-holds [data-hold-id="${hold.id}"] .hold-confirm`);
  check((await confirmed).status() === 200, "the booker confirms (200)");
  const since = Date.now();
  // Waited for longer than the target, so that a late update is measured.
  await a.waitForFunction(
    (id) => document.querySelector(`[data-slot-id="${id}"]`)?.dataset.confirmed === "2",
    slot.id,
    { timeout: 4 * LIVE_WITHIN_MS },
  );
  const took = Date.now() - since;
  check(took <= LIVE_WITHIN_MS, `the admin's view shows 2 confirmed ${took} ms after the confirm's answer`);
  check(reloads === 0, "... from the feed, without reloading the availability list");
  await b.waitForSelector(`#my-holds [data-hold-id="${hold.id}"][data-status="confirmed"]`, { timeout: 10000 });
  await screenshot(b, "booker-confirmed");
  await screenshot(a, "admin-live");

  // A refused hold: three seats where two are left; the API's message shows.
  await b.fill("#hold-quantity", "3");
  const refused = b.waitForResponse((r) => r.url().endsWith(`/slots/${slot.id}/hold`));
  await b.click("#hold");
  const refusal = await refused;
  const body = await refusal.json();
  check(refusal.status() === 409, `the hold of 3 of 2 seats is refused (${refusal.status()} ${body.reason})`);
  await b.waitForFunction(
    (message) => document.querySelector("#message")?.textContent.includes(message),
    body.message,
    { timeout: 5000 },
  );
  check(true, `the page shows the API's message: "${body.message}"`);
  await screenshot(b, "booker-refused");

  // Another client's confirm reaches the booker's week (its feed carries
  // only its own holds' events: the week is re-read every few seconds).
  const other = slots[1];
  const otherHold = await api("POST", `/slots/${other.id}/hold`, adminKey, { quantity: 3 }, {
    "Idempotency-Key": crypto.randomUUID(),
  });
  check(otherHold.status === 201, `another client holds 3 seats of a slot the booker sees (${otherHold.status})`);
  const otherConfirm = await api("POST", `/holds/${otherHold.body.id}/confirm`, adminKey, {});
  check(otherConfirm.status === 200, `... and confirms them (${otherConfirm.status})`);
  await b.waitForFunction(
    (id) => document.querySelector(`[data-slot-id="${id}"]`)?.dataset.confirmed === "3",
    other.id,
    { timeout: 15000 },
  );
  check(true, "the booker's week shows the other client's 3 confirmed seats within its refresh");
  await screenshot(b, "booker-sees-others");

  // The admin's clients page: a new key, shown once.
  await a.click("#tab-clients");
  await a.waitForSelector("#client-list [data-client-id]", { timeout: 10000 });
  await a.fill("#client-name", `made-in-the-console-${Date.now()}`);
  await a.selectOption("#client-role", "booker");
  const made = a.waitForResponse((r) => r.url() === `${base}/clients` && r.request().method() === "POST");
  await a.click("#client-create");
  const client = await (await made).json();
  check(typeof client.key === "string", "the admin creates a client");
  createdKeys.push(client.key);
  check((await a.inputValue("#client-new-key")) === client.key, "... and its key is shown");
  await screenshot(a, "admin-clients");
  await accessible(a, "the console (admin, clients)");

  // A name is data, never markup.
  const hostile = `<img src=x onerror=document.title='owned'> ${Date.now()}`;
  await a.fill("#client-name", hostile);
  const named = a.waitForResponse((r) => r.url() === `${base}/clients` && r.request().method() === "POST");
  await a.click("#client-create");
  const odd = await (await named).json();
  createdKeys.push(odd.key);
  const row = `#client-list [data-client-id="${odd.id}"]`;
  await a.waitForSelector(row, { timeout: 10000 });
  check(
    (await a.textContent(row)).includes(hostile) && (await a.$$("#client-list img")).length === 0,
    "a client named like markup shows as text",
  );

  await webhooks(a, b);

  // The key lives in the tab's sessionStorage, nowhere else.
  for (const [who, { context, page }, key] of [
    ["admin", admin, adminKey],
    ["booker", booker, bookerKey],
  ]) {
    check((await context.cookies()).length === 0, `no cookie (${who})`);
    const stored = await page.evaluate(() => [sessionStorage.getItem("slot-booking-key"), JSON.stringify(localStorage)]);
    check(stored[0] === key && !stored[1].includes(key), `the key is in sessionStorage, not localStorage (${who})`);
  }
  await admin.context.close();
  await booker.context.close();
}

/// The webhooks page (SPEC §23.7): the admin makes a subscription to a
/// receiver on 127.0.0.1 (make dev allows http and private addresses; it
/// need not answer to be made), sees its secret once, disables, enables,
/// rotates and deletes it. Each secret joins the keys no URL, console
/// message or log line may hold.
async function webhooks(a, b) {
  await a.click("#tab-webhooks");
  check(await a.isVisible("#webhook-form"), "the webhooks page opens");
  const described = `<b>made in the console</b> ${Date.now()}`;
  await a.fill("#webhook-url", "http://127.0.0.1:9/console-test-hook");
  await a.fill("#webhook-types", "hold.*, waitlist.offered");
  await a.fill("#webhook-description", described);
  const made = a.waitForResponse((r) => r.url() === `${base}/webhooks` && r.request().method() === "POST");
  await a.click("#webhook-create");
  const answer = await made;
  const hook = await answer.json();
  check(answer.status() === 201 && typeof hook.secret === "string", "the admin creates a webhook on 127.0.0.1 (201)");
  createdKeys.push(hook.secret);
  check((await a.inputValue("#webhook-secret")) === hook.secret, "... and its secret is shown");
  const row = `#webhook-list [data-webhook-id="${hook.id}"]`;
  await a.waitForSelector(row, { timeout: 10000 });
  check(
    (await a.textContent(row)).includes(described) && (await a.$$("#webhook-list b")).length === 0,
    "the webhook is listed, its description as text",
  );
  check(
    (await a.textContent(row)).includes("hold.*, waitlist.offered"),
    "... with its event types",
  );
  await screenshot(a, "admin-webhooks");
  await accessible(a, "the console (admin, webhooks)");
  const read = await api("GET", `/webhooks/${hook.id}`, adminKey);
  check(read.status === 200 && !("secret" in read.body), "the API shows the secret no more");

  await a.click(`${row} .webhook-toggle`);
  await a.waitForSelector(`${row}[data-status="disabled"]`, { timeout: 10000 });
  check((await a.textContent(`${row} .webhook-status`)).includes("by its client"), "disabled from the console");
  await a.click(`${row} .webhook-toggle`);
  await a.waitForSelector(`${row}[data-status="enabled"]`, { timeout: 10000 });
  check(true, "... and enabled again");

  const rotating = a.waitForResponse((r) => r.url() === `${base}/webhooks/${hook.id}/secret`);
  await a.click(`${row} .webhook-rotate`);
  const rotated = await (await rotating).json();
  createdKeys.push(rotated.secret);
  check(
    rotated.secret !== hook.secret && (await a.inputValue("#webhook-secret")) === rotated.secret,
    "the secret is rotated and the new one shown",
  );

  // A booker's page lists only its own: none of the admin's.
  const listed = b.waitForResponse((r) => r.url() === `${base}/webhooks` && r.request().method() === "GET");
  await b.click("#tab-webhooks");
  check((await listed).status() === 200, "a booker's webhooks page lists its own");
  await b.waitForSelector("#webhook-empty:not([hidden])", { timeout: 10000 });
  check((await b.$$("#webhook-list [data-webhook-id]")).length === 0, "a booker sees none of the admin's webhooks");
  await accessible(b, "the console (booker, webhooks)");

  const deleting = a.waitForResponse(
    (r) => r.url() === `${base}/webhooks/${hook.id}` && r.request().method() === "DELETE",
  );
  await a.click(`${row} .webhook-delete`);
  check((await deleting).status() === 200, "the webhook is deleted (200)");
  await a.waitForSelector(row, { state: "detached", timeout: 10000 });
  check(await a.isHidden("#webhook-secret-box"), "... gone from the list, its secret no longer shown");
  check((await api("GET", `/webhooks/${hook.id}`, adminKey)).status === 404, "... and from the API");
  await a.click("#tab-week");
  await b.click("#tab-week");
}

async function docs(browser) {
  console.log("reference:");
  const { context, page } = await newPage(browser);
  const response = await page.goto(`${base}/docs`);
  const policy = directives(response.headers()["content-security-policy"]);
  check(
    policy["default-src"] === "'none'" && policy["script-src"] === "'self'" && policy["connect-src"] === "'self'",
    "the reference's CSP: no inline script, nothing from another origin",
  );
  await page.waitForSelector("html[data-rendered=true]", { timeout: 30000 });
  const yaml = await (await page.request.get(`${base}/openapi.yaml`)).text();
  const wanted = operations(yaml);
  check(wanted.length > 20, `openapi.yaml lists ${wanted.length} operations`);
  const text = await page.evaluate(() => document.body.innerText);
  // Each operation as Redoc draws it: its summary as a heading, its path
  // beside its method.
  const missing = wanted.filter(([, path, summary]) => !text.includes(path) || !text.includes(summary));
  check(
    missing.length === 0,
    `the reference shows every operation of openapi.yaml (missing: ${missing.map((m) => m.join(" "))})`,
  );
  await screenshot(page, "reference");
  await accessible(page, "the reference");
  await context.close();
}

main().then(
  () => console.log("browser tests: passed"),
  (error) => {
    console.error(`browser tests: FAILED: ${error.message}`);
    process.exit(1);
  },
);
