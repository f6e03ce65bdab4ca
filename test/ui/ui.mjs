// Drives Cairn's admin page (/_cairn/ui) in headless Chromium with
// playwright-core. Run by test/e2e/ui_test.go, which starts a 3-node
// cluster and talks with this script in lines:
//
//   script → Go   ALIVE3                 logged in, three nodes alive in the page
//   Go → script   KILLED <id> DRAIN <id>  node <id> was SIGKILLed; drain the other one
//   script → Go   DEAD <ms>              the killed node showed dead, <ms> after KILLED
//   script → Go   DRAINED <id>           drained through the page (confirmation accepted)
//   Go → script   OK                     the API says it is draining
//   script → Go   CLIENT?                a client node, please
//   Go → script   CLIENT <id>            node <id> joined as a client and served two reads
//   script → Go   DONE                   every check passed
//
// Any failure prints "FAIL <why>" and exits 1. Other lines are log.
//
// Environment: CAIRN_UI_URL (a node's base URL), CAIRN_UI_KEY (the admin
// key), CHROMIUM (default /usr/bin/chromium), CAIRN_UI_SCREENSHOTS (a
// directory: save admin-ui-desktop.png at 1280×800 and admin-ui-phone.png
// at 390 px once the charts have CAIRN_UI_SCREENSHOT_WAIT seconds of data,
// default 40).
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const base = process.env.CAIRN_UI_URL;
const key = process.env.CAIRN_UI_KEY;
const shots = process.env.CAIRN_UI_SCREENSHOTS || '';
const shotWait = Number(process.env.CAIRN_UI_SCREENSHOT_WAIT || 40);
if (!base || !key) {
  console.log('FAIL CAIRN_UI_URL and CAIRN_UI_KEY are required');
  process.exit(1);
}

const lines = createInterface({ input: process.stdin });
const queue = [];
let waiter = null;
lines.on('line', (l) => { if (waiter) { const w = waiter; waiter = null; w(l); } else queue.push(l); });
function readLine(timeoutMs) {
  if (queue.length) return Promise.resolve(queue.shift());
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => { waiter = null; reject(new Error('no answer from the Go side in ' + timeoutMs + ' ms')); }, timeoutMs);
    waiter = (l) => { clearTimeout(t); resolve(l); };
  });
}
const say = (s) => console.log(s);

const profile = mkdtempSync(join(tmpdir(), 'cairn-ui-chromium-'));
let browser;
const seenURLs = [];

function checkNoKey(page, where) {
  if (page.url().includes(key)) throw new Error('the admin key is in the page URL ' + where);
  for (const u of seenURLs) if (u.includes(key)) throw new Error('the admin key was in a request URL: ' + u.replace(key, '<KEY>'));
}

