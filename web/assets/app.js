// troupe — the web task list (docs/WEB.md). Plain JavaScript, no framework, no
// build step. Every string from the server is inserted as text (textContent,
// createTextNode), never as markup.
(function () {
  'use strict';

  var SVG = 'http://www.w3.org/2000/svg';
  var CONFIRM_MS = 3000;
  var HINT_MS = 4000;
  var TICK_MS = 1000;
  var PANEL_MAX = 131072;
  var GAP_TEXT = '\u2026 earlier output dropped \u2026';

  // ---- Clock: real, or manual (fragment clock=manual; window.troupeTest).
  var hashParams = new URLSearchParams(location.hash.slice(1));
  var manual = hashParams.get('clock') === 'manual';
  var clock;
  if (manual) {
    var vnow = 0, vseq = 0, vtimers = [];
    clock = {
      now: function () { return vnow; },
      after: function (kind, ms, fn) {
        var t = { id: ++vseq, at: vnow + ms, fn: fn, kind: kind };
        vtimers.push(t);
        return t.id;
      },
      cancel: function (id) { vtimers = vtimers.filter(function (t) { return t.id !== id; }); }
    };
  } else {
    clock = {
      now: function () { return Date.now(); },
      after: function (kind, ms, fn) { return setTimeout(fn, ms); },
      cancel: function (id) { clearTimeout(id); }
    };
  }

  // ---- State.
  var S = {
    sessions: [],
    session: null,
    jobs: [],          // last rows frame's jobs
    children: null,    // null: no child lister
    tree: null,
    conn: 'reconnecting',
    userFold: null,    // the user's settled-section choice (true = open)
    cleared: {},       // session -> {id: true}
    expanded: null,    // the job id whose panel is open
    panel: null,       // {jobId, segs, len, gap, streaming, error, next, settled}
    phase: null,       // {id, state, timer}
    es: null,
    tick: null
  };

  var el = {
    select: document.getElementById('session'),
    count: document.querySelector('[data-count]'),
    conn: document.querySelector('[data-conn]'),
    empty: document.querySelector('[data-empty]'),
    list: document.getElementById('jobs'),
    childCard: document.getElementById('children-card'),
    children: document.getElementById('children'),
    treeCard: document.getElementById('tree-card'),
    tree: document.getElementById('tree'),
    main: document.getElementById('main')
  };
  var rowEls = {};   // job id -> row element record
  var childEls = {}; // child id -> li

  function h(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) { for (var k in attrs) { e.setAttribute(k, attrs[k]); } }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function icon(kind) {
    var s = document.createElementNS(SVG, 'svg');
    s.setAttribute('viewBox', '0 0 16 16');
    s.setAttribute('aria-hidden', 'true');
    s.setAttribute('focusable', 'false');
    s.setAttribute('class', 'icon');
    var p = document.createElementNS(SVG, kind === 'stop' ? 'rect' : 'path');
    if (kind === 'stop') {
      p.setAttribute('x', '4'); p.setAttribute('y', '4');
      p.setAttribute('width', '8'); p.setAttribute('height', '8'); p.setAttribute('rx', '1.5');
    } else {
      p.setAttribute('d', 'M5 3l6 5-6 5z');
    }
    s.appendChild(p);
    return s;
  }

  // ---- Formatting.
  var WORD = { running: 'running', stopping: 'stopping', completed: 'completed', killed: 'cancelled', failed: 'failed' };
  var STATE = { running: 'ongoing', stopping: 'warning', completed: 'done', killed: 'warning', failed: 'error' };
  function isLive(j) { return j.status === 'running' || j.status === 'stopping'; }

  function duration(ms) {
    if (!(ms > 0)) { ms = 0; }
    var s = Math.floor(ms / 1000);
    if (s < 60) { return s + 's'; }
    var m = Math.floor(s / 60);
    if (m < 60) { return m + 'm ' + (s % 60) + 's'; }
    return Math.floor(m / 60) + 'h ' + (m % 60) + 'm';
  }
  function elapsed(j) {
    if (isLive(j)) { return clock.now() - j.startedAt; }
    if (j.finishedAt === undefined) { return 0; }
    return j.finishedAt - j.startedAt;
  }
  function plural(n, one, many) { return n + ' ' + (n === 1 ? one : many); }

  // ---- Ordering (WEB.md §2.4).
  function ordered(jobs) {
    var idx = jobs.map(function (j, i) { return { j: j, i: i }; });
    idx.sort(function (a, b) {
      var la = isLive(a.j), lb = isLive(b.j);
      if (la !== lb) { return la ? -1 : 1; }
      if (!la) {
        var fa = a.j.finishedAt !== undefined ? a.j.finishedAt : a.j.startedAt;
        var fb = b.j.finishedAt !== undefined ? b.j.finishedAt : b.j.startedAt;
        if (fa !== fb) { return fb - fa; }
      }
      if (a.j.startedAt !== b.j.startedAt) { return a.j.startedAt - b.j.startedAt; }
      return a.i - b.i;
    });
    return idx.map(function (x) { return x.j; });
  }

  function clearedSet() {
    var k = S.session;
    if (!S.cleared[k]) { S.cleared[k] = {}; }
    return S.cleared[k];
  }
  function visibleJobs() {
    var c = clearedSet();
    return S.jobs.filter(function (j) { return isLive(j) || !c[j.id]; });
  }

  // ---- The stop phase (WEB.md §3).
  function setPhase(p) {
    if (S.phase && S.phase.timer !== null) { clock.cancel(S.phase.timer); }
    S.phase = p;
  }
  function press(id) {
    var p = S.phase;
    if (p && p.id === id && p.state === 'pending') { return; }
    if (p && p.id === id && p.state === 'armed') {
      var pending = { id: id, state: 'pending', timer: null };
      setPhase(pending);
      render();
      sendKill(id, pending);
      return;
    }
    var armed = { id: id, state: 'armed', timer: null };
    setPhase(armed);
    armed.timer = clock.after('confirm', CONFIRM_MS, function () {
      if (S.phase === armed) { S.phase = null; render(); }
    });
    render();
  }
  function sendKill(id, phase) {
    var session = S.session;
    function rejected() {
      if (S.phase !== phase) { return; }
      var failed = { id: id, state: 'failed', timer: null };
      setPhase(failed);
      failed.timer = clock.after('hint', HINT_MS, function () {
        if (S.phase === failed) { S.phase = null; render(); }
      });
      render();
    }
    fetch('api/kill', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ sessionId: session, jobId: id }),
      cache: 'no-store',
      credentials: 'same-origin'
    }).then(function (r) {
      if (!r.ok) { rejected(); }
      // Admitted: stay pending until a rows frame moves the row out of running.
    }, rejected);
  }
  function disarm() {
    if (S.phase && S.phase.state === 'armed') { setPhase(null); render(); }
  }

  // ---- The live channel.
  function streamURL() {
    var u = 'events?session=' + encodeURIComponent(S.session);
    if (S.expanded !== null) { u += '&follow=' + encodeURIComponent(S.expanded); }
    return u;
  }
  function openStream() {
    closeStream();
    var es = new EventSource(streamURL());
    S.es = es;
    var on = function (type) {
      es.addEventListener(type, function (ev) {
        if (S.es !== es) { return; }
        var data;
        try { data = JSON.parse(ev.data); } catch (e) { return; }
        dispatch(type, data);
      });
    };
    ['hello', 'rows', 'opened', 'output', 'status', 'problem', 'bye', 'tree'].forEach(on);
    es.onerror = function () {
      if (S.es !== es) { return; }
      if (es.readyState === EventSource.CLOSED) { disconnect(); } else { setConn('reconnecting'); }
    };
  }
  function closeStream() {
    if (S.es) { S.es.close(); S.es = null; }
  }
  function disconnect() {
    closeStream();
    setPhase(null);
    setConn('disconnected');
    if (S.panel && S.panel.streaming) { S.panel.streaming = false; }
    render();
  }
  var CONN_TEXT = { live: 'Live', reconnecting: 'Reconnecting\u2026', disconnected: 'Disconnected' };
  function setConn(c) {
    S.conn = c;
    el.conn.setAttribute('data-conn', c);
    el.conn.textContent = CONN_TEXT[c];
    el.main.classList.toggle('offline', c === 'disconnected');
    render();
  }

  function dispatch(type, d) {
    switch (type) {
      case 'hello': setConn('live'); break;
      case 'rows': onRows(d); break;
      case 'opened': if (S.panel && d.jobId === S.panel.jobId) { S.panel.streaming = isLive(d.job); S.panel.error = null; renderPanel(); } break;
      case 'output': onOutput(d); break;
      case 'status':
        if (S.panel && d.jobId === S.panel.jobId) { S.panel.streaming = false; S.panel.settled = true; renderPanel(); }
        break;
      case 'problem':
        if (d.scope === 'follow' && S.panel && d.jobId === S.panel.jobId) {
          S.panel.error = d.message; S.panel.streaming = false; renderPanel();
        }
        break;
      case 'bye': disconnect(); break;
      case 'tree': S.tree = d; renderTree(); break;
    }
  }

  function onRows(d) {
    if (d.session !== S.session) { return; }
    S.jobs = d.jobs || [];
    S.children = d.children === undefined ? null : d.children;
    var byId = {};
    S.jobs.forEach(function (j) { byId[j.id] = j; });
    if (S.phase) {
      var pj = byId[S.phase.id];
      if (!pj || pj.status !== 'running') { setPhase(null); }
    }
    if (S.expanded !== null && !byId[S.expanded]) { collapse(); }
    render();
    renderChildren();
  }

  function onOutput(d) {
    var p = S.panel;
    if (!p || d.jobId !== p.jobId) { return; }
    if (d.next <= p.next && d.chunks.length > 0 && !d.lossy) { return; } // already shown
    if (d.lossy) { p.gap = true; }
    d.chunks.forEach(function (c) {
      if (c.gapBefore) { p.gap = true; }
      var ch = c.channel === 'stderr' ? 'stderr' : 'stdout';
      var last = p.segs[p.segs.length - 1];
      if (last && last.ch === ch) { last.text += c.text; } else { p.segs.push({ ch: ch, text: c.text }); }
      p.len += c.text.length;
    });
    p.next = Math.max(p.next, d.next);
    p.version++;
    trimPanel(p);
    renderPanel();
  }
  function trimPanel(p) {
    while (p.len > PANEL_MAX && p.segs.length) {
      var over = p.len - PANEL_MAX, s = p.segs[0];
      if (s.text.length <= over) { p.segs.shift(); p.len -= s.text.length; p.gap = true; continue; }
      var cut = over, code = s.text.charCodeAt(cut);
      if (code >= 0xDC00 && code <= 0xDFFF) { cut++; }
      s.text = s.text.slice(cut); p.len -= cut; p.gap = true;
    }
  }

  // ---- Expanding rows.
  function toggle(id) {
    if (S.expanded === id) { collapse(); render(); return; }
    S.expanded = id;
    S.panel = { jobId: id, segs: [], len: 0, gap: false, streaming: true, error: null, next: 0, settled: false, version: 0 };
    openStream();
    render();
  }
  function collapse() {
    S.expanded = null;
    S.panel = null;
    openStream();
  }

  // ---- Rendering.
  function killable(j) { return j.status === 'running' && S.conn !== 'disconnected'; }
  function hasToggle(j) {
    if (S.expanded === j.id) { return true; }
    if (isLive(j)) { return true; }
    return !!(j.output && j.output.total > 0);
  }

  function makeRow(j) {
    var li = h('li', { 'class': 'row', 'data-job-id': j.id });
    var line = h('div', { 'class': 'line' });
    var kind = h('span', { 'class': 'chip', 'data-cell': 'kind' });
    var label = h('span', { 'class': 'label', 'data-cell': 'label' });
    var status = h('span', { 'class': 'status', 'data-cell': 'status' });
    var dur = h('span', { 'class': 'duration', 'data-cell': 'duration' });
    var actions = h('span', { 'class': 'actions' });
    line.appendChild(kind); line.appendChild(label); line.appendChild(status);
    line.appendChild(dur); line.appendChild(actions);
    li.appendChild(line);
    var r = { li: li, kind: kind, label: label, status: status, dur: dur, actions: actions,
      toggle: null, stop: null, panel: null, id: j.id };
    return r;
  }

  function ensureToggle(r, j) {
    var want = hasToggle(j);
    if (want && !r.toggle) {
      r.toggle = h('button', { 'type': 'button', 'class': 'toggle' });
      r.toggle.appendChild(icon('chevron'));
      r.toggle.addEventListener('click', function () { toggle(r.id); });
      r.actions.insertBefore(r.toggle, r.actions.firstChild);
    } else if (!want && r.toggle) {
      r.toggle.remove(); r.toggle = null;
    }
    if (r.toggle) {
      var open = S.expanded === j.id;
      var name = (open ? 'Hide' : 'Show') + ' live output of ' + j.label;
      r.toggle.setAttribute('aria-expanded', open ? 'true' : 'false');
      r.toggle.setAttribute('aria-label', name);
      r.toggle.setAttribute('title', name);
    }
  }

  function ensureStop(r, j) {
    var want = killable(j);
    if (want && !r.stop) {
      r.stop = h('button', { 'type': 'button', 'class': 'stop' });
      r.stop.addEventListener('click', function (ev) { ev.stopPropagation(); press(r.id); });
      r.stop.addEventListener('keydown', function (ev) {
        if (ev.key === 'Escape' && S.phase && S.phase.id === r.id && S.phase.state === 'armed') {
          ev.preventDefault(); disarm();
        }
      });
      r.actions.appendChild(r.stop);
    } else if (!want && r.stop) {
      var focused = document.activeElement === r.stop;
      r.stop.remove(); r.stop = null;
      if (focused) { (r.toggle || el.list).focus(); }
    }
    if (!r.stop) { return; }
    var st = S.phase && S.phase.id === j.id ? S.phase.state : 'idle';
    if (r.stop.getAttribute('data-kill-state') === st && r.stop.getAttribute('data-label') === j.label) { return; }
    r.stop.setAttribute('data-kill-state', st);
    r.stop.setAttribute('data-label', j.label);
    var name = st === 'armed' ? 'Click again to confirm' : st === 'failed' ? 'Stop failed' : 'Stop task ' + j.label;
    r.stop.setAttribute('aria-label', name);
    r.stop.setAttribute('title', name);
    r.stop.disabled = st === 'pending';
    while (r.stop.firstChild) { r.stop.removeChild(r.stop.firstChild); }
    if (st === 'armed') { r.stop.appendChild(document.createTextNode('Confirm stop')); } else { r.stop.appendChild(icon('stop')); }
  }

  function updateRow(r, j) {
    r.li.setAttribute('data-status', j.status);
    setText(r.kind, j.kind);
    setText(r.label, j.label);
    r.label.setAttribute('title', j.label);
    var text = j.detail !== undefined && j.detail !== '' ? j.detail : WORD[j.status] || j.status;
    setText(r.status, text);
    r.status.setAttribute('title', text);
    r.status.setAttribute('data-state', STATE[j.status] || 'ongoing');
    updateDuration(r, j);
    ensureToggle(r, j);
    ensureStop(r, j);
  }
  function updateDuration(r, j) {
    var d = duration(elapsed(j));
    setText(r.dur, d);
    r.dur.setAttribute('title', (isLive(j) ? 'Running for ' : 'Took ') + d);
  }
  function setText(e, t) { if (e.textContent !== t) { e.textContent = t; } }

  var sectionLive = h('li', { 'class': 'section', 'data-section': 'live' }, 'Running');
  var sectionSettled = h('li', { 'class': 'section', 'data-section': 'settled' });
  var foldBtn = h('button', { 'type': 'button', 'class': 'fold', 'aria-expanded': 'false' });
  var clearBtn = h('button', { 'type': 'button', 'class': 'clear' }, 'Clear');
  sectionSettled.appendChild(foldBtn);
  sectionSettled.appendChild(clearBtn);
  foldBtn.addEventListener('click', function () { S.userFold = !settledOpen(); render(); });
  clearBtn.addEventListener('click', function () {
    var c = clearedSet();
    S.jobs.forEach(function (j) { if (!isLive(j)) { c[j.id] = true; } });
    if (S.expanded !== null && c[S.expanded]) { collapse(); }
    render();
  });

  var liveCount = 0;
  function settledOpen() {
    if (S.userFold !== null) { return S.userFold; }
    return liveCount === 0;
  }

  function render() {
    var focused = document.activeElement;
    var jobs = ordered(visibleJobs());
    var live = jobs.filter(isLive), settled = jobs.filter(function (j) { return !isLive(j); });
    liveCount = live.length;
    var open = settledOpen();
    var want = [];
    if (live.length) { want.push(sectionLive); }
    var seen = {};
    function addRow(j) {
      var r = rowEls[j.id];
      if (!r) { r = rowEls[j.id] = makeRow(j); }
      seen[j.id] = true;
      updateRow(r, j);
      renderPanelInto(r, j);
      want.push(r.li);
    }
    live.forEach(addRow);
    if (settled.length) {
      setText(foldBtn, 'Finished ' + settled.length);
      foldBtn.setAttribute('aria-expanded', open ? 'true' : 'false');
      want.push(sectionSettled);
      if (open) { settled.forEach(addRow); }
    }
    for (var id in rowEls) {
      if (!seen[id]) {
        var gone = rowEls[id];
        var hadFocus = gone.li.contains(focused);
        gone.li.remove();
        delete rowEls[id];
        if (hadFocus) { el.list.focus(); focused = el.list; }
      }
    }
    // Reconcile in place: move only what is out of order (keeps focus and avoids jumps).
    for (var i = 0; i < want.length; i++) {
      if (el.list.children[i] !== want[i]) { el.list.insertBefore(want[i], el.list.children[i] || null); }
    }
    while (el.list.children.length > want.length) { el.list.removeChild(el.list.lastChild); }
    if (focused && focused !== document.activeElement && focused.isConnected && !focused.disabled) { focused.focus(); }

    var n = live.length ? live.length : jobs.length;
    el.count.textContent = live.length ? plural(n, 'background job running', 'background jobs running')
      : plural(n, 'background job', 'background jobs');
    el.empty.hidden = jobs.length !== 0;
    el.list.hidden = jobs.length === 0;
    scheduleTick(live.length > 0);
  }

  function scheduleTick(on) {
    if (!on) {
      if (S.tick !== null) { clock.cancel(S.tick); S.tick = null; }
      return;
    }
    if (S.tick !== null) { return; }
    S.tick = clock.after('tick', TICK_MS, function () {
      S.tick = null;
      render();
    });
  }

  function renderPanelInto(r, j) {
    var open = S.expanded === j.id && S.panel;
    if (!open) {
      if (r.panel) { r.panel.box.remove(); r.panel = null; }
      return;
    }
    if (!r.panel) {
      var box = h('div', { 'class': 'panel', 'data-panel-for': j.id });
      var err = h('p', { 'class': 'notice error', 'data-notice': 'error', 'hidden': '' });
      var gap = h('p', { 'class': 'notice gap', 'data-notice': 'gap', 'hidden': '' }, GAP_TEXT);
      var pre = h('pre', { 'class': 'output' });
      box.appendChild(err); box.appendChild(gap); box.appendChild(pre);
      r.li.appendChild(box);
      r.panel = { box: box, err: err, gap: gap, pre: pre, shown: null };
    }
    paintPanel(r.panel, S.panel);
  }
  function renderPanel() {
    if (!S.panel) { return; }
    var r = rowEls[S.panel.jobId];
    if (r && r.panel) { paintPanel(r.panel, S.panel); }
  }
  function paintPanel(v, p) {
    v.box.setAttribute('data-streaming', p.streaming ? 'true' : 'false');
    v.gap.hidden = !p.gap;
    if (p.error !== null) {
      v.err.hidden = false;
      setText(v.err, 'live output stream interrupted: ' + p.error);
    } else {
      v.err.hidden = true;
    }
    var key = p.version + ':' + (p.streaming ? 1 : 0);
    if (v.shown === key) { return; }
    v.shown = key;
    var stick = v.pre.scrollTop + v.pre.clientHeight >= v.pre.scrollHeight - 4;
    while (v.pre.firstChild) { v.pre.removeChild(v.pre.firstChild); }
    if (p.len === 0 && !p.streaming) {
      v.pre.appendChild(h('span', { 'class': 'placeholder' }, '(no output)'));
    }
    p.segs.forEach(function (s) {
      if (s.ch === 'stderr') { v.pre.appendChild(h('span', { 'data-channel': 'stderr' }, s.text)); } else { v.pre.appendChild(document.createTextNode(s.text)); }
    });
    if (stick) { v.pre.scrollTop = v.pre.scrollHeight; }
  }

  var ACTIVITY = { running: 'running', idle: 'idle', ready: 'not running' };
  var DIAG = { corrupt: 'record damaged', unsupported: 'unsupported', unavailable: 'unreadable' };
  function renderChildren() {
    if (S.children === null) { el.childCard.hidden = true; return; }
    el.childCard.hidden = false;
    var seen = {};
    S.children.forEach(function (c, i) {
      var li = childEls[c.id];
      if (!li) {
        li = h('li', { 'class': 'child', 'data-child-id': c.id });
        ['mode', 'label', 'activity', 'epoch', 'queue'].forEach(function (k) {
          li.appendChild(h('span', { 'data-cell': k, 'class': k === 'mode' ? 'chip' : k }));
        });
        childEls[c.id] = li;
      }
      seen[c.id] = true;
      var cell = function (k) { return li.querySelector('[data-cell="' + k + '"]'); };
      setText(cell('mode'), 'continuable');
      setText(cell('label'), c.label ? c.label : c.id);
      cell('label').setAttribute('title', c.label ? c.label : c.id);
      var act = c.diagnostic ? DIAG[c.diagnostic] || c.diagnostic : ACTIVITY[c.status] || c.status;
      setText(cell('activity'), act);
      cell('activity').setAttribute('data-state', c.diagnostic ? 'error' : c.status === 'running' ? 'ongoing' : c.status === 'idle' ? 'done' : 'idle');
      setText(cell('epoch'), c.epoch !== undefined ? 'epoch ' + c.epoch : '');
      setText(cell('queue'), c.queued !== undefined ? plural(c.queued, 'queued', 'queued') : '');
      li.classList.toggle('dim', !!c.diagnostic);
      if (el.children.children[i] !== li) { el.children.insertBefore(li, el.children.children[i] || null); }
    });
    for (var id in childEls) { if (!seen[id]) { childEls[id].remove(); delete childEls[id]; } }
    if (!S.children.length) {
      if (!el.children.querySelector('.none')) { el.children.appendChild(h('li', { 'class': 'none' }, 'No subagents')); }
    } else {
      var none = el.children.querySelector('.none');
      if (none) { none.remove(); }
    }
  }

  function renderTree() {
    var t = S.tree;
    if (!t) { el.treeCard.hidden = true; return; }
    el.treeCard.hidden = false;
    var frag = document.createDocumentFragment();
    t.nodes.forEach(function (n) {
      var li = h('li', { 'class': 'node', 'data-node-kind': n.kind, 'data-depth': String(Math.min(n.depth, 6)) });
      li.appendChild(h('span', { 'class': 'chip' }, n.kind));
      li.appendChild(h('span', { 'class': 'node-id', 'title': n.id }, n.id));
      var meta = [];
      if (n.session) { meta.push('session ' + n.session); }
      if (n.jobs) { meta.push(plural(n.jobs, 'job', 'jobs')); }
      li.appendChild(h('span', { 'class': 'node-meta' }, meta.join(' \u00b7 ')));
      if (n.restarts) {
        li.appendChild(h('span', { 'class': 'restarts', 'data-state': 'warning', 'title': 'restarted ' + n.restarts + ' times' }, '\u21bb ' + n.restarts));
      }
      frag.appendChild(li);
    });
    while (el.tree.firstChild) { el.tree.removeChild(el.tree.firstChild); }
    el.tree.appendChild(frag);
  }

  // ---- Sessions.
  function chooseSession(id) {
    closeStream();
    setPhase(null);
    S.session = id;
    S.expanded = null;
    S.panel = null;
    S.jobs = [];
    S.children = null;
    S.userFold = null;
    for (var k in rowEls) { rowEls[k].li.remove(); delete rowEls[k]; }
    for (var c in childEls) { childEls[c].remove(); delete childEls[c]; }
    el.select.value = id;
    var hp = new URLSearchParams(location.hash.slice(1));
    hp.set('session', id);
    history.replaceState(null, '', '#' + hp.toString());
    render();
    renderChildren();
    openStream();
  }
  el.select.addEventListener('change', function () { chooseSession(el.select.value); });

  function start() {
    fetch('api/sessions', { cache: 'no-store', credentials: 'same-origin' }).then(function (r) {
      if (!r.ok) { throw new Error('sessions ' + r.status); }
      return r.json();
    }).then(function (d) {
      S.sessions = d.sessions || [];
      S.sessions.forEach(function (s) {
        el.select.appendChild(h('option', { 'value': s.id }, s.label));
      });
      if (!S.sessions.length) { setConn('disconnected'); return; }
      var want = hashParams.get('session');
      var ok = S.sessions.some(function (s) { return s.id === want; });
      chooseSession(ok ? want : S.sessions[0].id);
    }).catch(function () { setConn('disconnected'); });
  }

  // ---- The test seam (only with clock=manual).
  if (manual) {
    window.troupeTest = {
      // setNow sets the wall clock; pending timers keep their remaining delay
      // (like setTimeout's, which are relative).
      setNow: function (ms) {
        var delta = ms - vnow;
        vtimers.forEach(function (t) { t.at += delta; });
        vnow = ms;
        render();
      },
      advance: function (ms) {
        var target = vnow + ms;
        for (;;) {
          var due = null;
          vtimers.forEach(function (t) { if (t.at <= target && (due === null || t.at < due.at || (t.at === due.at && t.id < due.id))) { due = t; } });
          if (due === null) { break; }
          vtimers = vtimers.filter(function (t) { return t !== due; });
          vnow = due.at;
          due.fn();
        }
        vnow = target;
      },
      timers: function () { return vtimers.map(function (t) { return t.kind; }); },
      inject: function (type, data) { dispatch(type, typeof data === 'string' ? JSON.parse(data) : data); },
      streamState: function () {
        if (!S.es) { return 'closed'; }
        return S.es.readyState === EventSource.OPEN ? 'open' : S.es.readyState === EventSource.CONNECTING ? 'connecting' : 'closed';
      }
    };
  }

  start();
})();
