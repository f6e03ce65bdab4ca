// Cairn admin page. Plain JavaScript, no build step, no external resource.
// The admin key lives in this script's memory only (not in sessionStorage
// or localStorage, which any page of the same origin — a bucket's HTML
// file — could read; a reload asks for it again) and goes in the
// Authorization header of every data call; it is never put in a URL.
'use strict';

(function () {
  let adminKey = '';      // memory only: see above
  const REFRESH_MS = 2000;      // status, history, logs
  const SLOW_REFRESH_MS = 15000; // keys, rules, bucket usage
  const API_TIMEOUT_MS = 15000;  // a black-holed node must not freeze the page

  const $ = (sel) => document.querySelector(sel);
  let timer = null;
  let slowAt = 0;
  let last = {};          // the last answers, by endpoint
  let busy = false;

  // ---- helpers -----------------------------------------------------------

  // el builds an element; text is set with textContent (never HTML).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k === 'width') e.style.width = v; // CSSOM, allowed by the CSP (style attributes are not)
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined || k === false) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }

  function bytes(n) {
    if (n === undefined || n === null) return '–';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    let v = Number(n);
    while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(v < 10 ? 1 : 0)) + ' ' + u[i];
  }
  const num = (n) => (n === undefined || n === null) ? '–' : Number(n).toLocaleString('en-US');
  function ago(t) {
    if (!t) return 'never';
    const s = Math.round((Date.now() - new Date(t).getTime()) / 1000);
    if (s < 0) return 'in ' + dur(-s);
    return dur(s) + ' ago';
  }
  function dur(s) {
    if (s < 90) return s + ' s';
    if (s < 5400) return Math.round(s / 60) + ' min';
    if (s < 172800) return Math.round(s / 3600) + ' h';
    return Math.round(s / 86400) + ' days';
  }
  function clock(t) {
    const d = new Date(t);
    return d.toLocaleTimeString('en-GB', { hour12: false });
  }

  // ApiError carries a message meant for a person.
  class ApiError extends Error {
    constructor(msg, status) { super(msg); this.status = status; }
  }

  // api calls an admin endpoint with the key in the Authorization header.
  async function api(method, path, body) {
    const key = adminKey;
    if (!key) throw new ApiError('You are logged out.', 401);
    const opts = { method, headers: { 'Authorization': 'Bearer ' + key }, cache: 'no-store', credentials: 'omit',
      signal: AbortSignal.timeout(API_TIMEOUT_MS) };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, opts);
    } catch (e) {
      throw new ApiError('Cannot reach this node: it may be down, restarting or unreachable from your browser.', 0);
    }
    let data = null;
    const text = await resp.text();
    if (text) { try { data = JSON.parse(text); } catch (e) { data = null; } }
    if (!resp.ok) throw new ApiError(plain(resp.status, data, text), resp.status);
    return data;
  }

  // plain turns an API error answer into words for the operator.
  function plain(status, data, text) {
    const msg = data && data.error ? data.error : (text || '').trim().slice(0, 300);
    switch (status) {
      case 401: return 'The admin key was refused. Log in again with the cluster\'s admin key.';
      case 403: return 'This key is not the admin key: it may not manage the cluster.';
      case 404: return 'Not found: ' + (msg || 'no such thing on this node') + '.';
      case 409: return 'Refused: ' + msg;
      case 501: return msg || 'This node does not support that.';
      case 503: return 'The cluster cannot do this right now: ' + (msg || 'no leader or no quorum') + '. Try again in a few seconds.';
    }
    if (status >= 500) return 'The node failed to do this (' + status + '): ' + (msg || 'see its log') + '.';
    return msg ? msg.charAt(0).toUpperCase() + msg.slice(1) : 'The request failed with status ' + status + '.';
  }

  function banner(msg) {
    const b = $('#banner');
    b.textContent = msg || '';
    b.hidden = !msg;
  }

  // ---- login -------------------------------------------------------------

  function showLogin(msg) {
    stop();
    $('#app').hidden = true;
    $('#logout').hidden = true;
    $('#login-view').hidden = false;
    $('#refreshed').textContent = '';
    const le = $('#login-error');
    le.textContent = msg || '';
    le.hidden = !msg;
    $('#key').focus();
  }

  async function login(ev) {
    ev.preventDefault(); // never submit the form: the key must not reach a URL
    const input = $('#key');
    const k = input.value.trim();
    if (!k) return;
    adminKey = k;
    input.value = '';
    try {
      await api('GET', '/_cairn/status');
    } catch (e) {
      adminKey = '';
      showLogin(e.status === 401 || e.status === 403 ? 'That key was refused: use the cluster\'s admin key.' : e.message);
      return;
    }
    showApp();
  }

  function logout() {
    adminKey = '';
    showLogin('Logged out.');
  }

  function showApp() {
    $('#login-view').hidden = true;
    $('#app').hidden = false;
    $('#logout').hidden = false;
    slowAt = 0;
    refresh();
  }

  function stop() {
    if (timer) clearTimeout(timer);
    timer = null;
  }

  // ---- refresh -----------------------------------------------------------

  async function refresh() {
    stop();
    if (busy) return;
    busy = true;
    const slow = Date.now() >= slowAt;
    const calls = {
      status: api('GET', '/_cairn/status'),
      history: api('GET', '/_cairn/history'),
      logs: api('GET', '/_cairn/logs'),
      buckets: api('GET', '/_cairn/buckets'),
      mounts: api('GET', '/_cairn/mounts'),
    };
    if (slow) {
      refreshUsage();
      calls.keys = api('GET', '/_cairn/keys');
      calls.rules = api('GET', '/_cairn/rules');
      slowAt = Date.now() + SLOW_REFRESH_MS;
    }
    const names = Object.keys(calls);
    const res = await Promise.allSettled(Object.values(calls));
    busy = false;
    const errs = [];
    let unauthorized = false;
    res.forEach((r, i) => {
      if (r.status === 'fulfilled') last[names[i]] = r.value;
      else {
        if (r.reason && (r.reason.status === 401)) unauthorized = true;
        errs.push(r.reason ? r.reason.message : 'unknown error');
      }
    });
    if (unauthorized) {
      adminKey = '';
      showLogin('The admin key was refused (it may have changed). Log in again.');
      return;
    }
    if (res[0].status === 'rejected') last.status = null;
    banner([...new Set(errs)].join(' '));
    render();
    $('#refreshed').textContent = (errs.length ? 'Refresh failed ' : 'Updated ') + clock(Date.now());
    if (!$('#app').hidden) timer = setTimeout(refresh, REFRESH_MS);
  }

  // refreshUsage counts the buckets' files and bytes apart from the 2 s
  // refresh: a count of a large store may take seconds.
  let usageBusy = false;
  async function refreshUsage() {
    if (usageBusy) return;
    usageBusy = true;
    try {
      last.usage = await api('GET', '/_cairn/usage');
      if (!$('#app').hidden) renderBuckets(last.buckets, last.usage, last.status);
    } catch (e) {
      // the next slow refresh tries again; the 2 s refresh shows errors
    } finally {
      usageBusy = false;
    }
  }

  function render() {
    const a = document.activeElement;
    const keep = a && a.dataset && a.dataset.action ? [a.dataset.action, a.dataset.node] : null;
    renderAll();
    if (keep) {
      const b = document.querySelector('button[data-action="' + CSS.escape(keep[0]) + '"][data-node="' + CSS.escape(keep[1] || '') + '"]');
      if (b) b.focus();
    }
  }

  function renderAll() {
    renderSummary(last.status);
    renderNodes(last.status);
    renderCharts(last.history);
    renderBuckets(last.buckets, last.usage, last.status);
    renderMaintenance(last.status);
    renderMounts(last.mounts);
    renderLocks(last.status);
    renderOwners(last.status);
    renderLogs(last.logs);
    renderKeys(last.keys);
    renderRules(last.rules);
  }

  function stat(label, value, cls) {
    return el('div', { class: 'stat ' + (cls || '') }, el('div', { class: 'label', text: label }), el('div', { class: 'value', text: value }));
  }

  function renderSummary(s) {
    const box = $('#summary');
    box.replaceChildren();
    if (!s) { box.append(stat('Cluster', 'unreachable', 'bad')); return; }
    const nodes = s.nodes || [];
    const alive = nodes.filter((n) => n.liveness === 'alive').length;
    const leader = nodes.find((n) => n.leader);
    const self = nodes.find((n) => n.self);
    box.append(
      stat('Nodes alive', alive + ' of ' + nodes.length, alive < nodes.length ? 'bad' : ''),
      stat('Leader', s.cluster ? (leader ? 'node ' + shortID(leader.id) : 'none') : 'single node', s.cluster && !leader ? 'bad' : ''),
      stat('Under-replicated blobs', num(s.under_replicated), s.under_replicated > 0 ? 'warn' : ''),
      stat('Requests/s here', rateNow()),
      stat('Raft term', s.cluster ? num(s.term) : '–'),
      stat('This page is served by', self ? 'node ' + shortID(self.id) : 'this node'),
    );
  }

  function rateNow() {
    const pts = last.history && last.history.points;
    return pts && pts.length ? fmtNum(pts[pts.length - 1].rate) : '–';
  }

  // Node IDs are 63-bit decimal strings: shown whole in the table, shortened in prose.
  function shortID(id) { return String(id).length > 8 ? '…' + String(id).slice(-6) : String(id); }

  function badge(v) { return el('span', { class: 'badge b-' + v, text: v }); }

  function td(label, ...kids) { return el('td', { 'data-label': label }, ...kids); }

  function renderNodes(s) {
    const tb = $('#nodes tbody');
    tb.replaceChildren();
    $('#nodes-note').textContent = '';
    if (!s) return;
    const nodes = s.nodes || [];
    $('#nodes-note').textContent = s.cluster ? 'as node ' + shortID((nodes.find((n) => n.self) || {}).id) + ' sees them' : 'single node (not a cluster)';
    for (const n of nodes) {
      const rep = n.report;
      const d = rep ? rep.disk : null;
      let disk = '–';
      if (d) {
        const total = d.total_bytes || (d.used_bytes + d.free_bytes);
        const usedFS = total ? total - d.free_bytes : 0;
        const pct = total ? Math.round(100 * usedFS / total) : 0;
        disk = el('div', {}, bytes(d.used_bytes) + ' / ' + bytes(d.free_bytes) + ' free',
          el('div', { class: 'bar' + (pct > 90 ? ' hot' : ''), title: 'data disk ' + pct + '% full' }, el('span', { width: pct + '%' })),
          d.read_only ? el('div', { class: 'error', text: 'READ-ONLY after a disk error' }) : null);
      }
      let repair = '–';
      if (rep && rep.repair) {
        const r = rep.repair;
        repair = el('div', {}, r.active ? 'running' : 'idle', ' · ', num(r.pending) + ' pending',
          el('div', { class: 'muted small', text: 'pulled ' + num(r.pulled) + ' · pushed ' + num(r.pushed) + ' · dropped ' + num(r.dropped) }));
      }
      let scrub = '–';
      if (rep && rep.scrub) {
        const sc = rep.scrub;
        if (sc.running) {
          const pct = sc.bytes_total ? Math.min(100, Math.round(100 * sc.bytes_checked / sc.bytes_total)) : 0;
          scrub = el('div', {}, 'running ' + pct + '%', el('div', { class: 'bar' }, el('span', { width: pct + '%' })));
        } else {
          scrub = el('div', {}, sc.last_completed ? 'last ' + ago(sc.last_completed) : 'never run yet', sc.corrupt_found || sc.corrupt_copies ? el('div', { class: 'error', text: num(sc.corrupt_copies) + ' corrupt copies' }) : null);
        }
      }
      let blobs = el('span', { class: 'num', text: rep ? num(rep.disk.blobs) : '–' });
      if (rep && rep.cache && rep.cache.on_disk) {
        // A client node: the blobs it keeps are its disk cache's.
        const c = rep.cache;
        blobs = el('div', { class: 'cache' }, el('span', { class: 'num', text: num(c.entries) + ' cached' }),
          el('div', { class: 'muted small', text: bytes(c.bytes) + ' of ' + bytes(c.max_bytes) + ' · ' + num(c.hits) + ' hits · ' +
            num(c.misses) + ' misses · ' + num(c.evictions) + ' evicted' +
            (c.not_kept ? ' · ' + num(c.not_kept) + ' not kept (full)' : '') + (c.corrupt ? ' · ' + num(c.corrupt) + ' refused' : '') }));
      }
      const actions = el('div', { class: 'cell-actions' });
      if (s.cluster && n.state !== 'unknown' && n.state !== 'client') {
        if (n.state === 'draining') {
          actions.append(el('button', { type: 'button', class: 'small', 'data-action': 'activate', 'data-node': n.id, text: 'Activate', onclick: () => setState(n, 'activate') }));
        } else {
          actions.append(el('button', { type: 'button', class: 'small', 'data-action': 'drain', 'data-node': n.id, text: 'Drain', onclick: () => setState(n, 'drain') }));
        }
      }
      if (s.cluster) {
        actions.append(el('button', { type: 'button', class: 'small', 'data-action': 'remove', 'data-node': n.id, text: 'Remove', onclick: () => removeNode(n) }));
      }
      const tr = el('tr', { 'data-node-id': n.id, 'data-liveness': n.liveness, 'data-state': n.state },
        el('td', { class: 'head', 'data-label': 'Node' }, el('strong', { text: 'node ' + n.id + (n.self ? ' (this one)' : '') }),
          el('div', { class: 'nodeurl', text: n.url || '' }), n.error ? el('div', { class: 'error small', text: 'no report: ' + n.error }) : null),
        td('Liveness', badge(n.liveness)),
        td('State', badge(n.state)),
        td('Raft', el('span', { text: n.role + (n.leader ? ' ★ leader' : '') })),
        td('Zone', n.zone || '–'),
        td('Disk', disk),
        td('Blobs', blobs),
        td('Lag', el('span', { class: 'num', text: rep ? num(n.lag) + ' entries' : '–' })),
        td('Repair', repair),
        td('Scrub', scrub),
        td('Version', versionCell(rep)),
        td('Actions', actions),
      );
      tb.append(tr);
    }
  }

  // versionCell is a node's release, commit and log version (issue 22).
  function versionCell(rep) {
    if (!rep || !rep.version || !rep.version.release) return '–';
    const v = rep.version;
    return el('div', { class: 'version' }, v.release,
      el('div', { class: 'muted small', text: (v.commit || '') + ' · reads log ' + v.log_max + ' · cluster log ' + v.log_version }),
      v.log_stopped ? el('div', { class: 'error small', text: 'LOG STOPPED: ' + v.log_stopped }) : null,
      v.upgrade_waiting_for && v.upgrade_waiting_for.length ? el('div', { class: 'muted small', text: 'upgrade waits for: ' + v.upgrade_waiting_for.join('; ') }) : null);
  }

  // retention formats a trash retention in seconds as the CLI does: 7d, 1d12h, 90m → 1h30m.
  function retention(s) {
    let out = '';
    for (const [n, unit] of [[86400, 'd'], [3600, 'h'], [60, 'm'], [1, 's']]) {
      const q = Math.floor(s / n);
      if (q > 0) { out += q + unit; s -= q * n; }
    }
    return out;
  }

  // trashCell is a bucket's trash (the status view's trash, kept in the
  // namespace): "N files, SIZE" and its retention, or "off".
  function trashCell(b, tr) {
    if (!tr && !b.trash_seconds) return el('span', { class: 'muted', text: 'off' });
    const held = tr ? num(tr.entries) + (tr.entries === 1 ? ' file, ' : ' files, ') + bytes(tr.bytes) : '…';
    if (!b.trash_seconds) return el('span', {}, held, el('div', { class: 'muted small', text: 'off; left until emptied' }));
    return el('span', {}, el('span', { class: 'num', text: held }), el('div', { class: 'muted small', text: 'kept ' + retention(b.trash_seconds) }));
  }

  function renderBuckets(bs, usage, status) {
    const tb = $('#buckets tbody');
    tb.replaceChildren();
    if (!bs) return;
    const u = {};
    if (usage && usage.buckets) for (const b of usage.buckets) u[b.name] = b;
    const trash = {};
    if (status && status.trash) for (const t of status.trash) trash[t.bucket] = t;
    $('#usage-note').textContent = usage ? 'sizes counted ' + ago(usage.computed) : '';
    if (bs.length === 0) tb.append(el('tr', {}, el('td', { colspan: 6, class: 'muted', text: 'No buckets yet.' })));
    for (const b of bs) {
      const r = b.replicas === -1 ? 'mirror (every node)' : b.replicas === 0 ? '3 copies (default)' : b.replicas + (b.replicas === 1 ? ' copy' : ' copies');
      const w = b.write_quorum ? 'W=' + b.write_quorum : 'W=majority';
      const ub = u[b.name];
      tb.append(el('tr', { 'data-bucket': b.name },
        el('td', { class: 'head', 'data-label': 'Bucket' }, el('strong', { text: b.name })),
        td('Replication', r + ', ' + w + (b.strict ? ', strict' : '')),
        td('Files', el('span', { class: 'num', text: ub ? num(ub.files) + (ub.complete ? '' : '+') : '…' })),
        td('Size', el('span', { class: 'num', text: ub ? bytes(ub.bytes) + (ub.complete ? '' : '+') : '…' })),
        td('Trash', trashCell(b, trash[b.name])),
        td('Access', b.public ? 'public read' : (b.acl || 'private')),
      ));
    }
  }

  // renderMounts shows each mount of this node: its write-back queue and
  // the FUSE calls that took the most time (GET /_cairn/mounts).
  function renderMounts(m) {
    const box = $('#mounts');
    const ms = (m && m.mounts) || [];
    $('#mounts-card').hidden = ms.length === 0;
    box.replaceChildren();
    for (const mt of ms) {
      const q = mt.queue_items + ' queued (' + bytes(mt.queue_bytes) + ', oldest ' + Math.round(mt.queue_oldest_ms) + ' ms), ' +
        num(mt.published) + ' published, ' + num(mt.publish_errors) + ' failed; ' +
        bytes(mt.zero_copy_bytes || 0) + ' read zero-copy';
      const rows = mt.ops.slice(0, 12).map(o => el('tr', { 'data-op': o.op },
        td('Call', el('code', { text: o.op })),
        td('Calls', el('span', { class: 'num', text: num(o.calls) })),
        td('Errors', el('span', { class: 'num', text: num(o.errors) })),
        td('Mean', el('span', { class: 'num', text: o.mean_us.toFixed(1) + ' µs' })),
        td('p99 ≤', el('span', { class: 'num', text: o.p99_le_us < 0 ? '> 5 s' : (o.p99_le_us >= 1000 ? (o.p99_le_us / 1000) + ' ms' : o.p99_le_us + ' µs') })),
        td('Time', el('span', { class: 'num', text: Math.round(o.share_of_time * 100) + ' %' }))));
      box.append(el('div', { class: 'mount', 'data-mount': mt.dir },
        el('p', {}, el('strong', { text: mt.bucket + (mt.prefix ? '/' + mt.prefix : '') }), ' on ', el('code', { text: mt.dir }),
          el('span', { class: 'muted small', text: ' · ' + num(mt.calls) + ' calls · write-back: ' + q })),
        el('div', { class: 'table-wrap' }, el('table', { class: 'stack mount-ops' },
          el('thead', {}, el('tr', {}, ...['Call', 'Calls', 'Errors', 'Mean', 'p99 ≤', 'Time'].map(h => el('th', { text: h })))),
          el('tbody', {}, ...rows)))));
    }
  }

  // File locks: the cluster's lock table (the same on every node).
  function renderLocks(s) {
    const locks = (s && s.locks) || [];
    const tb = $('#locks tbody');
    tb.replaceChildren();
    const ls = s && s.lock_stats;
    $('#locks-stats').textContent = ls ? 'This node since start: ' + num(ls.grants) + ' granted (' +
      num(ls.local_grants) + ' here, under its lock rights), ' + num(ls.waits) + ' waited, ' + num(ls.refused) +
      ' refused, ' + num(ls.commits) + ' lock commits, ' + num(ls.recalled) + ' rights recalled, ' + num(ls.returned) +
      ' given back, ' + num(ls.lost) + ' sessions lost; locks on ' + num(ls.files) + ' files now, lock rights of ' +
      num(ls.rights) + ' files' : '';
    $('#locks').hidden = locks.length === 0;
    $('#locks-none').hidden = locks.length > 0;
    const EOF = '18446744073709551615';
    for (const l of locks) {
      const end = String(l.end);
      const range = l.kind === 'flock' || (l.start === '0' && end === EOF) ? 'whole file' : l.start + '–' + (end === EOF ? '' : end);
      tb.append(el('tr', { 'data-ino': String(l.ino) },
        td('Path', el('code', { text: l.path || 'inode ' + l.ino })),
        td('Node', shortID(l.node)),
        td('PID', String(l.pid)),
        td('Kind', l.kind),
        td('Type', l.write ? 'write' : 'read'),
        td('Range', range),
        td('Since', ago(l.since)),
        td('State', badge(l.waiting ? 'waiting' : 'held'))));
    }
  }

  // Directory owners: this node's counters and directories, and each
  // node's count from the log (the same on every node).
  function renderOwners(s) {
    const o = (s && s.owners) || null;
    const stats = $('#owners-stats');
    const nb = $('#owner-nodes tbody');
    const tb = $('#owners tbody');
    stats.replaceChildren();
    nb.replaceChildren();
    tb.replaceChildren();
    const dirs = (o && o.dirs) || [];
    const byNode = o && s.cluster ? (o.by_node || []) : []; // a lone node: its own count says it all
    const more = o ? o.owned - dirs.length : 0;
    $('#owners').hidden = dirs.length === 0;
    $('#owners-none').hidden = dirs.length > 0;
    $('#owners-more').hidden = more <= 0;
    $('#owners-more').textContent = more > 0 ? 'and ' + num(more) + ' more (the first ' + num(dirs.length) + ' by path are shown)' : '';
    $('#owner-nodes-wrap').hidden = byNode.length === 0;
    $('#owners-grid').classList.toggle('single', byNode.length === 0);
    if (!o) return;
    const plural = (n, one, many) => num(n) + ' ' + (Number(n) === 1 ? one : many);
    stats.append(
      el('strong', { text: (s.cluster ? 'Node ' + shortID(o.node) : 'This node') + ' owns ' + plural(o.owned, 'directory', 'directories') }),
      el('span', { class: 'muted', text: ' · since start: ' + plural(o.claims, 'claim', 'claims') + ', ' + plural(o.recalls, 'recall', 'recalls') +
        ' sent, ' + num(o.handed_over) + ' handed over, ' + num(o.fenced) + ' fenced, ' + num(o.lost) + ' lost' }));
    if (o.error) stats.append(el('div', { class: 'error small', text: o.error }));
    for (const c of byNode) {
      nb.append(el('tr', { 'data-node-id': String(c.node), 'data-dirs': String(c.dirs) },
        td('Node', shortID(c.node) + (c.node === o.node ? ' (this node)' : '')),
        td('Directories owned', el('span', { class: 'num', text: num(c.dirs) + (c.more ? '+' : '') }))));
    }
    for (const d of dirs) {
      tb.append(el('tr', { 'data-ino': String(d.ino) },
        td('Path', el('code', { text: d.path || 'inode ' + d.ino })),
        td('Inode', String(d.ino)),
        td('Epoch', String(d.epoch)),
        td('Since', ago(d.since))));
    }
  }

  function renderMaintenance(s) {
    const box = $('#maintenance');
    box.replaceChildren();
    if (!s) return;
    const nodes = s.nodes || [];
    let pending = 0, active = 0, pulled = 0, pushed = 0, dropped = 0, scrubbing = 0, corrupt = 0;
    let selfScrub = null;
    for (const n of nodes) {
      const r = n.report;
      if (!r) continue;
      if (r.repair) {
        pending += r.repair.pending; pulled += r.repair.pulled; pushed += r.repair.pushed; dropped += r.repair.dropped;
        if (r.repair.active) active++;
      }
      if (r.scrub) {
        if (r.scrub.running) scrubbing++;
        corrupt += r.scrub.corrupt_copies || 0;
        if (n.self) selfScrub = r.scrub;
      }
    }
    const dl = el('dl');
    const row = (k, v) => dl.append(el('dt', { text: k }), el('dd', { text: v }));
    row('Under-replicated blobs', num(s.under_replicated));
    row('Repair', active ? 'running on ' + active + ' node(s)' : 'idle');
    row('Repair queue', num(pending) + ' copies pending');
    row('Repaired (pulled)', num(pulled) + ' blobs since start');
    row('Rebalanced', num(pushed) + ' pushed, ' + num(dropped) + ' dropped');
    row('Scrub', scrubbing ? 'running on ' + scrubbing + ' node(s)' : 'idle');
    if (selfScrub) {
      row('Scrub here', selfScrub.running
        ? bytes(selfScrub.bytes_checked) + ' of ' + bytes(selfScrub.bytes_total) + ' checked'
        : 'last pass ' + ago(selfScrub.last_completed) + ', next ' + (selfScrub.next_pass ? ago(selfScrub.next_pass) : 'on request'));
    }
    row('Corrupt copies found', num(corrupt));
    box.append(dl);
  }

  function renderLogs(l) {
    const tb = $('#logs tbody');
    tb.replaceChildren();
    if (!l) return;
    const recs = (l.records || []).slice().reverse();
    if (recs.length === 0) tb.append(el('tr', {}, el('td', { colspan: 3, class: 'muted', text: 'No warnings or errors since this node started.' })));
    for (const r of recs.slice(0, 200)) {
      const attrs = (r.attrs || []).map((a) => a.key + '=' + a.value).join(' ');
      tb.append(el('tr', {},
        el('td', { text: new Date(r.time).toLocaleString('en-GB', { hour12: false }) }),
        el('td', {}, badge(r.level.startsWith('ERROR') ? 'ERROR' : 'WARN')),
        el('td', {}, el('div', { text: r.msg + (r.count > 1 ? ' (×' + num(r.count) + ' since ' + clock(r.first) + ')' : '') }),
          attrs ? el('div', { class: 'attrs mono', text: attrs }) : null)));
    }
  }

  function renderKeys(keys) {
    const tb = $('#keys tbody');
    tb.replaceChildren();
    if (!keys) return;
    if (keys.length === 0) tb.append(el('tr', {}, el('td', { colspan: 5, class: 'muted', text: 'No access keys.' })));
    for (const k of keys) {
      const grants = (k.grants || []).map((g) => (g.bucket || 'all buckets') + (g.prefix ? '/' + g.prefix : '') + ': ' + (Array.isArray(g.allow) ? g.allow.join(', ') : (g.allow || ''))).join('; ');
      tb.append(el('tr', {},
        el('td', { text: k.name || '–' }), el('td', {}, el('code', { text: k.id })),
        el('td', { class: 'small', text: grants || JSON.stringify(k.grants) }),
        el('td', { text: k.expires ? new Date(k.expires).toLocaleDateString('en-GB') : 'never' }),
        el('td', {}, el('button', { type: 'button', class: 'small', text: 'Revoke', onclick: () => revokeKey(k) }))));
    }
  }

  function describeRule(r) {
    const m = [];
    m.push(r.bucket ? 'bucket ' + r.bucket : 'every bucket');
    if (r.user_agent) m.push('UA ~ ' + r.user_agent);
    if (r.ip) m.push('IP ' + r.ip);
    if (r.path_prefix) m.push('path ' + r.path_prefix + '*');
    let a = '';
    if (r.deny) a = 'deny ' + r.deny;
    else if (r.respond) a = 'respond ' + (r.respond.status || 403);
    if (r.rate) a += (a ? ', ' : '') + 'limit ' + r.rate + '/s per IP';
    return [m.join(', '), a];
  }

  function renderRules(rules) {
    const tb = $('#rules tbody');
    tb.replaceChildren();
    if (!rules) return;
    if (rules.length === 0) tb.append(el('tr', {}, el('td', { colspan: 4, class: 'muted', text: 'No rules.' })));
    for (const r of rules) {
      const [m, a] = describeRule(r);
      tb.append(el('tr', {}, el('td', {}, el('code', { text: r.id })), el('td', { text: m }), el('td', { text: a }),
        el('td', {}, el('button', { type: 'button', class: 'small', text: 'Delete', onclick: () => deleteRule(r) }))));
    }
  }

  // ---- charts (canvas, drawn by hand) -----------------------------------

  function renderCharts(h) {
    const pts = h && h.points ? h.points : [];
    const win = h ? h.window_seconds : 900;
    const t = pts.map((p) => new Date(p.t).getTime());
    const note = $('#history-note');
    if (h && h.error) note.textContent = 'The metrics history could not be read: ' + h.error;
    else if (pts.length < 2) note.textContent = 'Collecting: a point every ' + (h ? h.interval_seconds : 5) + ' s; the charts fill in over 15 minutes.';
    else note.textContent = 'One point every ' + h.interval_seconds + ' s, from this node\'s own request metrics. Errors are 5xx answers; 4xx (client mistakes, refused keys) are shown apart.';
    chart($('#chart-rate'), t, win, [{ name: 'req/s', color: '#2456c7', v: pts.map((p) => p.rate) }], (v) => fmtNum(v));
    chart($('#chart-errors'), t, win, [
      { name: '5xx %', color: '#c62828', v: pts.map((p) => 100 * p.error_ratio) },
      { name: '4xx/s', color: '#a15c00', v: pts.map((p) => p.client_error_rate), dash: [3, 3] },
    ], (v) => fmtNum(v));
    chart($('#chart-latency'), t, win, [
      { name: 'p50', color: '#1a7f37', v: pts.map((p) => p.p50_seconds === null ? null : 1000 * p.p50_seconds) },
      { name: 'p99', color: '#7b3fc4', v: pts.map((p) => p.p99_seconds === null ? null : 1000 * p.p99_seconds) },
    ], (v) => fmtNum(v));
  }

  function fmtNum(v) {
    if (v === 0) return '0';
    const a = Math.abs(v);
    if (a >= 1000) return (v / 1000).toFixed(a >= 10000 ? 0 : 1) + 'k';
    if (a >= 10) return v.toFixed(0);
    if (a >= 1) return v.toFixed(1);
    return v.toPrecision(2);
  }

  // niceMax rounds a maximum up so that its four grid steps are 1, 2, 2.5
  // or 5 times a power of ten.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const step = v / 4;
    const p = Math.pow(10, Math.floor(Math.log10(step)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= step) return 4 * m * p;
    return 40 * p;
  }

  function chart(cv, times, windowSec, series, fmt) {
    const dpr = window.devicePixelRatio || 1;
    const w = cv.clientWidth || 300;
    const hgt = cv.clientHeight || 160;
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(hgt * dpr)) {
      cv.width = Math.round(w * dpr);
      cv.height = Math.round(hgt * dpr);
    }
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, hgt);
    const L = 40, R = 8, T = 20, B = 20;
    const pw = w - L - R, ph = hgt - T - B;
    const now = times.length ? times[times.length - 1] : Date.now();
    // The x axis spans the data kept (at least 2 minutes, at most the window),
    // so a node that just started does not show a sliver at the right.
    const span = Math.min(windowSec, Math.max(120, times.length ? (now - times[0]) / 1000 : 0));
    const t0 = now - span * 1000;
    let max = 0;
    for (const s of series) for (const v of s.v) if (v !== null && v > max) max = v;
    max = niceMax(max * 1.1);
    g.font = '11px system-ui, sans-serif';
    g.lineWidth = 1;
    // grid and y labels
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const y = T + ph - (ph * i) / 4;
      g.strokeStyle = '#e3e6ea';
      g.beginPath(); g.moveTo(L, y + 0.5); g.lineTo(L + pw, y + 0.5); g.stroke();
      g.fillStyle = '#5f6b7a';
      g.fillText(fmt((max * i) / 4), L - 4, y);
    }
    // x labels: minutes before now
    g.textAlign = 'center';
    g.textBaseline = 'top';
    for (const f of [1, 2 / 3, 1 / 3, 0]) {
      const sec = span * f;
      const x = L + pw - pw * f;
      const lbl = f === 0 ? 'now' : sec >= 120 ? '-' + Math.round(sec / 60) + ' min' : '-' + Math.round(sec) + ' s';
      g.fillText(lbl, Math.min(Math.max(x, L + 18), L + pw - 12), T + ph + 4);
    }
    // legend
    let lx = L;
    g.textAlign = 'left';
    g.textBaseline = 'middle';
    for (const s of series) {
      g.strokeStyle = s.color; g.lineWidth = 2; g.setLineDash(s.dash || []);
      g.beginPath(); g.moveTo(lx, 9); g.lineTo(lx + 14, 9); g.stroke();
      g.setLineDash([]);
      g.fillStyle = '#1d2330';
      const lastV = [...s.v].reverse().find((v) => v !== null && v !== undefined);
      const label = s.name + (lastV !== undefined ? ' ' + fmt(lastV) : '');
      g.fillText(label, lx + 18, 9);
      lx += 26 + g.measureText(label).width;
    }
    if (times.length === 0) {
      g.fillStyle = '#8a94a3';
      g.textAlign = 'center';
      g.fillText('no data yet', L + pw / 2, T + ph / 2);
      return;
    }
    // series
    for (const s of series) {
      g.strokeStyle = s.color;
      g.lineWidth = 1.5;
      g.setLineDash(s.dash || []);
      g.beginPath();
      let pen = false;
      for (let i = 0; i < times.length; i++) {
        const v = s.v[i];
        if (v === null || v === undefined || times[i] < t0) { pen = false; continue; }
        const x = L + (pw * (times[i] - t0)) / (span * 1000);
        const y = T + ph - (ph * Math.min(v, max)) / max;
        if (pen) g.lineTo(x, y); else g.moveTo(x, y);
        pen = true;
      }
      g.stroke();
      g.setLineDash([]);
    }
  }

  // ---- actions (each behind a confirmation) -----------------------------

  // confirmStep shows the confirmation dialog and resolves true on confirm.
  function confirmStep(title, text, okLabel) {
    const d = $('#confirm');
    $('#confirm-title').textContent = title;
    $('#confirm-text').textContent = text;
    $('#confirm-ok').textContent = okLabel || 'Confirm';
    return new Promise((resolve) => {
      const done = (v) => {
        $('#confirm-ok').onclick = null;
        $('#confirm-cancel').onclick = null;
        d.onclose = null;
        if (d.open) d.close();
        resolve(v);
      };
      $('#confirm-ok').onclick = () => done(true);
      $('#confirm-cancel').onclick = () => done(false);
      d.onclose = () => done(false);
      d.showModal();
      $('#confirm-cancel').focus();
    });
  }

  async function act(what, fn) {
    try {
      banner((await fn()) || '');
    } catch (e) {
      banner(what + ' failed. ' + e.message);
      window.scrollTo(0, 0);
    }
    slowAt = 0;
    refresh();
  }

  async function setState(n, action) {
    const drain = action === 'drain';
    const ok = await confirmStep(drain ? 'Drain node ' + n.id + '?' : 'Activate node ' + n.id + '?',
      drain ? 'Node ' + n.id + ' (' + n.url + ') will take no new copies; repair moves its copies to the other nodes. It keeps serving reads until you remove it.'
        : 'Node ' + n.id + ' (' + n.url + ') will take new copies again.',
      drain ? 'Drain' : 'Activate');
    if (!ok) return;
    act(drain ? 'Draining node ' + n.id : 'Activating node ' + n.id, () => api('POST', '/_cairn/nodes/' + encodeURIComponent(n.id) + '/' + action));
  }

  async function removeNode(n) {
    const ok = await confirmStep('Remove node ' + n.id + ' from the cluster?',
      'Node ' + n.id + ' (' + n.url + ') leaves Raft and the cluster map and stops on its own; its copies are re-made elsewhere. ' +
      'Drain it first and wait for the repair queue to empty if it still holds data. This cannot be undone: the node would have to join again with an empty data directory.',
      'Remove node');
    if (!ok) return;
    const path = '/_cairn/nodes/' + encodeURIComponent(n.id) + (n.self ? '?force=1' : '');
    act('Removing node ' + n.id, () => api('DELETE', path));
  }

  async function startScrub() {
    const ok = await confirmStep('Start a scrub on this node?',
      'This node reads every blob copy it holds and checks its checksum, at the configured rate; corrupt copies are quarantined and repaired from replicas. Reads slow down a little while it runs.',
      'Start scrub');
    if (!ok) return;
    act('Starting a scrub', async () => {
      const r = await api('POST', '/_cairn/scrub');
      return r && !r.started ? 'A scrub pass was already running on this node.' : '';
    });
  }

  async function createKey(ev) {
    ev.preventDefault();
    const f = ev.target;
    const name = f.name.value.trim();
    const buckets = f.buckets.value.split(',').map((s) => s.trim()).filter((s) => s && s !== 'all' && s !== '*');
    const allow = f.allow.value.trim();
    const exp = f.expires.value.trim();
    const body = { name, buckets, allow, expires: exp === 'never' ? '' : exp };
    const ok = await confirmStep('Create access key "' + name + '"?',
      'It may ' + (allow || 'read, list, write and delete') + ' in ' + (buckets.length ? buckets.join(', ') : 'every bucket') +
      (body.expires ? ', for ' + body.expires : ', with no expiry') + '. The secret is shown once.', 'Create key');
    if (!ok) return;
    try {
      const k = await api('POST', '/_cairn/keys', body);
      f.reset();
      $('#secret-id').textContent = k.id;
      $('#secret-value').textContent = k.secret;
      $('#secret').showModal();
      banner('');
    } catch (e) {
      banner('Creating the key failed. ' + e.message);
    }
    slowAt = 0;
    refresh();
  }

  async function revokeKey(k) {
    const ok = await confirmStep('Revoke key "' + (k.name || k.id) + '"?', 'Clients using key ' + k.id + ' are refused from now on.', 'Revoke');
    if (!ok) return;
    act('Revoking the key', () => api('DELETE', '/_cairn/keys/' + encodeURIComponent(k.id)));
  }

  async function addRule(ev) {
    ev.preventDefault();
    const f = ev.target;
    const r = {};
    for (const k of ['bucket', 'user_agent', 'ip', 'path_prefix']) if (f[k].value.trim()) r[k] = f[k].value.trim();
    const v = Number(f.value.value);
    if (!Number.isFinite(v) || v <= 0) { banner('The rule\'s value must be a positive number: a status (400-599) to deny with, or requests per second.'); return; }
    if (f.kind.value === 'deny') r.deny = Math.round(v); else r.rate = v;
    const [m, a] = describeRule(r);
    const ok = await confirmStep('Add this rule?', 'Requests matching ' + m + ' will be answered: ' + a + '.', 'Add rule');
    if (!ok) return;
    act('Adding the rule', async () => { await api('POST', '/_cairn/rules', r); f.reset(); });
  }

  async function deleteRule(r) {
    const [m, a] = describeRule(r);
    const ok = await confirmStep('Delete rule ' + r.id + '?', 'Requests matching ' + m + ' will no longer get: ' + a + '.', 'Delete rule');
    if (!ok) return;
    act('Deleting the rule', () => api('DELETE', '/_cairn/rules/' + encodeURIComponent(r.id)));
  }

  // ---- start ---------------------------------------------------------------

  document.addEventListener('DOMContentLoaded', () => {
    $('#login').addEventListener('submit', login);
    $('#logout').addEventListener('click', logout);
    $('#scrub-btn').addEventListener('click', startScrub);
    $('#key-form').addEventListener('submit', createKey);
    $('#rule-form').addEventListener('submit', addRule);
    $('#secret-close').addEventListener('click', () => {
      $('#secret-value').textContent = ''; // shown once: gone from the page when closed
      $('#secret').close();
    });
    $('#secret').addEventListener('close', () => { $('#secret-value').textContent = ''; });
    window.addEventListener('resize', () => renderCharts(last.history));
    showLogin('');
  });
})();