async function main() {
  // A fresh profile directory (launchPersistentContext passes it as --user-data-dir).
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage();
  page.on('request', (r) => seenURLs.push(r.url()));
  const consoleErrors = [];
  page.on('console', (m) => { if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));

  // The page answers with a strict CSP.
  const resp = await page.goto(base + '/_cairn/ui');
  const csp = resp.headers()['content-security-policy'] || '';
  if (!csp.includes("default-src 'none'") || !csp.includes("script-src 'self'")) throw new Error('weak or missing CSP: ' + csp);

  // A wrong key is refused in plain words.
  await page.fill('#key', 'not-the-admin-key-0123456789');
  await page.click('#login button[type=submit]');
  await page.waitForSelector('#login-error:not([hidden])', { timeout: 5000 });
  const refused = await page.textContent('#login-error');
  if (!/refused/i.test(refused)) throw new Error('a wrong key got: ' + refused);

  // Log in through the form.
  await page.fill('#key', key);
  await page.click('#login button[type=submit]');
  await page.waitForSelector('#app:not([hidden])', { timeout: 10000 });
  checkNoKey(page, 'after login');
  // The key is in the script's memory only: no storage of the origin
  // (which a bucket's HTML file could read) holds it.
  const stored = await page.evaluate((k) => [sessionStorage, localStorage].some((st) =>
    Object.keys(st).some((n) => (st.getItem(n) || '').includes(k))), key);
  if (stored) throw new Error('the key is in web storage');

  // Three nodes alive.
  await page.waitForFunction(() => document.querySelectorAll('#nodes tr[data-liveness="alive"]').length === 3, null, { timeout: 30000 });
  say('saw three nodes alive');
  // Every node's version: its release and the log versions (issue 22).
  await page.waitForFunction(() => {
    const cells = document.querySelectorAll('#nodes td[data-label="Version"]');
    return cells.length === 3 && [...cells].every((c) => /reads log \d+ · cluster log \d+/.test(c.textContent) && /\d+\.\d+/.test(c.textContent));
  }, null, { timeout: 10000 });

  if (shots) {
    say('collecting ' + shotWait + ' s of history for the screenshots');
    await page.waitForTimeout(shotWait * 1000);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: join(shots, 'admin-ui-desktop.png') });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(2500); // a refresh redraws the charts at the new width
    await page.screenshot({ path: join(shots, 'admin-ui-phone.png') });
    await page.screenshot({ path: join(shots, 'admin-ui-phone-full.png'), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 800 });
    say('screenshots saved in ' + shots);
  }
  say('ALIVE3');

  // Go kills a node; the page shows it dead within 5 s.
  const killed = (await readLine(60000)).trim().split(/\s+/);
  if (killed[0] !== 'KILLED' || killed[2] !== 'DRAIN') throw new Error('unexpected line from Go: ' + killed.join(' '));
  const deadID = killed[1], drainID = killed[3];
  const t0 = Date.now();
  await page.waitForSelector(`#nodes tr[data-node-id="${deadID}"][data-liveness="dead"]`, { timeout: 5000 });
  say('DEAD ' + (Date.now() - t0));

  // Drain a node through the page, accepting the confirmation.
  await page.click(`#nodes button[data-action="drain"][data-node="${drainID}"]`);
  await page.waitForSelector('#confirm[open]', { timeout: 5000 });
  const text = await page.textContent('#confirm-text');
  if (!text.includes(drainID)) throw new Error('the confirmation does not name the node: ' + text);
  await page.click('#confirm-ok');
  await page.waitForSelector(`#nodes tr[data-node-id="${drainID}"][data-state="draining"]`, { timeout: 10000 });
  say('DRAINED ' + drainID);
  const ok = (await readLine(30000)).trim();
  if (ok !== 'OK') throw new Error('Go did not confirm the drain: ' + ok);

  // The sections render data.
  const charts = await page.$$eval('canvas', (cs) => cs.length);
  if (charts !== 3) throw new Error('want 3 charts, have ' + charts);
  await page.waitForSelector('#buckets tr[data-bucket]', { timeout: 10000 });
  // The Trash column: web keeps 7 days and holds the file Go overwrote;
  // backups has no trash.
  await page.waitForFunction(() => {
    const c = document.querySelector('#buckets tr[data-bucket="web"] td[data-label="Trash"]');
    return c && /^1 file, .*kept 7d$/.test(c.textContent);
  }, null, { timeout: 10000 }).catch(async () => {
    throw new Error('the Trash column of web: ' + await page.textContent('#buckets tr[data-bucket="web"]'));
  });
  const noTrash = await page.textContent('#buckets tr[data-bucket="backups"] td[data-label="Trash"]');
  if (noTrash.trim() !== 'off') throw new Error('the Trash column of a bucket without a trash: ' + noTrash);
  await page.waitForSelector('#logs tbody tr', { timeout: 10000 });
  if (process.env.CAIRN_UI_MOUNT) {
    // The Mounts section: node 1's mount, its FUSE calls and its queue.
    const m = `#mounts .mount[data-mount="${process.env.CAIRN_UI_MOUNT}"]`;
    for (const op of ['lookup', 'create', 'write', 'read']) {
      await page.waitForSelector(`${m} tr[data-op="${op}"]`, { timeout: 10000 });
    }
    const line = await page.textContent(m);
    if (!/published/.test(line) || !/queued/.test(line) || !/zero-copy/.test(line)) throw new Error('the mount shows no write-back queue: ' + line);
    // The File locks section: the write lock Go holds through the mount.
    await page.waitForSelector('#locks tr[data-ino]', { timeout: 10000 });
    const lk = await page.textContent('#locks tbody');
    if (!/through-the-mount\.txt/.test(lk) || !/write/.test(lk) || !/held/.test(lk) || !/whole file/.test(lk)) throw new Error('the File locks section: ' + lk);
    // This node's lock counters: the lock above was granted through it.
    const lst = await page.textContent('#locks-stats');
    if (!/^This node since start: [1-9][0-9,]* granted \([0-9,]+ here, under its lock rights\), .* lock commits, [0-9,]+ rights recalled, [0-9,]+ given back, .* locks on [1-9][0-9,]* files now, lock rights of [0-9,]+ files$/.test(lst)) throw new Error('the File locks counters: ' + lst);
    // The Directory owners section: node 1 owns the mount's root and the
    // directory Go made through it; the log's count says so too.
    await page.waitForSelector('#owners tr[data-ino]', { timeout: 10000 });
    const od = await page.textContent('#owners tbody');
    if (!/site\/owned-here/.test(od)) throw new Error('the Directory owners section lists: ' + od);
    const ostats = await page.textContent('#owners-stats');
    const owned = /owns (\d+) directories/.exec(ostats);
    if (!owned || Number(owned[1]) < 2 || !/\d+ claims?/.test(ostats)) throw new Error('the Directory owners counters: ' + ostats);
    await page.waitForFunction(() => [...document.querySelectorAll('#owner-nodes tr[data-node-id]')].some((r) =>
      /this node/.test(r.textContent) && Number(r.dataset.dirs) >= 2), null, { timeout: 10000 }).catch(async () => {
      throw new Error('the Directory owners count by node: ' + await page.textContent('#owner-nodes tbody'));
    });
  } else {
    if (!(await page.$eval('#mounts-card', (c) => c.hidden))) throw new Error('the Mounts section shows without a mount');
    // The Directory owners section: nothing owned, every member at 0.
    await page.waitForFunction(() => [...document.querySelectorAll('#owner-nodes tr[data-node-id]')].filter((r) =>
      r.dataset.dirs === '0').length === 3, null, { timeout: 10000 });
    if (await page.$eval('#owners-none', (p) => p.hidden)) throw new Error('the Directory owners section lists a directory without a mount');
  }
  const owners = await page.$$eval('#owner-nodes tr[data-node-id]', (rs) => rs.length);
  if (owners !== 3) throw new Error('the Directory owners section lists ' + owners + ' nodes, want 3');

  // Cancel really cancels: activate, then cancel, and the node stays draining.
  await page.click(`#nodes button[data-action="activate"][data-node="${drainID}"]`);
  await page.waitForSelector('#confirm[open]', { timeout: 5000 });
  await page.click('#confirm-cancel');
  await page.waitForTimeout(2500);
  if (!(await page.$(`#nodes tr[data-node-id="${drainID}"][data-state="draining"]`))) throw new Error('cancel did not cancel');

  // No sideways scrolling at desktop or phone width.
  for (const [w, h] of [[1280, 800], [390, 844]]) {
    await page.setViewportSize({ width: w, height: h });
    await page.waitForTimeout(2500); // a refresh at this width
    const [sw, iw] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    if (sw > iw) throw new Error(`the page scrolls sideways at ${w} px: ${sw} > ${iw}`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });

  // Keyboard focus on an action button survives the 2 s refresh.
  await page.focus(`#nodes button[data-action="activate"][data-node="${drainID}"]`);
  await page.waitForTimeout(2600);
  const focused = await page.evaluate(() => document.activeElement ? document.activeElement.getAttribute('data-action') : null);
  if (focused !== 'activate') throw new Error('keyboard focus lost by a refresh: now on ' + focused);

  // A client node joins: its row says client, offers no Drain, and its
  // Blobs cell shows its disk cache with the hits of the reads made
  // through it.
  say('CLIENT?');
  const cl = await readLine(90000);
  if (!cl.startsWith('CLIENT ')) throw new Error('the Go side answered ' + cl);
  const clientID = cl.slice('CLIENT '.length);
  try {
    await page.waitForFunction((id) => {
      const r = document.querySelector(`#nodes tr[data-node-id="${id}"][data-state="client"]`);
      return r && /\d+ cached/.test(r.textContent) && /[1-9]\d* hits/.test(r.textContent);
    }, clientID, { timeout: 30000 });
  } catch (e) {
    throw new Error('no client row with its cache: ' + await page.textContent('#nodes tbody'));
  }
  if (await page.$(`#nodes button[data-action="drain"][data-node="${clientID}"]`)) throw new Error('a client node offers Drain');
  say('saw the client node and its disk cache');

  // A bucket's HTML file on the same origin, opened in the same tab,
  // cannot read the key.
  const probe = '<!doctype html><title>x</title><script>document.title = "KEYS:" + ' +
    'JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage)]);</script>';
  const put = await fetch(base + '/web/probe.html', { method: 'PUT', body: probe,
    headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'text/html' } });
  if (put.status !== 201 && put.status !== 200) throw new Error('PUT probe.html: ' + put.status);
  await page.goto(base + '/web/probe.html');
  await page.waitForFunction(() => document.title.startsWith('KEYS:'), null, { timeout: 5000 });
  if ((await page.title()).includes(key)) throw new Error('a bucket page read the admin key');
  say('a bucket page on the same origin could not read the key');
  checkNoKey(page, 'at the end');
  if (consoleErrors.length) throw new Error('console errors: ' + [...new Set(consoleErrors)].join(' | ').slice(0, 1000));
  say('DONE');
}

main().then(async () => {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
  process.exit(0);
}, async (e) => {
  say('FAIL ' + (e && e.message ? e.message.split('\n')[0] : e));
  if (browser) await browser.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
  process.exit(1);
});
